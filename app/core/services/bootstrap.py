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
from dataclasses import dataclass
from typing import Sequence

import numpy as np

METRICS = ("accuracy", "macro_f1")
CONFIDENCE = 0.95
_BLOCK_CELLS = 4_000_000  # resample indices held at once (resamples x items), about 32 MB


@dataclass(frozen=True)
class Interval:
    current: float | None
    candidate: float | None
    difference: float | None  # candidate - current, on the items as they are
    low: float | None  # percentile interval of the resampled differences
    high: float | None
    items: int


def _scores(gold: np.ndarray, predicted: np.ndarray, label_count: int, metric: str) -> np.ndarray:
    """The metric of each row of a (resamples x items) matrix of gold and predicted label codes."""
    if metric == "accuracy":
        return np.asarray((gold == predicted).mean(axis=1), dtype=float)
    if metric != "macro_f1":
        raise ValueError(f"unknown metric {metric!r}; known: {', '.join(METRICS)}")
    f1_sum = np.zeros(gold.shape[0])
    present = np.zeros(gold.shape[0])
    for label in range(label_count):
        is_gold, is_predicted = gold == label, predicted == label
        true_positive = (is_gold & is_predicted).sum(axis=1)
        gold_count, predicted_count = is_gold.sum(axis=1), is_predicted.sum(axis=1)
        denominator = gold_count + predicted_count  # = 2tp + fp + fn
        with np.errstate(invalid="ignore", divide="ignore"):
            f1 = np.where(denominator > 0, 2 * true_positive / np.maximum(denominator, 1), 0.0)
        f1_sum += f1
        present += denominator > 0  # sklearn's labels=None: the labels seen in gold or predicted
    return np.asarray(f1_sum / np.maximum(present, 1), dtype=float)


def _generator(seed: int, stream: str) -> np.random.Generator:
    """One generator per (seed, stream): each split draws its own resamples, the same on every run."""
    return np.random.default_rng([seed, zlib.crc32(stream.encode("utf-8"))])


def paired_bootstrap(gold: Sequence[str], current: Sequence[str], candidate: Sequence[str], metric: str, *,
                     resamples: int = 2000, seed: int = 0, stream: str = "",
                     confidence: float = CONFIDENCE) -> Interval:
    """The candidate's minus the current model's ``metric`` on the items, with a paired bootstrap
    ``confidence`` interval; every figure is None when there are no items."""
    if not len(gold) == len(current) == len(candidate):
        raise ValueError("gold, current and candidate must have one label per item each")
    if resamples < 1:
        raise ValueError("resamples must be at least 1")
    if not 0 < confidence < 1:
        raise ValueError("confidence must lie between 0 and 1")
    n = len(gold)
    if n == 0:
        return Interval(None, None, None, None, None, 0)
    codes = {label: i for i, label in enumerate(dict.fromkeys([*gold, *current, *candidate]))}
    gold_codes = np.array([codes[g] for g in gold])
    current_codes = np.array([codes[p] for p in current])
    candidate_codes = np.array([codes[p] for p in candidate])
    whole = np.arange(n)[None, :]
    current_score = float(_scores(gold_codes[whole], current_codes[whole], len(codes), metric)[0])
    candidate_score = float(_scores(gold_codes[whole], candidate_codes[whole], len(codes), metric)[0])
    rng = _generator(seed, stream)
    differences = np.empty(resamples)
    block = max(1, _BLOCK_CELLS // n)
    for first in range(0, resamples, block):
        count = min(block, resamples - first)
        draw = rng.integers(0, n, size=(count, n))
        differences[first:first + count] = (_scores(gold_codes[draw], candidate_codes[draw], len(codes), metric)
                                            - _scores(gold_codes[draw], current_codes[draw], len(codes), metric))
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(differences, [tail, 100 - tail])
    return Interval(current_score, candidate_score, candidate_score - current_score, float(low), float(high), n)
