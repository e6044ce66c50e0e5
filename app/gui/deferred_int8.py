"""A round opened on a candidate's fp32 form with its int8 search deferred (the next-round dialog's
choice, or `dynadesk train --int8 later`): the int8 form is prepared in the background, as the bundled
model's first start prepares its faster form, in a child process at lower priority so typing keeps
its pace; then the round switches to it and the status bar says so. A window that closes first
cancels it; the next start resumes (app.core.next_round.deferred_int8 finds what still waits)."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, QTimer, Signal

from app.core.errors import DynadeskError
from app.gui.worker import SerialWorker
from app.views.stage_progress import StageClock
from local_models.errors import Cancelled
from local_models.progress import Progress

log = logging.getLogger(__name__)


class DeferredInt8(QObject):
    progress_reported = Signal(int, int, str)  # done, total, line ("" for a report): from the worker, queued
    finished = Signal(str)  # what the status bar said at the end (switched, kept fp32, or failed)

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self._worker: SerialWorker | None = None
        self._progress: Progress | None = None
        self._stages = StageClock()
        self._prefix = ""
        self._busy = False
        self._closed = False
        self.progress_reported.connect(self._show_progress, Qt.ConnectionType.QueuedConnection)
        window.next_round.promoted.connect(lambda _promotion: self.resume())
        QTimer.singleShot(0, self, self.resume)  # a window closed before the switch: the next start resumes

    def resume(self) -> None:
        """Prepare the next int8 form that waits, if any (one at a time)."""
        from app.core.next_round.deferred_int8 import pending_int8

        if self._busy or self._closed:
            return
        self._busy = True
        self.window.db.submit(lambda: pending_int8(self.window.desk), on_done=self._start, on_error=self._failed)

    def _start(self, waiting) -> None:
        from app.core.next_round.deferred_int8 import prepare_int8_files, switch_to_int8

        if not waiting or self._closed:
            self._busy = False
            return
        pending, desk = waiting[0], self.window.desk
        self._prefix = f"{pending.task_code} round {pending.round_number}: preparing its int8 form in the background"
        self._stages = StageClock()
        self.window.statusBar().showMessage(f"{self._prefix}…")
        progress = self._progress = Progress(lambda done, total: self.progress_reported.emit(done, total, ""),
                                             lambda line: self.progress_reported.emit(-1, 0, line))

        def switch(prepared) -> None:
            self.window.db.submit(lambda: switch_to_int8(desk, pending, prepared),
                                  on_done=lambda outcome: self._switched(outcome.line(pending)),
                                  on_error=self._failed)

        self._lane().submit(lambda: prepare_int8_files(desk, pending, progress=progress), on_done=switch,
                            on_error=self._failed)

    def _show_progress(self, done: int, total: int, line: str) -> None:
        if not self._busy or self._closed:
            return
        if done < 0:
            self._stages.say(line)
        else:
            self._stages.report(done, total)
        self.window.statusBar().showMessage(f"{self._prefix} · {self._stages.line()}")

    def _switched(self, message: str) -> None:
        self._busy = False
        self.window.statusBar().showMessage(message, 30_000)
        self.window.workspace.reload_models(keep_shown=True)
        self.finished.emit(message)
        self.resume()  # another round may wait too

    def _failed(self, error: BaseException) -> None:
        self._busy = False
        if isinstance(error, Cancelled) or self._closed:
            return  # the window is closing; the next start resumes
        if not isinstance(error, DynadeskError):
            log.error("preparing a deferred int8 form failed", exc_info=(type(error), error, error.__traceback__))
        message = f"The int8 form could not be prepared ({error}); the round keeps its fp32 form."
        self.window.statusBar().showMessage(message)
        self.finished.emit(message)

    def _lane(self) -> SerialWorker:
        if self._worker is None:
            self._worker = SerialWorker("int8-later", self.window)
        return self._worker

    def shutdown(self) -> None:
        self._closed = True
        if self._worker is not None:
            if self._progress is not None:
                self._progress.cancel()
            self._worker.shutdown(wait=False)
