"""Background jobs for the GUI: one thread per kind of work, results delivered as signals.

The database has exactly one such worker, so writes happen one after another (the one
writer of DESIGN.md §4.5); the GUI thread never runs a query or a write itself.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Signal

log = logging.getLogger(__name__)


class SerialWorker(QObject):
    """Runs submitted callables one at a time, in order, on a long-lived thread."""

    _delivered = Signal(object, object, object)  # callback, result, error
    failed = Signal(object)  # an error that no job handled

    def __init__(self, name: str, parent: QObject | None = None):
        super().__init__(parent)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=name)
        self._closed = False
        self._latest: dict[str, int] = {}  # per key of submit_latest: the newest job's number
        self._delivered.connect(self._deliver)  # queued: emitted from the worker thread

    def submit(self, fn: Callable[..., Any], *args, on_done: Callable[[Any], None] | None = None,
               on_error: Callable[[BaseException], None] | None = None) -> Future:
        def job():
            try:
                result = fn(*args)
            except BaseException as exc:  # handed to the GUI thread, which decides what to tell the user
                log.debug("job %s failed", getattr(fn, "__name__", fn), exc_info=True)
                self._delivered.emit(on_error, None, exc)
                return None
            self._delivered.emit(on_done, result, None)
            return result

        if self._closed:  # the owner is closing; late signals (an inference answer in flight) start no work
            refused: Future = Future()
            refused.cancel()
            return refused
        return self._executor.submit(job)

    def submit_latest(self, key: str, fn: Callable[..., Any], *args,
                      on_done: Callable[[Any], None] | None = None,
                      on_error: Callable[[BaseException], None] | None = None) -> Future:
        """Like submit, but the newest request wins: a job's answer (or error) is dropped when a newer job
        of the same key was submitted after it, so a page never shows figures for a request already replaced."""
        number = self._latest[key] = self._latest.get(key, 0) + 1

        def current(callback):
            def deliver(value):
                if self._latest.get(key) == number and callback is not None:
                    callback(value)
            return deliver

        # an error of a replaced job is dropped too, not reported as unhandled
        return self.submit(fn, *args, on_done=current(on_done), on_error=current(on_error or self.failed.emit))

    def _deliver(self, callback, result, error) -> None:
        if self._closed:  # the owner is closing: its widgets want no more answers
            return
        if error is not None:
            if callback is not None:
                callback(error)
            else:
                self.failed.emit(error)
        elif callback is not None:
            callback(result)

    def shutdown(self, wait: bool = True) -> None:
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=False)
