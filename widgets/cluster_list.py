"""Clusters of near-duplicate examples, grouped: one branch per cluster (its original first, then
each near-duplicate with its similarity to it). Selecting an example says so, as the table does."""

from __future__ import annotations

import uuid

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QTreeWidget, QTreeWidgetItem

from app.views.quality import ClustersView

ID_ROLE = Qt.ItemDataRole.UserRole


class ClusterList(QTreeWidget):
    selection_changed = Signal(list)  # ids of the selected examples, current one first

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("near-duplicate-clusters")
        self._texts: dict[uuid.UUID, str] = {}  # each shown example's full text
        self.setColumnCount(4)
        self.setHeaderLabels(["Similarity", "Round", "Author", "Text"])
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        for column, width in enumerate((110, 56, 110)):
            self.setColumnWidth(column, width)
        self.itemSelectionChanged.connect(lambda: self.selection_changed.emit(self.selected_ids()))

    def show_clusters(self, view: ClustersView) -> None:
        self.clear()
        self._texts = {row.example_id: row.text for row in view.rows}
        branch: QTreeWidgetItem | None = None
        for row in view.rows:
            if row.first:
                branch = QTreeWidgetItem(self, [f"Cluster {row.cluster}", "", "", ""])
                branch.setFlags(branch.flags() & ~Qt.ItemFlag.ItemIsSelectable)
                font = branch.font(0)
                font.setBold(True)
                branch.setFont(0, font)
            parent = branch if branch is not None else self.invisibleRootItem()
            item = QTreeWidgetItem(parent, ["original" if row.first else f"{row.similarity * 100:.0f}%",
                                            f"R{row.round_number}", row.author, " ".join(row.text.split())])
            item.setData(0, ID_ROLE, str(row.example_id))
            item.setToolTip(3, row.text)
        for index in range(self.topLevelItemCount()):
            top = self.topLevelItem(index)
            if top is not None:
                top.setText(3, f"{top.childCount()} examples")
        self.expandAll()

    def selected_ids(self) -> list[uuid.UUID]:
        ids = [uuid.UUID(item.data(0, ID_ROLE)) for item in self.selectedItems() if item.data(0, ID_ROLE)]
        current = self.currentItem()
        if current is not None and current.data(0, ID_ROLE):
            first = uuid.UUID(current.data(0, ID_ROLE))
            if first in ids:
                ids.remove(first)
                ids.insert(0, first)
        return ids

    def text_of(self, example_id: uuid.UUID) -> str:
        return self._texts.get(example_id, "")

