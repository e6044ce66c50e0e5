"""The model leaderboard: every model the task has had, scored on every round's held-out split
(Dynabench's "evaluate every model on every round"), kept in the desk database so that a cell is
scored again only when its split changed. Qt-free; long work takes a ``Progress``.

    report = fill_leaderboard(desk, "hate_speech")             # score the missing cells, then read
    report = fill_leaderboard(desk, "hate_speech", refresh=True)  # ... and the stale and failed ones
    board = read_leaderboard(desk, "hate_speech")               # what is stored, no model work
    board.cell(row, column).accuracy

Rows: every model record that has been a round's target, in the order of the round it first served
(an ensemble target is a row of its own besides its members). Columns: every round's held-out split,
the same sets the comparison scores on (``held_out.held_out_sets``: decided and imported examples on
the held-out side, as training holds them out), and the task's adaptive suite (``suite_split``: its validated
variants, only those of held-out seeds when a row's model trained on variants), whose cell also holds each
topic family's wrong answers; its cells are kept under the latest round, keyed by ``suite_model_key``.
A cell holds accuracy, macro-F1 (the evaluation service's, ``evaluation.evaluate``), the share of
the split's validated fooling examples (``figures.is_validated_fooling``) the model now gets right,
n, and a bootstrap 95 % interval of accuracy (``bootstrap.bootstrap_interval``).

A cell is keyed by the model's sha256 (an ensemble's: of its members', in order) and the round, and
stores the fingerprint of the split it scored (ids, model inputs, gold labels, fooling marks): when
the split changes (a new decision), the cell is *stale* and keeps its old figures until refreshed.

The GUI runs the three steps apart: ``plan_leaderboard`` and ``store_cells`` on the database
worker, ``compute_cells`` (models only, no database) as a job of the inference service.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from app.core.errors import DynadeskError
from app.core.next_round.leaderboard_board import (  # noqa: F401  (the board's names, for callers of the service)
    EMPTY,
    FAILED,
    FILES_NOT_HERE,
    FORMAT,
    FRESH,
    METRICS,
    MISSING,
    NO_FILES,
    STALE,
    STATE_TEXT,
    STATES,
    SUITE_COLUMN,
    Cell,
    Leaderboard,
    LeaderboardError,
    ModelRow,
    RoundColumn,
    cell_detail,
    figure_text,
)

if TYPE_CHECKING:
    from app.core.services.evaluation_data import EvalSet
    from app.core.storage.models import ModelRecord
    from local_models.progress import Progress

log = logging.getLogger(__name__)

RESAMPLES = 1000  # bootstrap resamples of each cell's accuracy interval

@dataclass
class LeaderboardPlan:
    """What a fill scores: the board as stored, the held-out sets, and per model the rounds to score."""

    board: Leaderboard
    sets: dict[int, EvalSet]
    work: list[tuple[ModelRow, list[ModelRecord], list[int]]]
    records: list[ModelRecord]  # every record, for the overlap check (read off the database thread)

    @property
    def cells_to_score(self) -> int:
        return sum(len(numbers) for _row, _records, numbers in self.work)


@dataclass(frozen=True)
class ScoredCell:
    """A cell as ``compute_cells`` scored it, for ``store_cells``."""

    row: ModelRow
    column: RoundColumn
    cell: Cell
    details: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FillReport:
    board: Leaderboard
    scored: int  # cells scored now
    failed: int  # of them, models that could not be scored
    seconds: float

    def summary(self) -> str:
        if not self.scored:
            return "Every cell of the leaderboard is up to date." if not self.board.counts().get(STALE) else \
                "No cell was missing; stale cells are scored again with a refresh."
        failed = f", {self.failed} could not be scored" if self.failed else ""
        return f"Scored {self.scored} cell{'s' if self.scored != 1 else ''} of the leaderboard{failed} " \
               f"({self.seconds:.1f} s)."


def ensemble_key(shas: Sequence[str]) -> str:
    """An ensemble's cache key: its members' checksums, in order (a single model's key is its sha256)."""
    return shas[0] if len(shas) == 1 else hashlib.sha256(("ensemble\n" + "\n".join(shas)).encode()).hexdigest()


def split_fingerprint(eval_set: EvalSet) -> str:
    """What a cell's figures depend on: the split's example ids, model inputs, gold labels and fooling marks."""
    digest = hashlib.sha256()
    for case in sorted(eval_set.cases, key=lambda c: c.id):
        item = json.dumps([case.id, case.text, case.input, case.gold, bool(case.extra.get("fooled"))],
                          ensure_ascii=False)
        digest.update(item.encode("utf-8") + b"\n")
    return digest.hexdigest()


def suite_model_key(key: str) -> str:
    """The key a model's adaptive-suite cell is stored under (beside its round cells, in the latest round)."""
    return hashlib.sha256(("adaptive-suite\n" + key).encode()).hexdigest()


def _store_key(row_key: str, column: RoundColumn) -> str:
    return suite_model_key(row_key) if column.suite else row_key


def unavailable_reason(records: Sequence[ModelRecord]) -> str:
    """Why these models cannot be scored on this desk ("" when every member's files are here)."""
    from pathlib import Path

    from app.core.domain import ModelFormat

    for record in records:
        if record.format == ModelFormat.IMPORTED.value:
            return f"{FILES_NOT_HERE}: {record.name} is known only by predictions recorded elsewhere"
        if not record.path or not Path(record.path).exists():
            where = f" (expected at {record.path})" if record.path else ""
            return f"{FILES_NOT_HERE}: {record.name}{where}"
    return ""


def model_rows(desk: Any, task_code: str) -> tuple[list[ModelRow], dict[str, list[ModelRecord]]]:
    """Every model that has been a round's target, in the order of the round it first served; an
    ensemble target is a row besides its members. Returns the rows and each row's records."""
    from app.core.domain import RoundStatus

    rounds = desk.tasks.rounds(task_code)
    open_rounds = [r for r in rounds if r.status == RoundStatus.OPEN.value]
    current_round = open_rounds[-1].number if open_rounds else None
    order: list[str] = []
    served: dict[str, list[int]] = {}
    members: dict[str, list[ModelRecord]] = {}
    current_key = None
    for round_ in rounds:
        targets = desk.models.round_models(round_.id)
        if not targets:
            continue
        keys = [(r.sha256, [r]) for r in targets]
        if len(targets) > 1:
            keys.append((ensemble_key([r.sha256 for r in targets]), list(targets)))
        for key, records in keys:
            if key not in members:
                order.append(key)
                members[key] = records
            if round_.number not in served.setdefault(key, []):
                served[key].append(round_.number)
        if round_.number == current_round:
            current_key = keys[-1][0]
    rows = []
    for key in order:
        records = members[key]
        rows.append(ModelRow(key, " + ".join(r.name for r in records), tuple(str(r.id) for r in records),
                             tuple(r.sha256 for r in records), tuple(served[key]), len(records) > 1,
                             key == current_key, unavailable_reason(records)))
    return rows, members


def plan_leaderboard(desk: Any, task_code: str, *, refresh: bool = False) -> LeaderboardPlan:
    """The board as stored, and what a fill scores: the missing cells (with ``refresh``, also the
    stale and the failed ones). Reads the database; no model work."""
    from sqlalchemy import select

    from app.core.next_round.held_out import held_out_sets
    from app.core.services.evaluation_data import EvaluationInputError
    from app.core.storage.models import LeaderboardCell

    definition = desk.tasks.definition_by_code(task_code)  # NotFound names the task
    if definition.is_extractive:
        raise LeaderboardError(f"{definition.name} is an extractive QA task; the leaderboard scores classifiers.")
    try:
        held = held_out_sets(desk, task_code, "all")
    except EvaluationInputError as exc:
        raise LeaderboardError(str(exc)) from exc
    statuses = {r.number: (str(r.id), str(r.status)) for r in desk.tasks.rounds(task_code)}
    sets: dict[int, EvalSet] = {}
    columns = []
    for split in held.sets:
        number = int(split.key.rsplit("-", 1)[1])
        sets[number] = split
        round_id, status = statuses[number]
        columns.append(RoundColumn(number, round_id, status, len(split.cases),
                                   sum(bool(c.extra.get("fooled")) for c in split.cases), held.eligible[number],
                                   split_fingerprint(split)))
    rows, members = model_rows(desk, task_code)
    adaptive = _suite_column(desk, task_code, members, statuses)
    if adaptive is not None:
        sets[SUITE_COLUMN], column = adaptive
        columns.append(column)
    with desk.db.read() as session:
        stored = {(c.model_key, uuid.UUID(str(c.round_id))): c for c in session.scalars(
            select(LeaderboardCell).where(LeaderboardCell.round_id.in_([uuid.UUID(c.round_id) for c in columns])))}
    cells: dict[tuple[str, int], Cell] = {}
    work = []
    for row in rows:
        wanted = []
        for column in columns:
            found = stored.get((_store_key(row.key, column), uuid.UUID(column.round_id)))
            cell = _stored_cell(found, column, row)
            cells[(row.key, column.number)] = cell
            if cell.state == MISSING or (refresh and cell.state in (STALE, FAILED)):
                wanted.append(column.number)
        if wanted:
            work.append((row, members[row.key], wanted))
    board = Leaderboard(task_code, definition.name, tuple(rows), tuple(columns), cells, tuple(definition.labels),
                        datetime.now(UTC).isoformat(timespec="seconds"))
    return LeaderboardPlan(board, sets, work, list(desk.models.all()) if work else [])


def _suite_column(desk: Any, task_code: str, members: Mapping[str, Sequence[ModelRecord]],
                  statuses: Mapping[int, tuple[str, str]]) -> tuple[EvalSet, RoundColumn] | None:
    """The adaptive suite's set and column (None without a validated variant or a round): every validated variant,
    or those of held-out seeds when a row's model trained on variants."""
    from app.core.next_round.suite_split import adaptive_suite_split, trained_on_variants

    if not statuses:
        return None
    split = adaptive_suite_split(desk, task_code, held_out_only=trained_on_variants(
        None, [r for records in members.values() for r in records]))
    if not split.validated:
        return None
    latest = statuses[max(statuses)][0]
    return split.eval_set, RoundColumn(SUITE_COLUMN, latest, "suite", len(split.eval_set.cases), 0, split.validated,
                                       split_fingerprint(split.eval_set), split.rule)


def _stored_cell(found: Any, column: RoundColumn, row: ModelRow) -> Cell:
    if column.n == 0:
        return Cell(EMPTY, note="no validated variant on the side scored" if column.suite
                    else "no decided held-out example yet")
    fresh = found is not None and found.fingerprint == column.fingerprint
    if row.unavailable and not (fresh and not found.problem):  # figures scored here before still hold
        return Cell(NO_FILES, note=row.unavailable)
    if found is None:
        return Cell(MISSING)
    when = found.updated_at.isoformat(timespec="seconds") if found.updated_at else None
    if found.problem:
        return Cell(FAILED if fresh else MISSING, computed_at=when, note=found.problem)
    return Cell(FRESH if fresh else STALE, found.n, found.accuracy, found.macro_f1, found.accuracy_low,
                found.accuracy_high, found.fooling_n, found.fooling_right, when,
                "" if fresh else "the held-out split changed since this was scored",
                int((found.details or {}).get("overlap") or 0),
                tuple((str(f), int(w), int(n)) for f, w, n in (found.details or {}).get("families") or []))


def compute_cells(plan: LeaderboardPlan, progress: Progress | None = None, *, num_threads: int | None = None,
                  into: list[ScoredCell] | None = None) -> list[ScoredCell]:
    """Score the plan's cells, one model (or ensemble) at a time, each loaded once by the evaluation
    service. A model that cannot be loaded or scored gives failed cells, never an error; a cancel
    raises ``Cancelled`` and scores nothing more (``into``, when given, holds the cells scored
    before it, whole, to keep). No database work: safe on any thread."""
    from app.core.services import evaluation_models
    from app.core.services.evaluation import EvaluationOptions, evaluate
    from app.core.services.evaluation_models import ModelChoice
    from local_models.errors import Cancelled
    from local_models.progress import Progress

    progress = progress or Progress()
    columns = {c.number: c for c in plan.board.columns}
    number_of = {s.key: number for number, s in plan.sets.items()}
    options = EvaluationOptions(identity_swap=False, robustness=False, latency_samples=0, num_threads=num_threads)
    total = max(1, sum(len(plan.sets[n].cases) for _r, _m, numbers in plan.work for n in numbers))
    done = 0
    scored: list[ScoredCell] = into if into is not None else []
    for row, records, numbers in plan.work:
        progress.check()
        sets = [plan.sets[n] for n in numbers]
        size = sum(len(s.cases) for s in sets)
        progress.say(f"Leaderboard: scoring {row.name} on round{'s' if len(numbers) > 1 else ''} "
                     f"{', '.join(map(str, numbers))} ({size:,} held-out examples)…")
        started = time.perf_counter()
        try:
            doc = evaluate([ModelChoice(row.name, records)], sets, options, task_code=plan.board.task_code,
                           records=plan.records, progress=progress.part(done, total),
                           loader=lambda choice: evaluation_models.load_predictor(choice, num_threads))
        except Cancelled:
            raise
        except Exception as exc:  # a broken or changed model: its cells say why, the others go on
            if not isinstance(exc, DynadeskError):
                log.warning("leaderboard: %s could not be scored", row.name, exc_info=exc)
            problem = f"could not be scored: {str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__}"
            scored += [ScoredCell(row, columns[n], Cell(FAILED, note=problem)) for n in numbers]
            done += size
            continue
        seconds = time.perf_counter() - started
        scored += [_scored(row, columns[number_of[s.key]], s, doc, seconds) for s in sets]
        done += size
        progress.report(done, total)
    return scored


def _scored(row: ModelRow, column: RoundColumn, eval_set: EvalSet, doc: Mapping[str, Any], seconds: float) -> ScoredCell:
    from app.core.services.bootstrap import CONFIDENCE, bootstrap_interval
    from app.core.services.evaluation_data import resample_units
    from app.core.services.evaluation_scoring import accuracy

    model = doc["models"][0]
    figures = doc["results"][model["key"]]["sets"][eval_set.key]
    predicted = {case_id: p["label"] for case_id, p in model["predictions"][eval_set.key].items()}
    cases = eval_set.cases
    gold = [c.gold for c in cases]
    labels = [predicted[c.id] for c in cases]
    low, high = bootstrap_interval(gold, labels, "accuracy", groups=resample_units(cases), resamples=RESAMPLES, seed=0,
                                   stream=eval_set.key)
    fooling = [i for i, c in enumerate(cases) if c.extra.get("fooled")]
    fooling_right = accuracy([gold[i] for i in fooling], [labels[i] for i in fooling])
    overlap = sum(len((check.get("by_set") or {}).get(eval_set.key, [])) for check in model["overlap"]["checks"])
    families = tuple((name, f["n"] - f["correct"], f["n"]) for name, f in (figures.get("functionalities") or {}).items()
                     ) if column.suite else ()
    cell = Cell(FRESH, figures["n"], figures["accuracy"], figures["macro_f1"], low, high, len(fooling), fooling_right,
                datetime.now(UTC).isoformat(timespec="seconds"), overlap=overlap, families=families)
    details = {"predictions": predicted, "overlap": overlap, "seconds": round(seconds, 3),
               "interval": {"confidence": CONFIDENCE, "resamples": RESAMPLES, "seed": 0, "stream": eval_set.key,
                            "method": "bootstrap percentile; perturbation pairs drawn together"},
               "members": [{"id": i, "sha256": s} for i, s in zip(row.member_ids, row.member_shas)],
               "per_label": figures["per_label"], **({"families": [list(f) for f in families]} if families else {})}
    return ScoredCell(row, column, cell, details)


def store_cells(desk: Any, scored: Sequence[ScoredCell]) -> None:
    """Keep the scored cells, each replacing the one stored for its model and round, in one unit of work."""
    from sqlalchemy import delete

    from app.core.storage.models import LeaderboardCell

    if not scored:
        return
    with desk.db.write() as session:
        for item in scored:
            round_id = uuid.UUID(item.column.round_id)
            key = _store_key(item.row.key, item.column)
            session.execute(delete(LeaderboardCell).where(LeaderboardCell.round_id == round_id,
                                                          LeaderboardCell.model_key == key))
            cell = item.cell
            session.add(LeaderboardCell(
                round_id=round_id, model_key=key, model_name=item.row.name[:200],
                fingerprint=item.column.fingerprint, n=cell.n, accuracy=cell.accuracy, macro_f1=cell.macro_f1,
                accuracy_low=cell.low, accuracy_high=cell.high, fooling_n=cell.fooling_n,
                fooling_right=cell.fooling_right, problem=cell.note if cell.state == FAILED else None,
                details=item.details))


def read_leaderboard(desk: Any, task_code: str) -> Leaderboard:
    """The leaderboard as stored (missing and stale cells marked); no model work."""
    return plan_leaderboard(desk, task_code).board


def fill_leaderboard(desk: Any, task_code: str, *, refresh: bool = False, progress: Progress | None = None,
                     num_threads: int | None = None) -> FillReport:
    """Score the missing cells (with ``refresh`` also the stale and failed ones), keep them, and
    return the board. Called after a round changes (``dynadesk rounds next/open/close``)."""
    started = time.perf_counter()
    plan = plan_leaderboard(desk, task_code, refresh=refresh)
    if not plan.work:
        return FillReport(plan.board, 0, 0, time.perf_counter() - started)
    scored = compute_cells(plan, progress, num_threads=num_threads)
    store_cells(desk, scored)
    return FillReport(read_leaderboard(desk, task_code), len(scored),
                      sum(s.cell.state == FAILED for s in scored), time.perf_counter() - started)




def leaderboard_document(desk: Any, task_code: str) -> dict[str, Any] | None:
    """The board as stored, as JSON for an evaluation document's report section (no model work);
    None when the task has no board (no round with a target, or an extractive task)."""
    try:
        board = read_leaderboard(desk, task_code)
    except DynadeskError:
        return None
    return board.to_json() if board.rows and board.columns else None
