"""The parity rule for an int8 model: does it keep the decisions annotators see?

    figures = compare_probabilities(float_probs, int8_probs, source="dev+test of the training run")
    verdict = judge(figures)           # verdict.passed, verdict.problems
    verdict.to_json()                  # what the model's provenance keeps (shown by app.core.int8_status)

The rule, on at least ``MIN_TEXTS`` of the task's own texts (the model's held-out data, the
round's examples):

- the int8 model gives the float model's label on at least ``MIN_AGREEMENT`` of the texts;
- the 99th percentile of the probability change is at most ``MAX_P99_CHANGE``;
- the mean and the maximum change are reported, not judged: one text may move a lot.

A form fetched from elsewhere is checked again where it is used, on a bounded sample (``judge_sample``):
it fails when its label changes are more than a form keeping ``MIN_AGREEMENT`` shows but once in a
thousand samples of that size, or when more than a tenth of the texts move by over ``MAX_P99_CHANGE``.
That catches a form that is not the model's (swapped labels, other weights), not the last half percent,
which the full rule settled where the form was made.

Fewer texts than ``MIN_TEXTS`` never pass: with 500 texts a single changed label moves the
agreement by 0.2 %, and the 99th percentile rests on 5 texts, so the rule cannot tell a model
that keeps 99.5 % of labels from one that keeps 98 %. The refusal says how many texts are
missing; where a graph was built anyway (``--force``), its figures on the texts there are are
reported beside it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from math import comb
from typing import Any

import numpy as np

MIN_TEXTS = 2000
MIN_AGREEMENT = 0.995
MAX_P99_CHANGE = 0.05
RULE = (f"on at least {MIN_TEXTS:,} task texts, the int8 label agrees with the float label on at least "
        f"{MIN_AGREEMENT:.1%} of them and the 99th percentile of the probability change is at most {MAX_P99_CHANGE}")


@dataclass(frozen=True)
class ParityFigures:
    """How far an int8 model's answers are from its float model's, text by text."""

    texts: int
    agreement: float  # share of texts with the same label (extractive QA: the same start and end token)
    labels_changed: int
    p99_change: float  # 99th percentile over texts of the largest change in any probability of that text
    max_change: float
    mean_change: float
    source: str  # where the texts came from, in words

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ParityVerdict:
    figures: ParityFigures
    passed: bool
    problems: tuple[str, ...]  # why it did not pass, in words; empty when it passed

    @property
    def reason(self) -> str:
        return "; ".join(self.problems)

    def to_json(self, *, forced: bool = False) -> dict[str, Any]:
        return {**self.figures.to_json(), "passed": self.passed, "problems": list(self.problems),
                "forced": forced and not self.passed,
                "rule": {"min_texts": MIN_TEXTS, "min_agreement": MIN_AGREEMENT, "max_p99_change": MAX_P99_CHANGE}}


def compare_probabilities(reference: np.ndarray, candidate: np.ndarray, source: str,
                          labels: tuple[np.ndarray, np.ndarray] | None = None) -> ParityFigures:
    """``reference``/``candidate``: [texts, classes] probabilities of the float and the int8 model.
    ``labels``: the decisions to compare when they are not the argmax of those rows (extractive QA)."""
    reference, candidate = np.asarray(reference, dtype=np.float64), np.asarray(candidate, dtype=np.float64)
    if reference.shape != candidate.shape or reference.ndim != 2 or not len(reference):
        raise ValueError(f"probabilities of shapes {reference.shape} and {candidate.shape} cannot be compared")
    change = np.abs(reference - candidate).max(axis=1)
    if labels is None:
        labels = (reference.argmax(axis=1), candidate.argmax(axis=1))
    return figures_from(change, np.asarray(labels[0]) == np.asarray(labels[1]), source)


def figures_from(change: np.ndarray, same: np.ndarray, source: str) -> ParityFigures:
    """``change``: per text, the largest change in any probability; ``same``: per text, the same decision."""
    change, same = np.asarray(change, dtype=np.float64), np.asarray(same, dtype=bool)
    if change.shape != same.shape or change.ndim != 1 or not len(change):
        raise ValueError("parity needs one change and one decision per text, for at least one text")
    return ParityFigures(texts=len(change), agreement=float(same.mean()), labels_changed=int((~same).sum()),
                         p99_change=float(np.quantile(change, 0.99)), max_change=float(change.max()),
                         mean_change=float(change.mean()), source=source)


def judge(figures: ParityFigures, *, min_texts: int = MIN_TEXTS, min_agreement: float = MIN_AGREEMENT,
          max_p99_change: float = MAX_P99_CHANGE) -> ParityVerdict:
    problems = []
    if figures.texts < min_texts:
        problems.append(f"only {figures.texts:,} task texts to compare on; the rule needs at least {min_texts:,} "
                        f"({min_texts - figures.texts:,} more) to tell {min_agreement:.1%} agreement apart")
    if figures.agreement < min_agreement:
        problems.append(f"the label changed on {figures.labels_changed:,} of {figures.texts:,} texts "
                        f"(agreement {figures.agreement:.2%} < {min_agreement:.1%})")
    if not figures.p99_change <= max_p99_change:  # NaN fails too
        problems.append(f"the 99th percentile of the probability change is {figures.p99_change:.3f} "
                        f"(> {max_p99_change})")
    return ParityVerdict(figures, not problems, tuple(problems))


SAMPLE_RISK = 0.001  # how often a sample check may refuse a form that keeps the rule
SAMPLE_SHARE_WITHIN = 0.9  # of a sample's texts, the share whose change must stay within MAX_P99_CHANGE


def allowed_changes(texts: int, *, min_agreement: float = MIN_AGREEMENT, risk: float = SAMPLE_RISK) -> int:
    """The most label changes among ``texts`` sampled texts that a form keeping ``min_agreement`` exceeds
    with probability below ``risk`` (a binomial tail)."""
    p, below = 1.0 - min_agreement, 0.0
    for k in range(texts + 1):
        below += comb(texts, k) * p**k * (1.0 - p) ** (texts - k)
        if 1.0 - below < risk:
            return k
    return texts


def judge_sample(reference: np.ndarray, candidate: np.ndarray, source: str, *, min_texts: int) -> ParityVerdict:
    """The sample check of a form against its model, on their [texts, classes] probabilities."""
    figures = compare_probabilities(reference, candidate, source)
    change = np.abs(np.asarray(reference, dtype=np.float64) - np.asarray(candidate, dtype=np.float64)).max(axis=1)
    problems = []
    if figures.texts < min_texts:
        problems.append(f"only {figures.texts:,} texts to compare on; the check needs at least {min_texts:,}")
    allowed = allowed_changes(figures.texts)
    if figures.labels_changed > allowed:
        problems.append(f"the label changed on {figures.labels_changed:,} of {figures.texts:,} texts (a form "
                        f"keeping {MIN_AGREEMENT:.1%} of labels changes at most {allowed} there)")
    moved = float(np.quantile(change, SAMPLE_SHARE_WITHIN))
    if not moved <= MAX_P99_CHANGE:  # NaN fails too
        problems.append(f"{1 - SAMPLE_SHARE_WITHIN:.0%} of the texts moved by more than {moved:.3f} "
                        f"(> {MAX_P99_CHANGE})")
    return ParityVerdict(figures, not problems, tuple(problems))
