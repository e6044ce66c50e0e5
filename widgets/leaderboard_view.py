"""The model leaderboard panel of the Evaluate tab (a view only): every model the task has had ×
every round's held-out split, the best figure of each column highlighted, the current target
marked, stale and unscored cells marked, n and intervals in each cell's tooltip; Refresh and Cancel.

The controller (app/gui/leaderboard.py) hands in a ``LeaderboardView`` (app/views/leaderboard.py)
with every text decided, and listens to ``refresh_requested`` and ``cancel_requested``.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.leaderboard import BoardCell, LeaderboardView

HEADER_ROWS = 2  # the round groups, then the figures' names
HEADER_BACKGROUND = QColor("#eceff1")
BEST_BACKGROUND = QColor("#c8e6c9")
STALE_FOREGROUND = QColor("#8a6d00")
STATE_FOREGROUND = QColor("#6b6b6b")
GROUP_TINTS = (QColor("#ffffff"), QColor("#f6f8fb"))  # alternate round groups, to tell them apart


class LeaderboardPanel(QWidget):
    refresh_requested = Signal()
    cancel_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("leaderboard")
        self.intro = QLabel(
            "Every model the task has had, scored on every round's <b>held-out split</b> (about one decided "
            "example in ten, never trained on). <i>Fooling now right</i>: of the round's validated fooling "
            "examples, the share the model now gets right. Best of each column in green, ▶ the current target, "
            "* stale; hover a cell for its n and 95 % interval.", objectName="leaderboard-intro", wordWrap=True)
        self.intro.setTextFormat(Qt.TextFormat.RichText)
        self.table = QTableWidget(objectName="leaderboard-table")
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.table.horizontalHeader().hide()  # two header rows of its own: rounds, then figures
        self.table.verticalHeader().hide()
        self.table.setWordWrap(True)  # a long model name takes two lines; the figures are short
        self.table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        self.summary = QLabel(objectName="leaderboard-summary", wordWrap=True)
        self.summary.setTextFormat(Qt.TextFormat.PlainText)
        self.refresh_button = QPushButton("&Refresh", objectName="leaderboard-refresh")
        self.refresh_button.setToolTip("Score the missing cells, and score again the stale ones (their held-out "
                                       "split changed) and the ones that failed.")
        self.cancel_button = QPushButton("Cancel", objectName="leaderboard-cancel", enabled=False)
        self.progress = QProgressBar(objectName="leaderboard-progress", minimum=0, maximum=100, value=0,
                                     textVisible=True)
        self.progress.hide()
        self.status = QLabel(objectName="leaderboard-status", wordWrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        buttons = QHBoxLayout()
        buttons.addWidget(self.summary, 1)
        buttons.addWidget(self.refresh_button)
        buttons.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.intro)
        layout.addWidget(self.table, 1)
        layout.addLayout(buttons)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        self.refresh_button.clicked.connect(self.refresh_requested)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.board: LeaderboardView | None = None

    # What the controller calls -------------------------------------------------------------
    def show_board(self, board: LeaderboardView) -> None:
        self.board = board
        table = self.table
        table.clear()
        table.clearSpans()
        width = len(board.metrics)
        if board.empty:
            table.setRowCount(1)
            table.setColumnCount(1)
            table.setItem(0, 0, QTableWidgetItem(board.empty))
            table.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
            self.summary.setText("")
            return
        table.setRowCount(HEADER_ROWS + len(board.rows))
        table.setColumnCount(1 + width * len(board.groups))
        self._header(0, 0, "Model", "Every model that has been a round's target (an ensemble target is a row too).")
        table.setSpan(0, 0, HEADER_ROWS, 1)
        for g, group in enumerate(board.groups):
            for m, metric in enumerate(board.metrics):
                self._header(1, 1 + g * width + m, metric, f"{group.title}: {board.metric_tips[m]}", bold=False)
        for r, row in enumerate(board.rows):
            name = QTableWidgetItem(("▶ " if row.current else "") + row.name)
            name.setToolTip(f"{row.name.replace(' + ', chr(10) + '  + ')}\n{row.detail}")
            if row.current:
                self._bold(name)
            table.setItem(HEADER_ROWS + r, 0, name)
            for index, cell in enumerate(row.cells):
                table.setItem(HEADER_ROWS + r, 1 + index, self._cell(cell, (index // width) % 2))
                if cell.first and cell.state not in ("fresh", "stale") and width > 1:
                    table.setSpan(HEADER_ROWS + r, 1 + index, 1, width)  # a state is said once, across its round
        table.resizeColumnsToContents()  # by the figures: a round's title may elide, whole in its tooltip
        for g, group in enumerate(board.groups):
            self._header(0, 1 + g * width, f"{group.title}\n{group.detail}", group.tooltip)
            if width > 1:
                table.setSpan(0, 1 + g * width, 1, width)
        table.resizeRowToContents(0)
        table.setRowHeight(0, table.rowHeight(0) + 6)  # two lines: the round, then its split
        table.setColumnWidth(0, min(max(table.columnWidth(0), 160), 220))  # long names wrap, then elide
        for r in range(len(board.rows)):
            table.setRowHeight(HEADER_ROWS + r, table.sizeHintForRow(HEADER_ROWS + r) + 6)
        header = table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.summary.setText(board.summary)

    def set_running(self, running: bool) -> None:
        self.refresh_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.progress.setVisible(running)
        if running:
            self.progress.setRange(0, 0)  # busy until the first report

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))

    def set_status(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color:#b00020;" if error else "")

    # For tests and screen readers ------------------------------------------------------------
    def item(self, row: int, group: int, metric: int) -> QTableWidgetItem:
        """The table item of a model's figure: ``row`` among the models, ``group`` the round's place."""
        assert self.board is not None
        return self.table.item(HEADER_ROWS + row, 1 + group * len(self.board.metrics) + metric)

    def model_names(self) -> list[str]:
        return [self.table.item(HEADER_ROWS + r, 0).text() for r in range(self.table.rowCount() - HEADER_ROWS)]

    # Building blocks -------------------------------------------------------------------------
    def _header(self, row: int, column: int, text: str, tooltip: str, *, bold: bool = True) -> None:
        item = QTableWidgetItem(text)
        item.setToolTip(tooltip)
        item.setBackground(QBrush(HEADER_BACKGROUND))
        item.setTextAlignment(Qt.AlignmentFlag.AlignCenter)
        if bold:  # the figures' names stay light: they set the columns' widths
            self._bold(item)
        self.table.setItem(row, column, item)

    @staticmethod
    def _bold(item: QTableWidgetItem) -> None:
        font = QFont(item.font())
        font.setBold(True)
        item.setFont(font)

    def _cell(self, cell: BoardCell, tint: int) -> QTableWidgetItem:
        item = QTableWidgetItem(cell.text)
        item.setToolTip(cell.tooltip)
        item.setData(Qt.ItemDataRole.UserRole, cell.state)
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter
                              if cell.value is not None or cell.state in ("fresh", "stale")
                              else Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter)
        item.setBackground(QBrush(BEST_BACKGROUND if cell.best else GROUP_TINTS[tint]))
        font = QFont(item.font())
        if cell.best:
            font.setBold(True)
        if cell.state == "stale":
            font.setItalic(True)
            item.setForeground(QBrush(STALE_FOREGROUND))
        elif cell.state not in ("fresh",):
            font.setItalic(True)
            item.setForeground(QBrush(STATE_FOREGROUND))
        item.setFont(font)
        return item
