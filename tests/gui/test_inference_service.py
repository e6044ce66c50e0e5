"""The inference service: one worker thread owns the models; requests coalesce; each answer goes to
its own request's reply, stale results to none; the GUI thread never waits on a model. Waits are on
signals and replies, never sleeps."""

from __future__ import annotations

import os
import sys
import threading

from app.gui.inference import EXPLANATION_NICENESS, InferenceService
from local_models.engine import ModelSpec
from tests.model_fixtures import LABELS

SIGNAL_TIMEOUT = 60_000  # loading torch the first time can be slow on a busy CI machine


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


class Told:
    """What one or more replies told, through the callbacks given with their requests."""

    def __init__(self):
        self.done: list = []
        self.failed: list = []
        self.cancelled = 0
        self.progress: list[tuple[int, int]] = []
        self.messages: list[str] = []

    def callbacks(self, *, job: bool = False) -> dict:
        told = dict(on_done=self.done.append, on_failed=self.failed.append, on_cancelled=self._cancelled)
        return {**told, "on_progress": lambda done, total: self.progress.append((done, total)),
                "on_message": self.messages.append} if job else told

    def _cancelled(self) -> None:
        self.cancelled += 1

    @property
    def ends(self) -> int:
        return len(self.done) + len(self.failed) + self.cancelled


def load(qtbot, service, *specs):
    told = Told()
    with qtbot.waitSignal(service.model_loaded, timeout=SIGNAL_TIMEOUT) as loaded:
        service.load(list(specs), **told.callbacks())
    qtbot.waitUntil(lambda: told.done == [loaded.args[0]], timeout=SIGNAL_TIMEOUT)  # its own reply is told too
    return loaded.args[0]


def answer(qtbot, request, *args, **kwargs):
    """Ask ``request`` and wait for its reply's end; returns what it told."""
    told = Told()
    reply = request(*args, **kwargs, **told.callbacks())
    qtbot.waitUntil(lambda: told.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert reply.finished
    return told


def test_load_predict_and_attribute(qtbot, service, tiny_classifier_dir):
    info = load(qtbot, service, spec(tiny_classifier_dir, name="tiny"))
    assert info.names == ("tiny",) and info.devices == ("cpu",) and info.labels == tuple(LABELS)
    assert info.supports_gradients == (True,) and len(info.sha256s[0]) == 64

    told = answer(qtbot, service.predict, "I ❤️ you, n\u200bice")
    result = told.done[0]
    assert result.inputs == "I ❤️ you, n\u200bice" and not told.failed and not told.cancelled
    assert result.prediction.label in LABELS and result.prediction.members[0].model_sha == info.sha256s[0]

    told = answer(qtbot, service.attribute, "I ❤️ you, n\u200bice", method="gradients", target="hate")
    attribution = told.done[0].attribution
    assert attribution.target == "hate" and attribution.method == "gradients"
    assert [w.text for w in attribution.words] == ["I", "❤️", "you", ",", "n\u200bice"]


def test_typing_coalesces_and_stale_results_are_never_shown(qtbot, service, tiny_classifier_dir):
    gated = GatedSpec(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    told = {text: Told() for text in ("h", "he", "hel", "hell", "hello", "hello!")}

    service.predict("h", **told["h"].callbacks())
    qtbot.waitUntil(lambda: gated.calls == [["h"]], timeout=SIGNAL_TIMEOUT)  # the worker is busy on "h"
    for text in ("he", "hel", "hell", "hello"):
        service.predict(text, **told[text].callbacks())  # returns at once while the model is busy: the GUI never waits
    assert gated.calls == [["h"]] and not any(t.done for t in told.values())
    # each newer request cancelled the one before it, at once
    assert [told[text].cancelled for text in ("h", "he", "hel", "hell", "hello")] == [1, 1, 1, 1, 0]

    gated.allow(2)
    qtbot.waitUntil(lambda: bool(told["hello"].done), timeout=SIGNAL_TIMEOUT)
    assert told["hello"].done[0].inputs == "hello"
    assert gated.calls == [["h"], ["hello"]]  # the texts in between were never computed
    gated.allow()
    service.predict("hello!", **told["hello!"].callbacks())
    qtbot.waitUntil(lambda: bool(told["hello!"].done), timeout=SIGNAL_TIMEOUT)
    # "h" was computed but never shown; every request was told exactly one end
    assert [len(t.done) for t in told.values()] == [0, 0, 0, 0, 1, 1]
    assert all(t.ends == 1 and not t.failed for t in told.values())


def test_new_models_drop_old_answers_and_answer_the_newest_text(qtbot, service, tiny_classifier_dir, tmp_path):
    from transformers import BertForSequenceClassification

    from tests.model_fixtures import save_tiny

    other = save_tiny(BertForSequenceClassification, tmp_path / "other", seed=11, num_labels=2,
                      id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})
    gated = GatedSpec(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    told, explained = Told(), Told()
    service.predict("round text", **told.callbacks())
    qtbot.waitUntil(lambda: gated.calls == [["round text"]], timeout=SIGNAL_TIMEOUT)
    service.attribute("asked of the old model", method="ablation", **explained.callbacks())
    service.load([spec(other)])
    with qtbot.waitSignal(service.model_loaded, timeout=SIGNAL_TIMEOUT) as loaded:
        gated.allow()
    qtbot.waitUntil(lambda: told.ends == 1 and explained.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert told.done[0].inputs == "round text"
    assert told.done[0].prediction.members[0].model_sha == loaded.args[0].sha256s[0]  # the new model's answer
    assert explained.cancelled == 1 and not explained.done  # the old model's answer is never given


def test_failures_reach_their_own_request_with_messages(qtbot, service, tiny_classifier_dir, tmp_path):
    failure = answer(qtbot, service.predict, "no model yet").failed[0]
    assert failure.operation == "predict" and "No model is loaded" in failure.message

    failure = answer(qtbot, service.load, [spec(tmp_path / "missing-model")]).failed[0]
    assert failure.operation == "load" and "There is no model at" in failure.message

    load(qtbot, service, spec(tiny_classifier_dir))
    assert "beyond what Dynadesk sends to a model" in answer(qtbot, service.predict, "x" * 5_000_001).failed[0].message
    failure = answer(qtbot, service.attribute, "x", target="no such label").failed[0]
    assert failure.operation == "attribute" and "not a label" in failure.message


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
    explained = Told()
    service.attribute("the old text", method="gradients", target="hate", **explained.callbacks())
    qtbot.waitUntil(lambda: gated.calls == ["the old text"], timeout=SIGNAL_TIMEOUT)  # the attribution holds its lane
    predicted = answer(qtbot, service.predict, "the old text, typed on")
    assert [p.inputs for p in predicted.done] == ["the old text, typed on"]
    assert explained.ends == 0 and gated.outcomes == []  # answered before the attribution even started

    gated.allow()
    qtbot.waitUntil(lambda: explained.ends == 1, timeout=SIGNAL_TIMEOUT)
    attributions = explained.done
    assert [a.inputs for a in attributions] == ["the old text"]
    assert [w.text for w in attributions[0].attribution.words] == ["the", "old", "text"]
    if sys.platform.startswith("linux"):  # attributions yield the CPU to predictions when cores are busy
        assert gated.niceness[0] == min(19, max(os.getpriority(os.PRIO_PROCESS, 0), 0) + EXPLANATION_NICENESS)


def test_a_newer_attribution_stops_the_running_one_at_its_next_pass(qtbot, service, tiny_classifier_dir):
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    first, second = Told(), Told()

    # one variant per pass, so that there is a pass boundary to stop at
    service.attribute("first text to explain", method="ablation", rows_per_pass=1, **first.callbacks())
    qtbot.waitUntil(lambda: gated.calls == ["first text to explain"], timeout=SIGNAL_TIMEOUT)
    service.attribute("second text", method="ablation", rows_per_pass=1, **second.callbacks())
    assert first.cancelled == 1  # told at once: a newer request of its key replaced it
    gated.allow(2)
    qtbot.waitUntil(lambda: second.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert gated.outcomes[0] == "Cancelled"  # stopped: its text is no longer the newest
    assert gated.calls == ["first text to explain", "second text"]
    assert [a.inputs for a in second.done] == ["second text"]
    assert first.ends == 1 and not first.done and not first.failed  # the stopped one is not shown, nor failed


def test_new_models_while_an_attribution_runs(qtbot, service, tiny_classifier_dir, trigger_model_dir):
    """The prediction lane loads other models while the explanation lane still uses the old
    ones: the old attribution stops and is not shown, and the old models are closed after it."""
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    old = Told()
    service.attribute("explained by the old model", method="ablation", rows_per_pass=1, **old.callbacks())
    qtbot.waitUntil(lambda: len(gated.calls) == 1, timeout=SIGNAL_TIMEOUT)
    old_models = service._worker._shared._current
    info = load(qtbot, service, ModelSpec(trigger_model_dir, num_threads=1))
    assert old_models.engines[0].runtime.module is not None  # borrowed: not closed under the attribution
    gated.allow()
    qtbot.waitUntil(lambda: gated.outcomes == ["Cancelled"], timeout=SIGNAL_TIMEOUT)
    qtbot.waitUntil(lambda: old_models.engines[0].runtime.module is None, timeout=SIGNAL_TIMEOUT)  # closed after
    assert old.cancelled == 1 and not old.done  # the new models' load cancelled it
    new = answer(qtbot, service.attribute, "a banana", method="ablation")
    assert new.done[0].attribution.model_sha == info.sha256s[0]


def test_a_writers_and_a_readers_attributions_both_arrive(qtbot, service, tiny_classifier_dir):
    """The blur of a reading view and the writer's heatmap ask for attributions independently: neither
    replaces the other as a newer request of the same kind would."""
    load(qtbot, service, spec(tiny_classifier_dir, name="tiny"))
    writer, reader = Told(), Told()
    service.attribute("the writer's text", target="hate", **writer.callbacks())
    service.attribute_for_reading("the reader's text", target="hate", **reader.callbacks())
    qtbot.waitUntil(lambda: writer.ends == 1 and reader.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert [r.inputs for r in writer.done] == ["the writer's text"]
    assert [r.inputs for r in reader.done] == ["the reader's text"]
