"""The Create page's view-model builders, without Qt, on hand-made inputs."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.core.domain import Span
from app.core.tasks.definition import InputKind, MetadataKind, builtin_tasks_dir, load_task_file
from app.views.create import (
    DiffKind,
    EditorContent,
    PairSide,
    PredictedView,
    attribution_changes,
    attribution_view,
    editor_spec,
    form_fields,
    pair_view,
    prediction_view,
    segment_names,
    task_view,
    written_segment,
)

HATE = load_task_file(builtin_tasks_dir() / "hate_speech.yaml")
NLI = load_task_file(builtin_tasks_dir() / "nli.yaml")
QA = load_task_file(builtin_tasks_dir() / "extractive_qa.yaml")


@dataclass
class Member:
    label: str | None
    probabilities: dict
    truncated: bool = False
    answer: Span | None = None


@dataclass
class Ensemble:
    members: tuple
    label: str | None
    probabilities: dict
    latency_ms: float = 4.25


@dataclass
class Word:
    segment: int
    text: str
    start: int
    end: int
    score: float
    raw: float
    seen: bool = True


@dataclass
class Attribution:
    words: tuple
    target: str = "entailment"
    predicted: str = "neutral"
    method: str = "integrated gradients"
    latency_ms: float = 80.0
    truncated: bool = False
    convergence_delta: float | None = None
    n_steps: int | None = 32
    units: str = "probability"
    details: dict = field(default_factory=dict)

    @property
    def scale(self) -> float:
        return 0.2


def test_the_editor_and_the_form_are_laid_out_from_the_definition():
    spec = editor_spec(NLI)
    assert [(f.name, f.kind, f.is_context) for f in spec.inputs] == [
        ("context", InputKind.CONTEXT, True), ("hypothesis", InputKind.WRITTEN, False)]
    assert spec.labels == ("entailment", "neutral", "contradiction") and spec.has_context and not spec.extractive
    qa = editor_spec(QA)
    assert qa.extractive and qa.span_of == "context" and qa.labels == ()
    fields = {f.name: f for f in form_fields(HATE)}
    assert fields["hate_type"].kind is MetadataKind.CHOICE and fields["hate_type"].applies_to == ("hate",)
    assert fields["hate_type"].applies("hate") and not fields["hate_type"].applies("not hate")
    assert all(f.applies(None) for f in form_fields(NLI))
    assert task_view(HATE).labels == ("hate", "not hate") and task_view(HATE).guidelines


def test_the_prediction_view_names_the_members_and_the_devices_once():
    prediction = Ensemble((Member("hate", {"hate": 0.7, "not hate": 0.3}, truncated=True),
                           Member("not hate", {"hate": 0.4, "not hate": 0.6})), "hate", {"hate": 0.55, "not hate": 0.45})
    view = prediction_view(HATE, prediction, ["small", "big"], ["cpu", "cpu"], EditorContent({"text": "x"}, "not hate"),
                           fooled=True)
    assert [(m.name, m.label) for m in view.members] == [("small", "hate"), ("big", "not hate")]
    assert view.combined.label == "hate" and view.goal == "not hate" and view.truncated
    assert view.verdict == "Model fooled" and view.title == "Ensemble (mean)"
    assert view.note == "4.2 ms · cpu · the text is longer than the model reads: only its start was used"


def test_an_extractive_prediction_reports_the_answers_overlap():
    answer = Span(0, 5, "Paris")
    prediction = Ensemble((Member("Paris", {}, answer=answer),), "Paris", {})
    content = EditorContent({"context": "Paris is big", "question": "Where?"}, None, Span(0, 5, "Paris"))
    view = prediction_view(QA, prediction, ["qa"], ["cpu"], content, fooled=False)
    assert view.labels == () and view.combined.answer == "Paris" and view.answer_f1 == 1.0
    assert view.verdict == "Not fooled yet" and view.title == "qa"


def test_attributions_land_on_their_segments_in_the_models_order():
    assert segment_names(NLI) == ["Context", "Hypothesis"]  # the model reads the premise first
    assert written_segment(NLI) == 1 and written_segment(QA) == 0 and written_segment(HATE) == 0
    attribution = Attribution((Word(0, "A", 0, 1, 1.0, 0.1), Word(1, "dog", 0, 3, -0.5, -0.05, seen=False)))
    view = attribution_view(NLI, attribution, ("A", "dog"))
    assert [s.text for s in view.segments] == ["A", "dog"]
    assert [w.text for w in view.segments[1].words] == ["dog"] and not view.segments[1].words[0].seen
    assert view.method == "integrated gradients (32 steps)" and view.scale == 0.2
    assert view.measure == "probability of entailment" and view.strongest() == 0.1  # unseen words do not count


def test_a_pair_shows_the_edit_and_the_biggest_attribution_moves_first():
    changes = attribution_changes([("women", 0.3), ("can't", 0.9), ("lead", 0.0)],
                                  [("women", 0.5), ("can", 0.1), ("lead", 0.0)])
    assert [(c.word, c.before, c.after) for c in changes] == [
        ("can't", 0.9, None), ("women", 0.3, 0.5), ("can", None, 0.1), ("lead", 0.0, 0.0)]
    assert changes[0].delta == -0.9
    pair = pair_view(HATE.labels, "women can't lead", "women can lead",
                     PairSide("hate", PredictedView("hate", {"hate": 0.9})), PairSide("not hate", None),
                     "hate", changes, 0.9)
    assert pair.edit_distance == 1 and pair.labels == ("hate", "not hate")
    assert [p.kind for p in pair.diff] == [DiffKind.EQUAL, DiffKind.DELETE, DiffKind.INSERT, DiffKind.EQUAL]
    assert "".join(p.text for p in pair.diff if p.kind is not DiffKind.DELETE) == "women can lead"
