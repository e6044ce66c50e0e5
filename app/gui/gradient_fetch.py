"""The target's PyTorch form from the team's server, for word substitution on a desk that has only the
target's ONNX form (``sync.gradient_forms``): fetched on its own network lane the first time the writer
asks for suggestions, with its progress in the assistant's panel. The GUI thread never waits for it.

The window lends this its sync clients (``use_team``); a desk without a team server never fetches.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.gui.worker import SerialWorker

log = logging.getLogger(__name__)

RECHECK_MISSING_S = 60.0  # a server that lacked the form is asked again after this (the owner may publish it)


class GradientFetch(QObject):
    """One fetch at a time; its progress goes to ``on_progress(done, total)`` (bytes) on the GUI thread."""

    progressed = Signal(object, object)  # emitted on the lane; bytes so far, bytes in all (a model may pass 2 GiB)

    def __init__(self, desk, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.desk = desk
        self.clients: Any = None  # the sync controller's ClientFactory (``use_team``)
        self._worker: SerialWorker | None = None
        self._handle: Any = None
        self.running: str | None = None  # the checksum of the form being fetched
        self._missing: dict[str, float] = {}  # checksum -> when the server said it has no such form
        self.on_progress: Callable[[int, int], None] | None = None
        self.progressed.connect(self._progressed)  # a slot of this GUI-thread object: queued from the lane

    def _progressed(self, done: int, total: int) -> None:
        if self.on_progress is not None and self.running is not None:
            self.on_progress(done, total)

    def use_team(self, clients) -> None:
        self.clients = clients

    def may_fetch(self, sha256: str) -> bool:
        """Whether asking the server for this form now makes sense (a team server is set; not asked in vain
        just now; not under way)."""
        if self.clients is None or not self.desk.settings.server_url or self.running is not None:
            return False
        asked = self._missing.get(sha256)
        return asked is None or time.monotonic() - asked > RECHECK_MISSING_S

    def start(self, source, *, on_done: Callable[[Any], None], on_failed: Callable[[BaseException, bool], None]) -> None:
        """Fetch ``source`` (a ``GradientSource``); ``on_done((key, ModelSpec))`` with the form ready to load,
        or ``on_failed(error, missing)`` (``missing``: the server has no such form)."""
        from app.core.services.target_models import model_spec
        from sync.gradient_forms import GradientFormMissing, fetch_gradient_form
        from sync.transport import SyncHandle

        desk, clients = self.desk, self.clients
        def progress(phase: str, done: int, total: int) -> None:
            if phase == "models":
                self.progressed.emit(done, total)

        handle = SyncHandle(on_progress=progress)
        self._handle, self.running = handle, source.sha256

        def fetch():
            record = fetch_gradient_form(desk, clients, source, handle=handle)
            return str(record.id), model_spec(record)

        def done(found) -> None:
            self._handle = self.running = None
            on_done(found)

        def failed(error: BaseException) -> None:
            self._handle = self.running = None
            missing = isinstance(error, GradientFormMissing)
            if missing:
                self._missing[source.sha256] = time.monotonic()
            else:
                log.warning("the target's PyTorch form was not fetched: %s", error)
            on_failed(error, missing)

        self._lane().submit(fetch, on_done=done, on_error=failed)

    def _lane(self) -> SerialWorker:
        if self._worker is None:
            self._worker = SerialWorker("dynadesk-gradients", self)
        return self._worker

    def shutdown(self) -> None:
        """The window closes: a download under way stops (what arrived is kept; the next one resumes it)."""
        if self._handle is not None:
            self._handle.cancel()
        if self._worker is not None:
            self._worker.shutdown(wait=False)
