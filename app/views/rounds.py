"""What the round dialog shows, and the changes it asks for.

Built by pure functions from the round service's summaries (``round_items``, ``round_view``); the
dialog's edits leave as a :class:`RoundChanges`. Qt-free, tested in tests/views/test_rounds.py.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from app.core.assist.arms import MODE_WORDS
from app.core.domain import FooledRule, RoundStatus
from app.core.formatting import MISSING
from app.core.int8_status import int8_detail, int8_status

CONTEXT_TOOLTIP_CHARS = 2000
# The writing assistant's round setting, as the dialog offers it: (text, value).
ASSISTANT_CHOICES: tuple[tuple[str, str], ...] = tuple((words[0].upper() + words[1:], mode)
                                                      for mode, words in MODE_WORDS.items())


class _Round(Protocol):
    id: uuid.UUID
    number: int
    status: str


class _Settings(Protocol):
    label_start: str
    fixed_label: str | None
    keep_label_after_submit: bool
    context_policy: str
    context_tag: str | None
    assistant: str


class _Summary(_Round, Protocol):
    description: str
    goal_message: str
    fooled_rule: str
    settings: _Settings
    models: Sequence[tuple[uuid.UUID, str, str]]  # id, name, sha256: the round's targets in ensemble order
    opened_at: datetime | None
    closed_at: datetime | None
    contexts: int
    examples: int
    fooled: int


class _Context(Protocol):
    text: str
    tag: str
    times_used: int
    examples: int

    @property
    def fooling_rate(self) -> float | None: ...


class _Model(Protocol):
    id: uuid.UUID
    name: str
    sha256: str


@dataclass(frozen=True, slots=True)
class RoundItem:
    """A round in the dialog's list."""

    id: uuid.UUID
    number: int
    status: RoundStatus
    text: str


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """A model that can be a target of the round: checked when it is one."""

    id: uuid.UUID
    text: str
    checked: bool
    tooltip: str = ""  # the int8 check's figures (app.core.int8_status), when the model has them


@dataclass(frozen=True, slots=True)
class ContextRow:
    text: str  # on one line
    tooltip: str
    tag: str
    served: str
    examples: str
    fooling_rate: str


@dataclass(frozen=True, slots=True)
class RoundView:
    id: uuid.UUID
    number: int
    status: RoundStatus
    heading: str  # rich text: number, status, dates and counts
    description: str
    goal_message: str
    fooled_rule: FooledRule
    label_start: str
    fixed_label: str | None
    keep_label_after_submit: bool
    context_policy: str
    context_tag: str
    assistant: str  # off / on / ab
    models: tuple[ModelChoice, ...]  # the round's targets first, in ensemble order, then the other candidates
    contexts: tuple[ContextRow, ...]
    context_count: str

    @property
    def is_open(self) -> bool:
        return self.status is RoundStatus.OPEN


@dataclass(frozen=True, slots=True)
class RoundChanges:
    """A lead's edits of a round's settings, as the dialog asks for them."""

    description: str
    goal_message: str
    fooled_rule: FooledRule
    label_start: str
    fixed_label: str | None
    keep_label_after_submit: bool
    context_policy: str
    context_tag: str | None
    assistant: str = "off"  # the writing assistant: off / on / ab

    def settings(self) -> dict[str, object]:
        """The round settings' fields (for app.core.services.rounds.parse_settings)."""
        return {"label_start": self.label_start, "fixed_label": self.fixed_label,
                "keep_label_after_submit": self.keep_label_after_submit, "context_policy": self.context_policy,
                "context_tag": self.context_tag, "assistant": self.assistant}


def round_items(rounds: Sequence[_Round]) -> tuple[RoundItem, ...]:
    return tuple(RoundItem(r.id, r.number, RoundStatus(r.status), f"Round {r.number} · {r.status}") for r in rounds)


def _rate(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.0f}%"


def context_rows(contexts: Sequence[_Context]) -> tuple[ContextRow, ...]:
    return tuple(ContextRow(" ".join(c.text.split()), c.text[:CONTEXT_TOOLTIP_CHARS], c.tag, str(c.times_used),
                            str(c.examples), _rate(c.fooling_rate)) for c in contexts)


def context_count(total: int, shown: int) -> str:
    return f"{total:,} contexts" + (f" (the {shown} most served shown)" if total > shown else "")


def model_choice(model: _Model, checked: bool) -> ModelChoice:
    """A model in the list: name and checksum, and the int8 check's outcome where it has one."""
    provenance = getattr(model, "provenance", None)
    status, detail = int8_status(provenance), int8_detail(provenance)
    if status and not status.startswith("int8 passed"):
        status += " (hover for why)"
    return ModelChoice(model.id, f"{model.name}  ({model.sha256[:12]})" + (f"\n{status}" if status else ""),
                       checked, detail)


def round_view(summary: _Summary, contexts: Sequence[_Context], candidates: Sequence[_Model]) -> RoundView:
    """The dialog's view of a round: its settings, its models among the candidates, its most served contexts."""
    opened = f"{summary.opened_at:%Y-%m-%d}" if summary.opened_at else MISSING
    dates = f"opened {opened}" + (f", closed {summary.closed_at:%Y-%m-%d}" if summary.closed_at else "")
    chosen = [model_id for model_id, _name, _sha in summary.models]
    ordered = sorted(candidates, key=lambda m: (m.id not in chosen, chosen.index(m.id) if m.id in chosen else 0))
    settings = summary.settings
    return RoundView(
        id=summary.id, number=summary.number, status=RoundStatus(summary.status),
        heading=(f"<b>Round {summary.number}</b> · {summary.status} · {dates} · "
                 f"{summary.examples} examples, {summary.fooled} fooled the model"),
        description=summary.description, goal_message=summary.goal_message,
        fooled_rule=FooledRule(summary.fooled_rule), label_start=settings.label_start,
        fixed_label=settings.fixed_label, keep_label_after_submit=settings.keep_label_after_submit,
        context_policy=settings.context_policy, context_tag=settings.context_tag or "",
        assistant=str(settings.assistant),
        models=tuple(model_choice(m, m.id in chosen) for m in ordered),
        contexts=context_rows(contexts), context_count=context_count(summary.contexts, len(contexts)),
    )
