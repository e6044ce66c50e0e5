"""The writing assistant's lane on the inference service: suggestions run on the explanation
lane, so a keystroke's prediction never waits for them (pending or running); a newer request
supersedes an older one, whose work stops at its next checkpoint and is never shown."""

from __future__ import annotations

import threading

from app.core.assist.pipeline import suggest
from app.core.assist.types import Goal
from app.core.tasks.definition import builtin_tasks_dir, load_task_file
from tests.gui.test_inference_service import (
    SIGNAL_TIMEOUT,
    GatedAttributions,
    Told,
    answer,
    load,
    spec,
)

HATE = load_task_file(builtin_tasks_dir() / "hate_speech.yaml")


class GatedWork:
    """Suggestion work that records that it started, then waits for the test's permit before
    passing its checkpoint and answering."""

    def __init__(self):
        self.permits = threading.Semaphore(0)
        self.started: list[str] = []
        self.outcomes: list[str] = []

    def make(self, name: str):
        def work(models, checkpoint):
            self.started.append(name)
            assert self.permits.acquire(timeout=SIGNAL_TIMEOUT / 1000), "the test never let the work run"
            try:
                checkpoint()
            except Exception as exc:
                self.outcomes.append(type(exc).__name__)
                raise
            self.outcomes.append(name)
            return f"suggestions for {name}", len(models.engines)

        return work


def test_a_keystroke_prediction_goes_before_a_pending_and_a_running_suggestion(qtbot, service, tiny_classifier_dir):
    gated = GatedAttributions(spec(tiny_classifier_dir))
    load(qtbot, service, gated)
    work = GatedWork()
    suggestions = Told()

    # the explanation lane is busy with an attribution: the suggestion request waits (pending)
    service.attribute("the text explained", method="gradients")
    qtbot.waitUntil(lambda: gated.calls == ["the text explained"], timeout=SIGNAL_TIMEOUT)
    service.suggest(work.make("first"), {"text": "the text"}, **suggestions.callbacks())
    predicted = answer(qtbot, service.predict, "the text, typed on")
    assert [p.inputs for p in predicted.done] == ["the text, typed on"] and work.started == []  # still pending

    gated.allow()  # the attribution ends; the suggestion starts, and holds the lane
    qtbot.waitUntil(lambda: work.started == ["first"], timeout=SIGNAL_TIMEOUT)
    predicted = answer(qtbot, service.predict, "the text, typed on again")
    assert predicted.done[0].inputs == "the text, typed on again" and suggestions.ends == 0  # answered while it runs

    work.permits.release()
    qtbot.waitUntil(lambda: suggestions.ends == 1, timeout=SIGNAL_TIMEOUT)
    got = suggestions.done[0]
    assert got.result == ("suggestions for first", 1) and got.inputs == {"text": "the text"}


def test_a_newer_suggestion_request_supersedes_the_running_one(qtbot, service, tiny_classifier_dir):
    load(qtbot, service, spec(tiny_classifier_dir))
    work = GatedWork()
    old, new = Told(), Told()
    service.suggest(work.make("old text"), "old", **old.callbacks())
    qtbot.waitUntil(lambda: work.started == ["old text"], timeout=SIGNAL_TIMEOUT)
    service.suggest(work.make("new text"), "new", **new.callbacks())
    assert old.cancelled == 1  # told at once
    work.permits.release(2)
    qtbot.waitUntil(lambda: new.ends == 1 and len(work.outcomes) == 2, timeout=SIGNAL_TIMEOUT)
    assert work.outcomes == ["Cancelled", "new text"]  # the old one stopped at its checkpoint
    assert [s.inputs for s in new.done] == ["new"]
    assert old.ends == 1 and not old.done and not old.failed  # a superseded request is not reported as a failure


def test_the_lane_runs_the_real_assistant_on_the_loaded_models(qtbot, service, hate_trigger_model_dir):
    from app.core.services.target_models import model_input
    from local_models.engine import ModelSpec

    load(qtbot, service, ModelSpec(hate_trigger_model_dir, task_labels=tuple(HATE.labels), num_threads=1))
    inputs = model_input(HATE, {"text": "the banana people ruin everything"})

    def work(models, checkpoint):
        return suggest(models, HATE, inputs, goal=Goal.FOOL, writer_label="hate", checkpoint=checkpoint)

    result = answer(qtbot, service.suggest, work, inputs).done[0].result
    assert result.text == "the banana people ruin everything" and result.suggestions
    assert all(s.probabilities and s.predicted in HATE.labels for s in result.suggestions)  # each one checked


def test_an_onnx_target_gets_word_substitution_from_its_pytorch_form(qtbot, service, trigger_model_dir,
                                                                      trigger_onnx_dir):
    """The ONNX target has no gradients: the lane loads the PyTorch form it was exported from (once)
    for word substitution, and every suggestion is still checked against the ONNX target."""
    from app.core.assist.types import Generator, Unavailable
    from app.gui.assistant import engine_work
    from app.gui.gradient_form import GradientForm
    from local_models.engine import ModelSpec

    as_hate = {"fruit": "hate", "plain": "not hate"}  # the trigger model's labels, named as the task's
    load(qtbot, service, ModelSpec(trigger_onnx_dir, label_map=as_hate, num_threads=1))
    inputs = {"text": "the banana people ruin everything"}

    def suggestions(form):
        return answer(qtbot, service.suggest, engine_work(HATE, inputs, Goal.FOOL, "hate", "mean",
                                                          gradient_form=form), inputs).done[0].result

    without = suggestions(None)
    assert without.unavailable[Generator.SUBSTITUTION] is Unavailable.NO_GRADIENTS
    form = GradientForm()
    form.want("trigger", ModelSpec(trigger_model_dir, label_map=as_hate, num_threads=1))
    with_form = suggestions(form)
    assert Generator.SUBSTITUTION not in with_form.unavailable
    assert any(s.candidate.generator is Generator.SUBSTITUTION for s in with_form.suggestions)
    loaded = form.engine()
    assert loaded is not None and loaded.supports_gradients and suggestions(form) and form.engine() is loaded  # once
    form.want(None)
    assert form.engine() is None and loaded.runtime.module is None  # a new target: the old form is closed


def test_a_request_the_assistant_cannot_serve_fails_with_its_reason(qtbot, service, hate_trigger_model_dir):
    from app.gui.assistant import engine_work
    from local_models.engine import ModelSpec

    load(qtbot, service, ModelSpec(hate_trigger_model_dir, task_labels=tuple(HATE.labels), num_threads=1))
    inputs = {"text": "word " * 500}  # longer than the assistant works on
    failure = answer(qtbot, service.suggest, engine_work(HATE, inputs, Goal.FOOL, "hate", "mean"), inputs).failed[0]
    assert failure.operation == "suggest" and failure.message.startswith("The text has 2500 characters")
