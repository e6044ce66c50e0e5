"""Dynabench's figures, defined once: MER (model error rate) and vMER (validated model error rate).

- An example counts as *submitted* when its status is submitted or flagged (drafts and retracted
  examples do not count).
- It *fooled* the model when its "fooled" is true (None, nothing judged, does not count).
- It is *validated fooling* when it fooled the model and the decision on it is 'correct' (the
  author's label stands).
- MER = fooled ÷ submitted; vMER = validated fooling ÷ submitted; None when nothing was submitted.
- Rejection rate = submitted examples decided 'incorrect' ÷ submitted examples with a decision.
- Time per example = the median writing time of submitted examples that recorded one (imports
  record none).
- The writing assistant's split (``arm_split``): by the arm of the session an example was written
  in ("on": assisted, "off": unassisted; the A-B comparison); examples with no arm (the assistant
  off, or written before it) are in neither. ``applied`` counts examples a suggestion was applied to.

The desk's statistics (SQL), the dashboard (numpy) and the server's team figures (SQL, on SQLite or
PostgreSQL) count with the forms of that rule written here, and divide with ``mer`` and ``vmer``.
Import-light on purpose (no sqlalchemy or numpy at import time): view-models may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import median
from typing import Any, Iterable, Mapping, Sequence

from app.core.domain import ExampleStatus, Verdict

COUNTED_STATUSES = (ExampleStatus.SUBMITTED, ExampleStatus.FLAGGED)
COUNTED = tuple(status.value for status in COUNTED_STATUSES)  # as stored
VALIDATING_VERDICT = Verdict.CORRECT  # the decision that makes fooling "validated"
REJECTING_VERDICT = Verdict.INCORRECT  # the decision that rejects an example
ASSISTED, UNASSISTED = "assisted", "unassisted"
ARM_GROUPS = {"on": ASSISTED, "off": UNASSISTED}  # a session's arm -> its side of the split


def is_submitted(status: str) -> bool:
    return status in COUNTED


def is_fooling(fooled: bool | None) -> bool:
    return fooled is True


def is_validated_fooling(fooled: bool | None, decided_verdict: str | None) -> bool:
    return is_fooling(fooled) and decided_verdict == VALIDATING_VERDICT.value


def rate(part: float, submitted: float) -> float | None:
    return float(part) / float(submitted) if submitted else None


def mer(fooled: int, submitted: int) -> float | None:
    """Model error rate: examples that fooled the model ÷ submitted examples."""
    return rate(fooled, submitted)


def vmer(validated_fooling: int, submitted: int) -> float | None:
    """Validated model error rate: fooling examples decided 'correct' ÷ submitted examples."""
    return rate(validated_fooling, submitted)


def is_rejected(decided_verdict: str | None) -> bool:
    return decided_verdict == REJECTING_VERDICT.value


def rejection_rate(rejected: int, decided: int) -> float | None:
    """Decided 'incorrect' ÷ decided (submitted examples)."""
    return rate(rejected, decided)


def median_seconds(times_ms: Iterable[int | None]) -> float | None:
    """Time per example: the median writing time, in seconds, of the examples that recorded one."""
    recorded = [t for t in times_ms if t is not None and t > 0]
    return median(recorded) / 1000 if recorded else None


def arm_group(assistance: Mapping[str, Any] | None) -> str | None:
    """The side of the assistant split an example is on (``ASSISTED`` / ``UNASSISTED``), or None."""
    arm = assistance.get("arm") if isinstance(assistance, Mapping) else None
    return ARM_GROUPS.get(arm) if isinstance(arm, str) else None


@dataclass(frozen=True)
class ArmRow:
    """What the split reads of one example (the desk and the server each select these)."""

    key: str  # the group: an annotator's or a round's id
    status: str
    fooled: bool | None
    decided_verdict: str | None
    time_spent_ms: int | None
    assistance: Mapping[str, Any] | None


@dataclass(frozen=True)
class ArmFigures:
    """One side (assisted or unassisted) of one group's split."""

    key: str
    arm: str  # ASSISTED or UNASSISTED
    submitted: int
    applied: int  # of them, with a suggestion applied
    fooled: int
    validated_fooling: int
    decided: int
    rejected: int
    median_seconds: float | None

    @property
    def mer(self) -> float | None:
        return mer(self.fooled, self.submitted)

    @property
    def vmer(self) -> float | None:
        return vmer(self.validated_fooling, self.submitted)

    @property
    def rejection_rate(self) -> float | None:
        return rejection_rate(self.rejected, self.decided)

    @property
    def applied_share(self) -> float | None:
        return rate(self.applied, self.submitted)


def arm_split(rows: Iterable[ArmRow]) -> tuple[list[ArmFigures], int]:
    """Each group's figures on each side of the split it has examples on (sorted by key, assisted
    first), and how many submitted examples had no arm (outside the split)."""
    sides: dict[tuple[str, str], list[ArmRow]] = {}
    outside = 0
    for row in rows:
        if not is_submitted(row.status):
            continue
        side = arm_group(row.assistance)
        if side is None:
            outside += 1
            continue
        sides.setdefault((row.key, side), []).append(row)
    figures = [_side_figures(key, side, members) for (key, side), members in sides.items()]
    figures.sort(key=lambda f: (f.key, f.arm != ASSISTED))
    return figures, outside


def _side_figures(key: str, side: str, rows: Sequence[ArmRow]) -> ArmFigures:
    fooling = [r for r in rows if is_fooling(r.fooled)]
    decided = [r for r in rows if r.decided_verdict is not None]
    return ArmFigures(
        key=key, arm=side, submitted=len(rows),
        applied=sum(1 for r in rows if isinstance(r.assistance, Mapping) and r.assistance.get("applied") is True),
        fooled=len(fooling),
        validated_fooling=sum(1 for r in fooling if is_validated_fooling(r.fooled, r.decided_verdict)),
        decided=len(decided), rejected=sum(1 for r in decided if is_rejected(r.decided_verdict)),
        median_seconds=median_seconds(r.time_spent_ms for r in rows))


def rates(part: Any, submitted: Any) -> Any:
    """``rate`` over numpy arrays of counts: NaN where nothing was submitted."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(submitted > 0, part / np.maximum(submitted, 1), np.nan)



def sql_submitted(status: Any) -> Any:
    """The WHERE clause of the examples that count (a SQLAlchemy expression over a status column)."""
    return status.in_(COUNTED)


def sql_counts(fooled: Any, decided_verdict: Any) -> tuple[Any, Any, Any]:
    """(submitted, fooled, validated fooling) as SQLAlchemy aggregates over the rows of a GROUP BY
    whose WHERE is ``sql_submitted``; portable (SQLite and PostgreSQL)."""
    from sqlalchemy import and_, func

    fooling = sql_fooling(fooled)
    return (func.count(), sql_total(fooling),
            sql_total(and_(fooling, decided_verdict == VALIDATING_VERDICT.value)))


def sql_fooling(fooled: Any) -> Any:
    """Whether the row fooled the model (a SQLAlchemy condition over a "fooled" column)."""
    return fooled.is_(True)


def sql_total(condition: Any) -> Any:
    """How many rows of the group meet ``condition`` (0, never NULL, for an empty group)."""
    from sqlalchemy import case, func

    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def sqlite_counts(status: str, fooled: str, decided_verdict: str) -> tuple[str, str]:
    """The same rule as SQLite text, for hand-tuned queries: (the select list of the three counts,
    the WHERE condition), over the named columns."""
    counted = ", ".join(f"'{s}'" for s in COUNTED)
    return (f"count(*), sum({fooled} IS 1), "
            f"sum({fooled} IS 1 AND {decided_verdict} = '{VALIDATING_VERDICT.value}')",
            f"{status} IN ({counted})")



def submitted_mask(status: Any, code_of: Mapping[str, int]) -> Any:
    """Which rows count as submitted, from a column of status codes (``code_of`` maps statuses to codes)."""
    mask = status == code_of[COUNTED[0]]
    for name in COUNTED[1:]:
        mask = mask | (status == code_of[name])
    return mask


def fooling_mask(fooled: Any) -> Any:
    """Which rows fooled the model, from a column of 1 (fooled), 0 (not) and -1 (not judged)."""
    return fooled == 1


def validated_mask(fooling: Any, decided: Any, code_of: Mapping[str | None, int]) -> Any:
    """Which fooling rows were decided 'correct', from a column of decision codes."""
    return fooling & (decided == code_of[VALIDATING_VERDICT.value])
