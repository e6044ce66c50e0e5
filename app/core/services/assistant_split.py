"""The writing assistant's split of a desk's figures: MER, vMER, rejection rate and time per
example on the assisted and unassisted side of each annotator or round (the figures' one
definition is ``app.core.tasks.figures.arm_split``; the sync server's team figures use it too)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal, Sequence

from sqlalchemy import select

from app.core.services.stats import group_names
from app.core.storage.db import Database
from app.core.storage.models import Example
from app.core.tasks import figures as rule

SplitBy = Literal["annotator", "round"]


@dataclass(frozen=True)
class SplitGroup:
    """One annotator or round: its figures with and without the assistant (None: no such examples)."""

    key: str
    name: str
    assisted: rule.ArmFigures | None
    unassisted: rule.ArmFigures | None


@dataclass(frozen=True)
class AssistantSplit:
    by: SplitBy
    groups: list[SplitGroup]
    all_assisted: rule.ArmFigures | None  # every group together
    all_unassisted: rule.ArmFigures | None
    outside: int  # submitted examples without an arm (the assistant off, or written before it)


def pair_up(figures: Sequence[rule.ArmFigures], names: dict[str, str]) -> list[SplitGroup]:
    """Each group's two sides side by side, in the order of their names."""
    by_key: dict[str, dict[str, rule.ArmFigures]] = {}
    for f in figures:
        by_key.setdefault(f.key, {})[f.arm] = f
    groups = [SplitGroup(key, names.get(key, key), sides.get(rule.ASSISTED), sides.get(rule.UNASSISTED))
              for key, sides in by_key.items()]
    return sorted(groups, key=lambda g: g.name.casefold())


def assistant_split(db: Database, by: SplitBy, *, task_id: uuid.UUID | None = None,
                    round_ids: Sequence[uuid.UUID] = (), author_ids: Sequence[uuid.UUID] = ()) -> AssistantSplit:
    """The split over the desk's submitted examples (of a task, rounds and authors when given)."""
    key = {"annotator": Example.author_id, "round": Example.round_id}[by]
    query = select(key, Example.status, Example.model_fooled, Example.decided_verdict, Example.time_spent_ms,
                   Example.assistance).where(rule.sql_submitted(Example.status))
    if task_id is not None:
        query = query.where(Example.task_id == task_id)
    if round_ids:
        query = query.where(Example.round_id.in_(list(round_ids)))
    if author_ids:
        query = query.where(Example.author_id.in_(list(author_ids)))
    with db.read() as session:
        rows = [rule.ArmRow(k.hex, *rest) for k, *rest in session.execute(query)]
        figures, outside = rule.arm_split(rows)
        ids = list({uuid.UUID(f.key) for f in figures})
        names = {k.hex: name for k, name in group_names(session, by, ids).items()}
    everyone, _ = rule.arm_split(rule.ArmRow("", r.status, r.fooled, r.decided_verdict, r.time_spent_ms, r.assistance)
                                 for r in rows)
    sides = {f.arm: f for f in everyone}
    return AssistantSplit(by, pair_up(figures, names), sides.get(rule.ASSISTED), sides.get(rule.UNASSISTED), outside)
