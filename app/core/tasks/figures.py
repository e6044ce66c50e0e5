"""Dynabench's figures, defined once: MER (model error rate) and vMER (validated model error rate).

- An example counts as *submitted* when its status is submitted or flagged (drafts and retracted
  examples do not count) and it was written on a desk against the round's target: imported data sets
  (HateCheck cases, ANLI, DynaHate; anything with a ``source``) were not written against this model,
  so they count apart, as *imported*, and never in MER or vMER. The adaptive suite's variants
  (``tasks.variants``: generated from a seed, not anyone's writing) have a source too, so they are
  never written; they are not imported either, and count in neither.
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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any

from app.core.domain import ExampleStatus, Verdict
from app.core.tasks.variants import VARIANT_SOURCE, is_variant_source, sql_not_variant, sql_variant

COUNTED_STATUSES = (ExampleStatus.SUBMITTED, ExampleStatus.FLAGGED)
COUNTED = tuple(status.value for status in COUNTED_STATUSES)  # as stored
VALIDATING_VERDICT = Verdict.CORRECT  # the decision that makes fooling "validated"
REJECTING_VERDICT = Verdict.INCORRECT  # the decision that rejects an example
ASSISTED, UNASSISTED = "assisted", "unassisted"
ARM_GROUPS = {"on": ASSISTED, "off": UNASSISTED}  # a session's arm -> its side of the split


def is_written(source: str | None) -> bool:
    """Written on a desk (against the round's target), not imported from a data set."""
    return source is None


def is_submitted(status: str, source: str | None = None) -> bool:
    return status in COUNTED and is_written(source)


def is_imported(status: str, source: str | None) -> bool:
    """A submitted example of an imported data set: counted apart, outside MER and vMER (a variant is none)."""
    return status in COUNTED and not is_written(source) and not is_variant_source(source)


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


def arm_group(arm: str | None) -> str | None:
    """The side of the assistant split an example written in a session of ``arm`` is on
    (``ASSISTED`` / ``UNASSISTED``), or None (no arm: outside the split)."""
    return ARM_GROUPS.get(arm) if isinstance(arm, str) else None


@dataclass(frozen=True)
class ArmRow:
    """What the split reads of one example (the desk and the server each select these; ``arm`` and
    ``applied`` are fields of its assistance record, read in SQL: no record is decoded whole)."""

    key: str  # the group: an annotator's or a round's id
    status: str
    fooled: bool | None
    decided_verdict: str | None
    time_spent_ms: int | None
    arm: str | None
    applied: bool | None


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


TOTAL_KEY = ""  # the key of every group together, when ``arm_split`` is asked for it


def arm_split(rows: Iterable[ArmRow], *, with_total: bool = False) -> tuple[list[ArmFigures], int]:
    """Each group's figures on each side of the split it has examples on (sorted by key, assisted
    first; with ``with_total`` also every group together, under ``TOTAL_KEY``), and how many
    submitted examples had no arm (outside the split)."""
    tallies: dict[tuple[str, str], list[Any]] = {}  # [submitted, applied, fooled, validated, decided, rejected, times]
    outside = 0
    for row in rows:
        if not is_submitted(row.status):
            continue
        side = arm_group(row.arm)
        if side is None:
            outside += 1
            continue
        fooling = is_fooling(row.fooled)
        decided = row.decided_verdict is not None
        for key in ((row.key, TOTAL_KEY) if with_total else (row.key,)):
            tally = tallies.get((key, side))
            if tally is None:
                tally = tallies[(key, side)] = [0, 0, 0, 0, 0, 0, []]
            tally[0] += 1
            tally[1] += row.applied is True
            tally[2] += fooling
            tally[3] += is_validated_fooling(row.fooled, row.decided_verdict)
            tally[4] += decided
            tally[5] += decided and is_rejected(row.decided_verdict)
            tally[6].append(row.time_spent_ms)
    figures = [ArmFigures(key, side, submitted=t[0], applied=t[1], fooled=t[2], validated_fooling=t[3], decided=t[4],
                          rejected=t[5], median_seconds=median_seconds(t[6])) for (key, side), t in tallies.items()]
    figures.sort(key=lambda f: (f.key, f.arm != ASSISTED))
    return figures, outside


def rates(part: Any, submitted: Any) -> Any:
    """``rate`` over numpy arrays of counts: NaN where nothing was submitted."""
    import numpy as np

    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(submitted > 0, part / np.maximum(submitted, 1), np.nan)



def sql_arm_fields(assistance: Any) -> tuple[Any, Any]:
    """(arm, applied) of a JSON assistance column as SQLAlchemy expressions (SQLite and PostgreSQL)."""
    return assistance["arm"].as_string(), assistance["applied"].as_boolean()


def sql_submitted(status: Any, source: Any) -> Any:
    """The WHERE clause of the examples that count (SQLAlchemy, over the status and source columns)."""
    return status.in_(COUNTED) & source.is_(None)


def sql_imported(status: Any, source: Any) -> Any:
    """The WHERE clause of the imported examples, counted apart (``is_imported``)."""
    return status.in_(COUNTED) & source.is_not(None) & sql_not_variant(source)


def sql_variants(status: Any, source: Any) -> Any:
    """The WHERE clause of the counted-status variants: in neither the written nor the imported counts."""
    return status.in_(COUNTED) & sql_variant(source)


def sql_in_figures(status: Any) -> Any:
    """Examples that count as submitted or as imported: a query that reports both (``sql_counts``) keeps these
    and counts each kind with its own condition."""
    return status.in_(COUNTED)


def sql_counts(fooled: Any, decided_verdict: Any, source: Any) -> tuple[Any, Any, Any, Any]:
    """(submitted, fooled, validated fooling, imported) as SQLAlchemy aggregates over the rows of a
    GROUP BY whose WHERE is ``sql_in_figures`` (or ``sql_submitted``); portable (SQLite and PostgreSQL)."""
    from sqlalchemy import and_

    written = source.is_(None)
    fooling = and_(written, sql_fooling(fooled))
    return (sql_total(written), sql_total(fooling),
            sql_total(and_(fooling, decided_verdict == VALIDATING_VERDICT.value)),
            sql_total(and_(source.is_not(None), sql_not_variant(source))))


def sql_fooling(fooled: Any) -> Any:
    """Whether the row fooled the model (a SQLAlchemy condition over a "fooled" column)."""
    return fooled.is_(True)


def sql_total(condition: Any) -> Any:
    """How many rows of the group meet ``condition`` (0, never NULL, for an empty group)."""
    from sqlalchemy import case, func

    return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)


def sql_status_counts(fooled: Any, decided_verdict: Any) -> tuple[Any, Any, Any]:
    """(rows, fooling, validated fooling) over the rows a WHERE picked, whatever their source. Fast queries
    take these over ``sql_in_figures`` (a covering index answers) and again over ``sql_imported`` (the
    few imported rows, through the source index): written = the first less the second (``written_counts``)."""
    from sqlalchemy import and_, func

    fooling = sql_fooling(fooled)
    return func.count(), sql_total(fooling), sql_total(and_(fooling, decided_verdict == VALIDATING_VERDICT.value))


def written_counts(every: Sequence[int], imported: Sequence[int],
                   variants: Sequence[int] = (0, 0, 0)) -> tuple[int, int, int, int]:
    """(submitted, fooled, validated fooling, imported) from the counts of ``sql_status_counts`` over every
    counted row, over the imported ones alone and over the variants alone: what ``sql_counts`` gives in
    one (slower) pass."""
    rows, fooled, validated = (int(v or 0) for v in every)
    i_rows, i_fooled, i_validated = (int(v or 0) for v in imported)
    v_rows, v_fooled, v_validated = (int(v or 0) for v in variants)
    return (rows - i_rows - v_rows, fooled - i_fooled - v_fooled, validated - i_validated - v_validated, i_rows)


def sqlite_counts(status: str, fooled: str, decided_verdict: str) -> tuple[str, str]:
    """``sql_status_counts`` as SQLite text, for hand-tuned queries: (the select list of the three counts,
    the WHERE condition of ``sql_in_figures``), over the named columns. Null-safe (``IS``): an undecided
    example's NULL verdict counts 0, so a group whose examples all fooled and none is decided sums to 0, not NULL."""
    counted = ", ".join(f"'{s}'" for s in COUNTED)
    return (f"count(*), total({fooled} IS 1), "
            f"total({fooled} IS 1 AND {decided_verdict} IS '{VALIDATING_VERDICT.value}')",
            f"{status} IN ({counted})")


def sqlite_imported(source: str) -> str:
    """The extra WHERE condition (SQLite text) that keeps imported rows only (``sql_imported``)."""
    return f"{source} IS NOT NULL AND {source} IS NOT '{VARIANT_SOURCE}'"


def sqlite_variants(source: str) -> str:
    """The extra WHERE condition (SQLite text) that keeps the variants only (``sql_variants``)."""
    return f"{source} = '{VARIANT_SOURCE}'"



def status_mask(status: Any, code_of: Mapping[str, int]) -> Any:
    """Which rows have a submitted or flagged status, written or imported (``code_of`` maps statuses to codes)."""
    mask = status == code_of[COUNTED[0]]
    for name in COUNTED[1:]:
        mask = mask | (status == code_of[name])
    return mask


def submitted_mask(status: Any, code_of: Mapping[str, int], imported: Any) -> Any:
    """Which rows count as submitted, from a column of status codes and one of "imported" flags."""
    return status_mask(status, code_of) & ~imported


def imported_mask(status: Any, code_of: Mapping[str, int], imported: Any) -> Any:
    """Which rows are imported examples, counted apart (``is_imported``)."""
    return status_mask(status, code_of) & imported


def fooling_mask(fooled: Any) -> Any:
    """Which rows fooled the model, from a column of 1 (fooled), 0 (not) and -1 (not judged)."""
    return fooled == 1


def validated_mask(fooling: Any, decided: Any, code_of: Mapping[str | None, int]) -> Any:
    """Which fooling rows were decided 'correct', from a column of decision codes."""
    return fooling & (decided == code_of[VALIDATING_VERDICT.value])
