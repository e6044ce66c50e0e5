"""The model leaderboard's board: its rows (models), columns (rounds' held-out splits) and cells,
their states, and how a figure reads. Plain data, import-light (no storage, no model runtime), so
that view-models may build on it; the leaderboard service (leaderboard.py) reads and fills it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from app.core.errors import DynadeskError

FORMAT = "dynadesk-leaderboard"
VERSION = 1
FILES_NOT_HERE = "files not on this desk"

# A cell's state
FRESH = "fresh"  # scored on the split as it is now
STALE = "stale"  # scored on an earlier state of the split: its figures are shown, marked
MISSING = "missing"  # never scored (or the model changed): filled in automatically
FAILED = "failed"  # the model could not be scored; tried again on refresh or when the split changes
NO_FILES = "no-files"  # the model's files are not on this desk
EMPTY = "empty"  # the round has no decided held-out example
STATES = (FRESH, STALE, MISSING, FAILED, NO_FILES, EMPTY)
SUITE_COLUMN = 0  # the adaptive suite's column: its number (rounds start at 1)


class LeaderboardError(DynadeskError):
    pass


@dataclass(frozen=True)
class ModelRow:
    key: str  # the cache key: the model's sha256, or for an ensemble the sha256 of its members' (ensemble_key)
    name: str
    member_ids: tuple[str, ...]
    member_shas: tuple[str, ...]
    rounds: tuple[int, ...]  # the rounds it was the target (or, for a member, part of the target) of
    ensemble: bool = False
    current: bool = False  # the open round's target
    unavailable: str = ""  # why it cannot be scored here ("files not on this desk: …"); "" when it can

    @property
    def first_round(self) -> int:
        return self.rounds[0]


@dataclass(frozen=True)
class RoundColumn:
    number: int
    round_id: str
    status: str
    n: int  # examples in the held-out split (decided, and imported cases with their gold labels)
    fooling: int  # of them, validated fooling examples
    decided: int  # examples of the whole round with a label to score (either side); the suite: its validated variants
    fingerprint: str
    rule: str = ""  # the adaptive suite's column: which variants it scores, and why

    @property
    def suite(self) -> bool:
        return self.number == SUITE_COLUMN

    @property
    def title(self) -> str:
        return "Adaptive suite" if self.suite else f"Round {self.number}"

    @property
    def header(self) -> str:
        """The column group's line: its title, state and size."""
        if self.suite:
            return f"Adaptive suite (n={self.n} of {self.decided} validated variants)"
        return f"Round {self.number} ({self.status}, n={self.n}, {self.fooling} fooling)"


@dataclass(frozen=True)
class Cell:
    state: str
    n: int = 0
    accuracy: float | None = None
    macro_f1: float | None = None
    low: float | None = None  # bootstrap 95 % interval of accuracy
    high: float | None = None
    fooling_n: int = 0  # validated fooling examples scored
    fooling_right: float | None = None  # the share of them the model gets right
    computed_at: str | None = None
    note: str = ""  # why a cell is empty, failed or unavailable
    overlap: int = 0  # held-out examples that also appear in the model's training data
    families: tuple[tuple[str, int, int], ...] = ()  # the adaptive suite's column: (topic family, wrong, n)

    @property
    def has_figures(self) -> bool:
        return self.state in (FRESH, STALE) and self.n > 0


@dataclass(frozen=True)
class Leaderboard:
    task_code: str
    task_name: str
    rows: tuple[ModelRow, ...]
    columns: tuple[RoundColumn, ...]
    cells: Mapping[tuple[str, int], Cell]  # (row key, round number)
    labels: tuple[str, ...] = ()
    read_at: str = ""

    def cell(self, row: ModelRow, column: RoundColumn) -> Cell:
        return self.cells.get((row.key, column.number)) or Cell(MISSING)

    @property
    def current(self) -> ModelRow | None:
        return next((r for r in self.rows if r.current), None)

    def best(self, column: RoundColumn, metric: str) -> set[str]:
        """The keys of the rows with the column's highest ``metric`` (fresh or stale figures); none
        when fewer than two models have that figure (nothing to be best against)."""
        values = {r.key: getattr(self.cell(r, column), metric) for r in self.rows
                  if self.cell(r, column).has_figures and getattr(self.cell(r, column), metric) is not None}
        if len(values) < 2:
            return set()
        top = max(values.values())
        return {k for k, v in values.items() if v == top}

    def counts(self) -> dict[str, int]:
        states = [self.cell(r, c).state for r in self.rows for c in self.columns]
        return {state: states.count(state) for state in STATES if state in states}

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "task": self.task_code, "task_name": self.task_name,
                "labels": list(self.labels), "read_at": self.read_at,
                "rows": [asdict(r) for r in self.rows], "columns": [asdict(c) for c in self.columns],
                "cells": [{"row": key, "round": number, **asdict(cell)} for (key, number), cell in self.cells.items()]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Leaderboard:
        if data.get("format") != FORMAT:
            raise LeaderboardError("This is not a Dynadesk leaderboard.")
        rows = tuple(ModelRow(**{**r, "member_ids": tuple(r["member_ids"]), "member_shas": tuple(r["member_shas"]),
                                 "rounds": tuple(r["rounds"])}) for r in data["rows"])
        cells = {(c["row"], c["round"]): _cell_from_json(c) for c in data["cells"]}
        return cls(data["task"], data.get("task_name", data["task"]), rows,
                   tuple(RoundColumn(**c) for c in data["columns"]), cells, tuple(data.get("labels", ())),
                   data.get("read_at", ""))



def _cell_from_json(data: Mapping[str, Any]) -> Cell:
    fields: dict[str, Any] = {k: v for k, v in data.items() if k not in ("row", "round")}
    fields["families"] = tuple((str(f), int(w), int(n)) for f, w, n in fields.get("families") or ())
    return Cell(**fields)


METRICS = (("accuracy", "accuracy"), ("macro_f1", "macro-F1"), ("fooling_right", "fooling now right"))
STATE_TEXT = {MISSING: "not scored yet", FAILED: "could not be scored", NO_FILES: FILES_NOT_HERE,
              EMPTY: "no held-out examples"}


def figure_text(cell: Cell, metric: str) -> str:
    """One figure of a cell as the CLI, the report and the GUI show it; a state's words when it has none."""
    from app.core.formatting import MISSING as NONE
    from app.core.formatting import num, pct

    if not cell.has_figures:
        return STATE_TEXT.get(cell.state, NONE)
    if metric == "accuracy":
        return pct(cell.accuracy)
    if metric == "macro_f1":
        return num(cell.macro_f1)
    return NONE if cell.fooling_right is None else f"{pct(cell.fooling_right)} of {cell.fooling_n}"


def cell_detail(row: ModelRow, column: RoundColumn, cell: Cell) -> str:
    """Everything a cell's tooltip says: n, the interval, the fooling count, when, and why."""
    from app.core.formatting import pct

    head = (f"{row.name} on the adaptive suite" if column.suite else
            f"{row.name} on round {column.number}'s held-out split")
    if not cell.has_figures:
        return f"{head}: {STATE_TEXT.get(cell.state, cell.state)}" + (f" ({cell.note})" if cell.note else "") + "."
    lines = [f"{head} (n={cell.n}):",
             f"accuracy {pct(cell.accuracy)}, 95 % interval {pct(cell.low)} to {pct(cell.high)} (bootstrap)",
             f"macro-F1 {figure_text(cell, 'macro_f1')}",
             (f"validated fooling examples now right: {pct(cell.fooling_right)} of {cell.fooling_n}" if cell.fooling_n
              else "" if column.suite else "no validated fooling example in this split")]
    lines = [line for line in lines if line]
    if column.suite:
        lines += [f"{family}: {wrong} of {n} wrong" for family, wrong, n in cell.families]
        if column.rule:
            lines.append(column.rule)
    if cell.overlap:
        lines.append(f"WARNING: {cell.overlap} of these examples appear in the model's training data")
    if cell.state == STALE:
        lines.append(f"STALE: {cell.note}; refresh to score it again (scored {cell.computed_at})")
    elif cell.computed_at:
        lines.append(f"scored {cell.computed_at}")
    return "\n".join(lines)