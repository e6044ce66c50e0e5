"""When validators' verdicts decide an example: a lead's latest verdict is final; otherwise the first
verdict that ``threshold`` peers agree on. The same rule on the desk, on the server and in imports.

    summarise(example, validations, threshold)          # the example's validation summary, in place
    summarise_on_desk(example, validations, threshold)  # ... and its count of objections
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from app.core.domain import ValidationMode, ValidationState, Verdict

# A validator who says "incorrect" or "flagged" disagrees with the author, whatever the others said.
OBJECTING = (Verdict.INCORRECT.value, Verdict.FLAGGED.value)


class Given(Protocol):
    """One validator's verdict, as ``summarise`` reads it (a desk or a server validation row)."""

    @property
    def verdict(self) -> str: ...
    @property
    def corrected_label(self) -> str | None: ...
    @property
    def mode(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


class Summarised(Protocol):
    """What ``summarise`` reads and writes: a desk example, a server example, or a row about to be inserted."""

    true_label: str | None
    validation_count: int
    flag_count: int
    disagreement_count: int
    validation_state: str
    decided_verdict: str | None
    decided_label: str | None


class SummarisedOnDesk(Summarised, Protocol):
    objection_count: int


def verdict_key(validation: Given) -> tuple[str, str | None]:
    """Verdicts match when they agree on the verdict and, for 'incorrect', on the corrected label."""
    return validation.verdict, validation.corrected_label if validation.verdict == Verdict.INCORRECT else None


def summarise(example: Summarised, validations: Sequence[Given], threshold: int) -> None:
    """Bring the example's validation summary in step with its verdicts."""
    peer = [v for v in validations if v.mode == ValidationMode.PEER]
    lead = [v for v in validations if v.mode == ValidationMode.LEAD]
    counts = collections.Counter(verdict_key(v) for v in peer)
    example.validation_count = len(validations)
    example.flag_count = sum(1 for v in validations if v.verdict == Verdict.FLAGGED)
    example.disagreement_count = len(peer) - max(counts.values(), default=0)
    decided: tuple[str, str | None] | None = None
    if lead:
        decided = verdict_key(max(lead, key=lambda v: v.created_at))
    else:
        reached = [key for key, count in counts.items() if count >= threshold]
        if reached:
            decided = reached[0]
    if decided is not None:
        example.validation_state = ValidationState.DECIDED.value
        example.decided_verdict = decided[0]
        example.decided_label = decided[1] if decided[0] == Verdict.INCORRECT else (
            example.true_label if decided[0] == Verdict.CORRECT else None
        )
    else:
        example.validation_state = (ValidationState.IN_PROGRESS if validations else ValidationState.UNVALIDATED).value
        example.decided_verdict = None
        example.decided_label = None


def summarise_on_desk(example: SummarisedOnDesk, validations: Sequence[Given], threshold: int) -> None:
    """``summarise``, and the desk's count of verdicts against the author (the review's filter)."""
    summarise(example, validations, threshold)
    example.objection_count = sum(1 for v in validations if v.verdict in OBJECTING)
