"""The Create page's view-models: what the editor, the metadata form, the prediction panel, the
heatmap and the perturbation comparison show, as frozen values built by pure functions.

Nothing here touches the database or a model runtime: the controller fetches on its workers and
hands the results to these builders (model results are typed by Protocols, so that widgets
importing this module never pull in a runtime).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.domain import Span, StrEnum
from app.core.tasks.definition import InputKind, MetadataKind, TaskDefinition
from app.core.tasks.fooling import span_f1
from app.core.text import diff_pieces, word_alignment, word_edits


class EnsemblePrediction(Protocol):
    """What the builders read of local_models.engine.EnsemblePrediction (not imported: widgets
    import this module, and must never pull in a model runtime)."""

    members: Sequence[Any]
    label: str | None
    probabilities: dict[str, float]
    latency_ms: float


class Attribution(Protocol):
    """What the builders read of local_models.attribution.Attribution (a frozen dataclass: read-only)."""

    @property
    def words(self) -> Sequence[Any]: ...
    @property
    def target(self) -> str: ...
    @property
    def predicted(self) -> str: ...
    @property
    def method(self) -> str: ...
    @property
    def latency_ms(self) -> float: ...
    @property
    def truncated(self) -> bool: ...
    @property
    def convergence_delta(self) -> float | None: ...
    @property
    def n_steps(self) -> int | None: ...
    @property
    def units(self) -> str: ...

    @property
    def scale(self) -> float: ...

TYPE_TO_SEE = "Type to see what the model predicts."
MetadataValues = dict[str, "str | list[str]"]  # an example's metadata as stored: field name -> text or texts


class ExplainTarget(StrEnum):
    """Which label an attribution explains: the model's, or the one the writer chose."""

    PREDICTED = "predicted"
    GOAL = "goal"


class DiffKind(StrEnum):
    EQUAL = "equal"
    DELETE = "delete"
    INSERT = "insert"


@dataclass(frozen=True, slots=True)
class InputFieldView:
    name: str
    label: str
    kind: InputKind
    placeholder: str = ""
    max_chars: int | None = None

    @property
    def is_context(self) -> bool:
        """Given by the round (premise, passage): read-only in the editor."""
        return self.kind is InputKind.CONTEXT


@dataclass(frozen=True, slots=True)
class EditorSpec:
    inputs: tuple[InputFieldView, ...] = ()
    labels: tuple[str, ...] = ()
    extractive: bool = False
    span_of: str | None = None  # the context input an extractive answer is chosen in
    prompt_enabled: bool = False

    @property
    def has_context(self) -> bool:
        return any(f.is_context for f in self.inputs)

    def limit(self, name: str) -> int | None:
        return next((f.max_chars for f in self.inputs if f.name == name), None)


@dataclass(frozen=True, slots=True)
class FormFieldView:
    name: str
    label: str
    kind: MetadataKind
    choices: tuple[str, ...] = ()
    allow_other: bool = False
    required: bool = False
    help: str = ""
    applies_to: tuple[str, ...] | None = None  # the labels it applies to; None: every label

    @property
    def is_text(self) -> bool:
        return self.kind is MetadataKind.TEXT

    @property
    def is_choice(self) -> bool:
        return self.kind is MetadataKind.CHOICE

    def applies(self, label: str | None) -> bool:
        return self.applies_to is None or label in self.applies_to


@dataclass(frozen=True, slots=True)
class EditorContent:
    """What the editor holds: inputs by name, the chosen label, the chosen answer span (QA)."""

    inputs: Mapping[str, str]
    label: str | None = None
    answer: Span | None = None

    def written(self, definition: TaskDefinition) -> bool:
        """Whether anything is written in the inputs the writer fills in."""
        return any(self.inputs.get(f.name, "").strip() for f in definition.written_inputs)


@dataclass(frozen=True, slots=True)
class TaskView:
    """What the page shows for a task before any round is known."""

    editor: EditorSpec
    form: tuple[FormFieldView, ...]
    labels: tuple[str, ...]
    guidelines: str  # markdown


def editor_spec(definition: TaskDefinition) -> EditorSpec:
    return EditorSpec(
        inputs=tuple(InputFieldView(f.name, f.label, f.kind, f.placeholder or "", f.max_chars) for f in definition.inputs),
        labels=tuple(definition.labels),
        extractive=definition.is_extractive,
        span_of=definition.answer.span_of if definition.answer else None,
        prompt_enabled=bool(definition.prompt and definition.prompt.enabled),
    )


def form_fields(definition: TaskDefinition) -> tuple[FormFieldView, ...]:
    return tuple(FormFieldView(f.name, f.label, f.kind, tuple(f.choices), f.allow_other, f.required, f.help or "",
                               tuple(f.applies_when.label) if f.applies_when else None)
                 for f in definition.metadata)


def task_view(definition: TaskDefinition) -> TaskView:
    return TaskView(editor_spec(definition), form_fields(definition), tuple(definition.labels),
                    definition.guidelines or "_This task has no guidelines._")


@dataclass(frozen=True, slots=True)
class MemberView:
    """One model's (or the ensemble's) say: a label with its probabilities, or an answer (QA)."""

    name: str
    label: str | None
    probabilities: Mapping[str, float]
    answer: str | None = None


@dataclass(frozen=True, slots=True)
class PredictionView:
    labels: tuple[str, ...]  # empty for extractive QA
    goal: str | None  # the writer's label
    fooled: bool | None  # None: no label (or answer) chosen yet
    combined: MemberView
    members: tuple[MemberView, ...] = ()
    latency_ms: float | None = None
    device: str = ""
    truncated: bool = False
    answer_f1: float | None = None  # QA: overlap of the model's answer with the writer's

    @property
    def verdict(self) -> str:
        if self.fooled is None:
            return "Choose your label to see whether the model is fooled"
        return "Model fooled" if self.fooled else "Not fooled yet"

    @property
    def title(self) -> str:
        return "Ensemble (mean)" if len(self.members) > 1 else self.members[0].name if self.members else "Prediction"

    @property
    def note(self) -> str:
        notes = []
        if self.latency_ms is not None:
            notes.append(f"{self.latency_ms:.1f} ms")
        if self.device:
            notes.append(self.device)
        if self.truncated:
            notes.append("the text is longer than the model reads: only its start was used")
        return " · ".join(notes)


def prediction_view(definition: TaskDefinition, prediction: EnsemblePrediction, names: Sequence[str],
                    devices: Sequence[str], content: EditorContent, fooled: bool | None) -> PredictionView:
    """The panel's view of ``prediction`` (members in ``names``' order) for the content on screen."""
    members = prediction.members
    combined_answer = members[0].answer.text if members and members[0].answer else None
    answer_f1 = None
    if definition.is_extractive and content.answer is not None and combined_answer is not None:
        answer_f1 = span_f1(combined_answer, content.answer.text)
    return PredictionView(
        labels=tuple(definition.labels), goal=content.label, fooled=fooled,
        combined=MemberView("", prediction.label, prediction.probabilities, combined_answer),
        members=tuple(MemberView(name, m.label, m.probabilities, m.answer.text if m.answer else None)
                      for name, m in zip(names, members)),
        latency_ms=prediction.latency_ms, device=", ".join(sorted(set(devices))),
        truncated=any(m.truncated for m in members), answer_f1=answer_f1)


@dataclass(frozen=True, slots=True)
class WordView:
    text: str
    start: int  # Python (code point) offsets in the segment's text
    end: int
    score: float  # normalised, in [-1, 1]
    raw: float | None = None  # in ``units`` of the target
    seen: bool = True  # False: beyond what the model reads


@dataclass(frozen=True, slots=True)
class SegmentView:
    name: str
    text: str
    words: tuple[WordView, ...]


@dataclass(frozen=True, slots=True)
class AttributionView:
    segments: tuple[SegmentView, ...]
    target: str
    predicted: str
    method: str
    latency_ms: float | None = None
    truncated: bool = False
    convergence_delta: float | None = None
    scale: float | None = None  # the raw effect at full colour; None: colours relative to the strongest word
    units: str = "probability"

    @property
    def measure(self) -> str:
        return f"{self.units} of {self.target}"

    def strongest(self) -> float:
        raws = [w.raw or 0.0 for s in self.segments for w in s.words if w.seen]
        return max(raws, key=abs, default=0.0)


def segment_names(definition: TaskDefinition) -> list[str]:
    """The heatmap's name for each text the model reads, in the model's order."""
    written = " / ".join(f.label for f in definition.written_inputs)
    if definition.is_extractive:
        return [written, definition.context_inputs[0].label]
    if definition.context_inputs:
        return [definition.context_inputs[0].label, written]
    return [written]


def written_segment(definition: TaskDefinition) -> int:
    """Which of the model's texts is the one the writer writes."""
    return 1 if definition.context_inputs and not definition.is_extractive else 0


def attribution_view(definition: TaskDefinition, attribution: Attribution, texts: Sequence[str]) -> AttributionView:
    names = segment_names(definition)
    segments = tuple(
        SegmentView(names[index] if index < len(names) else f"Text {index + 1}", text,
                    tuple(WordView(w.text, w.start, w.end, w.score, w.raw, w.seen)
                          for w in attribution.words if w.segment == index))
        for index, text in enumerate(texts))
    return AttributionView(
        segments, attribution.target, attribution.predicted,
        attribution.method + (f" ({attribution.n_steps} steps)" if attribution.n_steps else ""),
        attribution.latency_ms, attribution.truncated, attribution.convergence_delta,
        attribution.scale, attribution.units)


@dataclass(frozen=True, slots=True)
class DiffPiece:
    kind: DiffKind
    text: str


@dataclass(frozen=True, slots=True)
class PredictedView:
    label: str | None
    probabilities: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class PairSide:
    label: str | None  # the writer's label
    prediction: PredictedView | None


@dataclass(frozen=True, slots=True)
class AttributionChange:
    word: str
    before: float | None  # None: the word is not in that text
    after: float | None

    @property
    def delta(self) -> float:
        return (self.after or 0.0) - (self.before or 0.0)


@dataclass(frozen=True, slots=True)
class PairView:
    labels: tuple[str, ...]
    diff: tuple[DiffPiece, ...]
    edit_distance: int
    original: PairSide
    edited: PairSide
    target: str | None = None
    changes: tuple[AttributionChange, ...] | None = None  # None: not explained yet
    scale: float | None = None  # raw change at full colour; None: the attributions' own units
    units: str = "probability"


def diff_view(original: str, edited: str) -> tuple[DiffPiece, ...]:
    return tuple(DiffPiece(DiffKind(p["kind"]), p["text"]) for p in diff_pieces(original, edited))


def attribution_changes(before: Sequence[tuple[str, float]],
                        after: Sequence[tuple[str, float]]) -> tuple[AttributionChange, ...]:
    """How each word's attribution moved from the original to the edit, biggest moves first."""
    changes = [AttributionChange(word, b, a) for word, b, a in word_alignment(list(before), list(after))]
    return tuple(sorted(changes, key=lambda c: -abs(c.delta)))


def pair_view(labels: Sequence[str], original_text: str, edited_text: str, original: PairSide, edited: PairSide,
              target: str | None = None, changes: tuple[AttributionChange, ...] | None = None,
              scale: float | None = None, units: str = "probability") -> PairView:
    return PairView(tuple(labels), diff_view(original_text, edited_text), word_edits(original_text, edited_text)[1],
                    original, edited, target, changes, scale, units)
