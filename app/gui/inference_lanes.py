"""The inference service's two lanes (app/gui/inference.py): what runs on its worker threads.

The prediction lane (``PredictionLane``) serves loads, predictions and jobs; the explanation lane
(``ExplanationLane``) attributions and suggestions, on the models the prediction lane loaded
(``SharedModels``). Requests wait in one ``Mailbox``: the newest per interactive kind, and a queue of
jobs. The lanes talk back only through signals, each carrying the request it answers; the service
tells that request's reply, on the GUI thread. Nothing here touches a reply.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from PySide6.QtCore import QObject, Signal, Slot

from app.gui.reply import InferenceFailure, Reply
from local_models.attribution import Attribution
from local_models.engine import Ensemble, EnsemblePrediction, ModelSpec
from local_models.errors import Cancelled
from local_models.progress import Progress
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LoadedModels:
    request_id: int
    names: tuple[str, ...]
    formats: tuple[str, ...]
    devices: tuple[str, ...]  # as reported by each runtime, never assumed
    sha256s: tuple[str, ...]
    labels: tuple[str, ...]
    supports_gradients: tuple[bool, ...]


@dataclass(frozen=True)
class PredictionResult:
    request_id: int
    inputs: ModelInput
    prediction: EnsemblePrediction  # members in the order the models were loaded; mean over them


@dataclass(frozen=True)
class AttributionResult:
    request_id: int
    inputs: ModelInput
    attribution: Attribution
    model_index: int


@dataclass(frozen=True)
class SuggestionResult:
    request_id: int
    inputs: Any  # what the work was asked for (the controller's own key: the editor's inputs)
    result: Any  # what the work returned (app.core.assist's SuggestionSet)


@dataclass(eq=False)
class Request:
    kind: str  # also its key: a newer request of the kind replaces it
    request_id: int
    load_id: int  # the newest load request when this one was made
    payload: Any
    reply: Reply
    options: dict = field(default_factory=dict)
    withdrawn: bool = False  # (set on the GUI thread) its reply was cancelled or is answered by a newer request


@dataclass(eq=False)
class Job:
    request_id: int
    fn: Callable[[Progress], Any]
    progress: Progress
    reply: Reply
    key: str | None = None
    started: bool = False  # taken by the prediction lane (under the mailbox's lock)


class Mailbox:
    """Newest request per interactive kind, and a queue of jobs; shared by all threads."""

    INTERACTIVE = ("load", "predict")  # the prediction lane's, taken in this order

    def __init__(self):
        self._lock = threading.Lock()
        self._latest: dict[str, Request] = {}
        self._jobs: deque[Job] = deque()
        self.closing = False

    def put(self, request: Request) -> None:
        with self._lock:
            self._latest[request.kind] = request

    def withdraw(self, request: Request) -> None:
        """Forget ``request`` if no lane took it yet."""
        with self._lock:
            if self._latest.get(request.kind) is request:
                del self._latest[request.kind]

    def put_job(self, job: Job) -> None:
        with self._lock:
            self._jobs.append(job)

    def withdraw_job(self, job: Job) -> bool:
        """Take ``job`` out of the queue unless it started; returns whether it was taken out."""
        with self._lock:
            if job.started or job not in self._jobs:
                return False
            self._jobs.remove(job)
            return True

    def take(self) -> Request | Job | None:
        with self._lock:
            request = self._take_interactive()
            if request is not None:
                return request
            if not self._jobs:
                return None
            job = self._jobs[0]
            job.started = True
            return job

    def take_interactive(self) -> Request | None:
        with self._lock:
            return self._take_interactive()

    def take_explanation(self) -> Request | None:
        """The explanation lane's next request: a suggestion (asked for by the writer) before an
        attribution (which a pinned heatmap asks for on every keystroke), before a reading view's."""
        with self._lock:
            return (self._latest.pop("suggest", None) or self._latest.pop("attribute", None)
                    or self._latest.pop("read", None))

    def has_pending(self, kind: str) -> bool:
        with self._lock:
            return kind in self._latest

    def _take_interactive(self) -> Request | None:
        for kind in self.INTERACTIVE:
            if kind in self._latest:
                return self._latest.pop(kind)
        return None

    def finish_job(self, job: Job) -> None:
        with self._lock:
            if self._jobs and self._jobs[0] is job:
                self._jobs.popleft()

    def jobs(self) -> list[Job]:
        with self._lock:
            return list(self._jobs)


class SharedModels:
    """The loaded ensemble, used by both lanes. A lane borrows it for one request; models that
    are replaced while borrowed are closed by whoever gives them back last."""

    def __init__(self):
        self._lock = threading.Lock()
        self._current: Ensemble | None = None
        self._borrowed: dict[int, int] = {}  # id(ensemble) -> borrowers
        self.generation = 0  # counts replacements: a borrower can tell its models went stale

    def replace(self, models: Ensemble | None) -> None:
        with self._lock:
            old, self._current = self._current, models
            self.generation += 1
            close_old = old is not None and not self._borrowed.get(id(old))
        if close_old and old is not None:
            old.close()

    @contextmanager
    def borrow(self) -> Iterator[tuple[Ensemble | None, int]]:
        with self._lock:
            models, generation = self._current, self.generation
            if models is not None:
                self._borrowed[id(models)] = self._borrowed.get(id(models), 0) + 1
        try:
            yield models, generation
        finally:
            if models is not None:
                with self._lock:
                    left = self._borrowed[id(models)] - 1
                    if left:
                        self._borrowed[id(models)] = left
                    else:
                        del self._borrowed[id(models)]
                    close = not left and models is not self._current
                if close:
                    models.close()




class PredictionLane(QObject):
    """The prediction lane: loads, predictions and jobs. Talks back only through signals, each
    carrying the request it answers (whose reply the service's GUI-thread side tells)."""

    loaded = Signal(object, object)  # Request, LoadedModels
    predicted = Signal(object, object)  # Request, PredictionResult
    job_reported = Signal(object, int, int)  # Job, done, total
    job_said = Signal(object, str)  # Job, what it is doing now
    job_returned = Signal(object, object)  # Job, what it returned
    went_wrong = Signal(object, object)  # Request | Job, InferenceFailure
    closed = Signal()

    def __init__(self, mailbox: Mailbox, models: SharedModels):
        super().__init__()
        self._mailbox = mailbox
        self._shared = models

    @Slot()
    def drain(self) -> None:
        """Serve every pending request, newest interactive ones first; then return to the loop."""
        while not self._mailbox.closing:
            job = self._mailbox.take()
            if job is None:
                return
            if isinstance(job, Job):
                self._run_job(job)
            else:
                getattr(self, f"_{job.kind}")(job)

    @Slot()
    def close(self) -> None:
        self._shared.replace(None)
        self.closed.emit()

    def _load(self, request: Request) -> None:
        specs: Sequence[ModelSpec] = request.payload
        engines = []
        try:
            for spec in specs:
                engines.append(spec.load())
            models = Ensemble(engines)
        except Exception as exc:
            for engine in engines:
                engine.close()
            fail(self.went_wrong, request, "load", exc)
            return
        self._shared.replace(models)
        self.loaded.emit(request, LoadedModels(
            request.request_id, tuple(e.name for e in engines), tuple(e.format for e in engines),
            tuple(e.device for e in engines), tuple(e.sha256 for e in engines), tuple(models.labels),
            tuple(e.supports_gradients for e in engines),
        ))

    def _predict(self, request: Request) -> None:
        with self._shared.borrow() as (models, _generation):
            if models is None:
                fail(self.went_wrong, request, "predict", RuntimeError("No model is loaded yet."))
                return
            try:
                prediction = models.predict([request.payload])[0]
            except Exception as exc:
                fail(self.went_wrong, request, "predict", exc)
                return
        self.predicted.emit(request, PredictionResult(request.request_id, request.payload, prediction))

    def _run_job(self, job: Job) -> None:
        """Run a whole job here; its progress reports let waiting interactive requests in first."""
        try:
            job.progress.check()
            result = job.fn(job.progress)
        except BaseException as exc:  # reported to the GUI thread, which tells the job's owner
            self._mailbox.finish_job(job)
            fail(self.went_wrong, job, "job", exc)
            return
        self._mailbox.finish_job(job)
        self.job_returned.emit(job, result)

    def serve_interactive(self) -> None:
        """Answer pending loads and predictions (called between a job's steps)."""
        while not self._mailbox.closing:
            request = self._mailbox.take_interactive()
            if request is None:
                return
            getattr(self, f"_{request.kind}")(request)


class ExplanationLane(QObject):
    """The explanation lane: attributions and suggestions, on the models the prediction lane
    loaded. Between the passes of an attribution (the steps of a suggestion) it checks whether a
    newer one was asked for, its reply was cancelled, or the models changed, and then stops: only
    the newest is finished."""

    attributed = Signal(object, object)  # Request, AttributionResult
    suggested = Signal(object, object)  # Request, SuggestionResult
    went_wrong = Signal(object, object)  # Request, InferenceFailure
    closed = Signal()

    def __init__(self, mailbox: Mailbox, models: SharedModels):
        super().__init__()
        self._mailbox = mailbox
        self._shared = models
        self._niced = False

    @Slot()
    def drain(self) -> None:
        if not self._niced:
            self._niced = True
            yield_to_predictions()
        while not self._mailbox.closing:
            request = self._mailbox.take_explanation()
            if request is None:
                return
            (self._suggest if request.kind == "suggest" else self._attribute)(request)

    @Slot()
    def close(self) -> None:
        self.closed.emit()

    def _attribute(self, request: Request) -> None:
        options = dict(request.options)
        index = options.pop("model_index", 0)
        self._serve(request, "A newer attribution was asked for.",
                    lambda models, checkpoint: models.engines[index].attribute(
                        request.payload, checkpoint=checkpoint, **options),
                    lambda attribution: self.attributed.emit(request, AttributionResult(
                        request.request_id, request.payload, attribution, index)))

    def _suggest(self, request: Request) -> None:
        work, inputs = request.payload
        self._serve(request, "Newer suggestions were asked for.", work,
                    lambda result: self.suggested.emit(request, SuggestionResult(request.request_id, inputs, result)))

    def _serve(self, request: Request, stale: str,
               run: Callable[[Ensemble, Callable[[], None]], Any], deliver: Callable[[Any], None]) -> None:
        """``run(models, checkpoint)`` on the borrowed models; ``checkpoint()`` raises Cancelled
        (saying ``stale``) once a newer request of this kind waits, this one was withdrawn, or the
        models were replaced."""
        with self._shared.borrow() as (models, generation):
            if models is None:
                fail(self.went_wrong, request, request.kind, RuntimeError("No model is loaded yet."))
                return

            def checkpoint() -> None:
                if (self._mailbox.closing or request.withdrawn or self._mailbox.has_pending(request.kind)
                        or self._shared.generation != generation):
                    raise Cancelled(stale)

            try:
                result = run(models, checkpoint)
            except Exception as exc:
                fail(self.went_wrong, request, request.kind, exc)
                return
        deliver(result)


EXPLANATION_NICENESS = 10


def yield_to_predictions() -> None:
    """Lower this thread's scheduling priority (Linux: niceness is per thread), so that when the
    cores are all busy, the prediction lane and the GUI thread get the CPU before an attribution
    does; on an idle core the attribution runs at full speed all the same. Where threads have no
    niceness of their own (macOS, Windows) this does nothing."""
    import os
    import sys

    if not sys.platform.startswith("linux"):  # elsewhere a thread id is no process id: nothing to set
        return
    try:
        current = os.getpriority(os.PRIO_PROCESS, 0)
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), min(19, max(current, 0) + EXPLANATION_NICENESS))
    except (AttributeError, OSError):
        pass




def fail(signal, request: Request | Job, operation: str, exc: BaseException) -> None:
    from app.core.errors import DynadeskError
    from local_models.errors import ModelError

    if not isinstance(exc, (ModelError, Cancelled, DynadeskError)):
        log.warning("inference %s failed", operation, exc_info=exc)
    message = str(exc) if isinstance(exc, (ModelError, DynadeskError, Cancelled)) else f"{exc.__class__.__name__}: {exc}"
    signal.emit(request, InferenceFailure(operation, message, exc))
