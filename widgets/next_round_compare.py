"""The Next round dialog's second step, Compare: every split's figures with their intervals, the chart of
accuracy per round, and the promotion rule's verdict (widgets/next_round_dialog.py holds the dialog)."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.next_round import BETTER, TOO_FEW, UNCLEAR, WORSE, ComparisonView
from widgets.comparison_chart import AccuracyComparisonChart

VERDICT_COLOURS = {BETTER: "#d7f0dd", WORSE: "#f8d7d3", UNCLEAR: "#eeeeee"}
BANNER = {True: "background:#f8d7d3;color:#5c1a12", False: "background:#e8f0fa;color:#10243e"}
COLUMNS = ["Split", "Metric", "Current", "Candidate", "Difference", "95 % interval", "n"]


class ComparePage:
    """Mixed into the dialog, which builds this page with ``_compare_page`` and shows its steps."""

    def _compare_page(self) -> QWidget:
        page = QWidget(objectName="compare-page")
        self.verdict = QLabel(objectName="verdict", wordWrap=True)
        self.verdict.setMargin(8)
        self.models_line = QLabel(objectName="models-line", wordWrap=True)
        self.table = QTableWidget(0, len(COLUMNS), objectName="comparison-table")
        self.table.setHorizontalHeaderLabels(COLUMNS)
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.chart = AccuracyComparisonChart()
        self.notes = QLabel(objectName="notes", wordWrap=True, styleSheet="color:#555")
        self.report_link = QLabel(objectName="report-link")
        self.report_link.setTextFormat(Qt.TextFormat.RichText)
        self.report_link.linkActivated.connect(lambda _link: self.report_requested.emit())
        back = QPushButton("◀ Back to the training choices", objectName="back")
        back.clicked.connect(self.back_requested)
        self.compare_again = QPushButton("Compare again", objectName="compare-again")
        self.compare_again.clicked.connect(self.compare_requested)
        self.compare_again.setVisible(False)
        self.to_promote = QPushButton("Next: promote ▶", objectName="to-promote")
        self.to_promote.clicked.connect(lambda: self.show_step(2))
        # the table's columns need the dialog's width; below it the chart, and beside the chart the report
        self.table.verticalHeader().setDefaultSectionSize(self.table.fontMetrics().height() + 8)
        self.table.setMinimumHeight(self.table.fontMetrics().height() * 10)
        self.chart.setMinimumHeight(230)
        self.chart.setMaximumHeight(300)
        self.report_link.setWordWrap(True)
        self.report_link.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.notes.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        side = QVBoxLayout()
        side.addWidget(self.report_link)
        side.addWidget(self.notes)
        side.addStretch(1)
        below = QHBoxLayout()
        below.addWidget(self.chart, 3)
        below.addLayout(side, 2)
        buttons = QHBoxLayout()
        buttons.addWidget(back)
        buttons.addStretch(1)
        buttons.addWidget(self.compare_again)
        buttons.addWidget(self.to_promote)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.verdict)
        layout.addWidget(self.models_line)
        layout.addWidget(self.table, 1)
        layout.addLayout(below)
        layout.addLayout(buttons)
        return page

    def show_comparison_stopped(self, message: str) -> None:
        """The comparison was cancelled or failed: the candidate is trained, so it can be compared again."""
        self.verdict.setText(f"<b>{escape(message)}</b>")
        self.verdict.setStyleSheet(BANNER[True])
        self.models_line.setText("")
        self.table.setRowCount(0)
        self.chart.set_groups(())
        self.notes.setVisible(False)
        self.report_link.setText("")
        self.compare_again.setVisible(True)
        self._compared = False
        self.show_step(1)
        self.to_promote.setEnabled(False)

    def show_comparison(self, view: ComparisonView) -> None:
        self.compare_again.setVisible(False)
        self._compared = True
        self.to_promote.setEnabled(not self._running)
        self._worse = view.worse
        self.verdict.setText(f"<b>{escape(view.verdict)}</b><br>{escape(view.headline)}")
        self.verdict.setStyleSheet(BANNER[view.worse])
        self.headline.setText(escape(view.headline))
        self.headline.setVisible(not view.worse)  # the refusal says it then
        self.models_line.setText(f"Current target: {view.current_name} · Candidate: {view.candidate_name}")
        self.table.setRowCount(len(view.rows))
        for r, row in enumerate(view.rows):
            first = r == 0 or view.rows[r - 1].split != row.split  # a split's name once, on its first row
            cells = (row.split if first else "", row.metric, row.current, row.candidate, row.difference, row.interval, f"{row.items:,}")
            for c, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if c >= 2:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if c in (4, 5) and row.verdict in VERDICT_COLOURS:
                    item.setBackground(QBrush(QColor(VERDICT_COLOURS[row.verdict])))
                    item.setToolTip({BETTER: "better: the interval lies above zero", WORSE: "worse: the interval "
                                     "lies below zero", UNCLEAR: "unclear: the interval includes zero"}[row.verdict])
                elif c in (4, 5) and row.verdict == TOO_FEW:
                    item.setForeground(QBrush(QColor("#777")))
                    item.setToolTip("too few items to judge: the interval says little")
                if row.pooled:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                if c == 0:
                    item.setToolTip(row.split)
                item.setData(Qt.ItemDataRole.UserRole, row.verdict)
                self.table.setItem(r, c, item)
        self.chart.set_groups(view.groups, "current target", "candidate")
        self.notes.setText(" ".join(view.notes))
        self.notes.setVisible(bool(view.notes))
        self.report_link.setText(f"<a href='report'>Open the HTML report</a> (every prediction of both models)<br>"
                                 f"<span style='color:#666'>{escape(view.report_path)}</span>" if view.report_path else "")
        self._refusal = (view.verdict, view.judged)
        self.refusal.setText(f"<b>{escape(view.verdict)}</b><ul style='margin:4px 0 0 -20px'>"
                             + "".join(f"<li>{escape(line)}</li>" for line in view.judged) + "</ul>"
                             if view.worse else "")
        self.refusal.setVisible(view.worse)
        self._set_promote_button()
        self.show_step(1)

    # Step 3 -------------------------------------------------------------------------------------
