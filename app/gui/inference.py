"""The inference service: the one owner of every model call in the GUI (DESIGN.md §4.4).

One ``InferenceService`` lives in the GUI thread; its worker lives on one long-lived
``QThread`` and holds the loaded models. The GUI thread only posts requests and receives
signals; it never waits on a model.

    service = InferenceService()
    service.model_loaded.connect(...)      # LoadedModels
    service.prediction_ready.connect(...)  # PredictionResult
    service.attribution_ready.connect(...) # AttributionResult
    service.failed.connect(...)            # InferenceFailure
    service.load([model_spec(record) for record in round_models])
    service.predict(text)                  # on every edit (after the editor's debounce)

Requests coalesce: each kind of request (load, predict, attribute) keeps only its newest
request, and the worker takes that one when it is free, so while the annotator types only the
latest text is computed. A result is delivered only if no newer request of its kind (and no
newer model load) was made in the meantime, checked on the GUI thread at delivery time: a
stale result is never shown. Jobs (an evaluation: a plain function taking a ``Progress``, which
loads its own models) queue instead of coalescing and run on the same worker; whenever they
report progress, pending interactive requests are served first. They can be cancelled.
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

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
class InferenceFailure:
    request_id: int
    operation: str  # "load", "predict", "attribute" or "job"
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
    """Newest request per interactive kind, and a queue of jobs; shared by both threads."""

    INTERACTIVE = ("load", "predict", "attribute")  # taken in this order

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


class _Worker(QObject):
    """Runs on the inference thread; owns the models. Talks back only through signals."""

    loaded = Signal(object, object)  # _Request, LoadedModels
    predicted = Signal(object, object)  # _Request, PredictionResult
    attributed = Signal(object, object)  # _Request, AttributionResult
    job_done = Signal(int, object)  # request id, what the job returned
    job_progress_raw = Signal(int, int, int)
    job_message_raw = Signal(int, str)
    failed = Signal(object, object)  # _Request | _Job, InferenceFailure
    closed = Signal()

    def __init__(self, mailbox: _Mailbox):
        super().__init__()
        self._mailbox = mailbox
        self._models: Ensemble | None = None

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
        if self._models is not None:
            self._models.close()
            self._models = None
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
        if self._models is not None:
            self._models.close()
        self._models = models
        self.loaded.emit(request, LoadedModels(
            request.request_id, tuple(e.name for e in engines), tuple(e.format for e in engines),
            tuple(e.device for e in engines), tuple(e.sha256 for e in engines), tuple(models.labels),
            tuple(e.supports_gradients for e in engines),
        ))

    def _predict(self, request: _Request) -> None:
        if not self._ready(request, "predict"):
            return
        try:
            prediction = self._models.predict([request.payload])[0]
        except Exception as exc:
            self._fail(request, "predict", exc)
            return
        self.predicted.emit(request, PredictionResult(request.request_id, request.payload, prediction))

    def _attribute(self, request: _Request) -> None:
        if not self._ready(request, "attribute"):
            return
        options = dict(request.options)
        index = options.pop("model_index", 0)
        try:
            engine = self._models.engines[index]
            attribution = engine.attribute(request.payload, **options)
        except Exception as exc:
            self._fail(request, "attribute", exc)
            return
        self.attributed.emit(request, AttributionResult(request.request_id, request.payload, attribution, index))

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
        """Answer pending loads, predictions and attributions (called between a job's steps)."""
        while not self._mailbox.closing:
            request = self._mailbox.take_interactive()
            if request is None:
                return
            getattr(self, f"_{request.kind}")(request)

    def _ready(self, request: _Request, operation: str) -> bool:
        if self._models is None:
            self._fail(request, operation, RuntimeError("No model is loaded yet."))
            return False
        return True

    def _fail(self, request, operation: str, exc: BaseException) -> None:
        from app.core.errors import DynadeskError
        from local_models.errors import ModelError

        if not isinstance(exc, (ModelError, Cancelled, DynadeskError)):
            log.warning("inference %s failed", operation, exc_info=exc)
        message = str(exc) if isinstance(exc, (ModelError, DynadeskError, Cancelled)) else f"{exc.__class__.__name__}: {exc}"
        self.failed.emit(request, InferenceFailure(request.request_id, operation, message, exc))


class InferenceService(QObject):
    """GUI-thread face of the inference worker. Every method returns at once with a request id."""

    model_loaded = Signal(object)  # LoadedModels
    prediction_ready = Signal(object)  # PredictionResult
    attribution_ready = Signal(object)  # AttributionResult
    failed = Signal(object)  # InferenceFailure
    job_progress = Signal(int, int, int)  # request id, done, total
    job_message = Signal(int, str)  # request id, what the job is doing now
    job_done = Signal(int, object)  # request id, what the job returned

    _wake = Signal()
    _close = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._latest: dict[str, int] = {}
        self._mailbox = _Mailbox()
        self._thread = QThread()
        self._thread.setObjectName("dynadesk-inference")
        self._worker = _Worker(self._mailbox)
        self._worker.moveToThread(self._thread)
        self._wake.connect(self._worker.drain)
        self._close.connect(self._worker.close)
        # direct: the GUI thread is blocked in wait() while the worker closes
        self._worker.closed.connect(self._thread.quit, Qt.ConnectionType.DirectConnection)
        self._thread.finished.connect(self._worker.deleteLater)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.predicted.connect(self._on_predicted)
        self._worker.attributed.connect(self._on_attributed)
        self._worker.job_done.connect(self.job_done)
        self._worker.job_progress_raw.connect(self.job_progress)
        self._worker.job_message_raw.connect(self.job_message)
        self._worker.failed.connect(self._on_failed)
        self._last_predict: _Request | None = None
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._thread.start()

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
        """Stop the worker after the step it is in; models are released on their own thread."""
        if not self._thread.isRunning():
            return
        self._mailbox.closing = True
        for job in self._mailbox.jobs():
            job.cancel()
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
        self._wake.emit()
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
    def _on_failed(self, request, failure: InferenceFailure) -> None:
        if isinstance(request, _Request) and self._is_stale(request):
            return
        self.failed.emit(failure)
