"""The early check (off on the desk; the bench measures it): the writer's text and the rules'
candidates checked on a second thread while the gradient pass runs. Every answer is the one the
desk's form gives the text typed, and a stopped call leaves no helper running."""

from __future__ import annotations

import threading

import pytest

from app.core.assist import early_check, pipeline
from app.core.assist.early_check import EarlyCheck, answers_alone_in_any_batch
from app.core.assist.pipeline import suggest
from app.core.assist.types import Generator
from local_models.engine import Ensemble, load_engine
from local_models.progress import Cancelled

TEXTS = ("I hate all of those disgusting immigrants.",
         "women are too stupid to be allowed to vote and everyone knows that, why do we even pretend otherwise")


@pytest.fixture(scope="module")
def desk(default_model_cache):
    import resources
    from app.core.tasks.definition import load_task_file
    from local_models.default_model import prepared_fast_form

    prepared = prepared_fast_form(resources.ROOT / "models" / "hate_speech_r1", default_model_cache)
    assert prepared is not None and prepared.onnx_dir is not None
    definition = load_task_file(resources.ROOT / "tasks" / "hate_speech.yaml")
    onnx = load_engine(prepared.onnx_dir, task_labels=definition.labels)
    torch_form = load_engine(prepared.torch_dir, task_labels=definition.labels)
    yield definition, onnx, torch_form
    onnx.close()
    torch_form.close()


def _helpers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "assist-early-check"]


def _answers(result):
    return [(s.candidate.text, s.probabilities, s.predicted, s.fools, s.shift) for s in result.suggestions]


@pytest.mark.parametrize("text", TEXTS)
def test_early_answers_are_the_ones_the_check_and_the_typed_text_get(desk, text, monkeypatch):
    definition, onnx, torch_form = desk
    if not onnx.runtime.row_by_row:
        pytest.skip("the default model has no int8 form on this machine")
    assert answers_alone_in_any_batch(Ensemble([onnx]))
    monkeypatch.setattr(early_check, "ENABLED", True)  # off on the desk; the bench measures it
    stop = EarlyCheck.stop

    def stop_after_every_guess(self):  # how many fit in the pass depends on the machine's load
        if self._thread is not None:
            self._thread.join(timeout=120)
        return stop(self)

    monkeypatch.setattr(EarlyCheck, "stop", stop_after_every_guess)
    early = suggest(onnx, definition, text, goal="fool", writer_label="hate", gradients=torch_form)
    monkeypatch.setattr(early_check, "ENABLED", False)
    monkeypatch.setattr(EarlyCheck, "stop", stop)
    later = suggest(onnx, definition, text, goal="fool", writer_label="hate", gradients=torch_form)
    # the writer's text and the rules' candidates were checked during the gradient pass
    rules = sum(s.candidate.generator == Generator.RULES for s in early.suggestions)
    assert rules and early.checked_early >= rules + 1 and later.checked_early == 0
    # the same suggestions, bit for bit, in the same order
    assert _answers(early) == _answers(later) and early.original == later.original
    for s in early.suggestions:  # and each is what the desk shows for the text typed
        typed = onnx.predict_one(s.candidate.text)
        assert s.probabilities == typed.probabilities and s.predicted == typed.label
        assert s.fools == (typed.label != "hate")
    assert early.original == onnx.predict_one(text).probabilities
    assert not _helpers()


def test_a_float_target_checks_everything_after_the_generators(hate_trigger_model_dir):
    torch_target = load_engine(hate_trigger_model_dir, task_labels=["hate", "not hate"])
    assert not answers_alone_in_any_batch(Ensemble([torch_target]))  # a padded batch: its own answers
    torch_target.close()


def test_a_newer_request_stops_the_call_and_its_helper(desk, monkeypatch):
    definition, onnx, torch_form = desk
    monkeypatch.setattr(early_check, "ENABLED", True)
    if not onnx.runtime.row_by_row:
        pytest.skip("the default model has no int8 form on this machine")
    asked = []

    def newer_request_after_the_gradient_pass():
        asked.append(1)
        raise Cancelled("a newer text")

    with pytest.raises(Cancelled):
        suggest(onnx, definition, TEXTS[1], goal="fool", writer_label="hate", gradients=torch_form,
                checkpoint=newer_request_after_the_gradient_pass)
    assert asked == [1] and not _helpers()  # stopped at the first checkpoint; the helper is gone


def test_the_helper_stops_between_texts_and_keeps_what_it_finished(desk):
    _, onnx, _ = desk
    started, release = threading.Event(), threading.Event()
    texts = [f"text number {i} of many" for i in range(50)]

    def guesses():
        started.set()
        release.wait(5)
        return texts

    early = EarlyCheck(Ensemble([onnx])).start(guesses)
    assert started.wait(5)
    release.set()
    known = early.stop()  # told to stop: at most the text in flight is finished after this
    assert len(known) < len(texts) and not _helpers()
    for item, prediction in known.items():
        assert item in texts and prediction.probabilities == onnx.predict_one(item).probabilities


def test_the_way_before_still_takes_ablation_when_the_model_disagrees(desk, monkeypatch):
    """The bench's side by side: with the old switch the attributions come from word ablation."""
    definition, onnx, torch_form = desk
    calls = []
    attribute = type(onnx).attribute

    def counted(self, *args, **kwargs):
        calls.append(kwargs.get("method"))
        return attribute(self, *args, **kwargs)

    monkeypatch.setattr(type(onnx), "attribute", counted)
    text = "have a lovely day, friends"  # not hateful: the model disagrees with the writer's "hate"
    assert onnx.predict_one(text).label != "hate"
    suggest(onnx, definition, text, goal="fool", writer_label="hate", gradients=torch_form)
    assert calls == []  # the second backward gave the attributions
    monkeypatch.setattr(pipeline, "ABLATION_WHEN_DISAGREEING", True)
    suggest(onnx, definition, text, goal="fool", writer_label="hate", gradients=torch_form)
    assert calls == ["ablation"]
