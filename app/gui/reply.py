"""The answer to one request of the inference service (app/gui/inference.py), told only to whoever asked.

Every request (a prediction, an attribution, suggestions, a model load, a job) takes its callbacks
with it, the way ``SerialWorker.submit`` does, and returns a ``Reply``: the handle to cancel it by.
The callbacks run on the GUI thread. A reply ends exactly once, in one of three ways:

    done(result)                # what the request asked for
    failed(InferenceFailure)    # it could not be done: the failure says why, for the user
    cancelled()                 # cancelled, or replaced by a newer request of the same key

Before its end a job may report ``progress(done, total)`` and ``message(text)`` any number of times;
after its end, and once cancel was asked for, the reply tells nothing more. A newer request of the
same key cancels the older one (its reply reports cancelled, never done).

Callbacks rather than a QObject with signals: they are given with the request, so no answer can come
before anyone listens; each caller's handlers are closures over that request's own context (no id to
compare, no attribute to stash it in); they are typed (a Signal(object) is not); and a reply per
keystroke needs no QObject whose Python wrapper, once dropped, takes its connections with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass(frozen=True)
class InferenceFailure:
    operation: str  # "load", "predict", "attribute", "read", "suggest" or "job": what failed
    message: str  # written for the user
    error: BaseException = field(repr=False)


class ReplyState(Enum):
    PENDING = "pending"
    CANCELLING = "cancelling"  # cancel was asked for while the work runs: it ends as cancelled once it stops
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class Reply(Generic[T]):
    """One request's answer (see the module docstring). ``key``: the requests a newer one replaces;
    ``request_id``: the request's number (a token for whoever must tell requests apart later)."""

    def __init__(self, key: str | None, request_id: int, *,
                 on_done: Callable[[T], None] | None = None,
                 on_failed: Callable[[InferenceFailure], None] | None = None,
                 on_cancelled: Callable[[], None] | None = None,
                 on_progress: Callable[[int, int], None] | None = None,
                 on_message: Callable[[str], None] | None = None):
        self.key, self.request_id = key, request_id
        self.state = ReplyState.PENDING
        self._on_done, self._on_failed, self._on_cancelled = on_done, on_failed, on_cancelled
        self._on_progress, self._on_message = on_progress, on_message
        self._stop: Callable[[], None] = self._cancelled  # the service's: withdraw the request, or stop its job

    @property
    def finished(self) -> bool:
        """Ended: done, failed or cancelled (a cancel asked for while the work runs is not ended yet)."""
        return self.state in (ReplyState.DONE, ReplyState.FAILED, ReplyState.CANCELLED)

    @property
    def pending(self) -> bool:
        """Not ended, and no cancel asked for."""
        return self.state is ReplyState.PENDING

    def cancel(self) -> None:
        """Stop the request: the reply reports cancelled, never done. A request not yet started (and any
        request but a job) reports it at once, within this call; a running job once it stopped, at its
        next check, so that its owner knows when nothing more of it runs."""
        if self.state is ReplyState.PENDING:
            self.state = ReplyState.CANCELLING
            self._stop()

    # The service's side (GUI thread) ------------------------------------------------------------------
    def _stopped_by(self, stop: Callable[[], None]) -> None:
        self._stop = stop

    def _progress(self, done: int, total: int) -> None:
        if self.state is ReplyState.PENDING and self._on_progress is not None:
            self._on_progress(done, total)

    def _message(self, text: str) -> None:
        if self.state is ReplyState.PENDING and self._on_message is not None:
            self._on_message(text)

    def _done(self, result: T) -> None:
        if self.state is ReplyState.CANCELLING:  # finished before it saw the cancel: its result is not wanted
            self._cancelled()
        elif self.state is ReplyState.PENDING:
            self.state = ReplyState.DONE
            if self._on_done is not None:
                self._on_done(result)

    def _failed(self, failure: InferenceFailure) -> None:
        if self.state is ReplyState.CANCELLING:  # stopped as asked, whatever it raised on the way
            if not _is_cancel(failure.error):
                log.info("%s failed after its cancel: %s", failure.operation, failure.message)
            self._cancelled()
        elif self.state is ReplyState.PENDING:
            if _is_cancel(failure.error):  # stopped from inside (a newer request waits, the service closes)
                self._cancelled()
                return
            self.state = ReplyState.FAILED
            if self._on_failed is not None:
                self._on_failed(failure)
            else:
                log.warning("%s failed, and its request took no on_failed: %s", failure.operation, failure.message)

    def _cancelled(self) -> None:
        if not self.finished:
            self.state = ReplyState.CANCELLED
            if self._on_cancelled is not None:
                self._on_cancelled()


def _is_cancel(error: BaseException) -> bool:
    from local_models.errors import Cancelled

    return isinstance(error, Cancelled)
