"""The review dashboard's figures: who produces good model-fooling data.

:class:`DashboardService` keeps a compact numpy snapshot of every non-draft example (with its
target-model outputs and choice metadata) and every validation. The first :meth:`refresh`
loads it all (a few hundred ms for 100k examples: run it off the GUI thread); later refreshes
load only what changed: rows added since (by rowid) and rows whose ``updated_at`` moved past
the last one seen. Every figure is then computed from the arrays with numpy, so filtering and
recomputing over 100k examples takes milliseconds (DESIGN.md §5).

Definitions (DESIGN.md §1 and app/services/stats.py):
- *submitted*: status submitted or flagged (drafts and retracted examples are not).
- *MER*: model-fooling ÷ submitted. *vMER*: model-fooling and decided 'correct' ÷ submitted.
- *rejection rate*: decided 'incorrect' ÷ decided examples.
- *retraction rate*: retracted ÷ (submitted + retracted).
- *examples per hour*: submitted ÷ hours of writing time recorded on the author's submitted
  and retracted examples (examples with no recorded time, such as imports, add none; with no
  recorded time at all the figure is empty).
- *median time per example*: over submitted examples with recorded writing time.
- *mean edit distance*: word edit distance of the author's submitted perturbations.
- *agreement with the final decision*: share of a person's peer verdicts on decided examples
  that match the decision (verdict, and the corrected label for 'incorrect').
"""

from __future__ import annotations

import csv
import functools
import math
import threading
from itertools import repeat
import uuid
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from typing import Sequence

import numpy as np

from app.domain import ExampleStatus, ValidationMode, Verdict
from app.services.agreement import MIN_OVERLAP, Agreement, agreement
from app.services.tasks import TaskService
from app.storage.db import Database
from app.tasks.definition import MetadataKind

STATUSES = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value, ExampleStatus.RETRACTED.value)
RETRACTED = STATUSES.index(ExampleStatus.RETRACTED.value)
DECIDED_CORRECT, DECIDED_INCORRECT, DECIDED_FLAGGED = 0, 1, 2
VERDICT_CODES = {Verdict.CORRECT.value: DECIDED_CORRECT, Verdict.INCORRECT.value: DECIDED_INCORRECT,
                 Verdict.FLAGGED.value: DECIDED_FLAGGED}
STATUS_CODES = {status: code for code, status in enumerate(STATUSES)}
DECIDED_CODES = {None: -1, **VERDICT_CODES}
JULIAN_UNIX_EPOCH = 2440587.5
CHART_ANNOTATORS = 6  # lines in the MER/vMER-over-time charts unless people are chosen


class _Rows:
    """Rows of a plain sqlite3 cursor, with the two ways of reading them used here."""

    def __init__(self, cursor):
        self.cursor = cursor

    def all(self) -> list[tuple]:
        return self.cursor.fetchall()

    def one(self) -> tuple:
        return self.cursor.fetchone()

    def __iter__(self):
        return iter(self.cursor)


def verdict_key(verdict: str | None, label: str | None) -> str | None:
    """The same key as app.services.validation.verdict_key, from bare columns."""
    if verdict is None:
        return None
    return f"{verdict}→{label}" if verdict == Verdict.INCORRECT.value else verdict


class Codes:
    """Strings to small integers and back, stable for the snapshot's lifetime."""

    def __init__(self):
        self.index: dict = {None: -1}
        self.values: list[str] = []

    def many(self, values) -> np.ndarray:
        index = self.index
        for value in dict.fromkeys(values):  # the distinct values, in C
            if value not in index:
                index[value] = len(self.values)
                self.values.append(value)
        return np.fromiter(map(index.__getitem__, values), dtype=np.int32, count=len(values))

    def __len__(self) -> int:
        return len(self.values)


@dataclass
class DashboardFilter:
    """Which examples the dashboard describes; empty means no restriction."""

    task_id: uuid.UUID | None = None
    round_ids: Sequence[uuid.UUID] = ()
    author_ids: Sequence[uuid.UUID] = ()  # the people shown (as authors and as validators)
    labels: Sequence[str] = ()
    facets: dict[str, Sequence[str]] = field(default_factory=dict)  # field -> any of these values
    since: datetime | None = None  # submitted at or after
    until: datetime | None = None  # submitted before


@dataclass
class Group:
    """Figures for one row of the per-annotator table or of a breakdown."""

    key: str
    name: str
    submitted: int = 0
    retracted: int = 0
    fooled: int = 0
    validated_fooling: int = 0
    decided: int = 0
    rejected: int = 0
    undecided: int = 0
    mer: float | None = None
    vmer: float | None = None
    rejection_rate: float | None = None
    retraction_rate: float | None = None
    median_seconds: float | None = None
    # per-annotator only
    writing_hours: float | None = None
    examples_per_hour: float | None = None
    perturbations: int = 0
    mean_edit_distance: float | None = None
    validations: int = 0
    validations_on_decided: int = 0
    agreement_with_decision: float | None = None


# The per-annotator table's columns: (attribute, header, kind, tooltip). Kinds tell views how to format.
ANNOTATOR_COLUMNS = [
    ("name", "Annotator", "text", "Display name"),
    ("submitted", "Submitted", "int", "Examples submitted or flagged (not drafts, not retracted)"),
    ("examples_per_hour", "Per hour", "float1", "Submitted examples per hour of recorded writing time"),
    ("mer", "MER", "rate", "Model error rate: model-fooling ÷ submitted"),
    ("vmer", "vMER", "rate", "Validated model error rate: fooling and validated correct ÷ submitted"),
    ("rejection_rate", "Rejected", "rate", "Decided 'incorrect' ÷ decided"),
    ("retraction_rate", "Retracted", "rate", "Retracted ÷ (submitted + retracted)"),
    ("median_seconds", "Median time", "seconds", "Median writing time per submitted example"),
    ("mean_edit_distance", "Edit dist.", "float1", "Mean word edit distance of their perturbations"),
    ("validations", "Verdicts", "int", "Peer verdicts they gave"),
    ("agreement_with_decision", "Agreement", "rate",
     "Share of their verdicts on decided examples that match the decision"),
]
BREAKDOWN_COLUMNS = [
    ("name", "Group", "text", ""),
    ("submitted", "Submitted", "int", "Examples submitted or flagged"),
    ("fooled", "Fooling", "int", "Examples that fooled the model"),
    ("mer", "MER", "rate", "Model-fooling ÷ submitted"),
    ("vmer", "vMER", "rate", "Fooling and validated correct ÷ submitted"),
    ("decided", "Decided", "int", "Examples with a decision"),
    ("rejection_rate", "Rejected", "rate", "Decided 'incorrect' ÷ decided"),
    ("retraction_rate", "Retracted", "rate", "Retracted ÷ (submitted + retracted)"),
    ("undecided", "Backlog", "int", "Submitted examples not yet decided"),
    ("median_seconds", "Median time", "seconds", "Median writing time per example"),
]


@dataclass
class Series:
    key: str  # person id
    name: str
    mer: list[float]  # NaN before their first example
    vmer: list[float]


@dataclass
class Bar:
    key: str  # what a click filters on (a label, facet value, round id)
    name: str
    value: float
    second: float | None = None  # vMER next to MER in the by-round chart


@dataclass
class DashboardView:
    """Everything the dashboard shows for one filter."""

    total_examples: int  # non-draft examples of the task, before filtering
    matching: int  # submitted + retracted examples that pass the filter
    annotators: list[Group]
    breakdowns: dict[str, list[Group]]  # breakdown name -> rows
    breakdown_titles: dict[str, str]  # breakdown name -> title for a selector
    agreement: Agreement
    rater_names: dict[int, str]  # agreement's rater codes -> names
    time_edges: list[float]  # MER over time: bin ends, unix seconds
    time_series: list[Series]
    labels: list[Bar]
    facets: dict[str, list[Bar]]  # choice metadata field -> value counts
    facet_titles: dict[str, str]
    fooling_by_round: list[Bar]
    backlog_times: list[float]
    backlog: list[int]
    bin_seconds: float = 86400.0


class _Table:
    """Parallel numpy columns with an id → row index, grown in place as rows arrive."""

    def __init__(self, columns: dict[str, np.dtype]):
        self.dtypes = columns
        self.columns = {name: np.zeros(0, dtype=dtype) for name, dtype in columns.items()}
        self.row_of: dict[str, int] = {}
        self.ids: list[str] = []

    def __len__(self) -> int:
        return len(self.row_of)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.columns[name]

    def upsert(self, ids: list[str], values: dict[str, np.ndarray]) -> np.ndarray:
        """Write rows by id (new ids are appended); returns their row indexes."""
        start = len(self.row_of)
        if start == 0 and len(set(ids)) == len(ids):  # a first build: no lookups needed
            self.row_of = dict(zip(ids, range(len(ids))))
            self.ids = list(ids)
            self.columns = {name: np.asarray(values[name], dtype=dtype) if name in values else
                            np.zeros(len(ids), dtype=dtype) for name, dtype in self.dtypes.items()}
            return np.arange(len(ids), dtype=np.int64)
        rows = np.empty(len(ids), dtype=np.int64)
        new = 0
        for i, identifier in enumerate(ids):
            row = self.row_of.get(identifier)
            if row is None:
                row = self.row_of[identifier] = start + new
                self.ids.append(identifier)
                new += 1
            rows[i] = row
        if new:
            for name, column in self.columns.items():
                grown = np.zeros(start + new, dtype=column.dtype)
                grown[:start] = column
                self.columns[name] = grown
        for name, column in values.items():
            self.columns[name][rows] = column
        return rows


class DashboardService:
    """Figures for the review dashboard, from an incrementally refreshed snapshot.

    Not thread-safe: use one instance from one thread at a time (the GUI runs it on one worker).
    """

    def __init__(self, db: Database, tasks: TaskService):
        self.db = db
        self.tasks = tasks
        self._lock = threading.RLock()
        self._reset()

    def _reset(self) -> None:
        self.tasks_codes, self.rounds, self.people, self.labels_codes = Codes(), Codes(), Codes(), Codes()
        self.models, self.keys = Codes(), Codes()
        self.facet_fields: dict[str, Codes] = {}
        self.examples = _Table({
            "task": np.int32, "round": np.int32, "author": np.int32, "label": np.int32, "fooled": np.int8,
            "status": np.int8, "decided": np.int8, "decided_key": np.int32, "time_ms": np.int64,
            "submitted_at": np.float64, "perturbation": np.bool_, "edit_distance": np.float64,
        })
        self.validations = _Table({
            "example": np.int64, "validator": np.int32, "key": np.int32, "peer": np.bool_, "at": np.float64,
        })
        # Metadata facets and per-model outputs: (example row, code) pairs, several per example.
        self.facet_rows: dict[str, np.ndarray] = {}
        self.facet_values: dict[str, np.ndarray] = {}
        self.output_rows = np.zeros(0, dtype=np.int64)
        self.output_models = np.zeros(0, dtype=np.int32)
        self.output_fooled = np.zeros(0, dtype=np.int8)
        self._example_rowid = self._validation_rowid = 0
        # The latest updated_at seen, and the rows that had it (a later look skips them unless they moved on).
        self._example_mark = self._validation_mark = ""
        self._examples_at_mark: set[str] = set()
        self._validations_at_mark: set[str] = set()
        self._decided_at: np.ndarray | None = None
        self._changed_rows: set[int] | None = None  # rows whose decision time needs a look; None: all
        self.version = 0  # grows whenever the snapshot changes
        self.names: dict[str, str] = {}  # person / model / round id (hex) -> display name
        self.round_numbers: dict[str, tuple[str, int]] = {}  # round id hex -> (task id hex, number)

    # --- loading ----------------------------------------------------------------------------

    def refresh(self, *, thorough: bool = False, _retry: bool = True) -> int:
        """Bring the snapshot up to date; returns how many example and validation rows changed.

        The quick pass finds new examples and verdicts by rowid, the examples those verdicts
        touched (by id), and retractions and flags (through the status index): everything the
        desk itself changes, in milliseconds. ``thorough`` also scans every row's ``updated_at``
        (about 0.1 s per 100k examples) for changes made elsewhere, such as synced edits. Rows
        deleted behind the snapshot's back make the counts disagree, and the snapshot is rebuilt.
        """
        # one read transaction: every query below sees the same state, so the counts can be trusted
        with self._lock, self.db.engine.connect() as connection, connection.begin():
            raw = connection.connection.driver_connection  # plain tuples: 100k rows without Row objects

            def sql(query: str, params: tuple = ()) -> _Rows:
                return _Rows(raw.execute(query, params))

            self._load_names(sql)
            verdicts = self._fetch_validations(sql, thorough)
            changed = self._load_examples(sql, thorough, touched={row[2] for row in verdicts})
            changed += self._place_validations(verdicts)
            counts = sql("SELECT (SELECT count(*) FROM examples WHERE status IN ('submitted', 'flagged', 'retracted')),"
                         " (SELECT count(*) FROM validations)").one()
            # Fewer rows than the snapshot holds: some were deleted.
            if _retry and (counts[0] < len(self.examples) or counts[1] < len(self.validations)):
                self._reset()
                return self.refresh(_retry=False)
        if changed:
            self.version += 1
            if self._changed_rows is not None and len(self._changed_rows) > 1000:
                self._changed_rows = None  # cheaper to rebuild
        return changed

    def _load_names(self, sql) -> None:
        names = {}
        for table, column in (("people", "display_name"), ("model_records", "name")):
            names.update(sql(f"SELECT id, {column} FROM {table}").all())
        self.round_numbers = {rid: (tid, number) for rid, tid, number in sql("SELECT id, task_id, number FROM rounds")}
        names.update({rid: f"Round {number}" for rid, (_tid, number) in self.round_numbers.items()})
        self.names = names

    EXAMPLE_COLUMNS = ("rowid, id, task_id, round_id, author_id, true_label, model_fooled, status, decided_verdict, "
                       "decided_label, time_spent_ms, {submitted}, perturbation_of IS NOT NULL, edit_distance, updated_at")

    def _load_examples(self, sql, thorough: bool, touched: set[str]) -> int:
        columns = self.EXAMPLE_COLUMNS.format(submitted=_epoch("submitted_at"))
        first = not self._example_mark
        rows = sql(f"SELECT {columns} FROM examples WHERE rowid > ? AND status != 'draft'", (self._example_rowid,)).all()
        seen = {row[1] for row in rows}
        if not first and not thorough:
            # A draft submitted after newer examples keeps its older rowid: the count shows it is
            # missing, and the scan of updated_at (which its submission moved) finds it.
            (present,) = sql("SELECT count(*) FROM examples WHERE status != 'draft'").one()
            thorough = present > len(self.examples) + len(rows)
        if not first:
            wanted = touched - seen
            # Retractions and flags: the status index counts them cheaply; when the counts moved,
            # it lists them, to compare with the snapshot.
            status = self.examples["status"]
            known = {STATUSES[code]: int(n) for code, n in enumerate(np.bincount(status, minlength=len(STATUSES)))}
            counted = dict(sql("SELECT status, count(*) FROM examples WHERE status IN ('retracted', 'flagged') "
                               "GROUP BY status").all())
            if any(counted.get(name, 0) != known[name] for name in ("retracted", "flagged")):
                marked = {i for (i,) in sql("SELECT id FROM examples WHERE status IN ('retracted', 'flagged')")}
                ids = self.examples.ids
                known_marked = {ids[r] for r in np.nonzero(status != STATUSES.index(ExampleStatus.SUBMITTED.value))[0]}
                wanted |= (marked ^ known_marked) - seen
            for start in range(0, len(wanted), 500):
                chunk = tuple(sorted(wanted))[start:start + 500]
                rows += sql(f"SELECT {columns} FROM examples WHERE id IN ({', '.join('?' * len(chunk))}) "
                            "AND status != 'draft'", chunk).all()
            seen |= wanted
            if thorough:
                rows += [row for row in sql(f"SELECT {columns} FROM examples WHERE updated_at >= ? AND rowid <= ? "
                                            "AND status != 'draft'", (self._example_mark, self._example_rowid)).all()
                         if row[1] not in seen
                         and not (row[-1] == self._example_mark and row[1] in self._examples_at_mark)]
        if not rows:
            return 0
        (rowids, ids, tasks, rounds, authors, labels, fooled, statuses, verdicts, decided_labels, times, submitted,
         perturbation, edit_distance, updated) = zip(*rows)
        index = self.examples.upsert(list(ids), {
            "task": self.tasks_codes.many(tasks), "round": self.rounds.many(rounds), "author": self.people.many(authors),
            "label": self.labels_codes.many(labels),
            "fooled": np.array([-1 if f is None else int(f) for f in fooled], dtype=np.int8),
            "status": np.fromiter(map(STATUS_CODES.__getitem__, statuses), dtype=np.int8, count=len(statuses)),
            "decided": np.fromiter(map(DECIDED_CODES.__getitem__, verdicts), dtype=np.int8, count=len(verdicts)),
            "decided_key": self.keys.many(list(map(verdict_key, verdicts, decided_labels))),
            "time_ms": np.array(times, dtype=np.int64),
            "submitted_at": np.array([math.nan if t is None else t for t in submitted], dtype=np.float64),
            "perturbation": np.array(perturbation, dtype=np.bool_),
            "edit_distance": np.array([math.nan if d is None else d for d in edit_distance], dtype=np.float64),
        })
        self._example_rowid = max(self._example_rowid, max(rowids))
        self._example_mark, self._examples_at_mark = _advance(self._example_mark, self._examples_at_mark, ids, updated)
        self._load_parts(sql, list(ids), index)
        self._note_changed(index)
        return len(rows)

    def _load_parts(self, sql, ids: list[str], index: np.ndarray) -> None:
        """Facets and model outputs of (re)loaded examples replace what the snapshot had for them."""
        row_of = dict(zip(ids, index.tolist()))
        if len(ids) > 500:  # a first build or a big import: one pass over covering indexes
            fields = [name for (name,) in sql("SELECT DISTINCT field FROM example_facets")]
            facets = {name: sql("SELECT example_id, value FROM example_facets WHERE field = ?", (name,)).all()
                      for name in fields}
            outputs = sql("SELECT example_id, model_id, fooled FROM model_outputs").all()
        else:
            marks = ", ".join("?" * len(ids))
            facets = {}
            for example_id, name, value in sql(
                    f"SELECT example_id, field, value FROM example_facets WHERE example_id IN ({marks})", tuple(ids)):
                facets.setdefault(name, []).append((example_id, value))
            outputs = sql(f"SELECT example_id, model_id, fooled FROM model_outputs WHERE example_id IN ({marks})",
                          tuple(ids)).all()

        def rows_of(pairs) -> tuple[np.ndarray, np.ndarray]:
            """Row indexes of the examples named first in each pair; and which pairs are ours."""
            rows = np.fromiter(map(row_of.get, (p[0] for p in pairs), repeat(-1)), dtype=np.int64, count=len(pairs))
            return rows, rows >= 0

        for name in list(self.facet_rows):
            keep = ~np.isin(self.facet_rows[name], index)
            self.facet_rows[name], self.facet_values[name] = self.facet_rows[name][keep], self.facet_values[name][keep]
        for name, pairs in facets.items():
            if not pairs:
                continue
            rows, ours = rows_of(pairs)
            values = self.facet_fields.setdefault(name, Codes()).many([p[1] for p in pairs])
            self.facet_rows[name] = np.concatenate([self.facet_rows.get(name, np.zeros(0, np.int64)), rows[ours]])
            self.facet_values[name] = np.concatenate([self.facet_values.get(name, np.zeros(0, np.int32)), values[ours]])
        keep = ~np.isin(self.output_rows, index)
        rows, ours = rows_of(outputs) if outputs else (np.zeros(0, np.int64), np.zeros(0, np.bool_))
        models = self.models.many([o[1] for o in outputs])
        fooled = np.fromiter((-1 if o[2] is None else o[2] for o in outputs), dtype=np.int8, count=len(outputs))
        self.output_rows = np.concatenate([self.output_rows[keep], rows[ours]])
        self.output_models = np.concatenate([self.output_models[keep], models[ours]])
        self.output_fooled = np.concatenate([self.output_fooled[keep], fooled[ours]])

    def _fetch_validations(self, sql, thorough: bool) -> list:
        columns = ("rowid, id, example_id, validator_id, verdict, corrected_label, mode, "
                   f"{_epoch('created_at')}, updated_at")
        rows = sql(f"SELECT {columns} FROM validations WHERE rowid > ?", (self._validation_rowid,)).all()
        if thorough and self._validation_mark:
            seen = {row[1] for row in rows}
            rows += [row for row in sql(f"SELECT {columns} FROM validations WHERE updated_at >= ? AND rowid <= ?",
                                        (self._validation_mark, self._validation_rowid)).all()
                     if row[1] not in seen
                     and not (row[-1] == self._validation_mark and row[1] in self._validations_at_mark)]
        return rows

    def _place_validations(self, rows: list) -> int:
        if not rows:
            return 0
        row_of = self.examples.row_of
        known = [row for row in rows if row[2] in row_of]  # a verdict on a row deleted meanwhile: left out
        if known:
            _, ids, examples, validators, verdicts, labels, modes, at, _ = zip(*known)
            self.validations.upsert(list(ids), {
                "example": (placed := np.array([row_of[e] for e in examples], dtype=np.int64)),
                "validator": self.people.many(validators),
                "key": self.keys.many(list(map(verdict_key, verdicts, labels))),
                "peer": np.array(modes, dtype=object) == ValidationMode.PEER.value,
                "at": np.array(at, dtype=np.float64),
            })
            self._note_changed(placed)
        self._validation_rowid = max(self._validation_rowid, max(r[0] for r in rows))
        self._validation_mark, self._validations_at_mark = _advance(
            self._validation_mark, self._validations_at_mark, [r[1] for r in rows], [r[-1] for r in rows])
        return len(rows)

    def _note_changed(self, rows: np.ndarray) -> None:
        if self._changed_rows is not None:
            if len(rows) > 1000:
                self._changed_rows = None
            else:
                self._changed_rows.update(rows.tolist())

    # --- figures ----------------------------------------------------------------------------

    def _code(self, codes: Codes, value) -> int:
        return codes.index.get(value.hex if isinstance(value, uuid.UUID) else value, -2)

    def example_mask(self, flt: DashboardFilter, *, authors: bool = True) -> np.ndarray:
        ex = self.examples
        mask = np.ones(len(ex), dtype=np.bool_)
        if flt.task_id is not None:
            mask &= ex["task"] == self._code(self.tasks_codes, flt.task_id)
        if flt.round_ids:
            mask &= np.isin(ex["round"], [self._code(self.rounds, r) for r in flt.round_ids])
        if authors and flt.author_ids:
            mask &= np.isin(ex["author"], [self._code(self.people, a) for a in flt.author_ids])
        if flt.labels:
            mask &= np.isin(ex["label"], [self._code(self.labels_codes, label) for label in flt.labels])
        for name, values in flt.facets.items():
            if not values:
                continue
            codes = self.facet_fields.get(name, Codes())
            hit = np.zeros(len(ex), dtype=np.bool_)
            if name in self.facet_rows:
                wanted = np.isin(self.facet_values[name], [codes.index.get(v, -2) for v in values])
                hit[self.facet_rows[name][wanted]] = True
            mask &= hit
        # Half a microsecond of slack: stored times are floats summed from seconds and fractions.
        if flt.since is not None:
            mask &= ex["submitted_at"] >= flt.since.timestamp() - 5e-7
        if flt.until is not None:
            mask &= ex["submitted_at"] < flt.until.timestamp() - 5e-7
        return mask

    def _groups(self, mask: np.ndarray, rows: np.ndarray, codes: np.ndarray, n_groups: int,
                fooled: np.ndarray | None = None, medians: bool = True) -> dict[str, np.ndarray]:
        """Counts per group over (example row, group code) pairs that pass the mask."""
        ex = self.examples
        keep = mask[rows] & (codes >= 0)
        rows, codes = rows[keep], codes[keep]
        counted = ex["status"][rows] != RETRACTED
        fooled_here = (ex["fooled"][rows] if fooled is None else fooled[keep]) == 1
        decided = ex["decided"][rows]
        perturbed = counted & ex["perturbation"][rows]
        # One pass: every (group, flags) pair counted at once; the figures are sums over flags.
        flags = (counted.astype(np.int64) | (fooled_here << 1) | ((decided == DECIDED_CORRECT) << 2)
                 | ((decided == DECIDED_INCORRECT) << 3) | ((decided >= 0) << 4))
        table = np.bincount(codes * 32 + flags, minlength=n_groups * 32)[:n_groups * 32].reshape(n_groups, 32)

        def count(*bits: int, without: int = 0) -> np.ndarray:
            return table[:, _flag_set(bits, without)].sum(axis=1)

        out = {
            "submitted": count(1), "retracted": count(without=1), "fooled": count(1, 2),
            "validated_fooling": count(1, 2, 4), "decided": count(1, 16), "rejected": count(1, 8),
        }
        times = ex["time_ms"][rows]
        if medians:
            timed = counted & (times > 0)
            out["median_ms"] = _group_median(codes[timed], times[timed], n_groups)
        else:
            out["median_ms"] = np.full(n_groups, np.nan)
        out["writing_ms"] = np.bincount(codes, weights=times, minlength=n_groups)[:n_groups]
        if perturbed.any():
            edits = ex["edit_distance"][rows[perturbed]]
            measured = ~np.isnan(edits)
            edit_codes = codes[perturbed][measured]
            out["perturbations"] = np.bincount(edit_codes, minlength=n_groups)[:n_groups]
            out["edit_sum"] = np.bincount(edit_codes, weights=edits[measured], minlength=n_groups)[:n_groups]
        else:
            out["perturbations"] = out["edit_sum"] = np.zeros(n_groups)
        return out

    @staticmethod
    def _rows(stats: dict[str, np.ndarray], keys: list[str], names: list[str], *, per_person: bool = False) -> list[Group]:
        groups = []
        for i, (key, name) in enumerate(zip(keys, names)):
            submitted, retracted, decided = int(stats["submitted"][i]), int(stats["retracted"][i]), int(stats["decided"][i])
            group = Group(
                key=key, name=name, submitted=submitted, retracted=retracted, fooled=int(stats["fooled"][i]),
                validated_fooling=int(stats["validated_fooling"][i]), decided=decided,
                rejected=int(stats["rejected"][i]), undecided=submitted - decided,
                mer=_ratio(stats["fooled"][i], submitted), vmer=_ratio(stats["validated_fooling"][i], submitted),
                rejection_rate=_ratio(stats["rejected"][i], decided),
                retraction_rate=_ratio(retracted, submitted + retracted),
                median_seconds=None if math.isnan(stats["median_ms"][i]) else float(stats["median_ms"][i]) / 1000,
            )
            if per_person:
                hours = float(stats["writing_ms"][i]) / 3_600_000
                group.writing_hours = hours if hours > 0 else None
                group.examples_per_hour = submitted / hours if hours > 0 else None
                group.perturbations = int(stats["perturbations"][i])
                group.mean_edit_distance = _ratio(stats["edit_sum"][i], group.perturbations)
            groups.append(group)
        return groups

    def annotators(self, flt: DashboardFilter, mask: np.ndarray | None = None,
                   wide: np.ndarray | None = None) -> list[Group]:
        """One row per person who wrote or validated an example in view."""
        ex, val = self.examples, self.validations
        mask = self.example_mask(flt) if mask is None else mask
        wide = self.example_mask(flt, authors=False) if wide is None else wide
        n_people = len(self.people)
        stats = self._groups(mask, np.arange(len(ex)), ex["author"], n_people)
        # As a validator: peer verdicts on examples in view (whoever wrote them).
        peer = val["peer"] & wide[val["example"]] if len(val) else np.zeros(0, np.bool_)
        validators, examples, keys = val["validator"][peer], val["example"][peer], val["key"][peer]
        decided_key = ex["decided_key"][examples]
        on_decided = decided_key >= 0
        given = np.bincount(validators, minlength=n_people)[:n_people]
        judged = np.bincount(validators[on_decided], minlength=n_people)[:n_people]
        agreeing = np.bincount(validators[on_decided & (keys == decided_key)], minlength=n_people)[:n_people]
        shown = (stats["submitted"] + stats["retracted"] + given) > 0
        if flt.author_ids:
            chosen = np.zeros(n_people, dtype=np.bool_)
            chosen[[c for c in (self._code(self.people, a) for a in flt.author_ids) if c >= 0]] = True
            shown &= chosen
        people = np.nonzero(shown)[0]
        picked = {name: column[people] for name, column in stats.items()}
        ids = [self.people.values[p] for p in people]
        rows = self._rows(picked, ids, [self.names.get(i, i) for i in ids], per_person=True)
        for row, p in zip(rows, people):
            row.validations, row.validations_on_decided = int(given[p]), int(judged[p])
            row.agreement_with_decision = _ratio(agreeing[p], judged[p])
        return sorted(rows, key=lambda r: (-r.submitted, r.name.casefold()))

    def breakdown(self, by: str, flt: DashboardFilter, mask: np.ndarray | None = None, *,
                  medians: bool = True) -> list[Group]:
        """Rows per round, target model, label or choice metadata field (an example with several
        target groups counts in each of them)."""
        ex = self.examples
        mask = self.example_mask(flt) if mask is None else mask
        fooled = None
        if by == "round":
            rows, codes, codebook = np.arange(len(ex)), ex["round"], self.rounds
        elif by == "label":
            rows, codes, codebook = np.arange(len(ex)), ex["label"], self.labels_codes
        elif by == "model":
            rows, codes, codebook, fooled = self.output_rows, self.output_models, self.models, self.output_fooled
        elif by in self.facet_rows:
            rows, codes, codebook = self.facet_rows[by], self.facet_values[by], self.facet_fields[by]
        else:
            return []
        stats = self._groups(mask, rows, codes, len(codebook), fooled, medians)
        present = np.nonzero(stats["submitted"] + stats["retracted"])[0]
        picked = {name: column[present] for name, column in stats.items()}
        keys = [codebook.values[i] for i in present]
        names = [self.names.get(k, k) for k in keys]
        groups = self._rows(picked, keys, names)
        if by == "round":
            return sorted(groups, key=lambda g: self.round_numbers.get(g.key, ("", 0))[1])
        return sorted(groups, key=lambda g: (-g.submitted, g.name.casefold()))

    def agreement(self, flt: DashboardFilter, mask: np.ndarray | None = None,
                  min_overlap: int = MIN_OVERLAP) -> tuple[Agreement, dict[int, str]]:
        """Agreement among peer validators on the examples in view."""
        val = self.validations
        mask = self.example_mask(flt) if mask is None else mask
        peer = val["peer"] & mask[val["example"]] if len(val) else np.zeros(0, np.bool_)
        # One peer verdict per (example, validator): the schema's unique constraint guarantees it.
        result = agreement(val["example"][peer], val["validator"][peer], val["key"][peer], min_overlap=min_overlap,
                           unique=True, dense=True)
        names = {code: self.names.get(self.people.values[code], self.people.values[code])
                 for code in {p.rater_a for p in result.pairs} | {p.rater_b for p in result.pairs}}
        return result, names

    def decided_at(self) -> np.ndarray:
        """When each decided example was decided: its latest verdict (no peer verdict follows a
        decision; a lead's adjudication is the latest by definition). NaN for undecided ones.
        Kept up to date row by row as verdicts arrive; rebuilt after big loads."""
        if self._decided_at is not None and self._changed_rows is not None:
            ex, val = self.examples, self.validations
            when = self._decided_at
            if len(when) < len(ex):
                when = np.concatenate([when, np.full(len(ex) - len(when), np.nan)])
            for row in self._changed_rows:
                times = val["at"][val["example"] == row]
                when[row] = times.max() if len(times) and ex["decided"][row] >= 0 else np.nan
            self._decided_at, self._changed_rows = when, set()
        if self._decided_at is None or self._changed_rows is None:
            ex, val = self.examples, self.validations
            when = np.full(len(ex), np.nan)
            if len(val):
                order = np.lexsort((val["at"], val["example"]))
                examples = val["example"][order]
                last = np.r_[examples[1:] != examples[:-1], True]
                when[examples[last]] = val["at"][order][last]
            when[ex["decided"] < 0] = np.nan
            self._decided_at, self._changed_rows = when, set()
        return self._decided_at

    def view(self, flt: DashboardFilter, *, breakdown: str = "round", chart_people: Sequence[uuid.UUID | str] = (),
             now: datetime | None = None) -> DashboardView:
        """Every figure the dashboard shows for this filter, with one breakdown in full (the
        others are a selector's click away: :meth:`breakdown`)."""
        with self._lock:
            return self._view(flt, breakdown, chart_people, now)

    def breakdown_titles(self, task_id: uuid.UUID | None) -> tuple[dict[str, str], dict[str, str]]:
        """Breakdown name -> title, and choice metadata field -> its label, for a task."""
        titles = {"round": "Per round", "model": "Per target model", "label": "Per label"}
        facets = {}
        if task_id is not None:
            for spec in self.tasks.definition(task_id).metadata:
                if spec.kind != MetadataKind.TEXT:
                    facets[spec.name] = spec.label
        else:
            facets = {name: name.replace("_", " ").capitalize() for name in self.facet_rows}
        titles.update({name: f"Per {label.casefold()}" for name, label in facets.items()})
        return titles, facets

    def _view(self, flt: DashboardFilter, breakdown: str, chart_people, now) -> DashboardView:
        ex = self.examples
        task_only = DashboardFilter(task_id=flt.task_id)
        in_task = self.example_mask(task_only)
        wide = self.example_mask(flt, authors=False)
        mask = wide.copy()
        if flt.author_ids:
            mask &= np.isin(ex["author"], [self._code(self.people, a) for a in flt.author_ids])
        annotators = self.annotators(flt, mask, wide)
        breakdown_titles, facet_titles = self.breakdown_titles(flt.task_id)
        if breakdown not in breakdown_titles:
            breakdown = "round"
        breakdowns = {breakdown: self.breakdown(breakdown, flt, mask)}
        agreement_result, rater_names = self.agreement(flt, mask)
        counted = mask & (ex["status"] != RETRACTED)

        def chart(name: str, **without) -> list[Group]:
            """A chart's bars ignore the chart's own filter, so that the other bars stay to click
            (the chosen one is highlighted); they need counts and rates, not medians."""
            if not any(getattr(flt, field) for field in without):
                return breakdowns.get(name) or self.breakdown(name, flt, mask, medians=False)
            others = replace(flt, **without)
            return self.breakdown(name, others, self.example_mask(others), medians=False)

        labels = [Bar(g.key, g.name, g.submitted) for g in chart("label", labels=())]
        facets = {}
        for name in facet_titles:
            if flt.facets.get(name):
                others = replace(flt, facets={k: v for k, v in flt.facets.items() if k != name})
                groups = self.breakdown(name, others, self.example_mask(others), medians=False)
            else:
                groups = chart(name)
            facets[name] = [Bar(g.key, g.name, g.submitted) for g in groups]
        by_round = [Bar(g.key, g.name, g.mer or 0.0, g.vmer or 0.0) for g in chart("round", round_ids=())]
        edges, series, bin_seconds = self._time_series(counted, annotators, chart_people)
        backlog_times, backlog = self._backlog(counted, now)
        return DashboardView(
            total_examples=int(in_task.sum()), matching=int(mask.sum()), annotators=annotators, breakdowns=breakdowns,
            breakdown_titles=breakdown_titles, agreement=agreement_result, rater_names=rater_names,
            time_edges=edges, time_series=series, labels=labels, facets=facets, facet_titles=facet_titles,
            fooling_by_round=by_round, backlog_times=backlog_times, backlog=backlog, bin_seconds=bin_seconds,
        )

    def _time_series(self, counted: np.ndarray, annotators: list[Group], chart_people) -> tuple[list, list, float]:
        """Cumulative MER and vMER at the end of each time bin, for the chosen people (or the most
        productive few)."""
        ex = self.examples
        times = ex["submitted_at"]
        usable = counted & ~np.isnan(times)
        if not usable.any():
            return [], [], 86400.0
        start, end = float(times[usable].min()), float(times[usable].max())
        width = _bin_width(end - start)
        n_bins = int((end - start) // width) + 1
        wanted = [p.hex if isinstance(p, uuid.UUID) else str(p) for p in chart_people]
        if not wanted:
            wanted = [a.key for a in annotators if a.submitted][:CHART_ANNOTATORS]
        series = []
        # Each wanted person gets a slot; one bincount over (slot, bin) counts them all.
        slot_of = np.full(len(self.people) + 1, -1, dtype=np.int64)
        wanted = [key for key in wanted if self.people.index.get(key, -1) >= 0]
        for slot, key in enumerate(wanted):
            slot_of[self.people.index[key]] = slot
        slots = slot_of[ex["author"]]
        mine = usable & (slots >= 0)
        bins = ((times[mine] - start) // width).astype(np.int64)
        cells = slots[mine] * n_bins + bins
        fooled = ex["fooled"][mine] == 1
        correct = ex["decided"][mine] == DECIDED_CORRECT
        size = len(wanted) * n_bins

        def cumulative(selection) -> np.ndarray:
            return np.cumsum(np.bincount(cells[selection], minlength=size)[:size].reshape(len(wanted), n_bins), axis=1)

        submitted = cumulative(slice(None))
        fooling, valid = cumulative(fooled), cumulative(fooled & correct)
        with np.errstate(invalid="ignore", divide="ignore"):
            mer = np.where(submitted > 0, fooling / np.maximum(submitted, 1), np.nan)
            vmer = np.where(submitted > 0, valid / np.maximum(submitted, 1), np.nan)
        for slot, key in enumerate(wanted):
            if submitted[slot, -1]:
                series.append(Series(key, self.names.get(key, key), mer[slot].tolist(), vmer[slot].tolist()))
        edges = (start + width * (np.arange(n_bins) + 1)).tolist()
        return edges, series, width

    def _backlog(self, counted: np.ndarray, now: datetime | None) -> tuple[list[float], list[int]]:
        """Examples submitted but not yet decided, at the end of each time bin."""
        ex = self.examples
        submitted_at = ex["submitted_at"][counted]
        submitted_at = submitted_at[~np.isnan(submitted_at)]
        if not len(submitted_at):
            return [], []
        decided = self.decided_at()[counted]
        decided = decided[~np.isnan(decided)]
        start = float(submitted_at.min())
        end = max(float(submitted_at.max()), float(decided.max()) if len(decided) else start,
                  (now or datetime.now(timezone.utc)).timestamp())
        width = _bin_width(end - start)
        n_bins = int((end - start) // width) + 1
        edges = start + width * (np.arange(n_bins) + 1)
        edges[-1] = min(edges[-1], end + 1)

        def arrived_by_each_edge(times: np.ndarray) -> np.ndarray:  # counts per bin, summed up: no sort
            bins = np.clip((times - start) // width, 0, n_bins - 1).astype(np.int64)
            return np.cumsum(np.bincount(bins, minlength=n_bins))

        backlog = arrived_by_each_edge(submitted_at) - arrived_by_each_edge(decided)
        return edges.tolist(), backlog.astype(int).tolist()


def _epoch(column: str) -> str:
    """Unix seconds of a stored UTC timestamp, to the microsecond (julianday alone keeps milliseconds)."""
    return (f"(round((julianday(substr({column}, 1, 19)) - {JULIAN_UNIX_EPOCH}) * 86400.0) "
            f"+ CAST(substr({column}, 20) AS REAL))")


def _advance(mark: str, at_mark: set[str], ids, stamps) -> tuple[str, set[str]]:
    latest = max(stamps)
    if latest < mark:
        return mark, at_mark
    now_at = {i for i, stamp in zip(ids, stamps) if stamp == latest}
    return latest, (at_mark | now_at) if latest == mark else now_at


@functools.lru_cache(maxsize=None)
def _flag_set(bits: tuple[int, ...], without: int) -> list[int]:
    """The 5-bit flag values with all of ``bits`` set and ``without`` clear."""
    return [f for f in range(32) if all(f & b for b in bits) and not f & without]


def _ratio(numerator, denominator) -> float | None:
    return float(numerator) / float(denominator) if denominator else None


def _bin_width(span_seconds: float) -> float:
    """Hours, days or weeks: the smallest that keeps the charts to about 60 points."""
    for width in (3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0, 30 * 86400.0):
        if span_seconds / width <= 60:
            return width
    return 365 * 86400.0


def _group_median(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The median of non-negative integer values (milliseconds) in each group, NaN where a group
    has none; one sort of (group, value) packed into int64."""
    result = np.full(n_groups, np.nan)
    if not len(codes):
        return result
    values = np.clip(values.astype(np.int64), 0, (1 << 32) - 1)
    keys = np.sort((codes.astype(np.int64) << 32) | values)
    groups = np.arange(n_groups, dtype=np.int64) << 32
    lo = np.searchsorted(keys, groups, side="left")
    hi = np.searchsorted(keys, groups + (1 << 32), side="left")
    count = hi - lo
    has = count > 0
    sorted_values = (keys & ((1 << 32) - 1)).astype(np.float64)
    last = len(keys) - 1
    lower = sorted_values[np.minimum(lo + (count - 1) // 2, last)]
    upper = sorted_values[np.minimum(lo + count // 2, last)]
    result[has] = ((lower + upper) / 2)[has]
    return result



EXPORT_EXTRA_COLUMNS = [
    ("writing_hours", "Writing hours", "float1", ""), ("retracted", "Retracted examples", "int", ""),
    ("fooled", "Fooling", "int", ""), ("validated_fooling", "Validated fooling", "int", ""),
    ("decided", "Decided", "int", ""), ("perturbations", "Perturbations", "int", ""),
    ("validations_on_decided", "Validations on decided", "int", ""),
]


def export_csv(rows: Sequence[Group], path, *, per_person: bool) -> "Path":
    """Write the per-annotator table (``per_person``) or a breakdown as CSV: rates as fractions,
    times in seconds, empty cells where a figure is undefined."""
    from pathlib import Path

    from app.errors import DynadeskError

    columns = ANNOTATOR_COLUMNS + EXPORT_EXTRA_COLUMNS if per_person else BREAKDOWN_COLUMNS
    path = Path(path)
    try:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow([header for _, header, _, _ in columns])
            for row in rows:
                writer.writerow(["" if (value := getattr(row, name)) is None else value for name, *_ in columns])
    except OSError as exc:
        raise DynadeskError(f"Could not write {path}: {exc.strerror or exc}") from exc
    return path
