"""The writing assistant's split of a desk's figures: MER, vMER, rejection rate and time per
example on the assisted and unassisted side of each annotator or round (the figures' one
definition is ``app.core.tasks.figures.arm_split``; the sync server's team figures use it too).

Two forms: ``snapshot_split`` over the dashboard's numpy snapshot (what the Dashboard shows, for its
filters, in milliseconds) and ``assistant_split`` over the stored records (``arm_split`` itself, as
the server computes it); the tests hold them to the same figures."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from sqlalchemy import String, select, type_coerce

from app.core.services.dashboard_snapshot import (
    ARM_CODES,
    DECIDED_CODES,
    STATUS_CODES,
    DashboardFilter,
    DashboardSnapshot,
)
from app.core.services.dashboard_tables import _group_median
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
    # the ids as SQLite stores them (32 hex digits, as uuid.hex): no UUID object per row
    key = type_coerce({"annotator": Example.author_id, "round": Example.round_id}[by], String)
    query = select(key, Example.status, Example.model_fooled, Example.decided_verdict, Example.time_spent_ms,
                   *rule.sql_arm_fields(Example.assistance)).where(rule.sql_submitted(Example.status, Example.source))
    if task_id is not None:
        query = query.where(Example.task_id == task_id)
    if round_ids:
        query = query.where(Example.round_id.in_(list(round_ids)))
    if author_ids:
        query = query.where(Example.author_id.in_(list(author_ids)))
    with db.read() as session:
        rows = [rule.ArmRow(*row) for row in session.execute(query)]
        figures, outside = rule.arm_split(rows, with_total=True)
        ids = list({uuid.UUID(f.key) for f in figures if f.key != rule.TOTAL_KEY})
        names = {k.hex: name for k, name in group_names(session, by, ids).items()}
    sides = {f.arm: f for f in figures if f.key == rule.TOTAL_KEY}
    groups = [f for f in figures if f.key != rule.TOTAL_KEY]
    return AssistantSplit(by, pair_up(groups, names), sides.get(rule.ASSISTED), sides.get(rule.UNASSISTED), outside)


def snapshot_split(snapshot: DashboardSnapshot, flt: DashboardFilter, by: SplitBy) -> AssistantSplit:
    """The same split (``figures.arm_split``'s rule) over the dashboard's numpy snapshot, for its
    filter: milliseconds over 100k examples, where reading the records takes seconds."""
    ex = snapshot.examples
    mask = snapshot.example_mask(flt) & rule.submitted_mask(ex["status"], STATUS_CODES, ex["imported"])
    arm = ex["arm"]
    outside = int((mask & (arm < 0)).sum())
    rows = np.nonzero(mask & (arm >= 0))[0]
    codes = snapshot.people if by == "annotator" else snapshot.rounds
    total = len(codes)  # the group code of every group together
    group = (ex["author"] if by == "annotator" else ex["round"])[rows].astype(np.int64)
    side = (arm[rows] == ARM_CODES["off"]).astype(np.int64)  # 0: assisted, 1: unassisted
    # each example counts in its group's cell and in the totals' cell: (group, side) -> group * 2 + side
    cells = np.concatenate([group * 2 + side, total * 2 + side])
    n = (total + 1) * 2
    twice = np.concatenate([rows, rows])
    fooling = rule.fooling_mask(ex["fooled"][twice])
    decided, times = ex["decided"][twice], ex["time_ms"][twice]

    def count(selection: np.ndarray) -> np.ndarray:
        return np.bincount(cells[selection], minlength=n)[:n]

    timed = times > 0
    submitted = np.bincount(cells, minlength=n)[:n]
    applied, fooled = count(ex["applied"][twice]), count(fooling)
    validated = count(rule.validated_mask(fooling, decided, DECIDED_CODES))
    decided_n, rejected = count(decided >= 0), count(decided == DECIDED_CODES[rule.REJECTING_VERDICT.value])
    medians = _group_median(cells[timed], times[timed], n)
    figures, totals = [], {}
    for cell in np.nonzero(submitted)[0].tolist():
        code, side_code = divmod(cell, 2)
        key = rule.TOTAL_KEY if code == total else codes.values[code]
        figure = rule.ArmFigures(
            key, rule.UNASSISTED if side_code else rule.ASSISTED, submitted=int(submitted[cell]),
            applied=int(applied[cell]), fooled=int(fooled[cell]), validated_fooling=int(validated[cell]),
            decided=int(decided_n[cell]), rejected=int(rejected[cell]),
            median_seconds=None if np.isnan(medians[cell]) else float(medians[cell]) / 1000)
        if code == total:
            totals[figure.arm] = figure
        else:
            figures.append(figure)
    names = {key: _snapshot_name(snapshot, key, by) for key in {f.key for f in figures}}
    return AssistantSplit(by, pair_up(figures, names), totals.get(rule.ASSISTED), totals.get(rule.UNASSISTED),
                          outside)


def _snapshot_name(snapshot: DashboardSnapshot, key: str, by: SplitBy) -> str:
    if by == "round" and key in snapshot.round_numbers:
        task_id, number = snapshot.round_numbers[key]
        return f"{snapshot.tasks.definition(uuid.UUID(task_id)).name} · round {number}"
    return snapshot.names.get(key, key)
