"""A table of examples that fetches rows page by page as the user scrolls.

The model owns no data source: it asks for pages with :attr:`ExampleTableModel.page_wanted`
and receives them through :meth:`ExampleTableModel.add_page`. Rows are ``ExampleRowView``s.
"""

from __future__ import annotations

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView

from app.core.domain import ExampleStatus, ReviewAction, Verdict
from app.views.example import ExampleRowView

COLUMNS = [
    ("text", "Text"),
    ("label", "Label"),
    ("fooled", "Fooled"),
    ("validation_state", "Validation"),
    ("validations", "Verdicts"),
    ("status", "Status"),
    ("review_state", "Review"),
    ("round", "Round"),
    ("author", "Author"),
    ("submitted_at", "Submitted"),
]
SORTABLE = {key for key, _ in COLUMNS}
# What a column counts, where its title cannot say it all.
HEADER_TIPS = {
    "disagreements": "Validators split: peer verdicts that differ from the most common peer verdict "
                     "(another verdict, or another corrected label)",
    "objections": "Validators who said incorrect or flagged it: they disagree with the author",
    "flags": "Verdicts that flagged the example",
}
PAGE_SIZE = 200

_FOOLED_BRUSH = QBrush(QColor("#1e6b35"))  # fooling the model is the writer's success
_ATTENTION_BRUSH = QBrush(QColor("#b3261e"))  # returned work, objections
_QUIET_BRUSH = QBrush(QColor("#6b6b6b"))
# the columns shown as their value, as is
_PLAIN = {
    "label": lambda row: row.label,
    "validation_state": lambda row: row.validation,
    "status": lambda row: row.status.value,
    "round": lambda row: row.round,
    "author": lambda row: row.author,
    "submitted_at": lambda row: row.submitted_at,
    "disagreements": lambda row: row.disagreements,
    "flags": lambda row: row.flags,
}


def _one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


class ExampleTableModel(QAbstractTableModel):
    """Rows arrive in pages; ``total`` says how many match, so the scroll bar is honest."""

    page_wanted = Signal(int, int)  # offset, limit
    sort_requested = Signal(str, bool)  # sort key, descending

    def __init__(self, parent=None, columns: list[tuple[str, str]] | None = None):
        super().__init__(parent)
        self.columns = list(columns or COLUMNS)
        self._rows: list[ExampleRowView] = []
        self._total = 0
        self._pending = False
        self.sort_key = "submitted_at"
        self.descending = True

    def reset(self, total: int, first_page: list[ExampleRowView]) -> None:
        self.beginResetModel()
        self._rows = list(first_page)
        self._total = total
        self._pending = False
        self.endResetModel()

    def add_page(self, offset: int, rows: list[ExampleRowView]) -> None:
        self._pending = False
        if offset != len(self._rows) or not rows:
            return  # a page for an older query, or nothing more
        first = len(self._rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        self._rows.extend(rows)
        self.endInsertRows()

    def set_total(self, total: int) -> None:
        """The count arrived after the first page (pages first, so the table fills at once)."""
        self._total = max(total, len(self._rows))

    @property
    def total(self) -> int:
        return self._total

    def row_data(self, row: int) -> ExampleRowView | None:
        return self._rows[row] if 0 <= row < len(self._rows) else None

    def rowCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self._rows)

    def columnCount(self, parent=QModelIndex()) -> int:
        return 0 if parent.isValid() else len(self.columns)

    def canFetchMore(self, parent=QModelIndex()) -> bool:
        return not parent.isValid() and len(self._rows) < self._total

    def fetchMore(self, parent=QModelIndex()) -> None:
        if not self._pending and self.canFetchMore(parent):
            self._pending = True
            self.page_wanted.emit(len(self._rows), PAGE_SIZE)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.DisplayRole:
            return self.columns[section][1]
        if orientation == Qt.Orientation.Horizontal and role == Qt.ItemDataRole.ToolTipRole:
            return HEADER_TIPS.get(self.columns[section][0])
        return None

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self._rows[index.row()]
        key = self.columns[index.column()][0]
        if role == Qt.ItemDataRole.DisplayRole:
            return self._display(row, key, with_disagreements="disagreements" not in self._keys)
        if role == Qt.ItemDataRole.ToolTipRole and key == "text":
            return row.text[:2000]
        if role == Qt.ItemDataRole.ForegroundRole:
            if key == "fooled" and row.fooled:
                return _FOOLED_BRUSH
            if (key == "review_state" and row.review_state == ReviewAction.RETURNED) or (key == "objections"
                                                                                        and row.objections):
                return _ATTENTION_BRUSH
            if row.status == ExampleStatus.RETRACTED:
                return _QUIET_BRUSH
        if role == Qt.ItemDataRole.ToolTipRole and key == "objections" and row.objections:
            return f"{row.objections} validator(s) said incorrect or flagged: they disagree with the author"
        if role == Qt.ItemDataRole.ToolTipRole and key == "review_state" and row.review_comment:
            return f"{str(row.review_state or 'reviewed').capitalize()} by a lead: {row.review_comment}"
        if role == Qt.ItemDataRole.UserRole:
            return row.id
        return None

    @property
    def _keys(self) -> list[str]:
        return [key for key, _ in self.columns]

    @staticmethod
    def _display(row: ExampleRowView, key: str, with_disagreements: bool = True) -> str:
        if key == "text":
            prefix = "↳ " if row.perturbation_of else ""
            return prefix + _one_line(row.text or "")
        if key == "fooled":
            return {True: "fooled", False: "no", None: "–"}[row.fooled]
        if key == "review_state":
            marks = {ReviewAction.RETURNED: "⟲ returned", ReviewAction.ACCEPTED: "✓ accepted"}
            return marks.get(row.review_state, "") if row.review_state is not None else ""
        if key == "decided":  # the decision, or where validation stands until there is one
            if not row.decided:
                return row.validation
            return row.decided.value + (f" → {row.decided_label}" if row.decided == Verdict.INCORRECT
                                        and row.decided_label else "")
        if key == "objections":  # verdicts against the author
            return str(row.objections) if row.objections else ""
        if key == "validations":
            extra = f" ({row.disagreements} disagree)" if row.disagreements and with_disagreements else ""
            return f"{row.validations}{extra}"
        value = _PLAIN[key](row) if key in _PLAIN else None
        return "" if value is None else str(value)

    def sort(self, column: int, order=Qt.SortOrder.AscendingOrder) -> None:
        self.sort_key = self.columns[column][0]
        self.descending = order == Qt.SortOrder.DescendingOrder
        self.sort_requested.emit(self.sort_key, self.descending)


class ExampleTableView(QTableView):
    def __init__(self, model: ExampleTableModel, parent=None):
        super().__init__(parent)
        self.setModel(model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setSortingEnabled(True)
        keys = [key for key, _ in model.columns]
        # the default order (newest first) has no column here: show no indicator rather than a wrong one
        self.horizontalHeader().setSortIndicator(keys.index("submitted_at") if "submitted_at" in keys else -1,
                                                 Qt.SortOrder.DescendingOrder)
        self.setWordWrap(False)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setVisible(False)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 8)
        header = self.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        header.setStretchLastSection(False)
        header.setSectionResizeMode(keys.index("text"), QHeaderView.ResizeMode.Stretch)
        # compact: the text column stretches into everything these leave
        widths = {"label": 80, "fooled": 55, "validation_state": 100, "validations": 60, "status": 85, "round": 50,
                  "author": 105, "submitted_at": 120, "flags": 45, "decided": 100, "review_state": 75}
        for column, (key, _) in enumerate(model.columns):
            if key in widths:
                self.setColumnWidth(column, widths[key])
        self.setMinimumWidth(500)
        # New rows (a refresh, a change routed from a sync or a store) keep the example being read selected
        # where it is still listed. Taken at the reset itself: the user may choose a row while the query runs.
        self._rows = model
        self._kept_id: object = None
        model.modelAboutToBeReset.connect(self._remember_current)
        model.modelReset.connect(self._select_kept)

    def _remember_current(self) -> None:
        row = self._rows.row_data(self.currentIndex().row())
        self._kept_id = row.id if row else None

    def _select_kept(self) -> None:
        kept, self._kept_id = self._kept_id, None
        rows = self._rows
        found = next((r for r in range(rows.rowCount()) if (row := rows.row_data(r)) and row.id == kept), None)
        if kept is not None and found is not None:
            self.selectRow(found)
