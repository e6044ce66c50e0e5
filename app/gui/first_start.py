"""A fresh desk's first start: the bundled target model answers from its PyTorch form within
seconds, while its faster ONNX form is prepared in the background (a child process at lower
priority, so typing keeps its pace); then round 1 switches to it and the status bar says so.
A start after a closed or killed first start resumes the background part."""

from __future__ import annotations

import logging
import time

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QProgressBar

from app.core.errors import DynadeskError
from app.core.storage.models import ModelRecord
from app.gui.worker import SerialWorker
from local_models.errors import Cancelled
from local_models.progress import Progress

log = logging.getLogger(__name__)

PREPARING = "Answering from the PyTorch form; preparing the faster form in the background…"
# measured on the promised 2-core laptop: about 5 s when quiet, 13.8 s under load
GETTING_READY = ("Getting the bundled target model ready (first start only: 5 to 15 seconds, the status bar "
                 "shows how far). You can start writing now.")
FAST_FORM_START_LATEST_MS = 20_000
STEP_PREFIX = "Preparing the faster form"  # before each step's words: the whole line fits at 1366 px


class FirstStart(QObject):
    """Prepares the bundled model for a main window (its status bar, database worker and workspace)."""

    progress_reported = Signal(int, int, str)  # done, total, step: from the preparing worker, queued
    switched = Signal(object)  # the fast form's record, once round 1 runs it (the workspace may still be loading it)

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self._worker: SerialWorker | None = None
        self._progress: Progress | None = None
        self._prefix = ""  # what the status bar says before the step in progress
        self._started = 0.0
        self._source = ""  # where the fast form came from, for the status bar
        self._closed = False

    def prepare(self) -> None:
        """A fresh desk: the PyTorch form becomes round 1's target at once, the ONNX form follows.
        A desk whose first start did not get to the switch picks up the background part."""
        from app.core.services import default_model_forms, target_models

        desk = self.window.desk

        def look():
            if target_models.needs_default_model(desk):
                return "fresh"
            return "resume" if default_model_forms.waiting_stand_in(desk) is not None else None

        def start(state: str | None) -> None:
            if state == "fresh":
                self._answer_first()
            elif state == "resume":
                self._prepare_fast_form()

        self.window.db.submit(look, on_done=start, on_error=self._failed)

    # The quick half: PyTorch ------------------------------------------------------------------
    def _answer_first(self) -> None:
        from app.core.services import default_model_forms

        window, desk = self.window, self.window.desk
        window.workspace.set_no_model_message(GETTING_READY)
        window.workspace.reload_models()
        self._show_bar("First start: getting the bundled target model ready…")
        progress = self._new_progress("Preparing the model")
        # a team desk's sync may give round 1 its target (the lead's) first: then this preparation is not needed
        window.workspace.inference.model_loaded.connect(self._set_up_elsewhere)
        self._worker_lane().submit(lambda: default_model_forms.prepare_torch_files(desk, progress=progress),
                                   on_done=lambda _prepared: window.db.submit(
                                       lambda: default_model_forms.adopt_torch_form(desk),
                                       on_done=self._answering, on_error=self._failed),
                                   on_error=self._failed)

    def _set_up_elsewhere(self, *_loaded) -> None:
        """A model answers: if round 1 got its target from elsewhere (the team's server, a lead), the bundled
        model's preparation stops and its bar goes; the model that answers is the one the round has."""
        from app.core.services import target_models

        desk, progress = self.window.desk, self._progress

        def stop(set_up: bool) -> None:
            if set_up and progress is self._progress and not self._bar().isHidden():
                self.window.workspace.inference.model_loaded.disconnect(self._set_up_elsewhere)
                progress.cancel()
                self._hide_bar()

        self.window.db.submit(lambda: not target_models.needs_default_model(desk), on_done=stop,
                              on_error=lambda exc: log.warning("first start: %s", exc))

    def _answering(self, record) -> None:
        try:
            self.window.workspace.inference.model_loaded.disconnect(self._set_up_elsewhere)
        except (RuntimeError, TypeError):  # already gone: the round was set up elsewhere
            pass
        workspace = self.window.workspace
        workspace.set_no_model_message("This round has no target model yet: a lead can attach one (Round menu).")
        if record is None:  # round 1 was set up meanwhile (a lead, a sync): nothing to switch
            self._hide_bar()
            return
        if workspace.task_code != _default_task():
            self._prepare_fast_form()
            return
        # The export starts once PyTorch has answered: on 2 cores its start-up (importing torch in
        # the child) would otherwise delay the first answer, however low its priority.
        once = []

        def start(*_args) -> None:
            if not once and not self._closed:
                once.append(True)
                workspace.inference.model_loaded.disconnect(start)
                self._prepare_fast_form()

        workspace.inference.model_loaded.connect(start)
        QTimer.singleShot(FAST_FORM_START_LATEST_MS, self, start)  # the page may not load it (another round shown)
        workspace.reload_models()

    # The slow half: the ONNX form, in the background ----------------------------------------------
    def _prepare_fast_form(self) -> None:
        from app.core.services import default_model_forms

        desk, clients = self.window.desk, self.window.sync.clients
        self._show_bar(PREPARING)
        progress = self._new_progress(STEP_PREFIX)
        self._started, self._source = time.monotonic(), "prepared in the background"

        def prepare():
            """What the cache has, else what the team's server has (published by the lead), else an export."""
            found = default_model_forms.prepared_fast_files(desk)
            if found is not None:
                return found
            if default_model_forms.waiting_stand_in(desk) is None:
                return None  # round 1 changed meanwhile (a lead, the team's server): nothing to prepare
            fetched = self._fetch_from_team(desk, clients, progress)
            if fetched is not None:
                self._source = "fetched from the team's server"
                return fetched
            return default_model_forms.prepare_fast_files(desk, progress=progress)

        def switch(prepared) -> None:
            if prepared is None:
                self._switched(None)
                return
            fetched = isinstance(prepared, ModelRecord)
            self.window.db.submit(lambda: default_model_forms.switch_to_fast_form(
                desk, None if fetched else prepared, record=prepared if fetched else None),
                on_done=self._switched, on_error=self._fast_form_failed)

        self._worker_lane().submit(prepare, on_done=switch, on_error=self._fast_form_failed)

    @staticmethod
    def _fetch_from_team(desk, clients, progress: Progress):
        """The stand-in's faster form as the team's lead published it; None (prepare it here) when there is
        no server, no such form, or it arrived damaged (refused, never used)."""
        from app.core.services import default_model_forms
        from sync.prepared_forms import fetch_prepared_form
        from sync.transport import SyncError

        stand_in = default_model_forms.waiting_stand_in(desk)
        if stand_in is None or not desk.settings.server_url:
            return None
        progress.say("Fetching it from the team's server")
        try:
            return fetch_prepared_form(desk, clients, stand_in)
        except SyncError as exc:
            log.warning("the team's prepared form was refused; preparing it here: %s", exc)
            progress.say("The team's copy was refused (damaged); preparing it here")
            return None

    def _switched(self, record) -> None:
        self._hide_bar()
        if record is None:
            return  # round 1 changed meanwhile (a lead, the team's server): it keeps what it has
        window, workspace = self.window, self.window.workspace
        took = time.monotonic() - self._started
        message = f"Switched to the faster form: {_form_name(record)} ({self._source} in {took:.0f} s)."
        if workspace.task_code != _default_task():
            window.statusBar().showMessage(message, 15_000)
            self.switched.emit(record)
            return

        def loaded(models) -> None:
            if record.name in models.names:
                workspace.inference.model_loaded.disconnect(loaded)
                window.statusBar().showMessage(message, 15_000)

        workspace.inference.model_loaded.connect(loaded)
        workspace.reload_models(keep_shown=True)
        self.switched.emit(record)

    def _fast_form_failed(self, error: BaseException) -> None:
        self._hide_bar()
        if isinstance(error, Cancelled):
            return  # the window is closing; the next start resumes
        if not isinstance(error, DynadeskError):
            log.error("preparing the fast form failed", exc_info=(type(error), error, error.__traceback__))
        self.window.statusBar().showMessage(
            f"The faster ONNX form could not be prepared ({error}). The model keeps answering from its PyTorch "
            "form; the next start tries again.")

    def _failed(self, error: BaseException) -> None:
        self._hide_bar()
        if isinstance(error, Cancelled):
            return
        workspace = self.window.workspace
        self.window.statusBar().clearMessage()
        workspace.set_no_model_message(f"The bundled target model could not be prepared: {error}")
        workspace.reload_models()
        if not isinstance(error, DynadeskError):
            log.error("first start failed", exc_info=(type(error), error, error.__traceback__))

    # The status bar -------------------------------------------------------------------------------
    def _new_progress(self, prefix: str) -> Progress:
        step = [""]  # the latest step's line, sent with each percentage
        self._prefix = prefix
        progress = Progress(lambda done, total: self.progress_reported.emit(done, total, step[0]),
                            lambda line: (step.__setitem__(0, line), self.progress_reported.emit(-1, 0, line)))
        self._progress = progress
        return progress

    def _bar(self) -> QProgressBar:
        status_bar = self.window.statusBar()
        bar = status_bar.findChild(QProgressBar, "first-start-progress")
        if bar is None:
            bar = QProgressBar(objectName="first-start-progress", maximumWidth=160, textVisible=True)
            status_bar.insertPermanentWidget(0, bar)
            self.progress_reported.connect(self._show_progress, Qt.ConnectionType.QueuedConnection)
            bar.hide()
        return bar

    def _show_bar(self, message: str) -> None:
        bar = self._bar()
        bar.setValue(0)
        bar.setToolTip(message)
        bar.show()
        self.window.statusBar().showMessage(message)

    def _hide_bar(self) -> None:
        self._bar().hide()
        self.window.statusBar().clearMessage()

    def _show_progress(self, done: int, total: int, step: str) -> None:
        """The preparation, as it goes: the step in words, the percentage in the bar."""
        bar = self._bar()
        if bar.isHidden():
            return  # finished (or failed) before this report arrived
        if done >= 0:
            bar.setValue(round(100 * done / total) if total else 0)
        self.window.statusBar().showMessage(f"{self._prefix} · {step}" if step else f"{self._prefix}…")

    def _worker_lane(self) -> SerialWorker:
        if self._worker is None:
            self._worker = SerialWorker("first-start", self.window)
        return self._worker

    def shutdown(self) -> None:
        """The window closes: a preparation under way is cancelled (its child process ends); the
        next start finishes it."""
        self._closed = True
        if self._worker is not None:
            if self._progress is not None:
                self._progress.cancel()
            self._worker.shutdown(wait=False)


def _default_task() -> str:
    from app.core.services.target_models import DEFAULT_TASK

    return DEFAULT_TASK


def _form_name(record) -> str:
    """"ONNX int8" of "Hate speech R1 (...), ONNX int8": the part that names the form."""
    return record.name.rpartition(", ")[2] or record.name
