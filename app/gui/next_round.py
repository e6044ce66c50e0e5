"""Round ▸ Next round…: the controller of the three-step dialog (widgets/next_round_dialog.py).

Database reads and writes run on the desk's serial worker; training, the comparison and the model
export run as jobs of the one inference service (its worker thread, like the Evaluate tab's jobs);
publishing runs on the sync controller's worker through the client's ``publish`` (the code path of
``dynadesk sync publish``). The GUI thread never waits on any of them.

    controller = NextRoundController(desk, db, inference, lambda: sync_controller, window)
    controller.person_shown(person, action)      # the menu entry: leads and owners only
    controller.open(task_code, window)           # read (db) -> step 1
    train -> compare (jobs) -> promote (db check, export job, db promote) -> promoted(Promotion) -> publish
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices

from app.core.desk import Desk
from app.core.domain import Role
from app.core.errors import DynadeskError
from app.gui.inference import InferenceFailure, InferenceService, Reply
from app.gui.worker import SerialWorker
from app.views.next_round import (
    BaseColumnsView,
    TrainChoices,
    base_columns_view,
    comparison_view,
    promotion_view,
    train_setup,
)
from app.views.next_round_session import NextRoundSession, Step, training_options
from widgets.next_round_dialog import NextRoundDialog

log = logging.getLogger(__name__)
PROMOTERS = (Role.LEAD, Role.OWNER)
REPORT_FOLDER = "comparison"


class NextRoundController(QObject):
    promoted = Signal(object)  # Promotion: the task's rounds changed (the window follows them)
    propose_requested = Signal(str, str)  # task code, candidate folder: a lead proposes it to the owner

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService,
                 sync: Callable[[], Any] = lambda: None, parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.db, self.inference, self.sync = desk, db, inference, sync
        self.dialog: NextRoundDialog | None = None
        self.session = NextRoundSession()  # the dialog's state: task, candidate, report, running step, rounds
        self.job: Reply | None = None  # the running job: training, the comparison or the export

    # The menu entry and opening -----------------------------------------------------------------
    @staticmethod
    def person_shown(person, action) -> None:
        """Leads and owners see Round ▸ Next round…; an annotator does not."""
        allowed = person is not None and person.role in PROMOTERS
        action.setVisible(allowed)
        action.setEnabled(allowed)

    def open(self, task_code: str | None, parent) -> None:
        if not task_code:
            return
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.raise_()
            self.dialog.activateWindow()
            return
        desk = self.desk

        def read():
            from app.core.next_round.inputs import (
                candidates_dir,
                format_label_map,
                round_counts,
                task_inputs,
                train_defaults,
            )

            person = desk.current_person()
            if person.role not in PROMOTERS:
                raise DynadeskError(f"Only leads and owners train the next round's target; {person.display_name} "
                                    f"is an {person.role}.")
            defaults = train_defaults(desk, task_code)
            definition = desk.tasks.definition_by_code(task_code)
            publish_reason = "" if desk.settings.server_url else (
                f"Sync is not set up, so there is no team server to publish to (Sync ▸ Settings); publish later "
                f"with: dynadesk sync publish {task_code} --round N")
            return train_setup(task_code, definition.name,
                               round_counts(desk, task_code), defaults, str(candidates_dir(desk.root)),
                               format_label_map(defaults.base.label_map if defaults.base else None),
                               publish_reason=publish_reason, inputs=task_inputs(definition),
                               validated_variants=len(desk.adaptive_suite.cases(task_code)))

        self.db.submit(read, on_done=lambda setup: self._show(task_code, setup, parent), on_error=self._error)

    def _show(self, task_code: str, setup, parent) -> None:
        self.session.opened(task_code, setup.context_input)
        if self.dialog is not None:
            self.dialog.deleteLater()  # closed earlier; its answers (a cancelled run's end) now go to the new one
        self.dialog = dialog = NextRoundDialog(parent)
        dialog.train_requested.connect(self.train)
        dialog.cancel_requested.connect(self.cancel)
        dialog.columns_requested.connect(self._columns)
        dialog.report_requested.connect(self.open_report)
        dialog.promote_requested.connect(self.promote)
        dialog.publish_requested.connect(self.publish)
        dialog.back_requested.connect(lambda: dialog.show_step(0))
        dialog.compare_requested.connect(self.compare)
        dialog.propose_requested.connect(lambda: self.propose_requested.emit(self.session.task_code,
                                                                             str(self.session.candidate_dir)))
        dialog.show_setup(setup)
        if setup.base_path:
            self._columns(setup.base_path)
        dialog.open()

    def _columns(self, path: str) -> None:
        if self.dialog is None or not path:
            return
        from app.core.next_round.inputs import csv_columns
        from app.core.services.evaluation_data import guess_columns, guess_context_column

        pairs = self.session.pairs

        def read() -> BaseColumnsView:
            columns = csv_columns(Path(path))
            return base_columns_view(Path(path).expanduser().name, columns, *guess_columns(columns),
                                     guess_context_column(columns), pairs=pairs)

        dialog = self.dialog
        self.db.submit(read, on_done=dialog.set_columns,
                       on_error=lambda exc: dialog.set_columns(
                           BaseColumnsView((), "", "", f"No base data chosen: {exc}"), str(exc)))

    # Step 1: train ------------------------------------------------------------------------------
    def train(self, choices: TrainChoices) -> None:
        from app.core.next_round.inputs import new_candidate_dir
        from app.core.next_round.round_training import train_from_desk

        dialog = self.dialog
        if dialog is None:
            return
        session = self.session
        if session.running is not None:
            dialog.show_message("The previous run is still stopping; train again in a moment.", error=True)
            return
        try:
            options = training_options(session.task_code, choices, session.context_input)
        except DynadeskError as exc:
            dialog.show_message(str(exc), error=True)
            return
        out = new_candidate_dir(self.desk.root, session.task_code)
        session.training_started(choices, out)
        options.name = session.candidate_name(options.rounds)
        desk = self.desk
        dialog.show_message(f"Training a candidate into {out} …")
        self._run("Training…", lambda progress: train_from_desk(desk, options, out, progress=progress), self._trained)

    def _trained(self, manifest: dict) -> None:
        from app.core.next_round.promotion import check_promotable
        from app.core.next_round.promotion_rule import may_propose

        counts = manifest["data"]["summary"]["counts"]
        parent = manifest["parent"]
        started = "the current target" if parent["kind"] == "target" else "the base encoder"
        test = (manifest.get("metrics") or {}).get("test") or {}
        figure = f"; macro-F1 on its own test split {test['macro_f1']:.3f}" if "macro_f1" in test else ""
        self._say(f"Trained on {counts['train']:,} round examples and {counts['base']:,} base rows ({counts['held_out']:,} "
                  f"held out), from {started}{figure}. Written to {self.session.candidate_dir}.")
        desk, folder, code = self.desk, self.session.candidate_dir, self.session.task_code

        def allowed() -> tuple[str, bool]:
            """Why this person may not promote ("" when they may), and whether they can propose instead."""
            try:
                check_promotable(desk, folder, task_code=code)
            except DynadeskError as exc:
                return str(exc), may_propose(desk.current_person().role, team_server=bool(desk.settings.server_url))
            return "", False

        self.db.submit(allowed, on_done=self._promote_allowed, on_error=self._error)
        self.compare()

    def _promote_allowed(self, answer: tuple[str, bool]) -> None:
        reason, can_propose = answer
        if self.dialog is not None:
            self.dialog.set_promote_allowed(reason)
            self.dialog.set_propose_available(can_propose)

    def proposal_answered(self, message: str, ok: bool) -> None:
        """What the server said to "Propose to the owner…" (the proposals controller sends it)."""
        if self.dialog is not None:
            self.dialog.show_message(message, error=not ok)

    # Step 2: compare ----------------------------------------------------------------------------
    def compare(self) -> None:
        from app.core.next_round.comparison import BaseTestOptions, compare_candidate
        from app.core.next_round.comparison_report import write_report
        from local_models.train import parse_label_map

        session, desk = self.session, self.desk
        choices, folder, code = session.choices, session.candidate_dir, session.task_code
        if choices is None or folder is None or self.dialog is None or not session.can_compare:
            return
        base_test = Path(choices.base_path) if choices.base_path else None
        base_options = BaseTestOptions(choices.text_column, choices.label_column, parse_label_map(choices.label_map),
                                       choices.html_unescape, context_column=(choices.context_column or None)
                                       if session.pairs else None) if base_test else None
        suite = Path(choices.suite) if choices.suite else None

        def run(progress):
            report = compare_candidate(desk, code, folder, base_test=base_test, base_options=base_options,
                                       suite=suite, progress=progress)
            _json, html = write_report(report, folder / REPORT_FOLDER,
                                       blur_words=desk.reading_words(code, browsing=True))
            return report, html

        session.comparing_started()
        self._run("Comparing the candidate with the current target…", run, self._compared)

    def _compared(self, result) -> None:
        report, html = result
        self.session.compared(report, html)
        if self.dialog is None:
            return
        self.dialog.show_comparison(comparison_view(report.document, str(html)))
        self.dialog.set_promote_intro(self.session.promote_intro())
        self._say("Compared. The report is stored with the candidate.")

    def open_report(self) -> None:
        if self.session.html is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.session.html)))

    # Step 3: promote and publish ----------------------------------------------------------------
    def promote(self, with_current: bool, force: bool, reason: str = "") -> None:
        from app.core.next_round.promotion import check_promotable

        folder, desk, code = self.session.candidate_dir, self.desk, self.session.task_code
        if self.dialog is None or folder is None or not self.session.can_promote:
            return
        self.dialog.set_running(True, "Checking…")
        self.db.submit(lambda: check_promotable(desk, folder, task_code=code), on_done=lambda person: self._export(
            with_current, force, reason, person.id), on_error=self._promotion_failed)

    def _export(self, with_current: bool, force: bool, reason: str, actor_id) -> None:
        """The costly part (assembling, ONNX export, parity check) as a job; promote_candidate then finds it done."""
        from app.core import paths
        from app.core.next_round.promotion import CANDIDATE_SLUG
        from local_models.default_model import prepare_default_model
        from local_models.errors import ExportFailed

        folder, cache = self.session.candidate_dir, paths.models_cache_dir(self.desk.root)

        def prepare(progress) -> None:
            try:
                prepare_default_model(folder, cache, slug=CANDIDATE_SLUG, progress=progress)
            except ExportFailed:
                pass  # promote_candidate registers the PyTorch model then, and records why

        self.session.export_started()
        self._run("Exporting the candidate to ONNX and checking parity…", prepare,
                  lambda _none: self._register(with_current, force, reason, actor_id))

    def _register(self, with_current: bool, force: bool, reason: str, actor_id) -> None:
        from app.core.next_round.promotion import promote_candidate

        desk, code, folder, report = self.desk, self.session.task_code, self.session.candidate_dir, self.session.report
        if self.dialog is not None:
            self.dialog.set_running(True, "Registering the candidate and opening the next round…")

        def run():
            return promote_candidate(desk, code, folder, with_current=with_current, force=force, reason=reason,
                                     comparison=report, actor_id=actor_id)

        self.db.submit(run, on_done=self._promoted, on_error=self._promotion_failed)

    def _promoted(self, promotion) -> None:
        self.promoted.emit(promotion)
        view = promotion_view(promotion)
        self.session.promoted(view.publish_rounds)
        if self.dialog is None:
            return
        self.dialog.set_running(False)
        self.dialog.show_promotion(view)
        self._say(f"Round {promotion.round_number} of {promotion.task_code} is open with {promotion.candidate.name} "
                  "as its target; the Create tab switches to it once the model answers.")

    def _promotion_failed(self, error: BaseException) -> None:
        if self.dialog is not None:
            self.dialog.set_running(False)
        self._error(error)

    def publish(self) -> None:
        sync = self.sync()
        dialog = self.dialog
        if dialog is None or sync is None or not self.session.can_publish:
            return
        rounds, code = self.session.publish_rounds, self.session.task_code
        dialog.show_publish_result(f"Publishing round(s) {', '.join(map(str, rounds))} to the team server…")
        dialog.publish_button.setEnabled(False)

        def done(response) -> None:
            counts = {status: response.count(status) for status in ("stored", "already_stored", "deferred", "rejected")}
            text = ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items() if n)
            problems = [f"{r.record} {r.id}: {r.status}: {r.reason or ''}" for r in response.results
                        if r.status in ("deferred", "rejected")]
            if self.dialog is not None:
                self.dialog.show_publish_result(f"Published to the team server: {text or 'nothing new'}."
                                                + (" " + "; ".join(problems[:3]) if problems else ""), bool(problems))

        def failed(error: BaseException) -> None:
            if self.dialog is not None:
                self.dialog.show_publish_result(f"Publishing failed: {error}. Nothing is lost; publish again, or "
                                                f"later with dynadesk sync publish {code}.", True)

        sync.publish(code, list(rounds), on_done=done, on_error=failed)

    # Jobs -------------------------------------------------------------------------------------------
    def _run(self, text: str, fn, then: Callable[[Any], None]) -> None:
        """Run the job of the step the session just started; ``then(result)`` when it is done."""
        self.session.stages.say(text)
        if self.dialog is not None:
            self.dialog.set_running(True, text)

        def done(result) -> None:
            self._ended()
            self.session.job_finished()
            if self.dialog is not None:
                self.dialog.set_running(False)
            then(result)

        self.job = self.inference.run_job(fn, on_progress=self._progress, on_message=self._message,
                                          on_done=done, on_failed=self._stopped,
                                          on_cancelled=lambda: self._stopped(None))

    def cancel(self) -> None:
        if self.job is not None:
            self._say("Cancelling after the current step…")  # first: a job not yet started ends within cancel()
            self.job.cancel()

    def _progress(self, done: int, total: int) -> None:
        if self.dialog is not None:
            self.session.stages.report(done, total)
            self.dialog.show_progress(self.session.stages.view())

    def _message(self, text: str) -> None:
        if self.dialog is not None:
            self.session.stages.say(text)
            self.dialog.show_progress(self.session.stages.view())

    def _ended(self) -> None:
        self.job = None

    def _stopped(self, failure: InferenceFailure | None) -> None:
        """The running step's job failed (``failure``), or was cancelled (None)."""
        from app.core.next_round.comparison import NothingToCompare

        self._ended()
        stage, dialog, cancelled = self.session.job_failed(), self.dialog, failure is None
        if dialog is None:
            return
        dialog.set_running(False)
        if stage == Step.TRAIN:
            dialog.show_step(0)
            if failure is None:  # training stages its folder: a cancelled run left nothing
                self._say("Training was cancelled; nothing was written.")
            else:
                dialog.show_message(f"Training failed: {failure.message}", error=True)
        elif stage == Step.COMPARE:
            if failure is not None and isinstance(failure.error, NothingToCompare):
                dialog.show_no_comparison(f"{failure.message} Promoting without a comparison needs “Promote anyway”.")
                dialog.set_promote_intro(self.session.promote_intro())
            elif failure is None:
                dialog.show_comparison_stopped(f"The comparison was cancelled. The trained candidate stays in "
                                               f"{self.session.candidate_dir}: compare it again, or go back and train anew.")
            else:
                dialog.show_comparison_stopped(f"The comparison failed: {failure.message}")
        else:
            dialog.show_message("Promotion cancelled; no round changed." if failure is None
                                else f"The export failed: {failure.message}", error=not cancelled)

    # Messages -----------------------------------------------------------------------------------------
    def _say(self, text: str) -> None:
        if self.dialog is not None:
            self.dialog.show_message(text)

    def _error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            message = str(error)
        else:
            log.error("next round error", exc_info=(type(error), error, error.__traceback__))
            message = f"Unexpected error: {error}. Details are in the log."
        if self.dialog is not None and self.dialog.isVisible():
            self.dialog.show_message(message, error=True)
        else:
            from PySide6.QtWidgets import QMessageBox

            parent = self.parent()
            QMessageBox.warning(parent if parent is not None and parent.isWidgetType() else None, "Next round", message)

