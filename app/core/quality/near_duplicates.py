"""The near-duplicate index of a desk: every counted example of a task (submitted or flagged; the
writer's own and those synced from others), answering "which examples are near this text" from
MinHash LSH candidates confirmed with the exact similarity (``similarity``).

Kept current without rescanning: SQLite triggers log every stored, changed or removed example in
``example_changes`` (migration 0013), whatever wrote it (submit, import, sync pull); before each
answer the index applies the log entries past the last one it saw (usually none: one indexed
look-up). Signatures are stored in ``example_signatures`` so that opening a desk of 100,000
examples reads them instead of hashing every text again; the first build of an older desk fills
them in (the backfill). A task's index is built on first use, on the caller's thread: the GUI asks
from a worker (``app.gui.quality_guard``, the Review's quality lane), never from the Qt thread.

Thread-safe: one lock around the in-memory state (readers of the database are independent).
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

import numpy as np
from sqlalchemy import Row, String, delete, func, insert, select, type_coerce
from sqlalchemy.orm import Session

from app.core.domain import ExampleStatus
from app.core.quality.band_table import BandTable
from app.core.quality.results import (
    ClusterMember,
    DuplicateCluster,
    DuplicateRate,
    Nearest,
    NearMatch,
    NovelShare,
)
from app.core.quality.signatures import (
    BANDS,
    ESTIMATE_MARGIN,
    NUM_PERM,
    SCHEME,
    SIMILARITY_FLOOR,
    band_hashes,
    estimated_similarity,
    from_bytes,
    minhash,
    minhash_many,
    text_hash,
    to_bytes,
)
from app.core.quality.similarity import jaccard, normalise, shingles
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleChange, ExampleSignature, Person, Round
from app.core.tasks.variants import is_variant_source, sql_not_variant

__all__ = ["COUNTED_STATUSES", "ClusterMember", "DuplicateCluster", "DuplicateRate", "NearDuplicateIndex",
           "NearMatch", "Nearest", "NovelShare"]

COUNTED_STATUSES = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value)
_CHUNK = 900  # ids per IN (...) query
PRUNE_AFTER = 50_000  # change-log entries kept before the applied ones are dropped


# example id, normalised text, round id, round number, author id, submitted (as stored), signature
_Entry = tuple[uuid.UUID, str, uuid.UUID, int, uuid.UUID, str, np.ndarray]


class _TaskIndex:
    """The in-memory index of one task. Rows only grow; a changed example gets a new row."""

    def __init__(self, seq: int) -> None:
        self.seq = seq  # the last change-log entry this index has applied
        self.removals = 0
        self.example_ids: list[uuid.UUID] = []
        self.normalised: list[str] = []
        self.round_ids: list[uuid.UUID] = []
        self.author_ids: list[uuid.UUID] = []
        self.times: list[str] = []
        self.rounds = np.zeros(0, dtype=np.int32)  # round number per row
        self.alive = np.zeros(0, dtype=bool)
        self.signatures = np.zeros((0, NUM_PERM), dtype=np.uint32)
        self.row_of: dict[uuid.UUID, int] = {}
        self.exact: dict[str, list[int]] = defaultdict(list)
        self.table = BandTable(BANDS)

    def __len__(self) -> int:
        return len(self.example_ids)

    def _grow(self, needed: int) -> None:
        if needed <= self.alive.size:
            return
        capacity = max(needed, 2 * self.alive.size, 1024)
        self.rounds = np.resize(self.rounds, capacity)
        self.alive = np.concatenate((self.alive, np.zeros(capacity - self.alive.size, dtype=bool)))
        grown = np.zeros((capacity, NUM_PERM), dtype=np.uint32)
        grown[: len(self)] = self.signatures[: len(self)]
        self.signatures = grown

    def _append(self, entry: _Entry) -> int:
        example_id, normalised, round_id, round_number, author_id, when, signature = entry
        row = len(self)
        self._grow(row + 1)
        self.example_ids.append(example_id)
        self.normalised.append(normalised)
        self.round_ids.append(round_id)
        self.author_ids.append(author_id)
        self.times.append(when)
        self.rounds[row] = round_number
        self.alive[row] = True
        self.signatures[row] = signature
        self.row_of[example_id] = row
        self.exact[normalised].append(row)
        return row

    def build(self, entries: Sequence[_Entry]) -> None:
        self._grow(len(entries))
        for entry in entries:
            self._append(entry)
        if entries:
            self.table.build(np.arange(len(entries)), band_hashes(self.signatures[: len(entries)]))

    def add(self, entry: _Entry) -> None:
        self.remove(entry[0])
        row = self._append(entry)
        self.table.add(row, band_hashes(self.signatures[row]))

    def remove(self, example_id: uuid.UUID) -> None:
        row = self.row_of.pop(example_id, None)
        if row is not None:
            self.removals += 1  # kept clusters can no longer be extended: they are computed again
            self.alive[row] = False
            self.exact[self.normalised[row]].remove(row)

    def live_rows(self) -> Iterable[int]:
        return self.row_of.values()

    def scored(self, form: str, signature: np.ndarray, at_least: float,
               keep: Callable[[np.ndarray], np.ndarray] | None = None) -> list[tuple[float, int]]:
        """(exact similarity, row) of every live row at ``at_least`` or more (LSH may miss a row
        below the threshold it was tuned for; see ``signatures``). ``keep`` filters rows first."""
        rows = self.table.candidates(band_hashes(signature))
        rows = rows[self.alive[rows]]
        if keep is not None:
            rows = rows[keep(rows)]
        estimates = estimated_similarity(signature, self.signatures[rows])
        grams = shingles(form)
        out = []
        for row in rows[estimates >= at_least - ESTIMATE_MARGIN].tolist():
            other = self.normalised[row]
            score = 1.0 if other == form else jaccard(grams, shingles(other))
            if score >= at_least:
                out.append((score, row))
        seen = {row for _, row in out}
        for row in self.exact.get(form, ()):  # equal forms are near whatever their signatures say
            if row not in seen and (keep is None or keep(np.array([row]))[0]):
                out.append((1.0, row))
        return out


def _find(parent: np.ndarray, row: int) -> int:
    while parent[row] != row:
        parent[row] = parent[parent[row]]
        row = int(parent[row])
    return row


def _join(parent: np.ndarray, a: int, b: int) -> None:
    """Union by smallest row: a cluster's root is its smallest row."""
    root_a, root_b = _find(parent, a), _find(parent, b)
    if root_a != root_b:
        parent[max(root_a, root_b)] = min(root_a, root_b)


def _roots(parent: np.ndarray) -> np.ndarray:
    """Every row's root, by pointer jumping (vectorised); ``parent`` is left as it was."""
    while True:
        jumped = parent[parent]
        if np.array_equal(jumped, parent):
            return jumped
        parent = jumped


_NEVER = "~"  # sorts after every stored time: an example without a submission time is the latest


def raw_time(column: Any) -> Any:
    """A time column as SQLite stores it ("YYYY-MM-DD HH:MM:SS.ffffff", UTC): ordered as text, unparsed."""
    return type_coerce(column, String).label(column.key)


class NearDuplicateIndex:
    """Near-duplicate look-ups for every task of a desk; ``threshold_of(task_id)`` gives a task's
    near-duplicate threshold (the lead's ``QualitySettings``) where a call names none."""

    def __init__(self, db: Database, threshold_of: Callable[[uuid.UUID], float]):
        self.db = db
        self.threshold_of = threshold_of
        self._lock = threading.RLock()
        self._tasks: dict[uuid.UUID, _TaskIndex] = {}
        self._round_numbers: dict[uuid.UUID, int] = {}
        self._unsaved: dict[uuid.UUID, dict] = {}
        # per task: (threshold, the index's removals, its size, each row's cluster) when last computed
        self._labels_kept: dict[uuid.UUID, tuple[float, int, int, np.ndarray]] = {}

    # ----- building and keeping current -----

    def ensure_built(self, task_id: uuid.UUID, *, save: bool = True) -> None:
        """Build the task's index if it is not yet (reads every counted example once); stored
        signatures are reused, missing or stale ones computed and, with ``save``, stored. The
        reading and hashing run outside the lock: other tasks' questions are answered meanwhile."""
        with self._lock:
            self._catch_up()
            if task_id in self._tasks:
                return
        index, unsaved = self._build(task_id)
        with self._lock:
            if task_id not in self._tasks:  # else another thread built it meanwhile
                self._tasks[task_id] = index
                self._unsaved.update(unsaved)
            self._catch_up()
        if save:
            self.save_signatures()

    def _build(self, task_id: uuid.UUID) -> tuple[_TaskIndex, dict[uuid.UUID, dict]]:
        raw = lambda column: type_coerce(column, String)  # noqa: E731  (the stored text: no per-row parsing)
        with self.db.read() as session:
            seq = session.scalar(select(func.max(ExampleChange.seq))) or 0
            rows = session.execute(
                select(raw(Example.id), Example.text, raw(Example.round_id), raw(Example.author_id),
                       raw(Example.submitted_at), ExampleSignature.scheme, ExampleSignature.text_hash,
                       ExampleSignature.normalised, ExampleSignature.minhash)
                .outerjoin(ExampleSignature, ExampleSignature.example_id == Example.id)
                .where(Example.task_id == task_id, Example.status.in_(COUNTED_STATUSES), sql_not_variant(Example.source))
                .order_by(Example.submitted_at, Example.id)).all()
            numbers = dict(session.execute(select(Round.id, Round.number).where(Round.task_id == task_id)).all())
        with self._lock:
            self._round_numbers.update(numbers)
        rounds = {rid.hex: (rid, number) for rid, number in numbers.items()}
        authors: dict[str, uuid.UUID] = {}
        hashes = [text_hash(text) for _, text, *_ in rows]
        stale = [i for i, r in enumerate(rows) if r[5] != SCHEME or r[6] != hashes[i]]
        fresh_forms = [normalise(rows[i][1]) for i in stale]
        computed = dict(zip(stale, zip(fresh_forms, minhash_many(fresh_forms))))
        entries: list[_Entry] = []
        unsaved: dict[uuid.UUID, dict] = {}
        for i, (example_hex, text, round_hex, author_hex, submitted, _, _, stored_form, blob) in enumerate(rows):
            example_id = uuid.UUID(example_hex)
            form, signature = computed[i] if i in computed else (stored_form, from_bytes(blob))
            if i in computed:
                unsaved[example_id] = self._signature_row(example_id, text, form, signature)
            round_id, number = rounds.get(round_hex) or (uuid.UUID(round_hex), 0)
            author = authors.get(author_hex) or authors.setdefault(author_hex, uuid.UUID(author_hex))
            entries.append((example_id, form, round_id, number, author, submitted or _NEVER, signature))
        index = _TaskIndex(seq)
        index.build(entries)
        return index, unsaved

    @staticmethod
    def _signature_row(example_id: uuid.UUID, text: str, form: str, signature: np.ndarray) -> dict:
        return {"example_id": example_id, "scheme": SCHEME, "text_hash": text_hash(text), "normalised": form,
                "minhash": to_bytes(signature)}

    def is_built(self, task_id: uuid.UUID) -> bool:
        """Whether the task's index is in memory (no database work, but it waits for the index's lock)."""
        with self._lock:
            return task_id in self._tasks

    def save_signatures(self) -> int:
        """Store the signatures computed since the last save (so the next open reads them)."""
        with self._lock:
            pending, self._unsaved = list(self._unsaved.values()), {}
        if not pending:
            return 0
        with self.db.write() as session:
            present = set()
            for start in range(0, len(pending), _CHUNK):
                ids = [p["example_id"] for p in pending[start:start + _CHUNK]]
                present |= set(session.scalars(select(Example.id).where(Example.id.in_(ids))))
            keep = [p for p in pending if p["example_id"] in present]  # removed since: nothing to keep
            if keep:
                session.execute(insert(ExampleSignature).prefix_with("OR REPLACE"), keep)
            # Applied log entries go once there are many (another open desk process that has not
            # applied them yet sees the gap and builds again).
            with self._lock:
                applied = min((index.seq for index in self._tasks.values()), default=0)
            first = session.scalar(select(func.min(ExampleChange.seq)))
            if first is not None and applied - first > PRUNE_AFTER:
                session.execute(delete(ExampleChange).where(ExampleChange.seq <= applied))
        return len(keep)

    def _load_rounds(self, session: Session, task_id: uuid.UUID | None = None) -> None:
        query = select(Round.id, Round.number)
        if task_id is not None:
            query = query.where(Round.task_id == task_id)
        self._round_numbers.update({rid: number for rid, number in session.execute(query)})

    def _catch_up(self) -> None:
        """Apply the logged changes each task's index has not seen yet (lock held)."""
        if not self._tasks:
            return
        since = min(index.seq for index in self._tasks.values())
        with self.db.read() as session:
            first = session.scalar(select(func.min(ExampleChange.seq)))
            if first is not None and first > since + 1:  # pruned past what some index saw: those start again
                for task_id in [t for t, index in self._tasks.items() if first > index.seq + 1]:
                    del self._tasks[task_id]
                return self._catch_up()
            changes = session.execute(select(ExampleChange.seq, ExampleChange.example_id)
                                      .where(ExampleChange.seq > since).order_by(ExampleChange.seq)).all()
            if not changes:
                return None
            latest = {example_id: seq for seq, example_id in changes}  # each example's last change
            ids = list(latest)
            found: dict[uuid.UUID, Row] = {}
            for start in range(0, len(ids), _CHUNK):
                found.update({r.id: r for r in session.execute(
                    select(Example.id, Example.task_id, Example.text, Example.status, Example.round_id,
                           Example.author_id, raw_time(Example.submitted_at), Example.source)
                    .where(Example.id.in_(ids[start:start + _CHUNK])))})
            if any(r.round_id not in self._round_numbers for r in found.values()):
                self._load_rounds(session)
        for example_id in ids:
            behind = [index for index in self._tasks.values() if index.seq < latest[example_id]]
            for index in behind:
                index.remove(example_id)
            r = found.get(example_id)
            if r is None or r.status not in COUNTED_STATUSES or is_variant_source(r.source):
                continue  # a generated variant is near its seed by design: no writer's duplicate
            index = self._tasks.get(r.task_id)
            if index is None or index not in behind:
                continue
            form = normalise(r.text)
            signature = minhash(form)
            index.add((r.id, form, r.round_id, self._round_numbers.get(r.round_id, 0), r.author_id,
                       r.submitted_at or _NEVER, signature))
            self._unsaved[r.id] = self._signature_row(r.id, r.text, form, signature)
        for index in self._tasks.values():
            index.seq = max(index.seq, changes[-1].seq)
        return None

    def _index(self, task_id: uuid.UUID) -> _TaskIndex:
        self.ensure_built(task_id, save=False)
        with self._lock:
            self._catch_up()
            if task_id not in self._tasks:  # the log was pruned under us
                self.ensure_built(task_id, save=False)
            return self._tasks[task_id]

    # ----- questions -----

    def nearest(self, task_id: uuid.UUID, text: str, *, round_id: uuid.UUID | None = None, limit: int = 3,
                threshold: float | None = None, exclude: Iterable[uuid.UUID] = ()) -> Nearest:
        """The examples of the task (of ``round_id`` only, where given) nearest ``text``, best first."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        form = normalise(text)
        signature = minhash(form)
        skip = set(exclude)
        with self._lock:
            index = self._index(task_id)
            keep = None
            if round_id is not None:
                number = self._round_numbers.get(round_id, -1)
                keep = lambda rows: index.rounds[rows] == number  # noqa: E731
            scored = [(score, index.times[row], index.example_ids[row])
                      for score, row in index.scored(form, signature, SIMILARITY_FLOOR, keep)
                      if index.example_ids[row] not in skip]
        scored.sort(key=lambda item: (-item[0], item[1]))  # most similar first; of equals, the earliest
        return Nearest(self._matches(scored[:limit]), chosen)

    def _matches(self, scored: list[tuple[float, str, uuid.UUID]]) -> tuple[NearMatch, ...]:
        if not scored:
            return ()
        with self.db.read() as session:
            rows = {r.id: r for r in session.execute(
                select(Example.id, Example.text, Example.true_label, Example.author_id, Round.number,
                       Person.display_name)
                .join(Round, Round.id == Example.round_id).join(Person, Person.id == Example.author_id)
                .where(Example.id.in_([example_id for _, _, example_id in scored])))}
        return tuple(NearMatch(example_id, round(score, 4), r.text, r.true_label, r.number, r.author_id,
                               r.display_name)
                     for score, _, example_id in scored if (r := rows.get(example_id)) is not None)

    def is_novel(self, task_id: uuid.UUID, example_id: uuid.UUID, *, threshold: float | None = None) -> bool:
        """Whether the example has no near-duplicate among the task's examples of earlier rounds."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            row = index.row_of.get(example_id)
            if row is None:
                raise KeyError(f"example {example_id} is not a counted example of task {task_id}")
            return self._novel_row(index, row, chosen)

    def _novel_row(self, index: _TaskIndex, row: int, threshold: float) -> bool:
        mine = int(index.rounds[row])
        earlier = index.scored(index.normalised[row], index.signatures[row], threshold,
                               lambda rows: index.rounds[rows] < mine)
        return not earlier

    def novel_share(self, task_id: uuid.UUID, round_id: uuid.UUID, *, threshold: float | None = None,
                    sample_size: int | None = 1000, seed: int = 0) -> NovelShare:
        """The share of the round's examples with no near-duplicate in an earlier round; over a
        random sample of ``sample_size`` (seeded) where the round has more (None: all). A sample
        of 1,000 puts the share within ±1.5 points (one standard error at a share of 0.9): a
        figure per round in about a second at 100,000 examples, where each check is a query."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            number = self._round_numbers.get(round_id, -1)
            size = len(index)
            rows = np.flatnonzero(index.alive[:size] & (index.rounds[:size] == number)).tolist()
            checked = rows if sample_size is None or len(rows) <= sample_size else \
                random.Random(seed).sample(rows, sample_size)
            novel = sum(self._novel_row(index, row, chosen) for row in checked)
        return NovelShare(max(number, 0), len(rows), len(checked), novel)

    def near_duplicate_clusters(self, task_id: uuid.UUID, *, round_id: uuid.UUID | None = None,
                                threshold: float | None = None) -> list[DuplicateCluster]:
        """Clusters of near-duplicates among the task's examples (of ``round_id`` only, where given),
        largest first; each cluster's first member is its earliest."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            if round_id is None:
                labels, wanted = self._task_labels(task_id, index, chosen), index.alive[: len(index)]
            else:
                wanted = index.alive[: len(index)] & (index.rounds[: len(index)] == self._round_numbers.get(round_id, -1))
                labels = self._components(index, chosen, wanted)
            return self._clusters(index, labels, wanted)

    def _task_labels(self, task_id: uuid.UUID, index: _TaskIndex, threshold: float) -> np.ndarray:
        """Each row's cluster (its smallest row) over the whole task, kept between calls: examples
        added since are joined one by one (a candidate query each); a removal, a changed text or
        another threshold, or many new examples at once (a big sync pull), compute them again."""
        size = len(index)
        cached = self._labels_kept.get(task_id)
        if cached is not None and cached[0] == threshold and cached[1] == index.removals \
                and size - cached[2] <= max(2000, size // 20):
            parent = np.concatenate((cached[3], np.arange(cached[2], size)))
            for row in range(cached[2], size):
                if index.alive[row]:
                    for _, other in index.scored(index.normalised[row], index.signatures[row], threshold):
                        _join(parent, row, other)
            labels = _roots(parent)
        else:
            labels = self._components(index, threshold, index.alive[:size])
        self._labels_kept[task_id] = (threshold, index.removals, size, labels)
        return labels

    @staticmethod
    def _components(index: _TaskIndex, threshold: float, wanted: np.ndarray) -> np.ndarray:
        """Connected components of the "near" graph over the ``wanted`` rows (roots: smallest rows)."""
        size = len(index)
        parent = np.arange(size)
        for same in index.exact.values():  # equal forms first: most repeats are these, and cost nothing
            if len(same) > 1:
                rows = [row for row in same if wanted[row]]
                for row in rows[1:]:
                    _join(parent, rows[0], row)
        grams: dict[int, frozenset[str]] = {}
        for a, b in index.table.pairs():
            label = _roots(parent)
            keep = wanted[a] & wanted[b] & (label[a] != label[b])  # pairs already joined cost nothing more
            a, b = a[keep], b[keep]
            if not a.size:
                continue
            pairs = np.unique(a.astype(np.int64) * size + b)  # each pair once
            a, b = pairs // size, pairs % size
            likely = (index.signatures[a] == index.signatures[b]).mean(axis=1) >= threshold - ESTIMATE_MARGIN
            for first, second in zip(a[likely].tolist(), b[likely].tolist()):
                if _find(parent, first) == _find(parent, second):
                    continue
                for row in (first, second):
                    if row not in grams:
                        grams[row] = shingles(index.normalised[row])
                if jaccard(grams[first], grams[second]) >= threshold:
                    _join(parent, first, second)
        return _roots(parent)

    @staticmethod
    def _groups(index: _TaskIndex, labels: np.ndarray, wanted: np.ndarray) -> list[list[int]]:
        """The clusters' rows (two or more), each earliest first."""
        rows = np.flatnonzero(wanted)
        if not rows.size:
            return []
        keys = labels[rows]
        order = np.argsort(keys, kind="stable")
        rows, keys = rows[order], keys[order]
        starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        ends = np.append(starts[1:], rows.size)
        groups = [rows[a:b].tolist() for a, b in zip(starts.tolist(), ends.tolist()) if b - a > 1]
        for group in groups:
            group.sort(key=lambda r: (index.times[r], str(index.example_ids[r])))
        return groups

    def _clusters(self, index: _TaskIndex, labels: np.ndarray, wanted: np.ndarray) -> list[DuplicateCluster]:
        clusters = []
        for rows in self._groups(index, labels, wanted):
            first_grams = shingles(index.normalised[rows[0]])
            clusters.append(DuplicateCluster(tuple(
                ClusterMember(index.example_ids[r], int(index.rounds[r]), index.author_ids[r],
                              1.0 if index.normalised[r] == index.normalised[rows[0]]
                              else round(jaccard(first_grams, shingles(index.normalised[r])), 4))
                for r in rows)))
        clusters.sort(key=lambda c: (-len(c.members), str(c.original_id)))
        return clusters

    def duplicate_rates(self, task_id: uuid.UUID, *, by: Literal["annotator", "round"] = "annotator",
                        round_id: uuid.UUID | None = None, threshold: float | None = None) -> list[DuplicateRate]:
        """Per annotator (or per round): their examples, and how many are duplicates, i.e. members
        of a task-wide near-duplicate cluster other than its earliest. ``round_id`` limits the
        examples counted (the clusters stay task-wide: a repeat of round 1 in round 2 counts)."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            size = len(index)
            groups = self._groups(index, self._task_labels(task_id, index, chosen), index.alive[:size])
            duplicates = {index.example_ids[row] for rows in groups for row in rows[1:]}
            totals: dict[str, int] = defaultdict(int)
            repeats: dict[str, int] = defaultdict(int)
            names: dict[uuid.UUID, str] = {}
            for row in index.live_rows():
                if round_id is not None and index.round_ids[row] != round_id:
                    continue
                author = index.author_ids[row]
                key = (names.get(author) or names.setdefault(author, str(author))) if by == "annotator" \
                    else str(int(index.rounds[row]))
                totals[key] += 1
                repeats[key] += index.example_ids[row] in duplicates
        labels = self._labels(by, totals)
        rates = [DuplicateRate(key, labels.get(key, key), totals[key], repeats[key]) for key in totals]
        rates.sort(key=lambda r: (-r.rate, r.label) if by == "annotator" else (int(r.key),))
        return rates

    def _labels(self, by: str, keys: Iterable[str]) -> dict[str, str]:
        if by == "round":
            return {key: f"Round {key}" for key in keys}
        ids = [uuid.UUID(key) for key in keys]
        with self.db.read() as session:
            return {str(pid): name for pid, name in session.execute(
                select(Person.id, Person.display_name).where(Person.id.in_(ids)))}

    def summaries(self, example_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, tuple[str, str]]:
        """(text, author's name) of each example, for showing clusters."""
        ids = list(example_ids)
        out: dict[uuid.UUID, tuple[str, str]] = {}
        with self.db.read() as session:
            for start in range(0, len(ids), _CHUNK):
                out.update({r.id: (r.text, r.display_name) for r in session.execute(
                    select(Example.id, Example.text, Person.display_name)
                    .join(Person, Person.id == Example.author_id).where(Example.id.in_(ids[start:start + _CHUNK])))})
        return out

    def size(self, task_id: uuid.UUID) -> int:
        """How many examples of the task the index holds."""
        with self._lock:
            return len(self._index(task_id).row_of)
