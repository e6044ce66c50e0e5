"""What the Evaluate tab's leaderboard shows, as typed values: a row per model the task has had,
a group of columns per round's held-out split, each cell's text, tooltip and marks (best in its
column, stale, not scored, files not here) already decided. Built by a pure function from the
board the leaderboard service reads (app/core/next_round/leaderboard.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.core.formatting import pct
from app.core.next_round.leaderboard_board import (
    FRESH,
    METRICS,
    STALE,
    STATES,
    cell_detail,
    figure_text,
)

if TYPE_CHECKING:
    from app.core.next_round.leaderboard_board import Leaderboard

STATE_WORDS = {"stale": "stale", "missing": "not scored yet", "failed": "could not be scored",
               "no-files": "files not on this desk", "empty": "no held-out examples"}


@dataclass(frozen=True, slots=True)
class BoardCell:
    text: str
    tooltip: str
    state: str  # one of leaderboard.STATES
    best: bool = False  # the best figure of its column (among two models or more)
    value: float | None = None  # 0..1 for shading; None leaves the cell plain
    first: bool = True  # the first of its round's figures (a state is written there only)


@dataclass(frozen=True, slots=True)
class BoardRow:
    key: str
    name: str
    detail: str  # "target of rounds 1, 2"
    current: bool
    cells: tuple[BoardCell, ...]  # len(groups) × len(metrics), round by round


@dataclass(frozen=True, slots=True)
class BoardGroup:
    title: str  # "Round 2"
    detail: str  # "open · n=42 · 9 fooling"
    tooltip: str


@dataclass(frozen=True, slots=True)
class LeaderboardView:
    task: str
    groups: tuple[BoardGroup, ...]
    metrics: tuple[str, ...]
    rows: tuple[BoardRow, ...]
    summary: str  # what the board holds: stale, missing, unavailable cells
    empty: str = ""  # why there is no table ("" when there is one)
    metric_tips: tuple[str, ...] = ()  # what each metric column means

    def cell(self, row: int, group: int, metric: int) -> BoardCell:
        return self.rows[row].cells[group * len(self.metrics) + metric]


# Short column titles for the panel; each says more in its tooltip (METRIC_TIPS).
METRIC_TITLES = {"accuracy": "accuracy", "macro_f1": "macro-F1", "fooling_right": "fooling right"}
METRIC_TIPS = {"accuracy": "Accuracy on the round's held-out split; the tooltip gives n and the 95 % bootstrap interval.",
               "macro_f1": "Macro-F1 over the labels on the round's held-out split.",
               "fooling_right": "Of the split's validated fooling examples (they fooled the round's target and the "
                                "author's label was upheld), the share this model now gets right."}
STALE_MARK = "*"


def build_leaderboard(board: Leaderboard) -> LeaderboardView:
    metrics = tuple(METRIC_TITLES[key] for key, _name in METRICS)
    tips = tuple(METRIC_TIPS[key] for key, _name in METRICS)
    if not board.rows or not board.columns:
        why = ("No round of this task has a target model yet." if not board.rows
               else "This task has no round yet.")
        return LeaderboardView(board.task_name, (), metrics, (), "", why, tips)
    groups = tuple(BoardGroup(
        c.title, f"{c.status} · n={c.n} · {c.fooling} fooling",
        f"Round {c.number} ({c.status}): {c.n} decided held-out example(s) of {c.decided} decided in the round; "
        f"{c.fooling} of them validated fooling examples.") if not c.suite else BoardGroup(
        c.title, f"n={c.n} of {c.decided} validated variants", c.rule) for c in board.columns)
    best = {(c.number, key): board.best(c, key) for c in board.columns for key, _name in METRICS}
    rows = []
    for row in board.rows:
        cells = []
        for column in board.columns:
            cell = board.cell(row, column)
            tip = cell_detail(row, column, cell)
            for index, (key, _name) in enumerate(METRICS):
                if not cell.has_figures:
                    text = STATE_WORDS.get(cell.state, cell.state) if index == 0 else ""
                    cells.append(BoardCell(text, tip, cell.state, first=index == 0))
                    continue
                # the fooling count is in the round's header and the tooltip: the cell stays narrow
                shown = pct(cell.fooling_right) if key == "fooling_right" else figure_text(cell, key)
                text = shown + (STALE_MARK if cell.state == STALE else "")
                value = getattr(cell, key)
                cells.append(BoardCell(text, tip, cell.state, row.key in best[(column.number, key)],
                                       value if key != "macro_f1" else None, index == 0))
        served = f"target of round{'s' if len(row.rounds) > 1 else ''} {', '.join(map(str, row.rounds))}"
        detail = ("current target · " if row.current else "") + served + (" · ensemble" if row.ensemble else "")
        name = f"Ensemble: {row.name}" if row.ensemble else row.name
        rows.append(BoardRow(row.key, name, detail, row.current, tuple(cells)))
    counts = board.counts()
    rounds = sum(not c.suite for c in board.columns)
    parts = [f"{len(board.rows)} model{'s' if len(board.rows) != 1 else ''} × {rounds} "
             f"round{'s' if rounds != 1 else ''}" + (" and the adaptive suite" if rounds < len(board.columns) else "")]
    parts += [f"{counts[s]} {STATE_WORDS[s]}" for s in STATES if s != FRESH and counts.get(s)]
    summary = "; ".join(parts) + "."
    if counts.get(STALE):
        summary += f" {STALE_MARK} stale: the figures from before the split changed."
    return LeaderboardView(board.task_name, groups, metrics, tuple(rows), summary, metric_tips=tips)
