"""Round ▸ Proposals…: a task's proposed candidates, the comparison of the one selected with every
interval, and Promote / Decline for whoever may decide (the owner, or leads where the owner allows).

A view only: it shows ``ProposalsView``s and says what the user asked for through signals; the
proposals controller (app/gui/proposals.py) downloads, compares, promotes and publishes off the GUI thread.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QFrame,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.proposals import ProposalDetail, ProposalsView, RefusalView
from widgets.promote_anyway_dialog import PromoteAnywayDialog

ERROR, OK, INFO = "#b3261e", "#2e7d32", "#555555"
TONES = {"worse": QColor("#b3261e"), "better": QColor("#2e7d32")}


def _item(text: str, tone: str = "", align_right: bool = False) -> QTableWidgetItem:
    item = QTableWidgetItem(text)
    item.setFlags(item.flags() & ~Qt.ItemFlag.ItemIsEditable)
    if tone in TONES:
        item.setForeground(QBrush(TONES[tone]))
    if align_right:
        item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
    return item


class ProposalsDialog(QDialog):
    refresh_requested = Signal()
    promote_requested = Signal(str, bool, bool, str)  # proposal id, with the current target(s), force, its reason
    decline_requested = Signal(str, str)  # proposal id, reason
    cancel_requested = Signal()

    def __init__(self, task_name: str, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Proposals — {task_name}")
        self.resize(1100, 680)
        self._view: ProposalsView | None = None
        self._busy = False
        self.note = QLabel(objectName="policy-note", wordWrap=True, styleSheet=f"color: {INFO}")

        self.table = QTableWidget(0, 5, objectName="proposals")
        self.table.setHorizontalHeaderLabels(["By", "When (UTC)", "Rounds trained on", "Accuracy Δ [95% CI] (where, n)",
                                              "State"])
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.Stretch)
        self.table.itemSelectionChanged.connect(self._selected)

        self.title = QLabel(objectName="detail-title", styleSheet="font-weight: bold")
        self.facts = QLabel(objectName="detail-facts", wordWrap=True)
        self.verdict = QLabel(objectName="detail-verdict", wordWrap=True)
        self.figures = QTableWidget(0, 7, objectName="figures")
        self.figures.setHorizontalHeaderLabels(["Split", "Figure", "Current", "Candidate", "Δ", "95% interval", "n"])
        self.figures.verticalHeader().setVisible(False)
        self.figures.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        figures_header = self.figures.horizontalHeader()
        figures_header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        figures_header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        detail = QWidget()
        detail_layout = QVBoxLayout(detail)
        detail_layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.title, self.facts, self.verdict):
            detail_layout.addWidget(widget)
        detail_layout.addWidget(self.figures, 1)
        splitter = QSplitter(Qt.Orientation.Vertical)
        splitter.addWidget(self.table)
        splitter.addWidget(detail)
        splitter.setSizes([150, 400])

        self.refusal = QFrame(objectName="refusal", frameShape=QFrame.Shape.StyledPanel, visible=False)
        self.refusal_text = QLabel(objectName="refusal-text", wordWrap=True, styleSheet=f"color: {ERROR}")
        self.refusal_text.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.promote_anyway = QPushButton("Promote anyway…", objectName="promote-anyway")
        self.promote_anyway.setToolTip("Promote over the comparison; the override is recorded with the round's "
                                       "target and on the server.")
        self.promote_anyway.clicked.connect(self._promote_anyway)
        refusal_scroll = QScrollArea(widgetResizable=True, frameShape=QFrame.Shape.NoFrame)
        refusal_scroll.setWidget(self.refusal_text)
        refusal_scroll.setMaximumHeight(130)
        refusal_layout = QHBoxLayout(self.refusal)
        refusal_layout.addWidget(refusal_scroll, 1)
        refusal_layout.addWidget(self.promote_anyway, 0, Qt.AlignmentFlag.AlignTop)

        self.with_current = QCheckBox("Keep the current target in an ensemble", objectName="with-current")
        self.reason = QLineEdit(objectName="decline-reason", placeholderText="Why decline? The lead reads it.")
        self.promote = QPushButton("Promote", objectName="promote")
        self.promote.setDefault(True)
        self.promote.clicked.connect(lambda: self._promote(force=False))
        self.decline = QPushButton("Decline", objectName="decline")
        self.decline.clicked.connect(self._decline)
        self.refresh = QPushButton("Refresh", objectName="refresh")
        self.refresh.clicked.connect(self.refresh_requested)
        self.cancel = QPushButton("Cancel", objectName="cancel", visible=False)
        self.cancel.clicked.connect(self.cancel_requested)
        close = QPushButton("Close", objectName="close")
        close.clicked.connect(self.reject)
        actions = QHBoxLayout()
        actions.addWidget(self.with_current)
        actions.addWidget(self.promote)
        actions.addSpacing(16)
        actions.addWidget(self.reason, 1)
        actions.addWidget(self.decline)

        self.progress = QProgressBar(objectName="progress", visible=False, textVisible=True)
        self.status = QLabel(objectName="status", wordWrap=True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        bottom = QHBoxLayout()
        bottom.addWidget(self.status, 1)
        bottom.addWidget(self.progress)
        bottom.addWidget(self.cancel)
        bottom.addWidget(self.refresh)
        bottom.addWidget(close)

        layout = QVBoxLayout(self)
        layout.addWidget(self.note)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.refusal)
        layout.addLayout(actions)
        layout.addLayout(bottom)
        self._update_buttons()

    # what the controller calls

    def show_proposals(self, view: ProposalsView, select_id: str | None = None) -> None:
        keep = select_id or self.selected_id()
        self._view = view
        self.note.setText(view.policy_note)
        self.table.setRowCount(len(view.rows))
        for i, row in enumerate(view.rows):
            for column, (text, tone) in enumerate(((row.who, ""), (row.when, ""), (row.rounds, ""),
                                                   (row.headline, row.tone), (row.state, ""))):
                self.table.setItem(i, column, _item(text, tone))
        index = next((i for i, row in enumerate(view.rows) if row.id == keep), None)
        if index is None:
            index = next((i for i, row in enumerate(view.rows) if row.is_open), 0 if view.rows else None)
        if index is not None:
            self.table.selectRow(index)
        self._selected()
        if not view.rows:
            self.show_message("No proposal for this task yet. A lead proposes a trained candidate with "
                              "`dynadesk rounds propose`.")

    def selected_id(self) -> str | None:
        detail = self._selected_detail()
        return detail.id if detail else None

    def set_busy(self, busy: bool, text: str = "") -> None:
        self._busy = busy
        self.progress.setVisible(busy)
        self.cancel.setVisible(busy)
        if busy:
            self.progress.setRange(0, 0)
            self.refusal.setVisible(False)
        if text:
            self.show_message(text)
        self._update_buttons()

    def set_progress(self, done: int, total: int) -> None:
        if total > 0:
            self.progress.setRange(0, total)
            self.progress.setValue(min(done, total))

    def show_message(self, text: str, *, error: bool = False, ok: bool = False) -> None:
        self.status.setStyleSheet(f"color: {ERROR if error else OK if ok else INFO}")
        self.status.setText(text)

    def offer_override(self, refusal: RefusalView) -> None:
        self._refused_id = refusal.proposal_id
        self._refusal = refusal
        self.refusal_text.setText(refusal.message)
        self.refusal.setVisible(True)
        self.show_message("Promotion refused by the promotion rule (figures above).", error=True)

    # the user's actions

    def _selected_detail(self) -> ProposalDetail | None:
        rows = self.table.selectionModel().selectedRows() if self.table.selectionModel() else []
        if not rows or self._view is None or rows[0].row() >= len(self._view.details):
            return None
        return self._view.details[rows[0].row()]

    def _selected(self) -> None:
        detail = self._selected_detail()
        if detail is None or detail.id != getattr(self, "_shown_id", None):
            self.reason.clear()  # a reason is written for one proposal
        self._shown_id = detail.id if detail else None
        self.refusal.setVisible(False)
        self.title.setText(detail.title if detail else "")
        self.facts.setText("\n".join(detail.facts) if detail else "")
        self.verdict.setText(detail.verdict if detail else "")
        rows = detail.figures if detail else ()
        self.figures.setRowCount(len(rows))
        for i, f in enumerate(rows):
            for column, text in enumerate((f.split, f.metric, f.current, f.candidate, f.difference, f.interval)):
                self.figures.setItem(i, column, _item(text, f.tone if column >= 4 else "", column >= 2))
            self.figures.setItem(i, 6, _item(str(f.items), align_right=True))
        self._update_buttons()

    def _update_buttons(self) -> None:
        detail = self._selected_detail()
        may = bool(self._view and self._view.may_decide and detail and detail.is_open and not self._busy)
        for widget in (self.promote, self.decline, self.with_current, self.reason):
            widget.setEnabled(may)
        self.promote_anyway.setEnabled(not self._busy)
        self.refresh.setEnabled(not self._busy)

    def _promote(self, force: bool) -> None:
        proposal_id = self.selected_id()
        if proposal_id:
            self.promote_requested.emit(proposal_id, self.with_current.isChecked(), force, "")

    def _promote_anyway(self) -> None:
        """Asks why, with the figures in view; the reason goes with the promotion into the lineage."""
        proposal_id = getattr(self, "_refused_id", None) or self.selected_id()
        if not proposal_id:
            return
        refusal = getattr(self, "_refusal", None)
        sentence = refusal.sentence if refusal is not None and refusal.sentence else "The promotion was refused."
        self.anyway_dialog = PromoteAnywayDialog(sentence, refusal.splits if refusal is not None else (), self)

        def confirmed(reason: str) -> None:
            self.refusal.setVisible(False)
            self.promote_requested.emit(proposal_id, self.with_current.isChecked(), True, reason)

        self.anyway_dialog.reason_given.connect(confirmed)
        self.anyway_dialog.open()

    def _decline(self) -> None:
        proposal_id = self.selected_id()
        reason = self.reason.text().strip()
        if not reason:
            self.show_message("Say why you decline it; the lead reads the reason.", error=True)
            self.reason.setFocus()
            return
        if proposal_id:
            self.decline_requested.emit(proposal_id, reason)
