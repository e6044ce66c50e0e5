"""Paired bootstrap intervals for the difference between two models scored on the same items.

Each resample draws the items (with replacement) once and scores both models on that same draw,
so what the two models share (the items' difficulty) cancels out of the difference. The interval
is the percentile interval of the resampled differences; the draws come from a seeded generator,
so the same inputs give the same interval on every machine.

    interval = paired_bootstrap(gold, current, candidate, "accuracy", resamples=2000, seed=0, stream="round-1")
    interval.difference, interval.low, interval.high

The metrics are the evaluation's (``evaluation_scoring.accuracy`` and ``macro_f1``: scikit-learn's,
macro-F1 over the labels present in gold or predicted); here they are computed over many resamples
at once with numpy, and a test ties the two together.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

METRICS = ("accuracy", "macro_f1")
CONFIDENCE = 0.95
_BLOCK_CELLS = 2_000_000  # counts held at once (resamples x groups x labels), about 16 MB per table


@dataclass(frozen=True)
class Interval:
    current: float | None
    candidate: float | None
    difference: float | None  # candidate - current, on the items as they are
    low: float | None  # percentile interval of the resampled differences
    high: float | None
    items: int


def _scores(gold: np.ndarray, predicted: np.ndarray, right: np.ndarray, metric: str) -> np.ndarray:
    """The metric of each row, from per-label counts summed over a resample's groups (rows x labels):
    gold items, predicted items, and items predicted right, of each label."""
    if metric == "accuracy":
        return np.asarray(right.sum(axis=-1) / np.maximum(gold.sum(axis=-1), 1), dtype=float)
    if metric != "macro_f1":
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    denominator = gold + predicted  # = 2tp + fp + fn, per label
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(denominator > 0, 2 * right / np.maximum(denominator, 1), 0.0)
    present = (denominator > 0).sum(axis=-1)  # sklearn's labels=None: the labels seen in gold or predicted
    return np.asarray(f1.sum(axis=-1) / np.maximum(present, 1), dtype=float)


def _counts(group: np.ndarray, codes: np.ndarray, group_count: int, label_count: int) -> np.ndarray:
    table = np.zeros((group_count, label_count), dtype=np.int32)
    np.add.at(table, (group, codes), 1)
    return table


def _generator(seed: int, stream: str) -> np.random.Generator:
    """One generator per (seed, stream): each split draws its own resamples, the same on every run."""
    return np.random.default_rng([seed, zlib.crc32(stream.encode("utf-8"))])


def paired_bootstrap(gold: Sequence[str], current: Sequence[str], candidate: Sequence[str], metric: str, *,
                     groups: Sequence[str] | None = None, resamples: int = 2000, seed: int = 0, stream: str = "",
                     confidence: float = CONFIDENCE) -> Interval:
    """The candidate's minus the current model's ``metric`` on the items, with a paired bootstrap
    ``confidence`` interval; every figure is None when there are no items.

    ``groups`` names each item's group (a perturbation pair shares one): a resample draws whole
    groups, since items that belong together are not independent. Without it each item is its own.
    """
    if not len(gold) == len(current) == len(candidate) == len(groups if groups is not None else gold):
        raise ValueError("gold, current, candidate (and groups) must have one entry per item each")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie between 0 and 1")
    n = len(gold)
    if n == 0:
        return Interval(None, None, None, None, None, 0)
    codes = {label: i for i, label in enumerate(dict.fromkeys([*gold, *current, *candidate]))}
    if groups is None:
        group = np.arange(n)
    else:
        numbers: dict[str, int] = {}
        group = np.array([numbers.setdefault(g, len(numbers)) for g in groups])
    group_count, label_count = int(group.max()) + 1, len(codes)
    gold_codes = np.array([codes[g] for g in gold])
    gold_table = _counts(group, gold_codes, group_count, label_count)
    tables = []
    for predicted in (current, candidate):
        predicted_codes = np.array([codes[p] for p in predicted])
        right = predicted_codes == gold_codes
        tables.append((_counts(group, predicted_codes, group_count, label_count),
                       _counts(group[right], gold_codes[right], group_count, label_count)))
    (current_predicted, current_right), (candidate_predicted, candidate_right) = tables
    current_score = float(_scores(gold_table.sum(axis=0), current_predicted.sum(axis=0), current_right.sum(axis=0), metric))
    candidate_score = float(_scores(gold_table.sum(axis=0), candidate_predicted.sum(axis=0),
                                    candidate_right.sum(axis=0), metric))
    rng = _generator(seed, stream)
    differences = np.empty(resamples)
    block = max(1, _BLOCK_CELLS // (group_count * label_count))
    for first in range(0, resamples, block):
        count = min(block, resamples - first)
        draw = rng.integers(0, group_count, size=(count, group_count))
        drawn_gold = gold_table[draw].sum(axis=1)
        differences[first:first + count] = (
            _scores(drawn_gold, candidate_predicted[draw].sum(axis=1), candidate_right[draw].sum(axis=1), metric)
            - _scores(drawn_gold, current_predicted[draw].sum(axis=1), current_right[draw].sum(axis=1), metric))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(differences, [tail, 100 - tail])
    return Interval(current_score, candidate_score, candidate_score - current_score, float(low), float(high), n)


def bootstrap_interval(gold: Sequence[str], predicted: Sequence[str], metric: str = "accuracy", *,
                       groups: Sequence[str] | None = None, resamples: int = 2000, seed: int = 0, stream: str = "",
                       confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """One model's ``metric`` on the items: the percentile ``confidence`` interval of its bootstrap
    resamples, drawn by groups as ``paired_bootstrap`` draws them; (None, None) without items."""
    if len(gold) != len(predicted) or (groups is not None and len(groups) != len(gold)):
        raise ValueError("gold, predicted (and groups) must have one entry per item each")
    if resamples < 1 or not 0 < confidence < 1:
        raise ValueError("resamples must be at least 1 and confidence lie between 0 and 1")
    if not gold:
        return None, None
    codes = {label: i for i, label in enumerate(dict.fromkeys([*gold, *predicted]))}
    numbers: dict[str, int] = {}
    group = np.arange(len(gold)) if groups is None else np.array([numbers.setdefault(g, len(numbers)) for g in groups])
    group_count, label_count = int(group.max()) + 1, len(codes)
    gold_codes = np.array([codes[g] for g in gold])
    predicted_codes = np.array([codes[p] for p in predicted])
    right = predicted_codes == gold_codes
    gold_table = _counts(group, gold_codes, group_count, label_count)
    predicted_table = _counts(group, predicted_codes, group_count, label_count)
    right_table = _counts(group[right], gold_codes[right], group_count, label_count)
    rng = _generator(seed, stream)
    scores = np.empty(resamples)
    block = max(1, _BLOCK_CELLS // (group_count * label_count))
    for first in range(0, resamples, block):
        count = min(block, resamples - first)
        draw = rng.integers(0, group_count, size=(count, group_count))
        scores[first:first + count] = _scores(gold_table[draw].sum(axis=1), predicted_table[draw].sum(axis=1),
                                              right_table[draw].sum(axis=1), metric)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(scores, [tail, 100 - tail])
    return float(low), float(high)
