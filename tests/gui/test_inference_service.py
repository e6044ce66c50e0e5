"""The inference service: one worker thread owns the models; requests coalesce; stale results
never reach the GUI; the GUI thread never waits on a model. Waits are on signals, never sleeps."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from app.gui.inference import EXPLANATION_NICENESS, InferenceService
from local_models.engine import ModelSpec
from tests.model_fixtures import LABELS

SIGNAL_TIMEOUT = 60_000  # loading torch the first time can be slow on a busy CI machine


@pytest.fixture
def service(qtbot):
    service = InferenceService()
    yield service
    service.shutdown()
    assert not service._thread.isRunning()


def spec(path, **kw) -> ModelSpec:
    return ModelSpec(path, task_labels=tuple(LABELS), num_threads=1, **kw)


class GatedSpec:
    """Loads the real model, but every prediction first records its inputs and then waits for
    a permit from the test: the test decides when, and for how long, the worker is busy."""

    def __init__(self, inner: ModelSpec):
        self.inner = inner
        self.permits = threading.Semaphore(0)
        self.calls: list[list] = []

    def allow(self, n: int = 1) -> None:
        self.permits.release(n)

    def load(self):
        engine = self.inner.load()
        predict = engine.predict

        def gated(inputs):
            self.calls.append(list(inputs))
            if not self.permits.acquire(timeout=SIGNAL_TIMEOUT / 1000):
                raise TimeoutError("the test never let this prediction run")
            return predict(inputs)

        engine.predict = gated
        return engine


def load(qtbot, service, *specs):
    with qtbot.waitSignal(service.model_loaded, timeout=SIGNAL_TIMEOUT) as loaded:
        service.load(list(specs))
    return loaded.args[0]


def test_load_predict_and_attribute(qtbot, service, tiny_classifier_dir):
    info = load(qtbot, service, spec(tiny_classifier_dir, name="tiny"))
    assert info.names == ("tiny",) and info.devices == ("cpu",) and info.labels == tuple(LABELS)
    assert info.supports_gradients == (True,) and len(info.sha256s[0]) == 64

    with qtbot.waitSignal(service.prediction_ready, timeout=SIGNAL_TIMEOUT) as got:
        request_id = service.predict("I ❤️ you, n\u200bice")
    result = got.args[0]
    assert result.request_id == request_id and result.inputs == "I ❤️ you, n\u200bice"
    assert result.prediction.label in LABELS and result.prediction.members[0].model_sha == info.sha256s[0]

    with qtbot.waitSignal(service.attribution_ready, timeout=SIGNAL_TIMEOUT) as got:
        service.attribute("I ❤️ you, n\u200bice", method="gradients", target="hate")
    attribution = got.args[0].attribution
    assert attribution.target == "hate" and attribution.method == "gradients"
    assert [w.text for w in attribution.words] == ["I", "❤️", "you", ",", "n\u200bice"]


def test_typing_coalesces_and_stale_results_are_never_shown(qtbot, service, tiny_classifier_dir):
    gated = GatedSpec(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    received = []
    service.prediction_ready.connect(received.append)

    service.predict("h")
    qtbot.waitUntil(lambda: gated.calls == [["h"]], timeout=SIGNAL_TIMEOUT)  # the worker is busy on "h"
    for text in ("he", "hel", "hell", "hello"):
        service.predict(text)  # returns at once while the model is busy: the GUI never waits
    assert gated.calls == [["h"]] and received == []

    with qtbot.waitSignal(service.prediction_ready, timeout=SIGNAL_TIMEOUT) as newest:
        gated.allow(2)
    assert newest.args[0].inputs == "hello"
    assert gated.calls == [["h"], ["hello"]]  # the texts in between were never computed
    with qtbot.waitSignal(service.prediction_ready, timeout=SIGNAL_TIMEOUT):
        gated.allow()
        service.predict("hello!")
    assert [r.inputs for r in received] == ["hello", "hello!"]  # "h" was computed but never shown


def test_new_models_drop_old_answers_and_answer_the_newest_text(qtbot, service, tiny_classifier_dir, tmp_path):
    from transformers import BertForSequenceClassification

    from tests.model_fixtures import save_tiny

    other = save_tiny(BertForSequenceClassification, tmp_path / "other", seed=11, num_labels=2,
                      id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})
    gated = GatedSpec(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    received = []
    service.prediction_ready.connect(received.append)
    service.predict("round text")
    qtbot.waitUntil(lambda: gated.calls == [["round text"]], timeout=SIGNAL_TIMEOUT)
    service.load([spec(other)])
    with qtbot.waitSignal(service.model_loaded, timeout=SIGNAL_TIMEOUT) as loaded:
        gated.allow()
    qtbot.waitUntil(lambda: len(received) == 1, timeout=SIGNAL_TIMEOUT)
    assert received[0].inputs == "round text"
    assert received[0].prediction.members[0].model_sha == loaded.args[0].sha256s[0]  # the new model's answer


def test_failures_arrive_as_signals_with_messages(qtbot, service, tiny_classifier_dir, tmp_path):
    with qtbot.waitSignal(service.failed, timeout=SIGNAL_TIMEOUT) as failed:
        service.predict("no model yet")
    assert failed.args[0].operation == "predict" and "No model is loaded" in failed.args[0].message

    with qtbot.waitSignal(service.failed, timeout=SIGNAL_TIMEOUT) as failed:
        service.load([spec(tmp_path / "missing-model")])
    assert failed.args[0].operation == "load" and "There is no model at" in failed.args[0].message

    load(qtbot, service, spec(tiny_classifier_dir))
    with qtbot.waitSignal(service.failed, timeout=SIGNAL_TIMEOUT) as failed:
        service.predict("x" * 5_000_001)
    assert "beyond what Dynadesk sends to a model" in failed.args[0].message
    with qtbot.waitSignal(service.failed, timeout=SIGNAL_TIMEOUT) as failed:
        service.attribute("x", target="no such label")
    assert failed.args[0].operation == "attribute" and "not a label" in failed.args[0].message


def test_shutdown_stops_the_worker_thread(qtbot, tiny_classifier_dir):
    service = InferenceService()
    load(qtbot, service, spec(tiny_classifier_dir))
    service.shutdown()
    assert not service._thread.isRunning()
    service.shutdown()  # a second call is harmless


class GatedAttributions:
    """Loads the real model, but every attribution records its inputs and waits for a permit
    before it starts; how each one ended (its label, or the exception's class) is recorded."""

    def __init__(self, inner: ModelSpec):
        self.inner = inner
        self.permits = threading.Semaphore(0)
        self.calls: list = []
        self.outcomes: list[str] = []
        self.niceness: list[int] = []  # of the thread each attribution ran on

    def allow(self, n: int = 1) -> None:
        self.permits.release(n)

    def load(self):
        engine = self.inner.load()
        attribute = engine.attribute

        def gated(item, **options):
            import os

            self.calls.append(item)
            self.niceness.append(os.getpriority(os.PRIO_PROCESS, 0))
            if not self.permits.acquire(timeout=SIGNAL_TIMEOUT / 1000):
                raise TimeoutError("the test never let this attribution run")
            try:
                result = attribute(item, **options)
            except BaseException as exc:
                self.outcomes.append(exc.__class__.__name__)
                raise
            self.outcomes.append(result.target)
            return result

        engine.attribute = gated
        return engine


def test_a_keystroke_is_answered_while_an_attribution_runs(qtbot, service, tiny_classifier_dir):
    """Attributions have their own lane: the prediction for the newest text comes while an
    attribution is still running, and each result is delivered for its own text."""
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    attributions, predictions = [], []
    service.attribution_ready.connect(attributions.append)
    service.prediction_ready.connect(predictions.append)

    service.attribute("the old text", method="gradients", target="hate")
    qtbot.waitUntil(lambda: gated.calls == ["the old text"], timeout=SIGNAL_TIMEOUT)  # the attribution holds its lane
    with qtbot.waitSignal(service.prediction_ready, timeout=SIGNAL_TIMEOUT):
        service.predict("the old text, typed on")
    assert [p.inputs for p in predictions] == ["the old text, typed on"]
    assert attributions == [] and gated.outcomes == []  # answered before the attribution even started

    with qtbot.waitSignal(service.attribution_ready, timeout=SIGNAL_TIMEOUT):
        gated.allow()
    assert [a.inputs for a in attributions] == ["the old text"]
    assert [w.text for w in attributions[0].attribution.words] == ["the", "old", "text"]
    if sys.platform.startswith("linux"):  # attributions yield the CPU to predictions when cores are busy
        assert gated.niceness[0] == min(19, max(os.getpriority(os.PRIO_PROCESS, 0), 0) + EXPLANATION_NICENESS)


def test_a_newer_attribution_stops_the_running_one_at_its_next_pass(qtbot, service, tiny_classifier_dir):
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    attributions, failures = [], []
    service.attribution_ready.connect(attributions.append)
    service.failed.connect(failures.append)

    # one variant per pass, so that there is a pass boundary to stop at
    service.attribute("first text to explain", method="ablation", rows_per_pass=1)
    qtbot.waitUntil(lambda: gated.calls == ["first text to explain"], timeout=SIGNAL_TIMEOUT)
    service.attribute("second text", method="ablation", rows_per_pass=1)
    with qtbot.waitSignal(service.attribution_ready, timeout=SIGNAL_TIMEOUT):
        gated.allow(2)
    assert gated.outcomes[0] == "Cancelled"  # stopped: its text is no longer the newest
    assert gated.calls == ["first text to explain", "second text"]
    assert [a.inputs for a in attributions] == ["second text"] and failures == []  # the stopped one is not shown


def test_new_models_while_an_attribution_runs(qtbot, service, tiny_classifier_dir, trigger_model_dir):
    """The prediction lane loads other models while the explanation lane still uses the old
    ones: the old attribution stops and is not shown, and the old models are closed after it."""
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    attributions = []
    service.attribution_ready.connect(attributions.append)
    service.attribute("explained by the old model", method="ablation", rows_per_pass=1)
    qtbot.waitUntil(lambda: len(gated.calls) == 1, timeout=SIGNAL_TIMEOUT)
    old_models = service._worker._shared._current
    info = load(qtbot, service, ModelSpec(trigger_model_dir, num_threads=1))
    assert old_models.engines[0].runtime.module is not None  # borrowed: not closed under the attribution
    gated.allow()
    qtbot.waitUntil(lambda: gated.outcomes == ["Cancelled"], timeout=SIGNAL_TIMEOUT)
    qtbot.waitUntil(lambda: old_models.engines[0].runtime.module is None, timeout=SIGNAL_TIMEOUT)  # closed after
    with qtbot.waitSignal(service.attribution_ready, timeout=SIGNAL_TIMEOUT) as got:
        service.attribute("a banana", method="ablation")
    assert attributions == [got.args[0]] and got.args[0].attribution.model_sha == info.sha256s[0]


def test_a_writers_and_a_readers_attributions_both_arrive(qtbot, service, tiny_classifier_dir):
    """The blur of a reading view and the writer's heatmap ask for attributions independently: neither
    replaces the other as a newer request of the same kind would."""
    load(qtbot, service, spec(tiny_classifier_dir, name="tiny"))
    arrived = []
    service.attribution_ready.connect(lambda result: arrived.append(result.request_id))
    writer = service.attribute("the writer's text", target="hate")
    reader = service.attribute_for_reading("the reader's text", target="hate")
    qtbot.waitUntil(lambda: {writer, reader} <= set(arrived), timeout=SIGNAL_TIMEOUT)
    assert service.for_reading(reader) and not service.for_reading(writer)
