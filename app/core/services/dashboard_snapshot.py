"""The dashboard's numpy snapshot of examples and validations, and its incremental refresh from the database."""

from __future__ import annotations

import math
import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import repeat
from typing import Any

import numpy as np

from app.core.domain import ExampleStatus, ValidationMode, Verdict
from app.core.services.tasks import TaskService
from app.core.storage.db import Database
from app.core.tasks.variants import VARIANT_SOURCE

STATUSES = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value, ExampleStatus.RETRACTED.value)
RETRACTED = STATUSES.index(ExampleStatus.RETRACTED.value)
DECIDED_CORRECT, DECIDED_INCORRECT, DECIDED_FLAGGED = 0, 1, 2
VERDICT_CODES: dict[str | None, int] = {Verdict.CORRECT.value: DECIDED_CORRECT,
                                        Verdict.INCORRECT.value: DECIDED_INCORRECT,
                                        Verdict.FLAGGED.value: DECIDED_FLAGGED}
STATUS_CODES = {status: code for code, status in enumerate(STATUSES)}
DECIDED_CODES: dict[str | None, int] = {None: -1, **VERDICT_CODES}
JULIAN_UNIX_EPOCH = 2440587.5
ARM_CODES: dict[str | None, int] = {"on": 1, "off": 0}  # a session's arm; -1: none (outside the split)


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
    """The same key as app.core.services.validation.verdict_key, from bare columns."""
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


class _Table:
    """Parallel numpy columns with an id → row index, grown in place as rows arrive."""

    def __init__(self, columns: dict[str, type[np.generic]]):
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


class DashboardSnapshot:
    """Every non-draft example and every validation as numpy columns, refreshed incrementally."""

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
            "arm": np.int8, "applied": np.bool_,  # the writing assistant's record (ARM_CODES), read in SQL
            "imported": np.bool_,  # has a source (a data set, or a variant): not written, outside MER and vMER
            "variant": np.bool_,  # a generated variant (tasks.variants): no one's writing, left out by example_mask
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
            raw: Any = connection.connection.driver_connection  # plain tuples: 100k rows without Row objects

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
                       "decided_label, time_spent_ms, {submitted}, perturbation_of IS NOT NULL, edit_distance, "
                       "json_extract(assistance, '$.arm'), json_extract(assistance, '$.applied'), source IS NOT NULL, "
                       f"source IS '{VARIANT_SOURCE}', updated_at")

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
                example_ids = self.examples.ids
                known_marked = {example_ids[r] for r in np.nonzero(status != STATUSES.index(ExampleStatus.SUBMITTED.value))[0]}
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
         perturbation, edit_distance, arms, applied, imported, variant, updated) = zip(*rows)
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
            "arm": np.fromiter((ARM_CODES.get(a, -1) for a in arms), dtype=np.int8, count=len(arms)),
            "applied": np.array([a == 1 for a in applied], dtype=np.bool_),
            "imported": np.array(imported, dtype=np.bool_),
            "variant": np.array(variant, dtype=np.bool_),
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

    def _code(self, codes: Codes, value) -> int:
        return codes.index.get(value.hex if isinstance(value, uuid.UUID) else value, -2)

    def example_mask(self, flt: DashboardFilter, *, authors: bool = True, variants: bool = False) -> np.ndarray:
        """The examples the filter keeps. A generated variant only with ``variants`` (a validator's verdicts on
        it are their work); no figure of writing takes one: it is no one's writing."""
        ex = self.examples
        mask = np.ones(len(ex), dtype=np.bool_) if variants else ~ex["variant"]
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
