"""The Dashboard's "Writing assistant" section: each annotator's or round's MER, vMER, rejection
rate and time per example with and without the assistant, and a headline comparing the arms.
A view only: figures come in as :class:`app.views.assistant_split.AssistantSplitView`; the
grouping the lead picks goes out as ``by_changed``."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.assistant_split import SPLIT_CHOICES, AssistantSplitView

ASSISTED_BACKGROUND = QColor("#eef4fb")  # the assisted row of each pair, so the pairs read at a glance


class AssistantSplitPanel(QWidget):
    by_changed = Signal(str)  # "annotator" or "round"
    shown = Signal()  # the section came into view (its figures are computed only while it can be seen)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.by = QComboBox(objectName="split-by")
        for text, value in SPLIT_CHOICES:
            self.by.addItem(text, value)
        self.by.currentIndexChanged.connect(lambda: self.by_changed.emit(self.by.currentData()))
        self.headline = QLabel(objectName="split-headline", wordWrap=True, textFormat=Qt.TextFormat.RichText)
        self.headline.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.table = QTableWidget(0, 0, objectName="split-table")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(False)
        self.note = QLabel(objectName="split-note", wordWrap=True)
        self.note.setStyleSheet("color:#555")

        top = QHBoxLayout()
        top.addWidget(QLabel("Show"))
        top.addWidget(self.by)
        top.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(top)
        layout.addWidget(self.headline)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.note)
        self.view: AssistantSplitView | None = None

    def showEvent(self, event) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.shown.emit()

    def show_loading(self) -> None:
        self.headline.setText("Computing the split…")

    def show_split(self, view: AssistantSplitView) -> None:
        self.view = view
        index = self.by.findData(view.by)
        if index >= 0 and index != self.by.currentIndex():
            self.by.blockSignals(True)
            self.by.setCurrentIndex(index)
            self.by.blockSignals(False)
        self.headline.setText(view.headline)
        self.note.setText(view.note)
        table = self.table
        table.setColumnCount(len(view.headers))
        table.setHorizontalHeaderLabels(list(view.headers))
        for column, tip in enumerate(view.tooltips):
            table.horizontalHeaderItem(column).setToolTip(tip)
        table.setRowCount(len(view.rows))
        bold = QFont()
        bold.setBold(True)
        for r, row in enumerate(view.rows):
            for c, text in enumerate(row.cells):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row.assisted:
                    item.setBackground(QBrush(ASSISTED_BACKGROUND))
                if row.total or (c == 0 and row.first_of_group):
                    item.setFont(bold)
                table.setItem(r, c, item)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)

    def cell(self, row: int, column: int) -> str:
        item = self.table.item(row, column)
        return item.text() if item is not None else ""
