"""What the Dashboard's "Writing assistant" section shows: each annotator's or round's figures with
and without the assistant, side by side, every cell formatted. Built by a pure function from the
desk's split (app.core.services.assistant_split); nothing here touches the database or Qt."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.core.formatting import MISSING, pct

# (header, tooltip) of the table's columns
COLUMNS: tuple[tuple[str, str], ...] = (
    ("Annotator", ""),
    ("Arm", "The arm of the writing session: assisted (suggestions offered) or unassisted (A-B's other half)"),
    ("Examples", "Submitted or flagged examples written in sessions of this arm"),
    ("Applied", "Examples a suggestion was applied to (share of the arm's examples)"),
    ("MER", "Model error rate: model-fooling ÷ submitted"),
    ("vMER", "Validated model error rate: fooling and decided correct ÷ submitted"),
    ("Rejected", "Decided 'incorrect' ÷ decided"),
    ("Time / example", "Median writing time per submitted example"),
)
SPLIT_CHOICES: tuple[tuple[str, str], ...] = (("Per annotator", "annotator"), ("Per round", "round"))
FEW = 30  # fewer examples on a side than this: the headline says differences are mostly noise
# The split's sides as app.core.tasks.figures names them (not imported: widgets import this module,
# and figures' SQL forms reach sqlalchemy).
ASSISTED, UNASSISTED = "assisted", "unassisted"
ARM_NAMES = {ASSISTED: "Assisted", UNASSISTED: "Unassisted"}


class _Side(Protocol):
    arm: str
    submitted: int
    applied: int
    fooled: int

    @property
    def mer(self) -> float | None: ...

    @property
    def vmer(self) -> float | None: ...

    @property
    def rejection_rate(self) -> float | None: ...

    @property
    def applied_share(self) -> float | None: ...

    median_seconds: float | None


class _Group(Protocol):
    key: str
    name: str
    assisted: _Side | None
    unassisted: _Side | None


class Split(Protocol):
    by: str
    groups: Sequence[_Group]
    all_assisted: _Side | None
    all_unassisted: _Side | None
    outside: int


@dataclass(frozen=True, slots=True)
class SplitRow:
    key: str  # the group's id ("" for the totals)
    cells: tuple[str, ...]  # one per column
    assisted: bool
    first_of_group: bool  # the group's name is shown on its first row only
    total: bool = False


@dataclass(frozen=True, slots=True)
class AssistantSplitView:
    by: str
    headers: tuple[str, ...]
    tooltips: tuple[str, ...]
    rows: tuple[SplitRow, ...]
    headline: str  # rich text: the comparison over everything in view
    note: str  # what is outside the split, and why
    empty: bool


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    return f"{value:.0f} s" if value < 120 else f"{value / 60:.1f} min"


def _cells(name: str, side: _Side) -> tuple[str, ...]:
    applied = (f"{side.applied} ({pct(side.applied_share)})" if side.arm == ASSISTED else MISSING)
    return (name, ARM_NAMES[side.arm], f"{side.submitted:,}", applied, pct(side.mer), pct(side.vmer),
            pct(side.rejection_rate), seconds(side.median_seconds))


def _points(a: float | None, b: float | None) -> str:
    return MISSING if a is None or b is None else f"{100 * (a - b):+.1f} points"


def wilson_interval(part: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a proportion (stays within 0–1 however few examples)."""
    p = part / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def mer_difference_interval(a: _Side, b: _Side) -> tuple[float, float] | None:
    """A 95% interval for MER(assisted) − MER(unassisted): Newcombe's hybrid score interval, built
    from each arm's Wilson interval, so that it is sound for small arms and rates near 0 or 1."""
    if not a.submitted or not b.submitted or a.mer is None or b.mer is None:
        return None
    (l1, u1), (l2, u2) = wilson_interval(a.fooled, a.submitted), wilson_interval(b.fooled, b.submitted)
    diff = a.mer - b.mer
    return (diff - math.sqrt((a.mer - l1) ** 2 + (u2 - b.mer) ** 2),
            diff + math.sqrt((u1 - a.mer) ** 2 + (b.mer - l2) ** 2))


def _headline(a: _Side | None, b: _Side | None) -> str:
    if a is None or b is None:
        which = "assisted" if a is None else "unassisted"
        return (f"<b>No {which} examples in view.</b> The comparison needs both arms: set the round's "
                "writing assistant to A-B (Round menu, or <code>dynadesk rounds set --assistant ab</code>).")
    line = (f"<b>Assisted vs unassisted:</b> MER {pct(a.mer)} vs {pct(b.mer)} ({_points(a.mer, b.mer)}"
            f"{_interval(a, b)}), vMER {pct(a.vmer)} vs {pct(b.vmer)}, rejected {pct(a.rejection_rate)} vs "
            f"{pct(b.rejection_rate)}, time per example {seconds(a.median_seconds)} vs {seconds(b.median_seconds)}. "
            f"A suggestion was applied to {a.applied} of {a.submitted} assisted examples.")
    if min(a.submitted, b.submitted) < FEW:
        line += f" <i>Fewer than {FEW} examples on a side: differences are mostly noise.</i>"
    return line


def _interval(a: _Side, b: _Side) -> str:
    interval = mer_difference_interval(a, b)
    return "" if interval is None else f"; 95% CI {100 * interval[0]:+.1f} to {100 * interval[1]:+.1f}"


def build_split(split: Split) -> AssistantSplitView:
    first = "Annotator" if split.by == "annotator" else "Round"
    headers = (first,) + tuple(h for h, _ in COLUMNS[1:])
    rows: list[SplitRow] = []
    totals = [s for s in (split.all_assisted, split.all_unassisted) if s is not None]
    for i, side in enumerate(totals):
        rows.append(SplitRow("", _cells("All in view" if i == 0 else "", side), side.arm == ASSISTED,
                             first_of_group=i == 0, total=True))
    for group in split.groups:
        sides = [s for s in (group.assisted, group.unassisted) if s is not None]
        for i, side in enumerate(sides):
            rows.append(SplitRow(group.key, _cells(group.name if i == 0 else "", side), side.arm == ASSISTED,
                                 first_of_group=i == 0))
    outside = (f"{split.outside:,} example{'s' if split.outside != 1 else ''} in view "
               f"{'were' if split.outside != 1 else 'was'} written without the assistant (the round's setting was "
               f"off, or before it existed) and {'are' if split.outside != 1 else 'is'} outside the split. "
               if split.outside else "")
    note = (outside + "The fair comparison is within A-B rounds: each writer's sessions alternate between the arms "
            "at random, so both arms have the same writers, rounds and contexts.")
    return AssistantSplitView(split.by, headers, tuple(t for _, t in COLUMNS), tuple(rows),
                              _headline(split.all_assisted, split.all_unassisted) if totals else
                              "<b>No examples with an assistant arm in view.</b> Set a round's writing assistant to "
                              "A-B (Round menu, or <code>dynadesk rounds set --assistant ab</code>).",
                              note, not rows)
