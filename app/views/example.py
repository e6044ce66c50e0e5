"""What the example widgets show, shared by the Data, Validate and Review tabs: a row of the lazy
table, the read-only detail of one example, and the verdict a form emits.

Built by pure functions from the stored example (or a review row) and its task definition; the
caller fetches those on the database worker. Import-light: widgets import this module, so the
storage and service types appear only under ``TYPE_CHECKING``.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.core.domain import ExampleStatus, ReviewAction, ValidationState, Verdict
from app.core.wellbeing.blur import blurred

if TYPE_CHECKING:
    from app.core.services.review import ExampleRow
    from app.core.storage.models import Example
    from app.core.tasks.definition import TaskDefinition
    from app.views.wellbeing import BlurView

Pairs = tuple[tuple[str, str], ...]  # (name, text) in the order shown


def text_of(value: Any) -> str:
    """A stored value as the widgets write it: nothing for None."""
    return "" if value is None else str(value)


def state_text(state: str | None) -> str:
    """A validation state as a person reads it: "in progress", not "in_progress"."""
    return (state or "").replace("_", " ")



@dataclass(frozen=True, slots=True)
class ExampleRowView:
    id: uuid.UUID
    text: str
    label: str | None
    fooled: bool | None
    status: ExampleStatus
    validation: str  # the validation state, as read ("in progress")
    validations: int
    disagreements: int
    flags: int
    decided: Verdict | None
    decided_label: str | None
    review_state: ReviewAction | None
    review_comment: str | None
    objections: int
    round: int
    author: str
    submitted_at: str  # "2026-01-31 14:05", or empty
    perturbation_of: uuid.UUID | None = None


def row_view(row: ExampleRow, blur_words: Sequence[str] = ()) -> ExampleRowView:
    """``blur_words``: the task's blur list where the reader reads this table masked (the row's text
    is then shown masked, as every reading view shows it)."""
    return ExampleRowView(
        id=row.id, text=blurred(row.text, blur_words), label=row.true_label, fooled=row.model_fooled, status=ExampleStatus(row.status),
        validation=state_text(row.validation_state), validations=row.validation_count,
        disagreements=row.disagreement_count, flags=row.flag_count,
        decided=Verdict(row.decided_verdict) if row.decided_verdict else None, decided_label=row.decided_label,
        review_state=ReviewAction(row.review_state) if row.review_state else None,
        review_comment=row.review_comment, objections=row.objections, round=row.round_number, author=row.author,
        submitted_at=row.submitted_at.strftime("%Y-%m-%d %H:%M") if row.submitted_at else "",
        perturbation_of=row.perturbation_of,
    )



@dataclass(frozen=True, slots=True)
class OriginalView:
    """For a perturbation, the example it edits; text None when it is not on this desk yet."""

    text: str | None
    label: str | None


@dataclass(frozen=True, slots=True)
class OutputRowView:
    model: str
    label: str
    probabilities: str  # "hate 0.91, not hate 0.09"


@dataclass(frozen=True, slots=True)
class ExampleDetailView:
    inputs: Pairs
    label: str | None
    fooled: bool | None
    meta: Pairs
    outputs: tuple[OutputRowView, ...]
    validations: tuple[str, ...]  # one line per verdict
    facts: Pairs
    review_state: ReviewAction | None = None
    review_comment: str | None = None
    original: OriginalView | None = None
    verdicts_first: bool = False  # a lead adjudicating reads the verdicts before the text
    blur: BlurView | None = None  # the shown texts (``shown_texts``), masked as the reader chose

    @property
    def shown_texts(self) -> tuple[str, ...]:
        """The example's texts in the order the detail shows them: the original it edits, its inputs, then
        its metadata answers (the author's explanations quote the words too)."""
        before = (self.original.text,) if self.original is not None and self.original.text is not None else ()
        return (*before, *(value for _name, value in self.inputs), *(value for _name, value in self.meta))


def answer_label(example: Example, definition: TaskDefinition) -> str | None:
    """The author's label, or for extractive QA the answer's text."""
    return (example.answer or {}).get("text") if definition.is_extractive else example.true_label


def explanations(example: Example, definition: TaskDefinition) -> Pairs:
    """The author's metadata answers, in the task's order, as (question, answer)."""
    out = []
    for field in definition.metadata:
        value = example.meta.get(field.name)
        if value in (None, "", []):
            continue
        out.append((field.label, ", ".join(value) if isinstance(value, list) else str(value)))
    return tuple(out)


def probabilities_text(probabilities: Mapping[str, float]) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in probabilities.items())


def output_rows(example: Example, models: Mapping[uuid.UUID, str], unknown: str | None = None) -> tuple[OutputRowView, ...]:
    """The stored model outputs; a model not on this desk goes by ``unknown`` (else by its id)."""
    return tuple(OutputRowView(models.get(o.model_id, str(o.model_id) if unknown is None else unknown), o.label,
                               probabilities_text(o.probabilities)) for o in example.outputs)


def _review(example: Example) -> ReviewAction | None:
    return ReviewAction(example.review_state) if example.review_state else None


def data_detail(example: Example, definition: TaskDefinition, names: Mapping[uuid.UUID, str],
                models: Mapping[uuid.UUID, str], original: Example | None = None) -> ExampleDetailView:
    """Everything the Data tab's detail pane shows. ``original``: for a perturbation, the example it
    edits (None when that is not on this desk yet)."""
    labels = {f.name: f.label for f in definition.inputs}
    meta_labels = {f.name: f.label for f in definition.metadata}
    if example.perturbation_of is None:
        before = None
    elif original is None:
        before = OriginalView(None, None)
    else:
        before = OriginalView(original.text, answer_label(original, definition))
    origin = example.origin
    return ExampleDetailView(
        review_state=_review(example), review_comment=example.review_comment, original=before,
        inputs=tuple((labels.get(k, k), text_of(v)) for k, v in example.inputs.items()),
        label=answer_label(example, definition), fooled=example.model_fooled,
        meta=tuple((meta_labels.get(k, k), ", ".join(v) if isinstance(v, list) else text_of(v))
                   for k, v in example.meta.items()),
        outputs=output_rows(example, models),
        validations=tuple(f"{v.verdict}{' → ' + v.corrected_label if v.corrected_label else ''}"
                          f"{' (' + v.reason + ')' if v.reason else ''} — {names.get(v.validator_id, '?')}, {v.mode}"
                          for v in example.validations),
        facts=(("id", str(example.id)), *_authorship(example, names),
               ("status", example.status + (f" ({example.status_reason})" if example.status_reason else "")),
               ("validation", state_text(example.validation_state)),
               ("time spent", f"{example.time_spent_ms / 1000:.0f} s"),
               ("edit distance (words)", text_of(example.edit_distance) if example.edit_distance is not None else "—"),
               ("origin", origin.get("kind", "") + (f" {origin.get('format')}" if origin.get("format") else "")),
               *recheck_facts(origin)),
    )


def _shown_probabilities(probabilities: Any) -> str:
    """Probabilities another desk wrote (an example's origin): shown as they are when they are not numbers."""
    if not isinstance(probabilities, Mapping):
        return "?"
    return ", ".join(f"{text_of(k)} {v:.2f}" if isinstance(v, int | float) else f"{text_of(k)} {text_of(v)}"
                     for k, v in probabilities.items())


def recheck_facts(origin: Mapping[str, Any]) -> Pairs:
    """What the writer saw, for an example re-checked against the team's target after it was written against
    another form of the same model (``sync.target_recheck``): its outputs are the target's now."""
    rechecked = origin.get("rechecked")
    if not isinstance(rechecked, Mapping):
        return ()
    seen = [w for w in rechecked.get("written_against") or [] if isinstance(w, Mapping)]
    before = rechecked.get("model_fooled_before")
    said = "fooled" if before else "not fooled" if before is False else "not judged"
    models = "; ".join(f"{text_of(w.get('name') or str(w.get('model_sha256', '?'))[:12] + '…')}: "
                       f"{text_of(w.get('label', '?'))} ({_shown_probabilities(w.get('probabilities'))})" for w in seen)
    return (("written against", f"{models or '?'} — {said} when written"),
            ("re-checked", f"against the team's target of its round, {_utc_minute(rechecked.get('at'))}"))


def _utc_minute(at: Any) -> str:
    """'2026-11-29 09:05 UTC' from a stored UTC ISO time (as written by ``app.core.domain.utcnow``)."""
    text = text_of(at)
    return f"{text[:10]} {text[11:16]} UTC" if len(text) >= 16 else text or "?"



def _authorship(example: Example, names: Mapping[uuid.UUID, str]) -> Pairs:
    """Who wrote it; for a variant the desk generated, from which seed, by which rule and for whom (never
    anyone's own writing; the seed's text is not repeated here, where no blur is drawn)."""
    origin = example.origin or {}
    if origin.get("kind") != "variant":
        return (("author", names.get(example.author_id, "?")),)
    rule, edit = str(origin.get("rule") or "?"), str(origin.get("edit_type") or "")
    return (("generated by", names.get(example.author_id, "?")),
            ("variant of seed", str(origin.get("seed_id") or "?")),
            ("rule", f"{rule}: {edit}" if edit and edit != rule else rule))


@dataclass(frozen=True, slots=True)
class DataFilterValues:
    """The Data tab's filter bar as the user set it (None: any)."""

    text: str = ""
    mine: bool = False  # only the working profile's examples
    returned: bool = False  # only the working profile's examples a lead returned
    round: uuid.UUID | None = None
    label: str | None = None
    fooled: bool | None = None
    validation_state: ValidationState | None = None
    status: ExampleStatus | None = None



@dataclass(frozen=True, slots=True)
class VerdictChoice:
    verdict: Verdict | None
    corrected_label: str | None = None
    reason: str | None = None
    model_note: str | None = None


def verdict_text(choice: VerdictChoice) -> str:
    """"incorrect → not hate": the verdict as the stored-message says it."""
    return text_of(choice.verdict) + (f" → {choice.corrected_label}" if choice.corrected_label else "")


def verdict_problem(choice: VerdictChoice, has_labels: bool) -> str | None:
    """What the form must say before sending ``choice``, or None when it can be sent."""
    if choice.verdict is None:
        return "Choose a verdict: 1 correct, 2 incorrect, 3 flag."
    if choice.verdict == Verdict.INCORRECT and not choice.corrected_label:
        return "Choose the corrected label." if has_labels else "Type the corrected answer."
    if choice.verdict in (Verdict.INCORRECT, Verdict.FLAGGED) and not choice.reason:
        return "Explain why the label is wrong." if choice.verdict == Verdict.INCORRECT else "Give a reason for the flag."
    return None
