"""The inference service: the one owner of every model call in the GUI (DESIGN.md §4.4).

One ``InferenceService`` lives in the GUI thread. Its work runs on two long-lived ``QThread``
lanes that share the loaded models: the prediction lane (loads, predictions, jobs) and the
explanation lane (attributions, suggestions), so that a 100 ms attribution never delays the
prediction of the next keystroke. Each model call uses one intra-op thread (``default_num_threads``
on two cores), so the two lanes together use the two cores; models replaced while an attribution
still uses them are closed when it gives them back. The GUI thread only posts requests and
receives answers; it never waits on a model.

Every request returns a ``Reply`` (app/gui/reply.py) and takes its own callbacks: its answer goes
to whoever asked, and to no one else.

    service = InferenceService()
    service.model_loaded.connect(...)      # LoadedModels: the models every request now uses
    service.load([model_spec(record) for record in round_models], on_failed=...)
    reply = service.predict(text, on_done=show, on_failed=say)   # on every edit (after the debounce)
    service.attribute(text, target="hate", on_done=..., on_failed=...)
    service.run_job(measure, key="quality.spreads", on_progress=..., on_done=..., on_failed=..., on_cancelled=...)
    reply.cancel()

Requests coalesce: each kind of request (load, predict, attribute, a reading view's attribution,
suggest) keeps only its newest request, and its lane takes that one when it is free, so while the
annotator types only the latest text is computed. A newer request of a kind cancels the older one's
reply at once; an attribution (suggestion) it replaced stops at its next pass. Suggestions run on
the explanation lane too, before a waiting attribution, never on the prediction lane: a keystroke's
prediction never waits for them. An answer computed by models a newer load replaced is never given:
the newest models answer a waiting prediction again, and other such requests are cancelled. Jobs
(an evaluation: a plain function taking a ``Progress``, which loads its own models) queue instead of
coalescing and run on the prediction lane; whenever they report progress, pending loads and
predictions are served first. A job given a ``key`` cancels the older job of that key.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from PySide6.QtCore import QCoreApplication, QObject, Qt, QThread, Signal, Slot

from app.gui.inference_lanes import (
    EXPLANATION_NICENESS,
    AttributionResult,
    ExplanationLane,
    Job,
    LoadedModels,
    Mailbox,
    PredictionLane,
    PredictionResult,
    Request,
    SharedModels,
    SuggestionResult,
)
from app.gui.reply import InferenceFailure, Reply
from local_models.engine import Ensemble, ModelSpec
from local_models.progress import Progress
from local_models.tokenization import ModelInput

__all__ = ["EXPLANATION_NICENESS", "AttributionResult", "InferenceFailure", "InferenceService", "LoadedModels",
           "PredictionResult", "Reply", "SuggestionResult"]
log = logging.getLogger(__name__)
T = TypeVar("T")
Callback = Callable[[T], None] | None


class InferenceService(QObject):
    """GUI-thread face of the inference lanes. Every request returns at once with its ``Reply``; its
    callbacks run on the GUI thread (see app/gui/reply.py)."""

    model_loaded = Signal(object)  # LoadedModels: the models now loaded (the first start waits for them too)

    _wake = Signal()
    _wake_explainer = Signal()
    _close = Signal()
    _close_explainer = Signal()

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._load_id = 0  # the newest load request
        # per key (a kind of request, or "job:" and a job's key): the newest request whose reply has not ended
        self._open: dict[str, Request | Job] = {}
        self._closed = False  # shut down: no reply is told anything more
        self._mailbox = Mailbox()
        models = SharedModels()
        self._thread = QThread()
        self._thread.setObjectName("dynadesk-inference")
        self._worker = PredictionLane(self._mailbox, models)
        self._worker.moveToThread(self._thread)
        self._explain_thread = QThread()
        self._explain_thread.setObjectName("dynadesk-explanations")
        self._explainer = ExplanationLane(self._mailbox, models)
        self._explainer.moveToThread(self._explain_thread)
        self._wake_explainer.connect(self._explainer.drain)
        self._close_explainer.connect(self._explainer.close)
        self._explainer.closed.connect(self._explain_thread.quit, Qt.ConnectionType.DirectConnection)
        self._explain_thread.finished.connect(self._explainer.deleteLater)
        self._explainer.attributed.connect(self._answered)
        self._explainer.suggested.connect(self._answered)
        self._explainer.went_wrong.connect(self._request_failed)
        self._wake.connect(self._worker.drain)
        self._close.connect(self._worker.close)
        # direct: the GUI thread is blocked in wait() while the worker closes
        self._worker.closed.connect(self._thread.quit, Qt.ConnectionType.DirectConnection)
        self._thread.finished.connect(self._worker.deleteLater)
        self._worker.loaded.connect(self._on_loaded)
        self._worker.predicted.connect(self._answered)
        self._worker.job_reported.connect(self._job_reported)
        self._worker.job_said.connect(self._job_said)
        self._worker.job_returned.connect(self._job_returned)
        self._worker.went_wrong.connect(self._went_wrong)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)
        self._thread.start()
        self._explain_thread.start()

    # Requests (GUI thread) ---------------------------------------------------------------
    def load(self, specs: Sequence[ModelSpec], *, on_done: Callback[LoadedModels] = None,
             on_failed: Callback[InferenceFailure] = None,
             on_cancelled: Callable[[], None] | None = None) -> Reply[LoadedModels]:
        """Load these models (several make an ensemble), replacing the current ones when done; every
        listener of ``model_loaded`` hears of them too. A newer load cancels this one."""
        if not specs:
            raise ValueError("load needs at least one model")
        return self._post("load", tuple(specs), Reply("load", next(self._ids), on_done=on_done, on_failed=on_failed,
                                                      on_cancelled=on_cancelled))

    def predict(self, inputs: ModelInput, *, on_done: Callback[PredictionResult] = None,
                on_failed: Callback[InferenceFailure] = None,
                on_cancelled: Callable[[], None] | None = None) -> Reply[PredictionResult]:
        """Predict for the newest text or pair; a newer prediction cancels this one. Asked before new
        models came, it is answered by them."""
        return self._post("predict", inputs, Reply("predict", next(self._ids), on_done=on_done, on_failed=on_failed,
                                                   on_cancelled=on_cancelled))

    def attribute(self, inputs: ModelInput, *, target: str | None = None, method: str = "auto",
                  model_index: int = 0, on_done: Callback[AttributionResult] = None,
                  on_failed: Callback[InferenceFailure] = None, on_cancelled: Callable[[], None] | None = None,
                  **options) -> Reply[AttributionResult]:
        """Word attributions from one member model (``method``: auto, gradients or ablation); a newer
        attribution cancels this one, and stops it at its next pass."""
        return self._post("attribute", inputs, Reply("attribute", next(self._ids), on_done=on_done,
                                                     on_failed=on_failed, on_cancelled=on_cancelled),
                          target=target, method=method, model_index=model_index, **options)

    def attribute_for_reading(self, text: str, *, target: str, on_done: Callback[AttributionResult] = None,
                              on_failed: Callback[InferenceFailure] = None,
                              on_cancelled: Callable[[], None] | None = None) -> Reply[AttributionResult]:
        """Word attributions for a text a reading view shows (the words it blurs). A kind of its own: the
        writer's newest attribution and a reader's never replace or cancel each other; a newer reading
        request cancels this one."""
        return self._post("read", text, Reply("read", next(self._ids), on_done=on_done, on_failed=on_failed,
                                              on_cancelled=on_cancelled),
                          target=target, method="auto", model_index=0)

    def suggest(self, work: Callable[[Ensemble, Callable[[], None]], Any], inputs: Any = None, *,
                on_done: Callback[SuggestionResult] = None, on_failed: Callback[InferenceFailure] = None,
                on_cancelled: Callable[[], None] | None = None) -> Reply[SuggestionResult]:
        """Run ``work(models, checkpoint)`` on the explanation lane (the writing assistant's
        generate-and-check); ``checkpoint()`` raises Cancelled once a newer suggestion is asked for
        or the models change. The answer carries ``inputs``; a newer suggestion cancels this one."""
        return self._post("suggest", (work, inputs), Reply("suggest", next(self._ids), on_done=on_done,
                                                           on_failed=on_failed, on_cancelled=on_cancelled))

    def run_job(self, fn: Callable[[Progress], Any], *, key: str | None = None,
                on_progress: Callable[[int, int], None] | None = None, on_message: Callback[str] = None,
                on_done: Callback[Any] = None, on_failed: Callback[InferenceFailure] = None,
                on_cancelled: Callable[[], None] | None = None) -> Reply[Any]:
        """Run ``fn(progress)`` on the prediction lane (an evaluation with its own models), after the
        jobs already queued; ``reply.cancel()`` stops it at its next check. A job with a ``key`` cancels
        the older job of that key (it reports cancelled once it stopped): for an owner whose newer job
        replaces the older (the quality page measuring another task); one that runs a job at a time
        and refuses a second needs none."""
        reply: Reply[Any] = Reply(key, next(self._ids), on_done=on_done, on_failed=on_failed,
                                  on_cancelled=on_cancelled, on_progress=on_progress, on_message=on_message)
        worker = self._worker
        job: Job

        def report(done: int, total: int) -> None:  # on the worker thread
            worker.job_reported.emit(job, done, total)
            worker.serve_interactive()

        job = Job(reply.request_id, fn, Progress(report, lambda text: worker.job_said.emit(job, text)), reply, key)
        reply._stopped_by(lambda: self._stop_job(job))
        if key is not None:
            self._replace(f"job:{key}", job)
        self._mailbox.put_job(job)
        self._wake.emit()
        return reply

    def shutdown(self, timeout_ms: int = 30_000) -> None:
        """Stop both lanes after the step they are in; models are released on the prediction lane
        (or by the explanation lane, when it still held them). No reply hears anything more."""
        self._closed = True
        if not self._thread.isRunning() and not self._explain_thread.isRunning():
            return
        self._mailbox.closing = True
        for job in self._mailbox.jobs():
            job.progress.cancel()
        self._close_explainer.emit()
        if not self._explain_thread.wait(timeout_ms):
            log.warning("the explanation thread did not stop within %d ms", timeout_ms)
        self._close.emit()
        if not self._thread.wait(timeout_ms):
            log.warning("the inference thread did not stop within %d ms", timeout_ms)

    def _post(self, kind: str, payload, reply: Reply[T], **options) -> Reply[T]:
        if kind == "load":
            self._load_id = reply.request_id
        request = Request(kind, reply.request_id, self._load_id, payload, reply, options)
        reply._stopped_by(lambda: self._withdraw(request))
        self._replace(kind, request)
        self._mailbox.put(request)
        (self._wake_explainer if kind in ("attribute", "read", "suggest") else self._wake).emit()
        return reply

    def _replace(self, key: str, request: Request | Job) -> None:
        """``request`` is the newest of ``key``: the older one's reply is cancelled."""
        older = self._open.get(key)
        self._open[key] = request
        if older is not None and older.reply is not request.reply:  # (the same reply: asked again of new models)
            older.reply.cancel()

    def _withdraw(self, request: Request) -> None:
        """A cancelled interactive request: no lane starts it, a running attribution stops at its next
        pass, and its reply says cancelled now."""
        request.withdrawn = True
        self._mailbox.withdraw(request)
        self._forget(request)
        request.reply._cancelled()
        if request.kind == "load" and request.request_id == self._load_id:  # the newest load, taken back:
            self._settle_stale(answer_again=False)  # no load's end will settle what waited for it

    def _stop_job(self, job: Job) -> None:
        job.progress.cancel()
        if self._mailbox.withdraw_job(job):  # never started: cancelled now; else when it stops
            self._forget(job)
            job.reply._cancelled()

    def _forget(self, request: Request | Job) -> None:
        key = request.kind if isinstance(request, Request) else f"job:{request.key}" if request.key else None
        if key is not None and self._open.get(key) is request:
            del self._open[key]

    # Deliveries (GUI thread): each to its own reply; stale answers stop here -----------------------
    def _answerable(self, request: Request) -> bool:
        """Whether ``request``'s answer may be given: its reply waits for this very request, and the
        models that answered are the newest asked for (else the newest load's end settles it)."""
        if self._closed or request.withdrawn or not request.reply.pending:
            return False
        return request.kind == "load" or request.load_id == self._load_id

    @Slot(object, object)
    def _answered(self, request: Request, result: Any) -> None:
        if self._answerable(request):
            self._forget(request)
            request.reply._done(result)

    @Slot(object, object)
    def _on_loaded(self, request: Request, result: LoadedModels) -> None:
        if not self._answerable(request):
            return  # a newer load was asked for: its end is the one told
        self._forget(request)
        request.reply._done(result)  # whoever asked first, then everyone who follows the loaded models
        self.model_loaded.emit(result)
        self._settle_stale(answer_again=True)

    @Slot(object, object)
    def _request_failed(self, request: Request, failure: InferenceFailure) -> None:
        if not self._answerable(request):
            return
        self._forget(request)
        request.reply._failed(failure)
        if request.kind == "load":
            self._settle_stale(answer_again=False)

    def _settle_stale(self, *, answer_again: bool) -> None:
        """The newest load ended: a request made before it is answered again by the new models (a
        prediction, whose owner waits for the newest text's answer) or cancelled."""
        stale = [r for r in self._open.values() if isinstance(r, Request) and r.load_id != self._load_id]
        for request in stale:
            if answer_again and request.kind == "predict":
                request.withdrawn = True
                self._post(request.kind, request.payload, request.reply, **request.options)
            else:
                request.reply.cancel()

    @Slot(object, int, int)
    def _job_reported(self, job: Job, done: int, total: int) -> None:
        if not self._closed:
            job.reply._progress(done, total)

    @Slot(object, str)
    def _job_said(self, job: Job, text: str) -> None:
        if not self._closed:
            job.reply._message(text)

    @Slot(object, object)
    def _job_returned(self, job: Job, result: Any) -> None:
        self._forget(job)
        if not self._closed:
            job.reply._done(result)

    @Slot(object, object)
    def _went_wrong(self, request: Request | Job, failure: InferenceFailure) -> None:
        if isinstance(request, Request):
            self._request_failed(request, failure)
            return
        self._forget(request)
        if not self._closed:
            request.reply._failed(failure)
