"""A fresh desk's first start: the bundled target model prepared off the GUI thread, with its
progress in the main window's status bar."""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QProgressBar

from app.core.errors import DynadeskError
from app.gui.worker import SerialWorker
from local_models.progress import Progress

log = logging.getLogger(__name__)


class FirstStart(QObject):
    """Prepares the bundled model for a main window (its status bar, database worker and workspace)."""

    progress_reported = Signal(int, int, str)  # done, total, step: from the preparing worker, queued

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self._worker: SerialWorker | None = None
        self._progress: Progress | None = None

    def prepare(self) -> None:
        """A fresh desk: build the bundled model once (about 20 s, off the GUI thread), then make it
        the target of hate-speech round 1, so the window is ready to annotate with nothing to set up."""
        from app.core.services import target_models

        window = self.window
        desk, workspace, status_bar = window.desk, window.workspace, window.statusBar()
        step = [""]  # the latest step's line, sent with each percentage
        progress = Progress(lambda done, total: self.progress_reported.emit(done, total, step[0]),
                            lambda line: (step.__setitem__(0, line), self.progress_reported.emit(-1, 0, line)))
        self._progress = progress
        bar = status_bar.findChild(QProgressBar, "first-start-progress")
        if bar is None:
            bar = QProgressBar(objectName="first-start-progress", maximumWidth=160, textVisible=True)
            status_bar.insertPermanentWidget(0, bar)
            self.progress_reported.connect(self._show_progress, Qt.ConnectionType.QueuedConnection)
        bar.hide()

        def start(needed: bool) -> None:
            if not needed:
                return
            workspace.set_no_model_message("Preparing the bundled target model (first start only, about half a "
                                            "minute; progress in the status bar). You can start writing now.")
            workspace.reload_models()
            bar.setValue(0)
            bar.show()
            status_bar.showMessage("First start: preparing the bundled target model…")
            self._worker = SerialWorker("first-start", window)
            self._worker.submit(lambda: target_models.prepare_default_files(desk, progress=progress),
                                on_done=adopt, on_error=failed)

        def adopt(_prepared) -> None:
            window.db.submit(lambda: target_models.adopt_default_model(desk), on_done=adopted, on_error=failed)

        def adopted(record) -> None:
            bar.hide()
            workspace.set_no_model_message("This round has no target model yet: a lead can attach one (Round menu).")
            status_bar.showMessage("The target model is ready." if record else "", 8000)
            if workspace.task_code == target_models.DEFAULT_TASK:
                workspace.reload_models()

        def failed(error: BaseException) -> None:
            bar.hide()
            status_bar.clearMessage()
            workspace.set_no_model_message(f"The bundled target model could not be prepared: {error}")
            workspace.reload_models()
            if not isinstance(error, DynadeskError):
                log.error("first start failed", exc_info=(type(error), error, error.__traceback__))

        window.db.submit(lambda: target_models.needs_default_model(desk), on_done=start, on_error=failed)

    def _show_progress(self, done: int, total: int, step: str) -> None:
        """The first start's preparation, as it goes: the step in words, the percentage in the bar."""
        status_bar = self.window.statusBar()
        bar = status_bar.findChild(QProgressBar, "first-start-progress")
        if bar is None or bar.isHidden():
            return  # finished (or failed) before this report arrived
        if done >= 0:
            bar.setValue(round(100 * done / total) if total else 0)
        status_bar.showMessage(f"Preparing the model · {step}" if step
                               else "First start: preparing the bundled target model…")

    def shutdown(self) -> None:
        """The window closes: a preparation under way is cancelled; the next start finishes it."""
        if self._worker is not None:
            self._progress.cancel()
            self._worker.shutdown(wait=False)
