"""A model's score on the adaptive suite: how many validated variants it gets wrong, per topic and family."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.adaptive_suite.topics import SuiteCase


@dataclass(frozen=True)
class SuiteScore:
    n: int
    wrong: int
    per_topic: dict[uuid.UUID, tuple[int, int]]  # seed -> (wrong, n)
    per_family: dict[str, tuple[int, int]]  # family (the topic's edit type) -> (wrong, n)

    @property
    def error_rate(self) -> float | None:
        return self.wrong / self.n if self.n else None


def score_suite(cases: Sequence[SuiteCase], predicted_labels: Sequence[str]) -> SuiteScore:
    """Score one model's labels (one per case, in order) against the suite's decided labels."""
    if len(cases) != len(predicted_labels):
        raise ValueError(f"{len(predicted_labels)} predicted labels for {len(cases)} suite cases")
    per_topic: dict[uuid.UUID, list[int]] = {}
    per_family: dict[str, list[int]] = {}
    wrong = 0
    for case, predicted in zip(cases, predicted_labels):
        missed = int(predicted != case.label)
        wrong += missed
        for tally in (per_topic.setdefault(case.seed_id, [0, 0]), per_family.setdefault(case.family, [0, 0])):
            tally[0] += missed
            tally[1] += 1
    return SuiteScore(len(cases), wrong, {k: (w, n) for k, (w, n) in per_topic.items()},
                      {k: (w, n) for k, (w, n) in sorted(per_family.items())})
