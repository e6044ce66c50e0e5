"""Tables of formatted figures (:class:`app.views.dashboard.Table`): a Qt model that sorts itself with
empty figures last, and the table view the dashboard's tables share."""

from __future__ import annotations

from typing import cast

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from app.views.dashboard import Column, Row, Table


class FigureTableModel(QAbstractTableModel):
    """A table of formatted figures; sorts itself, empty figures last whatever the order."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.columns: tuple[Column, ...] = ()
        self.rows: tuple[Row, ...] = ()
        self._sort: tuple[int, Qt.SortOrder] | None = None

    def set_table(self, table: Table) -> None:
        self.beginResetModel()
        self.columns, self.rows = table.columns, table.rows
        if self._sort is not None and self._sort[0] < len(self.columns):
            self._sort_rows(*self._sort)
        self.endResetModel()

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        column = self.columns[index.column()]
        value = self.rows[index.row()].cells[index.column()]
        if role == Qt.ItemDataRole.DisplayRole:
            return value.text
        if role == Qt.ItemDataRole.TextAlignmentRole and not column.text:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and column.text:
            return value.text
        return None

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation != Qt.Orientation.Horizontal or section >= len(self.columns):
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section].header
        if role == Qt.ItemDataRole.ToolTipRole:
            return self.columns[section].tip or None
        return None

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        if column < 0 or column >= len(self.columns):
            return
        self.layoutAboutToBeChanged.emit()
        self._sort = (column, order)
        self._sort_rows(column, order)
        self.layoutChanged.emit()

    def _sort_rows(self, column: int, order) -> None:
        present = [r for r in self.rows if r.cells[column].sort is not None]
        missing = [r for r in self.rows if r.cells[column].sort is None]
        present.sort(key=lambda row: cast("float | str", row.cells[column].sort),  # None is in missing
                     reverse=order == Qt.SortOrder.DescendingOrder)
        self.rows = tuple(present + missing)

    def key_at(self, row: int) -> str | None:
        return self.rows[row].key or None if 0 <= row < len(self.rows) else None


def figure_table(model: FigureTableModel, name: str) -> QTableView:
    """A sortable, read-only table view of a figure table, rows selected whole."""
    view = QTableView()
    view.setObjectName(name)
    view.setModel(model)
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
    view.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
    view.setAlternatingRowColors(True)
    view.verticalHeader().setVisible(False)
    view.verticalHeader().setDefaultSectionSize(22)
    view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    view.horizontalHeader().setStretchLastSection(True)
    view.horizontalHeader().setSortIndicatorShown(True)
    return view
