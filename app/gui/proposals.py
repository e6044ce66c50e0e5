"""Connects the Proposals dialog to ``sync.proposals``: listing and declining run on the sync worker (network
only, beside a sync, never on the database worker that serves editing); promoting downloads, compares,
exports and publishes, so it runs as a job of the one inference service, with progress and Cancel."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.core.domain import Role
from app.core.errors import DynadeskError
from app.gui.worker import SerialWorker
from app.views.proposals_build import promoted_message, proposals_view, refusal_view
from widgets.proposals_dialog import ProposalsDialog

log = logging.getLogger(__name__)


class ProposalsController(QObject):
    rounds_changed = Signal(str)  # task code: a promotion opened a round

    def __init__(self, desk, db: SerialWorker, net: SerialWorker, inference, show_error, parent=None, *, clients):
        super().__init__(parent)
        self.desk = desk
        self.db = db
        self.net = net
        self.inference = inference
        self.show_error = show_error
        self.clients = clients  # the sync controller's ClientFactory
        self.dialog: ProposalsDialog | None = None
        self.job = None  # the running promotion's Reply
        self._task_code = ""
        self._task_name = ""
        self._role = Role.ANNOTATOR

    def open_dialog(self, task_code: str, parent) -> None:
        desk = self.desk

        def read():
            return desk.tasks.definition_by_code(task_code), desk.current_person()

        self.db.submit(read, on_done=lambda found: self._open(task_code, parent, *found), on_error=self.show_error)

    def _open(self, task_code: str, parent, definition, person) -> ProposalsDialog:
        self._task_code, self._task_name, self._role = task_code, definition.name, Role(person.role)
        self.dialog = dialog = ProposalsDialog(definition.name, parent)
        dialog.refresh_requested.connect(self.refresh)
        dialog.promote_requested.connect(self.promote)
        dialog.decline_requested.connect(self.decline)
        dialog.cancel_requested.connect(self.cancel)
        dialog.open()
        self.refresh()
        return dialog

    def _client(self):
        return self.clients.configured()

    def refresh(self, select_id: str | None = None, message: str = "", ok: bool = False) -> None:
        from sync.proposals import list_proposals

        desk, code, role, name = self.desk, self._task_code, self._role, self._task_name

        def load():
            with self._client() as client:
                return proposals_view(list_proposals(desk, client, code), role, name)

        def show(view) -> None:
            if self.dialog is not None:
                self.dialog.show_proposals(view, select_id)
                if message:
                    self.dialog.show_message(message, ok=ok)
                elif view.rows:
                    self.dialog.show_message(f"{len(view.rows)} proposal(s).")

        if self.dialog is not None and not message:
            self.dialog.show_message("Reading the proposals from the server…")
        self.net.submit(load, on_done=show, on_error=self._failed)

    def decline(self, proposal_id: str, reason: str) -> None:
        from sync.proposals import decline_proposal

        def run():
            with self._client() as client:
                return decline_proposal(client, proposal_id, reason)

        self.net.submit(run, on_done=lambda s: self.refresh(proposal_id, f"Declined {s.name} by {s.proposer}.", True),
                        on_error=self._failed)

    def propose(self, task_code: str, candidate_dir: str, answer) -> None:
        """A lead's "Propose to the owner…" in the Next round dialog: upload the candidate with its comparison
        (when it was compared) on the sync worker; ``answer(message, ok)`` says how it went."""
        from pathlib import Path

        from sync.proposals import propose_candidate
        from sync.transport import Offline

        desk, folder = self.desk, Path(candidate_dir)
        report = folder / "comparison"

        def run():
            with self._client() as client:
                return propose_candidate(desk, client, task_code, folder, report if report.is_dir() else None)

        def failed(error: BaseException) -> None:
            if isinstance(error, Offline):
                answer(f"{error} The candidate stays in {folder}; propose it again when the server can be "
                       "reached.", False)
            elif isinstance(error, DynadeskError):
                answer(str(error), False)
            else:
                self.show_error(error)

        answer("Proposing: uploading the candidate's files and its comparison to the server…", True)
        self.net.submit(run, on_error=failed, on_done=lambda summary: answer(
            f"Proposed {summary.name} to the owner of {task_code}: they see it under Round ▸ Proposals… and "
            "decide there. Every desk of the team gets the new round once it is promoted.", True))

    def promote(self, proposal_id: str, with_current: bool, force: bool, reason: str = "") -> None:
        from sync.proposals import promote_proposal
        from sync.transport import SyncHandle

        if self.job is not None:
            return
        desk = self.desk

        class Linked(SyncHandle):
            """Cancel stops a download as well as the model work."""

            def check(self) -> None:
                self.progress_handle.check()
                super().check()

        def run(progress):
            handle = Linked(on_progress=lambda _phase, done, total: progress.report(done, total))
            handle.progress_handle = progress
            with self._client() as client:
                outcome = promote_proposal(desk, client, proposal_id, with_current=with_current, force=force,
                                           reason=reason, progress=progress, handle=handle)
            return str(outcome.proposal.id), promoted_message(outcome)  # read here: the records stay off the GUI thread

        if self.dialog is not None:
            self.dialog.set_busy(True, "Promoting: downloading and checking the files, comparing, exporting, "
                                       "publishing…" + (" (promoted anyway: the reason is recorded)" if force else ""))
        self.job = self.inference.run_job(run, on_progress=self._progress, on_message=self._message,
                                          on_done=self._done, on_failed=lambda failure: self._job_failed(
                                              proposal_id, failure), on_cancelled=self._cancelled)

    def cancel(self) -> None:
        if self.job is not None:
            if self.dialog is not None:  # first: a job not yet started ends within cancel(), saying so
                self.dialog.show_message("Cancelling after the current step…")
            self.job.cancel()

    def _progress(self, done: int, total: int) -> None:
        if self.dialog is not None:
            self.dialog.set_progress(done, total)

    def _message(self, text: str) -> None:
        if self.dialog is not None:
            self.dialog.show_message(text)

    def _done(self, result) -> None:
        self.job = None
        proposal_id, message = result
        if self.dialog is not None:
            self.dialog.set_busy(False)
        self.rounds_changed.emit(self._task_code)
        self.refresh(proposal_id, message, ok=True)

    def _cancelled(self) -> None:
        self.job = None
        if self.dialog is not None:
            self.dialog.set_busy(False)
            self.dialog.show_message("Cancelled; no round changed.")

    def _job_failed(self, proposal_id: str, failure) -> None:
        from app.core.next_round.promotion import PromotionRefused

        self.job = None
        if self.dialog is None:
            return
        self.dialog.set_busy(False)
        if isinstance(failure.error, PromotionRefused):
            self.dialog.offer_override(refusal_view(proposal_id, failure.message, failure.error.lines))
        else:
            self._failed(failure.error)

    def _failed(self, error: BaseException) -> None:
        from sync.transport import Offline

        if self.dialog is None or not self.dialog.isVisible():
            self.show_error(error)
            return
        if isinstance(error, Offline):
            self.dialog.show_message(f"{error} Proposals live on the server: nothing changed here; try again "
                                     "when it can be reached.", error=True)
        elif isinstance(error, DynadeskError):
            self.dialog.show_message(str(error), error=True)
        else:
            log.error("proposals: %s", error, exc_info=error)
            self.show_error(error)
