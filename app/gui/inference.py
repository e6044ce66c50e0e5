"""The inference service: the one owner of every model call in the GUI (DESIGN.md §4.4).

One ``InferenceService`` lives in the GUI thread. Its work runs on two long-lived ``QThread``
lanes that share the loaded models: the prediction lane (loads, predictions, jobs) and the
explanation lane (attributions), so that a 100 ms attribution never delays the prediction of
the next keystroke. Each model call uses one intra-op thread (``default_num_threads`` on two
cores), so the two lanes together use the two cores; models replaced while an attribution
still uses them are closed when it gives them back. The GUI thread only posts requests and
receives signals; it never waits on a model.

    service = InferenceService()
    service.model_loaded.connect(...)      # LoadedModels
    service.prediction_ready.connect(...)  # PredictionResult
    service.attribution_ready.connect(...) # AttributionResult
    service.suggestion_ready.connect(...)  # SuggestionResult
    service.failed.connect(...)            # InferenceFailure
    service.load([model_spec(record) for record in round_models])
    service.predict(text)                  # on every edit (after the editor's debounce)

Requests coalesce: each kind of request (load, predict, attribute) keeps only its newest
request, and its lane takes that one when it is free, so while the annotator types only the
latest text is computed; an attribution that a newer one (or new models) made stale stops at
its next pass. Suggestions (the writing assistant) run on the explanation lane too, before a
waiting attribution, and never on the prediction lane: a keystroke's prediction never waits for them. A result is delivered only if no newer request of its kind (and no
newer model load) was made in the meantime, checked on the GUI thread at delivery time: a
stale result is never shown. Jobs (an evaluation: a plain function taking a ``Progress``, which
loads its own models) queue instead of coalescing and run on the same worker; whenever they
report progress, pending loads and predictions are served first. They can be cancelled.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Sequence

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

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


@dataclass(frozen=True)
class InferenceFailure:
    request_id: int
    operation: str  # "load", "predict", "attribute", "suggest" or "job"
    message: str  # written for the user
    error: BaseException = field(repr=False)

    @property
    def cancelled(self) -> bool:
        return isinstance(self.error, Cancelled)


@dataclass
class _Request:
    kind: str
    request_id: int
    load_id: int  # the newest load request when this one was made
    payload: Any
    options: dict = field(default_factory=dict)


@dataclass
class _Job:
    request_id: int
    fn: Callable[[Progress], Any]
    progress: Progress

    def cancel(self) -> None:
        self.progress.cancel()


class _Mailbox:
    """Newest request per interactive kind, and a queue of jobs; shared by all threads."""

    INTERACTIVE = ("load", "predict")  # the prediction lane's, taken in this order

    def __init__(self):
        self._lock = threading.Lock()
        self._latest: dict[str, _Request] = {}
        self._jobs: deque[_Job] = deque()
        self.closing = False

    def put(self, request: _Request) -> None:
        with self._lock:
            self._latest[request.kind] = request

    def put_job(self, job: _Job) -> None:
        with self._lock:
            self._jobs.append(job)

    def take(self) -> _Request | _Job | None:
        with self._lock:
            request = self._take_interactive()
            if request is not None:
                return request
            return self._jobs[0] if self._jobs else None

    def take_interactive(self) -> _Request | None:
        with self._lock:
            return self._take_interactive()

    def take_explanation(self) -> _Request | None:
        """The explanation lane's next request: a suggestion (asked for by the writer) before an
        attribution (which a pinned heatmap asks for on every keystroke), before a reading view's."""
        with self._lock:
            return (self._latest.pop("suggest", None) or self._latest.pop("attribute", None)
                    or self._latest.pop("read", None))

    def has_pending(self, kind: str) -> bool:
        with self._lock:
            return kind in self._latest

    def _take_interactive(self) -> _Request | None:
        for kind in self.INTERACTIVE:
            if kind in self._latest:
                return self._latest.pop(kind)
        return None

    def finish_job(self, job: _Job) -> None:
        with self._lock:
            if self._jobs and self._jobs[0] is job:
                self._jobs.popleft()

    def jobs(self) -> list[_Job]:
        with self._lock:
            return list(self._jobs)


class _SharedModels:
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
        if close_old:
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


class _Worker(QObject):
    """The prediction lane: loads, predictions and jobs. Talks back only through signals."""

    loaded = Signal(object, object)  # _Request, LoadedModels
    predicted = Signal(object, object)  # _Request, PredictionResult
    job_done = Signal(int, object)  # request id, what the job returned
    job_progress_raw = Signal(int, int, int)
    job_message_raw = Signal(int, str)
    failed = Signal(object, object)  # _Request | _Job, InferenceFailure
    closed = Signal()

    def __init__(self, mailbox: _Mailbox, models: _SharedModels):
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
            if isinstance(job, _Job):
                self._run_job(job)
            else:
                getattr(self, f"_{job.kind}")(job)

    @Slot()
    def close(self) -> None:
        self._shared.replace(None)
        self.closed.emit()

    def _load(self, request: _Request) -> None:
        specs: Sequence[ModelSpec] = request.payload
        engines = []
        try:
            for spec in specs:
                engines.append(spec.load())
            models = Ensemble(engines)
        except Exception as exc:
            for engine in engines:
                engine.close()
            self._fail(request, "load", exc)
            return
        self._shared.replace(models)
        self.loaded.emit(request, LoadedModels(
            request.request_id, tuple(e.name for e in engines), tuple(e.format for e in engines),
            tuple(e.device for e in engines), tuple(e.sha256 for e in engines), tuple(models.labels),
            tuple(e.supports_gradients for e in engines),
        ))

    def _predict(self, request: _Request) -> None:
        with self._shared.borrow() as (models, _generation):
            if models is None:
                _fail(self.failed, request, "predict", RuntimeError("No model is loaded yet."))
                return
            try:
                prediction = models.predict([request.payload])[0]
            except Exception as exc:
                self._fail(request, "predict", exc)
                return
        self.predicted.emit(request, PredictionResult(request.request_id, request.payload, prediction))

    def _run_job(self, job: _Job) -> None:
        """Run a whole job here; its progress reports let waiting interactive requests in first."""
        try:
            job.progress.check()
            result = job.fn(job.progress)
        except BaseException as exc:  # reported to the GUI thread, which tells the user
            self._mailbox.finish_job(job)
            self._fail(job, "job", exc)
            return
        self._mailbox.finish_job(job)
        self.job_done.emit(job.request_id, result)

    def serve_interactive(self) -> None:
        """Answer pending loads and predictions (called between a job's steps)."""
        while not self._mailbox.closing:
            request = self._mailbox.take_interactive()
            if request is None:
                return
            getattr(self, f"_{request.kind}")(request)

    def _fail(self, request, operation: str, exc: BaseException) -> None:
        _fail(self.failed, request, operation, exc)


class _Explainer(QObject):
    """The explanation lane: attributions and suggestions, on the models the prediction lane
    loaded. Between the passes of an attribution (the steps of a suggestion) it checks whether a
    newer one was asked for, or the models changed, and then stops: only the newest is finished."""

    attributed = Signal(object, object)  # _Request, AttributionResult
    suggested = Signal(object, object)  # _Request, SuggestionResult
    failed = Signal(object, object)  # _Request, InferenceFailure
    closed = Signal()

    def __init__(self, mailbox: _Mailbox, models: _SharedModels):
        super().__init__()
        self._mailbox = mailbox
        self._shared = models
        self._niced = False

    @Slot()
    def drain(self) -> None:
        if not self._niced:
            self._niced = True
            _yield_to_predictions()
        while not self._mailbox.closing:
            request = self._mailbox.take_explanation()
            if request is None:
                return
            (self._suggest if request.kind == "suggest" else self._attribute)(request)

    @Slot()
    def close(self) -> None:
        self.closed.emit()

    def _attribute(self, request: _Request) -> None:
        options = dict(request.options)
        index = options.pop("model_index", 0)
        self._serve(request, "attribute", "A newer attribution was asked for.",
                    lambda models, checkpoint: models.engines[index].attribute(
                        request.payload, checkpoint=checkpoint, **options),
                    lambda attribution: self.attributed.emit(request, AttributionResult(
                        request.request_id, request.payload, attribution, index)))

    def _suggest(self, request: _Request) -> None:
        work, inputs = request.payload
        self._serve(request, "suggest", "Newer suggestions were asked for.", work,
                    lambda result: self.suggested.emit(request, SuggestionResult(request.request_id, inputs, result)))

    def _serve(self, request: _Request, operation: str, stale: str,
               run: Callable[[Ensemble, Callable[[], None]], Any], deliver: Callable[[Any], None]) -> None:
        """``run(models, checkpoint)`` on the borrowed models; ``checkpoint()`` raises Cancelled
        (saying ``stale``) once a newer request of this kind waits or the models were replaced.
        Failures are reported as ``operation`` (a reading view's attribution is an "attribute" too)."""
        with self._shared.borrow() as (models, generation):
            if models is None:
                _fail(self.failed, request, operation, RuntimeError("No model is loaded yet."))
                return

            def checkpoint() -> None:
                if (self._mailbox.closing or self._mailbox.has_pending(request.kind)
                        or self._shared.generation != generation):
                    raise Cancelled(stale)

            try:
                result = run(models, checkpoint)
            except Exception as exc:
                _fail(self.failed, request, operation, exc)
                return
        deliver(result)


EXPLANATION_NICENESS = 10


def _yield_to_predictions() -> None:
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


def _fail(signal, request, operation: str, exc: BaseException) -> None:
    from app.core.errors import DynadeskError
    from local_models.errors import ModelError

    if not isinstance(exc, (ModelError, Cancelled, DynadeskError)):
        log.warning("inference %s failed", operation, exc_info=exc)
    message = str(exc) if isinstance(exc, (ModelError, DynadeskError, Cancelled)) else f"{exc.__class__.__name__}: {exc}"
    signal.emit(request, InferenceFailure(request.request_id, operation, message, exc))


class InferenceService(QObject):
    """GUI-thread face of the inference worker. Every method returns at once with a request id."""

    model_loaded = Signal(object)  # LoadedModels
    prediction_ready = Signal(object)  # PredictionResult
    attribution_ready = Signal(object)  # AttributionResult
    suggestion_ready = Signal(object)  # SuggestionResult
    failed = Signal(object)  # InferenceFailure
    job_progress = Signal(int, int, int)  # request id, done, total
    job_message = Signal(int, str)  # request id, what the job is doing now
    job_done = Signal(int, object)  # request id, what the job returned

    _wake = Signal()
    _wake_explainer = Signal()
    _close = Signal()
    _close_explainer = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._latest: dict[str, int] = {}
        self._mailbox = _Mailbox()
        models = _SharedModels()
        self._thread = QThread()
        self._thread.setObjectName("dynadesk-inference")
        self._worker = _Worker(self._mailbox, models)
        self._worker.moveToThread(self._thread)
        self._explain_thread = QThread()
        self._explain_thread.setObjectName("dynadesk-explanations")
        self._explainer = _Explainer(self._mailbox, models)
        self._explainer.moveToThread(self._explain_thread)
        self._wake_explainer.connect(self._explainer.drain)
        self._close_explainer.connect(self._explainer.close)
        self._explainer.closed.connect(self._explain_thread.quit, Qt.ConnectionType.DirectConnection)
        self._explain_thread.finished.connect(self._explainer.deleteLater)
        self._explainer.attributed.connect(self._on_attributed)
        self._explainer.suggested.connect(self._on_suggested)
        self._explainer.failed.connect(self._on_failed)
        self._wake.connect(self._worker.drain)
        self._close.connect(self._worker.close)
        # direct: the GUI thread is blocked in wait() while the worker closes
        self._worker.closed.connect(self._thread.quit, Qt.ConnectionType.DirectConnection)
        self._thread.finished.connect(self._worker.deleteLater)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.predicted.connect(self._on_predicted)
        self._worker.job_done.connect(self.job_done)
        self._worker.job_progress_raw.connect(self.job_progress)
        self._worker.job_message_raw.connect(self.job_message)
        self._worker.failed.connect(self._on_failed)
        self._last_predict: _Request | None = None
        # attributions asked for by reading views (blur): only the newest waits and one more may be
        # running, so the last few ids are all that can still be answered
        self.reading_requests: deque[int] = deque(maxlen=64)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._thread.start()
        self._explain_thread.start()

    # Requests (GUI thread) ---------------------------------------------------------------
    def load(self, specs: Sequence[ModelSpec]) -> int:
        """Load these models (several make an ensemble), replacing the current ones when done."""
        if not specs:
            raise ValueError("load needs at least one model")
        return self._post("load", tuple(specs))

    def predict(self, inputs: ModelInput) -> int:
        """Predict for the newest text or pair; older pending predictions are dropped."""
        return self._post("predict", inputs)

    def attribute(self, inputs: ModelInput, *, target: str | None = None, method: str = "auto",
                  model_index: int = 0, **options) -> int:
        """Word attributions from one member model (``method``: auto, gradients or ablation)."""
        return self._post("attribute", inputs, target=target, method=method, model_index=model_index, **options)

    def suggest(self, work: Callable[[Ensemble, Callable[[], None]], Any], inputs: Any = None) -> int:
        """Run ``work(models, checkpoint)`` on the explanation lane (the writing assistant's
        generate-and-check); ``checkpoint()`` raises Cancelled once a newer suggestion is asked for
        or the models change. The result comes through ``suggestion_ready`` with ``inputs``, unless
        a newer suggestion request or model load made it stale."""
        return self._post("suggest", (work, inputs))

    def attribute_for_reading(self, text: str, *, target: str) -> int:
        """Word attributions for a text a reading view shows (the words it blurs); their results come
        through ``attribution_ready`` as any, and ``for_reading`` tells the writer's views to pass them by."""
        # a kind of its own: the writer's newest attribution and a reader's never replace or cancel each other
        request_id = self._post("read", text, target=target, method="auto", model_index=0)
        self.reading_requests.append(request_id)
        return request_id

    def for_reading(self, request_id: int) -> bool:
        return request_id in self.reading_requests

    def run_job(self, fn: Callable[[Progress], Any]) -> int:
        """Run ``fn(progress)`` on the inference thread (an evaluation with its own models), after
        the jobs already queued. Reports come through job_progress, job_message and job_done;
        a failure or a cancel (``cancel_job``) through ``failed`` with operation "job"."""
        request_id = next(self._ids)
        worker = self._worker

        def report(done: int, total: int) -> None:  # on the worker thread
            worker.job_progress_raw.emit(request_id, done, total)
            worker.serve_interactive()

        progress = Progress(report, lambda text: worker.job_message_raw.emit(request_id, text))
        self._mailbox.put_job(_Job(request_id, fn, progress))
        self._wake.emit()
        return request_id

    def cancel_job(self, request_id: int) -> None:
        for job in self._mailbox.jobs():
            if job.request_id == request_id:
                job.cancel()

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Stop both lanes after the step they are in; models are released on the prediction lane
        (or by the explanation lane, when it still held them)."""
        if not self._thread.isRunning() and not self._explain_thread.isRunning():
            return
        self._mailbox.closing = True
        for job in self._mailbox.jobs():
            job.cancel()
        self._close_explainer.emit()
        if not self._explain_thread.wait(timeout_ms):
            log.warning("the explanation thread did not stop within %d ms", timeout_ms)
        self._close.emit()
        if not self._thread.wait(timeout_ms):
            log.warning("the inference thread did not stop within %d ms", timeout_ms)

    def _post(self, kind: str, payload, **options) -> int:
        request_id = next(self._ids)
        self._latest[kind] = request_id
        request = _Request(kind, request_id, self._latest.get("load", 0), payload, options)
        if kind == "predict":
            self._last_predict = request
        self._mailbox.put(request)
        (self._wake_explainer if kind in ("attribute", "read", "suggest") else self._wake).emit()
        return request_id

    # Deliveries (GUI thread): stale results stop here ---------------------------------------
    def _is_stale(self, request: _Request) -> bool:
        newer_request = self._latest.get(request.kind) != request.request_id
        newer_models = request.kind != "load" and self._latest.get("load", 0) != request.load_id
        return newer_request or newer_models

    @Slot(object, object)
    def _on_loaded(self, request: _Request, result: LoadedModels) -> None:
        if self._is_stale(request):
            return
        self.model_loaded.emit(result)
        last = self._last_predict
        if last is not None and last.load_id != request.request_id:
            # the newest text was asked about before these models came: ask them too
            self.predict(last.payload)

    @Slot(object, object)
    def _on_predicted(self, request: _Request, result: PredictionResult) -> None:
        if not self._is_stale(request):
            self.prediction_ready.emit(result)

    @Slot(object, object)
    def _on_attributed(self, request: _Request, result: AttributionResult) -> None:
        if not self._is_stale(request):
            self.attribution_ready.emit(result)

    @Slot(object, object)
    def _on_suggested(self, request: _Request, result: SuggestionResult) -> None:
        if not self._is_stale(request):
            self.suggestion_ready.emit(result)

    @Slot(object, object)
    def _on_failed(self, request, failure: InferenceFailure) -> None:
        if isinstance(request, _Request) and self._is_stale(request):
            return
        self.failed.emit(failure)
