"""The Review tab's view-models: the filter a lead sets, the choices it offers, the figures over the
matching examples, and the selected example with every verdict. Built by pure functions; the
controller fetches on the database worker."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Protocol

from app.core.domain import ReviewAction, ValidationMode, ValidationState, Verdict
from app.core.tasks.definition import MetadataKind
from app.views.example import ExampleDetailView, Pairs, output_rows, state_text, text_of
from app.views.validate import validation_item

if TYPE_CHECKING:
    from app.core.services.lead import ReviewRecord
    from app.core.storage.models import Example
    from app.core.tasks.definition import TaskDefinition

# A validator who says "incorrect" or "flagged" disagrees with the author, whatever the others said.
OBJECTING = (Verdict.INCORRECT, Verdict.FLAGGED)


@dataclass(frozen=True, slots=True)
class ReviewFilterValues:
    """Every filter of the review, as the lead set it (None or empty: any)."""

    text: str = ""
    min_disagreements: int | None = None
    min_flags: int | None = None
    annotator: uuid.UUID | None = None
    round: uuid.UUID | None = None
    label: str | None = None
    fooled: bool | None = None
    validation_state: ValidationState | None = None
    review_states: tuple[ReviewAction | None, ...] = ()  # (None,): not reviewed yet
    objected: bool | None = None
    facets: tuple[tuple[str, str], ...] = ()  # (field, the value it must have)
    near_duplicates: bool = False  # clusters of near-duplicates instead of the table (round and annotator apply)


@dataclass(frozen=True, slots=True)
class FacetView:
    name: str
    question: str
    choices: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ReviewChoicesView:
    """What the filters offer for a task, and its agreement threshold (the desk's and the task's own)."""

    task_id: uuid.UUID
    annotators: tuple[tuple[str, str], ...]  # (name, id)
    rounds: tuple[tuple[str, str], ...]  # ("Round 2 (open)", id)
    labels: tuple[str, ...]
    facets: tuple[FacetView, ...]
    threshold: int
    default_threshold: int


class _Named(Protocol):
    id: uuid.UUID
    display_name: str


class _Round(Protocol):
    id: uuid.UUID
    number: int
    status: str


def review_choices(task_id: uuid.UUID, definition: TaskDefinition, rounds: Iterable[_Round],
                   people: Iterable[_Named], threshold: int) -> ReviewChoicesView:
    return ReviewChoicesView(
        task_id=task_id, annotators=tuple((p.display_name, str(p.id)) for p in people),
        rounds=tuple((f"Round {r.number} ({r.status})", str(r.id)) for r in rounds), labels=tuple(definition.labels),
        facets=tuple(FacetView(f.name, f.label, tuple(f.choices)) for f in definition.metadata
                     if f.kind != MetadataKind.TEXT),
        threshold=threshold, default_threshold=definition.agreement_threshold)


@dataclass(frozen=True, slots=True)
class ReviewFiguresView:
    """Counts over the matching examples, written out ("1,204")."""

    examples: str
    objected: str
    disagreements: str
    flagged: str
    decided: str
    unvalidated: str
    fooled: str
    accepted: str
    returned: str


def review_figures(summary: Mapping[str, int]) -> ReviewFiguresView:
    """``summary``: ReviewService.summary's counts."""
    return ReviewFiguresView(**{f.name: f"{summary.get(f.name, 0):,}" for f in fields(ReviewFiguresView)})


@dataclass(frozen=True, slots=True)
class ReviewItemView:
    """The selected example as a lead reviews it: the detail (verdicts first) and who wrote it."""

    id: uuid.UUID
    author_id: uuid.UUID
    author: str
    label: str | None
    labels: tuple[str, ...]
    detail: ExampleDetailView


def review_item(example: Example, definition: TaskDefinition, names: Mapping[uuid.UUID, str],
                models: Mapping[uuid.UUID, str], original: Example | None, history: Iterable[ReviewRecord]) -> ReviewItemView:
    """``names``: people by id; ``models``: model names by id; ``original``: for a perturbation, the example
    it edits; ``history``: the lead reviews of the example, oldest first."""
    shown = validation_item(example, definition, models, original)
    verdicts = []
    for v in example.validations:
        who = names.get(v.validator_id, "?") + (" (LEAD, final)" if v.mode == ValidationMode.LEAD else "")
        verdicts.append(f"{v.verdict}{' → ' + v.corrected_label if v.corrected_label else ''}"
                        f"{' — ' + v.reason if v.reason else ''}{' · model note: ' + v.model_note if v.model_note else ''}"
                        f" — {who}")
    reviews = [f"{r.action} by {r.lead} {r.at:%Y-%m-%d %H:%M}{': ' + r.comment if r.comment else ''}" for r in history]
    inputs = shown.context + (shown.written if shown.pair is None else
                              (("Original", shown.pair.original.text), ("Perturbation", shown.pair.edited.text)))
    decided = example.decided_verdict or "—"
    if example.decided_verdict == Verdict.INCORRECT:
        decided += f" → {example.decided_label}"
    author = names.get(example.author_id, "?")
    facts: Pairs = (("author", author),
                    ("validation", f"{state_text(example.validation_state)} · decided: {decided}"),
                    ("said incorrect or flagged", str(sum(v.verdict in OBJECTING for v in example.validations))),
                    ("peer verdicts against the majority", text_of(example.disagreement_count)),
                    ("flags", text_of(example.flag_count)),
                    *[("lead review", text) for text in reviews], ("id", str(example.id)))
    detail = ExampleDetailView(
        inputs=inputs, label=shown.label, fooled=example.model_fooled, meta=shown.explanations,
        outputs=output_rows(example, models, unknown="target model"), validations=tuple(verdicts), facts=facts,
        review_state=shown.review_state, review_comment=shown.review_comment, verdicts_first=True)
    return ReviewItemView(id=example.id, author_id=example.author_id, author=author, label=shown.label,
                          labels=shown.labels, detail=detail)


def accept_text(item: ReviewItemView) -> str:
    """The accept button's words for the selected example's author."""
    return f"Accept {item.author}'s decided work…"
