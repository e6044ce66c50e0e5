"""Dynabench's figures, defined once: MER (model error rate) and vMER (validated model error rate).

- An example counts as *submitted* when its status is submitted or flagged (drafts and retracted
  examples do not count).
- It *fooled* the model when its "fooled" is true (None, nothing judged, does not count).
- It is *validated fooling* when it fooled the model and the decision on it is 'correct' (the
  author's label stands).
- MER = fooled ÷ submitted; vMER = validated fooling ÷ submitted; None when nothing was submitted.

The desk's statistics (SQL), the dashboard (numpy) and the server's team figures (SQL, on SQLite or
PostgreSQL) count with the forms of that rule written here, and divide with ``mer`` and ``vmer``.
Import-light on purpose (no sqlalchemy or numpy at import time): view-models may use it.
"""

from __future__ import annotations

from typing import Any, Mapping

from app.core.domain import ExampleStatus, Verdict

COUNTED_STATUSES = (ExampleStatus.SUBMITTED, ExampleStatus.FLAGGED)
COUNTED = tuple(status.value for status in COUNTED_STATUSES)  # as stored
VALIDATING_VERDICT = Verdict.CORRECT  # the decision that makes fooling "validated"


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
