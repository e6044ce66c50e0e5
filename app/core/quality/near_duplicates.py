"""The near-duplicate index of a desk: every counted example of a task (submitted or flagged; the
writer's own and those synced from others), answering "which examples are near this text" from
MinHash LSH candidates confirmed with the exact similarity (``similarity``).

Kept current without rescanning: SQLite triggers log every stored, changed or removed example in
``example_changes`` (migration 0013), whatever wrote it (submit, import, sync pull); before each
answer the index applies the log entries past the last one it saw (usually none: one indexed
look-up). Signatures are stored in ``example_signatures`` so that opening a desk of 100,000
examples reads them instead of hashing every text again; the first build of an older desk fills
them in (the backfill). A task's index is built on first use, on the caller's thread: the GUI asks
from a worker (``QualityLane``), never from the Qt thread.

Thread-safe: one lock around the in-memory state (readers of the database are independent).
"""

from __future__ import annotations

import random
import threading
import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime
from typing import Callable, Iterable, Literal, Sequence

import numpy as np
from sqlalchemy import Row, delete, func, insert, select
from sqlalchemy.orm import Session

from app.core.domain import ExampleStatus
from app.core.quality.band_table import BandTable
from app.core.quality.signatures import (
    BANDS,
    SCHEME,
    SIMILARITY_FLOOR,
    band_hashes,
    band_hashes_many,
    from_bytes,
    text_hash,
    to_bytes,
)
from app.core.quality.similarity import jaccard, normalise, shingles
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleChange, ExampleSignature, Person, Round

COUNTED_STATUSES = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value)
_CHUNK = 900  # ids per IN (...) query
PRUNE_AFTER = 50_000  # change-log entries kept before the applied ones are dropped


@dataclass(frozen=True)
class NearMatch:
    """An example near a text, with what a writer or lead needs to see of it."""

    example_id: uuid.UUID
    similarity: float
    text: str
    true_label: str | None
    round_number: int
    author_id: uuid.UUID
    author_name: str


@dataclass(frozen=True)
class Nearest:
    """The examples nearest a text (best first, down to ``SIMILARITY_FLOOR``) under ``threshold``."""

    matches: tuple[NearMatch, ...]
    threshold: float

    @property
    def near(self) -> tuple[NearMatch, ...]:
        """The matches that make the text a near-duplicate."""
        return tuple(m for m in self.matches if m.similarity >= self.threshold)

    @property
    def closest(self) -> NearMatch | None:
        return self.matches[0] if self.matches else None

    @property
    def novelty(self) -> float:
        """1 − the closest similarity; 1.0 when nothing is within ``SIMILARITY_FLOOR``."""
        return 1.0 - self.matches[0].similarity if self.matches else 1.0


@dataclass(frozen=True)
class ClusterMember:
    example_id: uuid.UUID
    round_number: int
    author_id: uuid.UUID
    similarity: float  # to the cluster's original (its first member: 1.0)


@dataclass(frozen=True)
class DuplicateCluster:
    """Near-duplicates linked by the threshold (single linkage), earliest submitted first: the first
    is the original, the others count as duplicates."""

    members: tuple[ClusterMember, ...]

    @property
    def example_ids(self) -> tuple[uuid.UUID, ...]:
        return tuple(m.example_id for m in self.members)

    @property
    def original_id(self) -> uuid.UUID:
        return self.members[0].example_id


@dataclass(frozen=True)
class DuplicateRate:
    """Of ``examples`` (an annotator's or a round's), ``duplicates`` repeat an earlier example."""

    key: str  # the author's id or the round number, as text
    label: str  # the author's name or "Round N"
    examples: int
    duplicates: int

    @property
    def rate(self) -> float:
        return self.duplicates / self.examples if self.examples else 0.0


@dataclass(frozen=True)
class NovelShare:
    """How many of a round's examples (checked: all, or a random sample) have no near-duplicate in
    an earlier round."""

    round_number: int
    examples: int
    checked: int
    novel: int

    @property
    def share(self) -> float:
        return self.novel / self.checked if self.checked else 1.0


# example id, normalised text, round id, author id, submitted (epoch seconds), band hashes
_Entry = tuple[uuid.UUID, str, uuid.UUID, uuid.UUID, float, np.ndarray]


class _TaskIndex:
    """The in-memory index of one task. Rows only grow; a changed example gets a new row."""

    def __init__(self) -> None:
        self.example_ids: list[uuid.UUID] = []
        self.normalised: list[str] = []
        self.round_ids: list[uuid.UUID] = []
        self.author_ids: list[uuid.UUID] = []
        self.times: list[float] = []
        self.bands: list[np.ndarray] = []
        self.alive = bytearray()
        self.row_of: dict[uuid.UUID, int] = {}
        self.exact: dict[str, list[int]] = defaultdict(list)
        self.table = BandTable(BANDS)

    def _append(self, example_id: uuid.UUID, normalised: str, round_id: uuid.UUID, author_id: uuid.UUID,
                when: float, bands: np.ndarray) -> int:
        row = len(self.example_ids)
        self.example_ids.append(example_id)
        self.normalised.append(normalised)
        self.round_ids.append(round_id)
        self.author_ids.append(author_id)
        self.times.append(when)
        self.bands.append(bands)
        self.alive.append(1)
        self.row_of[example_id] = row
        self.exact[normalised].append(row)
        return row

    def build(self, entries: Sequence[_Entry]) -> None:
        for entry in entries:
            self._append(*entry)
        if entries:
            self.table.build(np.arange(len(entries)), np.stack(self.bands))

    def add(self, example_id: uuid.UUID, normalised: str, round_id: uuid.UUID, author_id: uuid.UUID,
            when: float, bands: np.ndarray) -> None:
        self.remove(example_id)
        self.table.add(self._append(example_id, normalised, round_id, author_id, when, bands), bands)

    def remove(self, example_id: uuid.UUID) -> None:
        row = self.row_of.pop(example_id, None)
        if row is not None:
            self.alive[row] = 0
            self.exact[self.normalised[row]].remove(row)

    def live_rows(self) -> Iterable[int]:
        return (row for row in self.row_of.values())

    def candidates(self, normalised: str, bands: np.ndarray) -> set[int]:
        found = {row for row in self.table.candidates(bands) if self.alive[row]}
        found.update(self.exact.get(normalised, ()))
        return found


def _when(moment: datetime | None) -> float:
    return moment.timestamp() if moment is not None else float("inf")


class NearDuplicateIndex:
    """Near-duplicate look-ups for every task of a desk; ``threshold_of(task_id)`` gives a task's
    near-duplicate threshold (the lead's ``QualitySettings``) where a call names none."""

    def __init__(self, db: Database, threshold_of: Callable[[uuid.UUID], float]):
        self.db = db
        self.threshold_of = threshold_of
        self._lock = threading.RLock()
        self._tasks: dict[uuid.UUID, _TaskIndex] = {}
        self._last_seq = 0
        self._round_numbers: dict[uuid.UUID, int] = {}
        self._unsaved: dict[uuid.UUID, dict] = {}

    # ----- building and keeping current -----

    def ensure_built(self, task_id: uuid.UUID, *, save: bool = True) -> None:
        """Build the task's index if it is not yet (reads every counted example once); stored
        signatures are reused, missing or stale ones computed and, with ``save``, stored."""
        with self._lock:
            self._catch_up()
            if task_id in self._tasks:
                return
            with self.db.read() as session:
                seq = session.scalar(select(func.max(ExampleChange.seq))) or 0
                rows = session.execute(
                    select(Example.id, Example.text, Example.round_id, Example.author_id, Example.submitted_at,
                           ExampleSignature.scheme, ExampleSignature.text_hash, ExampleSignature.normalised,
                           ExampleSignature.bands)
                    .outerjoin(ExampleSignature, ExampleSignature.example_id == Example.id)
                    .where(Example.task_id == task_id, Example.status.in_(COUNTED_STATUSES))
                    .order_by(Example.submitted_at, Example.id)).all()
                self._load_rounds(session, task_id)
            stale = [i for i, r in enumerate(rows) if r.scheme != SCHEME or r.text_hash != text_hash(r.text)]
            fresh_forms = [normalise(rows[i].text) for i in stale]
            fresh_bands = band_hashes_many(fresh_forms)
            computed = {i: (form, fresh_bands[k]) for k, (i, form) in enumerate(zip(stale, fresh_forms))}
            entries: list[_Entry] = []
            for i, r in enumerate(rows):
                form, bands = computed[i] if i in computed else (r.normalised, from_bytes(r.bands))
                if i in computed:
                    self._unsaved[r.id] = {"example_id": r.id, "scheme": SCHEME, "text_hash": text_hash(r.text),
                                           "normalised": form, "bands": to_bytes(bands)}
                entries.append((r.id, form, r.round_id, r.author_id, _when(r.submitted_at), bands))
            index = _TaskIndex()
            index.build(entries)
            first = not self._tasks
            self._tasks[task_id] = index
            if first:
                self._last_seq = seq
            else:  # the other tasks catch up to seq; for this one, changes up to seq apply again, harmlessly
                self._catch_up()
            if save:
                self.save_signatures()

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
            first = session.scalar(select(func.min(ExampleChange.seq)))
            if first is not None and self._last_seq - first > PRUNE_AFTER:
                session.execute(delete(ExampleChange).where(ExampleChange.seq <= self._last_seq))
        return len(keep)

    def _load_rounds(self, session: Session, task_id: uuid.UUID | None = None) -> None:
        query = select(Round.id, Round.number)
        if task_id is not None:
            query = query.where(Round.task_id == task_id)
        self._round_numbers.update({rid: number for rid, number in session.execute(query)})

    def _catch_up(self) -> None:
        """Apply the logged changes since the last look (lock held)."""
        if not self._tasks:
            return
        with self.db.read() as session:
            first = session.scalar(select(func.min(ExampleChange.seq)))
            if first is not None and first > self._last_seq + 1:  # pruned past us: start again
                self._tasks.clear()
                return
            changes = session.execute(select(ExampleChange.seq, ExampleChange.example_id)
                                      .where(ExampleChange.seq > self._last_seq).order_by(ExampleChange.seq)).all()
            if not changes:
                return
            ids = list(dict.fromkeys(example_id for _, example_id in changes))
            found: dict[uuid.UUID, Row] = {}
            for start in range(0, len(ids), _CHUNK):
                found.update({r.id: r for r in session.execute(
                    select(Example.id, Example.task_id, Example.text, Example.status, Example.round_id,
                           Example.author_id, Example.submitted_at)
                    .where(Example.id.in_(ids[start:start + _CHUNK])))})
            if any(r.round_id not in self._round_numbers for r in found.values()):
                self._load_rounds(session)
        for example_id in ids:
            for index in self._tasks.values():
                index.remove(example_id)
            r = found.get(example_id)
            if r is None or r.task_id not in self._tasks or r.status not in COUNTED_STATUSES:
                continue
            form = normalise(r.text)
            bands = band_hashes(form)
            self._tasks[r.task_id].add(r.id, form, r.round_id, r.author_id, _when(r.submitted_at), bands)
            self._unsaved[r.id] = {"example_id": r.id, "scheme": SCHEME, "text_hash": text_hash(r.text),
                                   "normalised": form, "bands": to_bytes(bands)}
        self._last_seq = changes[-1].seq

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
        grams = shingles(form)
        bands = band_hashes(form)
        skip = set(exclude)
        with self._lock:
            index = self._index(task_id)
            scored = []
            for row in index.candidates(form, bands):
                if index.example_ids[row] in skip or (round_id is not None and index.round_ids[row] != round_id):
                    continue
                other = index.normalised[row]
                score = 1.0 if other == form else jaccard(grams, shingles(other))
                if score >= SIMILARITY_FLOOR:
                    scored.append((score, -index.times[row], index.example_ids[row]))
        scored.sort(reverse=True)
        return Nearest(self._matches(scored[:limit]), chosen)

    def _matches(self, scored: list[tuple[float, float, uuid.UUID]]) -> tuple[NearMatch, ...]:
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
        mine = self._round_numbers[index.round_ids[row]]
        form = index.normalised[row]
        grams: frozenset[str] | None = None
        for other in index.candidates(form, index.bands[row]):
            if self._round_numbers[index.round_ids[other]] >= mine:
                continue
            if index.normalised[other] == form:
                return False
            grams = grams if grams is not None else shingles(form)
            if jaccard(grams, shingles(index.normalised[other])) >= threshold:
                return False
        return True

    def novel_share(self, task_id: uuid.UUID, round_id: uuid.UUID, *, threshold: float | None = None,
                    sample_size: int | None = 2000, seed: int = 0) -> NovelShare:
        """The share of the round's examples with no near-duplicate in an earlier round; over a
        random sample of ``sample_size`` (seeded) where the round has more (None: all)."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            rows = sorted(row for row in index.live_rows() if index.round_ids[row] == round_id)
            checked = rows if sample_size is None or len(rows) <= sample_size else \
                random.Random(seed).sample(rows, sample_size)
            novel = sum(self._novel_row(index, row, chosen) for row in checked)
            number = self._round_numbers.get(round_id, 0)
        return NovelShare(number, len(rows), len(checked), novel)

    def near_duplicate_clusters(self, task_id: uuid.UUID, *, round_id: uuid.UUID | None = None,
                                threshold: float | None = None) -> list[DuplicateCluster]:
        """Clusters of near-duplicates among the task's examples (of ``round_id`` only, where given),
        largest first; each cluster's first member is its earliest."""
        chosen = self.threshold_of(task_id) if threshold is None else threshold
        with self._lock:
            index = self._index(task_id)
            return self._clusters(index, chosen, round_id)

    def _clusters(self, index: _TaskIndex, threshold: float, round_id: uuid.UUID | None) -> list[DuplicateCluster]:
        wanted = {row for row in index.live_rows() if round_id is None or index.round_ids[row] == round_id}
        parent = {row: row for row in wanted}

        def find(row: int) -> int:
            while parent[row] != row:
                parent[row] = parent[parent[row]]
                row = parent[row]
            return row

        grams: dict[int, frozenset[str]] = {}

        def near(a: int, b: int) -> bool:
            if index.normalised[a] == index.normalised[b]:
                return True
            for row in (a, b):
                if row not in grams:
                    grams[row] = shingles(index.normalised[row])
            return jaccard(grams[a], grams[b]) >= threshold

        for same in index.exact.values():
            rows = [row for row in same if row in wanted]
            for row in rows[1:]:
                parent[find(row)] = find(rows[0])
        for bucket in index.table.buckets():
            rows = [row for row in bucket.tolist() if row in wanted]
            for pivot_at, pivot in enumerate(rows):  # each row against the bucket's rows not yet joined to it
                for row in rows[pivot_at + 1:]:
                    if find(row) != find(pivot) and near(pivot, row):
                        parent[find(row)] = find(pivot)
                if pivot_at >= 2:
                    break  # three pivots per bucket: the rest are reached through other bands or pivots
        groups: dict[int, list[int]] = defaultdict(list)
        for row in wanted:
            groups[find(row)].append(row)
        clusters = []
        for rows in groups.values():
            if len(rows) < 2:
                continue
            rows.sort(key=lambda r: (index.times[r], str(index.example_ids[r])))
            first = shingles(index.normalised[rows[0]])
            clusters.append(DuplicateCluster(tuple(
                ClusterMember(index.example_ids[r], self._round_numbers.get(index.round_ids[r], 0),
                              index.author_ids[r],
                              1.0 if index.normalised[r] == index.normalised[rows[0]]
                              else round(jaccard(first, shingles(index.normalised[r])), 4))
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
            duplicates = {m.example_id for c in self._clusters(index, chosen, None) for m in c.members[1:]}
            totals: dict[str, int] = defaultdict(int)
            repeats: dict[str, int] = defaultdict(int)
            for row in index.live_rows():
                if round_id is not None and index.round_ids[row] != round_id:
                    continue
                key = str(index.author_ids[row]) if by == "annotator" else \
                    str(self._round_numbers.get(index.round_ids[row], 0))
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

    def size(self, task_id: uuid.UUID) -> int:
        """How many examples of the task the index holds."""
        with self._lock:
            return len(self._index(task_id).row_of)
