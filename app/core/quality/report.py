"""A task's data-quality figures per round: artifacts (overall and per annotator), diversity, and
the alerts a lead's thresholds raise. One plain function over plain columns, used by the CLI,
the Dashboard's quality view (on its worker) and the bench.

    data = QualityData.load(desk.db, task_id)             # one read of the submitted examples
    report = quality_report(data, thresholds=...)          # every figure but the embedding spread
    spreads = embedding_spreads(data, engine)              # needs a model: a job, never the GUI thread

Submitted means status submitted or flagged, as for MER (app/core/tasks/figures.py): drafts and
retracted examples are not data.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from app.core.quality.artifacts import MIN_COUNT, TOP, ArtifactTable, TermMatrix, artifact_tables, mark_recurring
from app.core.quality.diversity import (
    DISTINCT_SAMPLE,
    SPREAD_SAMPLE,
    DistinctN,
    distinct_n,
    embedding_spread,
    sample_indexes,
)
from app.core.tasks.variants import VARIANT_SOURCE
from local_models.progress import Progress

if TYPE_CHECKING:
    from app.core.quality.settings import QualitySettings

SUBMITTED = ("submitted", "flagged")
# A writer is judged on their duplicate rate from this many examples on (two of three is no pattern).
ALERT_MIN_COUNT = 10


@dataclass
class QualityData:
    """A task's submitted examples as parallel columns, in submission order."""

    ids: list[str]
    texts: list[str]
    rounds: np.ndarray  # round number of each example
    authors: np.ndarray  # index into author_keys
    labels: np.ndarray  # index into label_names; -1 without a label
    author_keys: list[str]  # person id (hex)
    author_names: dict[str, str]  # person id (hex) -> display name
    label_names: list[str]
    round_ids: dict[int, str] = field(default_factory=dict)  # round number -> id (hex)
    _matrix: TermMatrix | None = field(default=None, repr=False)

    @classmethod
    def load(cls, db: Any, task_id: Any, labels: Sequence[str] = ()) -> QualityData:
        """Read the task's submitted examples, never the adaptive suite's generated variants (one query over the plain sqlite connection: 100k
        rows in a few hundred ms). ``labels``: the task's labels, to keep their order."""
        task_hex = task_id.hex if hasattr(task_id, "hex") else str(task_id)
        with db.engine.connect() as connection, connection.begin():
            raw = connection.connection.driver_connection
            rounds = dict(raw.execute("SELECT id, number FROM rounds WHERE task_id = ?", (task_hex,)).fetchall())
            names = dict(raw.execute("SELECT id, display_name FROM people").fetchall())
            rows = raw.execute(
                "SELECT id, round_id, author_id, text, true_label FROM examples WHERE task_id = ? AND status IN "
                f"({', '.join('?' * len(SUBMITTED))}) AND source IS NOT ? ORDER BY submitted_at, rowid",
                (task_hex, *SUBMITTED, VARIANT_SOURCE)).fetchall()
        return cls.from_rows(rows, rounds, names, labels)

    @classmethod
    def from_rows(cls, rows: Sequence[tuple], round_numbers: dict[str, int], names: dict[str, str],
                  labels: Sequence[str] = ()) -> QualityData:
        """From (id, round id, author id, text, label) rows, round id -> number, person id -> name."""
        label_names = list(labels)
        label_index = {name: i for i, name in enumerate(label_names)}
        author_index: dict[str, int] = {}
        ids, texts, numbers, authors, codes = [], [], [], [], []
        for example_id, round_id, author_id, text, label in rows:
            ids.append(example_id)
            texts.append(text or "")
            numbers.append(round_numbers.get(round_id, 0))
            authors.append(author_index.setdefault(author_id, len(author_index)))
            if label is not None and label not in label_index:
                label_index[label] = len(label_names)
                label_names.append(label)
            codes.append(-1 if label is None else label_index[label])
        keys = list(author_index)
        return cls(ids, texts, np.asarray(numbers, dtype=np.int64), np.asarray(authors, dtype=np.int64),
                   np.asarray(codes, dtype=np.int64), keys, {k: names.get(k, k[:8]) for k in keys}, label_names,
                   {number: rid for rid, number in round_numbers.items()})

    @property
    def matrix(self) -> TermMatrix:
        """The examples' terms, built on first use and kept (about half a second per 100k)."""
        if self._matrix is None:
            self._matrix = TermMatrix.build(self.texts)
        return self._matrix

    def round_numbers(self) -> list[int]:
        return sorted({int(n) for n in np.unique(self.rounds)} | set(self.round_ids))

    def in_round(self, number: int | None) -> np.ndarray:
        return np.ones(len(self.ids), dtype=np.bool_) if number is None else self.rounds == number

    def by_author(self, key: str) -> np.ndarray:
        if key not in self.author_keys:
            return np.zeros(len(self.ids), dtype=np.bool_)
        return self.authors == self.author_keys.index(key)

    def examples_with(self, term: str, mask: np.ndarray | None = None) -> list[int]:
        """Indexes of the examples (in ``mask``) that contain a term, as the artifact table counts it."""
        found = self.matrix.examples_with(term)
        return [int(i) for i in found if mask is None or mask[i]]


@dataclass(frozen=True)
class RoundQuality:
    number: int
    examples: int
    artifacts: ArtifactTable
    distinct: DistinctN
    annotators: dict[str, ArtifactTable] = field(default_factory=dict)  # person key -> table (by_annotator)
    spread: float | None = None  # mean pairwise cosine distance (embedding_spreads; None until computed)
    spread_sample: int = 0
    novel_share: float | None = None  # share of examples with no near-duplicate in earlier rounds


@dataclass(frozen=True)
class Alert:
    kind: str  # "artifact" or "duplicates"
    round: int | None
    subject: str  # the term, or the writer's name
    value: float  # what crossed the threshold: a term's z-score, or a writer's duplicate rate
    threshold: float
    message: str


@dataclass(frozen=True)
class AlertThresholds:
    """The lead's alert lines (app.core.quality.settings.QualitySettings holds them per task)."""

    artifact_z: float = 5.0  # a term's z-score (label share against the base rate)
    duplicate_rate: float = 0.25  # share of a writer's examples that repeat an earlier one
    min_count: int = ALERT_MIN_COUNT

    @classmethod
    def of(cls, settings: QualitySettings) -> AlertThresholds:
        return cls(settings.token_association_threshold, settings.duplicate_rate_threshold)


@dataclass(frozen=True)
class QualityReport:
    rounds: tuple[RoundQuality, ...]
    author_names: dict[str, str]
    alerts: tuple[Alert, ...] = ()

    def round(self, number: int) -> RoundQuality | None:
        return next((r for r in self.rounds if r.number == number), None)


def quality_report(data: QualityData, *, rounds: Sequence[int] | None = None, by_annotator: bool = False,
                   thresholds: AlertThresholds = AlertThresholds(), min_count: int = MIN_COUNT,
                   top: int = TOP) -> QualityReport:
    """Artifacts and distinct-n for every round (tokens are marked across all of them), per annotator
    when asked, and the artifact alerts. ``rounds`` limits what is returned, not what is marked."""
    matrix = data.matrix
    numbers = data.round_numbers()
    round_slots = np.searchsorted(np.asarray(numbers, dtype=np.int64), data.rounds)  # every round is in numbers
    tables = dict(zip(numbers, artifact_tables(matrix, data.labels, round_slots, len(numbers),
                                               label_names=data.label_names, min_count=min_count, top=top)))
    tables = mark_recurring(tables)
    wanted = numbers if rounds is None else [n for n in numbers if n in set(rounds)]
    result = []
    for number in wanted:
        in_round = data.in_round(number)
        candidates = np.nonzero(in_round)[0]
        annotators = {}
        if by_annotator:
            authors = np.where(in_round, data.authors, -1)
            for index, table in enumerate(artifact_tables(matrix, data.labels, authors, len(data.author_keys),
                                                          label_names=data.label_names, min_count=min_count,
                                                          top=top)):
                if table.examples:
                    annotators[data.author_keys[index]] = table
        result.append(RoundQuality(number, len(candidates), tables[number],
                                   distinct_n(matrix, sample_indexes(candidates, DISTINCT_SAMPLE, seed=number)),
                                   annotators))
    alerts = artifact_alerts(result, thresholds)
    return QualityReport(tuple(result), data.author_names, tuple(alerts))


def artifact_alerts(rounds: Sequence[RoundQuality], thresholds: AlertThresholds) -> list[Alert]:
    """A term whose association with a label (its z-score) reaches the lead's threshold: one alert
    per term and round, strongest first."""
    alerts = []
    for figures in rounds:
        for row in figures.artifacts.rows:
            if row.z >= thresholds.artifact_z:
                alerts.append(Alert("artifact", figures.number, row.term, row.z, thresholds.artifact_z,
                                    f"Round {figures.number}: {row.share:.0%} of the {row.count:,} examples with "
                                    f"“{row.term}” are labelled {row.label} (base rate {row.base_rate:.0%}): "
                                    f"z {row.z:.2f}, the threshold is {thresholds.artifact_z:g}."))
    return alerts


def duplicate_alerts(rates: dict[tuple[int | None, str], tuple[float, int]], names: dict[str, str],
                     thresholds: AlertThresholds) -> list[Alert]:
    """Writers whose near-duplicate rate crosses the threshold. ``rates``: (round or None, person key)
    -> (rate, examples); a writer with fewer than ``min_count`` examples is not judged."""
    alerts = []
    for (number, key), (rate, count) in sorted(rates.items(), key=lambda item: -item[1][0]):
        if count >= thresholds.min_count and rate >= thresholds.duplicate_rate:
            where = f"Round {number}: " if number is not None else ""
            alerts.append(Alert("duplicates", number, names.get(key, key), rate, thresholds.duplicate_rate,
                                f"{where}{rate:.0%} of {names.get(key, key)}'s {count:,} examples are "
                                f"near-duplicates; the threshold is {thresholds.duplicate_rate:.0%}."))
    return alerts


def spread_samples(data: QualityData, rounds: Sequence[int] | None = None) -> dict[int, list[int]]:
    """The examples (indexes) whose embeddings measure each round's spread: a seeded sample."""
    numbers = data.round_numbers() if rounds is None else list(rounds)
    return {n: sample_indexes(np.nonzero(data.in_round(n))[0], SPREAD_SAMPLE, seed=n).tolist() for n in numbers}


def embedding_spreads(data: QualityData, engine: Any, rounds: Sequence[int] | None = None,
                      progress: Progress | None = None) -> dict[int, tuple[float | None, int]]:
    """Round number -> (mean pairwise cosine distance, sample size), in ``engine``'s embedding space
    (any object with ``embed(texts, progress=...)``, such as local_models' InferenceEngine). All
    rounds go through one model, so their spreads compare."""
    progress = progress or Progress()
    samples = spread_samples(data, rounds)
    total = sum(len(s) for s in samples.values())
    done = 0
    result: dict[int, tuple[float | None, int]] = {}
    for number, sample in samples.items():
        progress.check()
        if len(sample) < 2:
            result[number] = (None, len(sample))
            continue
        vectors = engine.embed([data.texts[i] for i in sample], progress=progress.part(done, max(total, 1)))
        done += len(sample)
        result[number] = (embedding_spread(vectors), len(sample))
    return result


def with_spreads(report: QualityReport, spreads: dict[int, tuple[float | None, int]]) -> QualityReport:
    rounds = tuple(replace(r, spread=spreads[r.number][0], spread_sample=spreads[r.number][1])
                   if r.number in spreads else r for r in report.rounds)
    return replace(report, rounds=rounds)
