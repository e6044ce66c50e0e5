"""The dashboard's per-annotator and breakdown tables, agreement, and their CSV export."""

from __future__ import annotations

import csv
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.core.services.agreement import MIN_OVERLAP, Agreement, agreement
from app.core.services.dashboard_snapshot import (
    DECIDED_CODES,
    DECIDED_INCORRECT,
    RETRACTED,
    STATUS_CODES,
    DashboardFilter,
    DashboardSnapshot,
)
from app.core.tasks import figures as rule

if TYPE_CHECKING:
    from pathlib import Path


@dataclass
class Group:
    """Figures for one row of the per-annotator table or of a breakdown."""

    key: str
    name: str
    submitted: int = 0
    retracted: int = 0
    fooled: int = 0
    validated_fooling: int = 0
    decided: int = 0
    rejected: int = 0
    undecided: int = 0
    imported: int = 0  # imported data sets' examples: not written against the target, outside MER and vMER
    mer: float | None = None
    vmer: float | None = None
    rejection_rate: float | None = None
    retraction_rate: float | None = None
    median_seconds: float | None = None
    # per-annotator only
    writing_hours: float | None = None
    examples_per_hour: float | None = None
    perturbations: int = 0
    mean_edit_distance: float | None = None
    validations: int = 0
    validations_on_decided: int = 0
    agreement_with_decision: float | None = None


# The per-annotator table's columns: (attribute, header, kind, tooltip). Kinds tell views how to format.
TEAM_KEY = "team"  # the team-totals row: no person's key is this (person keys are uuid hex)
ANNOTATOR_COLUMNS = [
    ("name", "Annotator", "text", "Display name"),
    ("submitted", "Submitted", "int", "Examples submitted or flagged (not drafts, not retracted)"),
    ("examples_per_hour", "Per hour", "float1", "Submitted examples per hour of recorded writing time"),
    ("mer", "MER", "rate", "Model error rate: model-fooling ÷ submitted"),
    ("vmer", "vMER", "rate", "Validated model error rate: fooling and validated correct ÷ submitted"),
    ("rejection_rate", "Rejected", "rate", "Decided 'incorrect' ÷ decided"),
    ("retraction_rate", "Retracted", "rate", "Retracted ÷ (submitted + retracted)"),
    ("median_seconds", "Median time", "seconds", "Median writing time per submitted example"),
    ("mean_edit_distance", "Edit dist.", "float1", "Mean word edit distance of their perturbations"),
    ("validations", "Verdicts", "int", "Peer verdicts they gave"),
    ("agreement_with_decision", "Agreement", "rate",
     "Share of their verdicts on decided examples that match the decision"),
]
BREAKDOWN_COLUMNS = [
    ("name", "Group", "text", ""),
    ("submitted", "Submitted", "int", "Examples submitted or flagged"),
    ("fooled", "Fooling", "int", "Examples that fooled the model"),
    ("mer", "MER", "rate", "Model-fooling ÷ submitted"),
    ("vmer", "vMER", "rate", "Fooling and validated correct ÷ submitted"),
    ("decided", "Decided", "int", "Examples with a decision"),
    ("rejection_rate", "Rejected", "rate", "Decided 'incorrect' ÷ decided"),
    ("retraction_rate", "Retracted", "rate", "Retracted ÷ (submitted + retracted)"),
    ("undecided", "Backlog", "int", "Submitted examples not yet decided"),
    ("median_seconds", "Median time", "seconds", "Median writing time per example"),
    ("imported", "Imported", "int", "Examples imported from a data set: not written against the target, "
                                    "so outside Submitted, MER and vMER"),
]


class DashboardTables(DashboardSnapshot):
    """Per-annotator and per-group figures over the snapshot."""

    def _groups(self, mask: np.ndarray, rows: np.ndarray, codes: np.ndarray, n_groups: int,
                fooled: np.ndarray | None = None, medians: bool = True) -> dict[str, np.ndarray]:
        """Counts per group over (example row, group code) pairs that pass the mask."""
        ex = self.examples
        keep = mask[rows] & (codes >= 0)
        rows, codes = rows[keep], codes[keep]
        imported = ex["imported"][rows]
        counted = rule.submitted_mask(ex["status"][rows], STATUS_CODES, imported)
        fooled_here = rule.fooling_mask(ex["fooled"][rows] if fooled is None else fooled[keep])
        decided = ex["decided"][rows]
        perturbed = counted & ex["perturbation"][rows]
        # One pass: every (group, flags) pair counted at once; the figures are sums over flags
        # (bit 4 marks validated fooling only together with bit 2, fooling).
        flags = (counted.astype(np.int64) | (fooled_here << 1)
                 | (rule.validated_mask(fooled_here, decided, DECIDED_CODES) << 2)
                 | ((decided == DECIDED_INCORRECT) << 3) | ((decided >= 0) << 4))
        table = np.bincount(codes * 32 + flags, minlength=n_groups * 32)[:n_groups * 32].reshape(n_groups, 32)

        def count(*bits: int, without: int = 0) -> np.ndarray:
            return table[:, _flag_set(bits, without)].sum(axis=1)

        out = {
            "submitted": count(1), "fooled": count(1, 2),
            "retracted": np.bincount(codes[ex["status"][rows] == RETRACTED], minlength=n_groups)[:n_groups],
            "validated_fooling": count(1, 2, 4), "decided": count(1, 16), "rejected": count(1, 8),
            "imported": np.bincount(codes[rule.imported_mask(ex["status"][rows], STATUS_CODES, imported)],
                                    minlength=n_groups)[:n_groups],
        }
        times = ex["time_ms"][rows]
        if medians:
            timed = counted & (times > 0)
            out["median_ms"] = _group_median(codes[timed], times[timed], n_groups)
        else:
            out["median_ms"] = np.full(n_groups, np.nan)
        out["writing_ms"] = np.bincount(codes, weights=times, minlength=n_groups)[:n_groups]
        if perturbed.any():
            edits = ex["edit_distance"][rows[perturbed]]
            measured = ~np.isnan(edits)
            edit_codes = codes[perturbed][measured]
            out["perturbations"] = np.bincount(edit_codes, minlength=n_groups)[:n_groups]
            out["edit_sum"] = np.bincount(edit_codes, weights=edits[measured], minlength=n_groups)[:n_groups]
        else:
            out["perturbations"] = out["edit_sum"] = np.zeros(n_groups)
        return out

    @staticmethod
    def _rows(stats: dict[str, np.ndarray], keys: list[str], names: list[str], *, per_person: bool = False) -> list[Group]:
        groups = []
        for i, (key, name) in enumerate(zip(keys, names)):
            submitted, retracted, decided = int(stats["submitted"][i]), int(stats["retracted"][i]), int(stats["decided"][i])
            group = Group(
                key=key, name=name, submitted=submitted, retracted=retracted, fooled=int(stats["fooled"][i]),
                validated_fooling=int(stats["validated_fooling"][i]), decided=decided,
                rejected=int(stats["rejected"][i]), undecided=submitted - decided, imported=int(stats["imported"][i]),
                mer=rule.mer(stats["fooled"][i], submitted), vmer=rule.vmer(stats["validated_fooling"][i], submitted),
                rejection_rate=rule.rejection_rate(int(stats["rejected"][i]), decided),
                retraction_rate=_ratio(retracted, submitted + retracted),
                median_seconds=None if math.isnan(stats["median_ms"][i]) else float(stats["median_ms"][i]) / 1000,
            )
            if per_person:
                hours = float(stats["writing_ms"][i]) / 3_600_000
                group.writing_hours = hours if hours > 0 else None
                group.examples_per_hour = submitted / hours if hours > 0 else None
                group.perturbations = int(stats["perturbations"][i])
                group.mean_edit_distance = _ratio(stats["edit_sum"][i], group.perturbations)
            groups.append(group)
        return groups

    def annotators(self, flt: DashboardFilter, mask: np.ndarray | None = None,
                   wide: np.ndarray | None = None) -> list[Group]:
        """One row per person who wrote or validated an example in view."""
        ex, val = self.examples, self.validations
        mask = self.example_mask(flt) if mask is None else mask
        wide = self.example_mask(flt, authors=False) if wide is None else wide
        n_people = len(self.people)
        stats = self._groups(mask, np.arange(len(ex)), ex["author"], n_people)
        # As a validator: peer verdicts on examples in view (whoever wrote them, and the variants they vetted).
        judged_in = wide | (self.example_mask(flt, authors=False, variants=True) & ex["variant"])
        peer = val["peer"] & judged_in[val["example"]] if len(val) else np.zeros(0, np.bool_)
        validators, examples, keys = val["validator"][peer], val["example"][peer], val["key"][peer]
        decided_key = ex["decided_key"][examples]
        on_decided = decided_key >= 0
        given = np.bincount(validators, minlength=n_people)[:n_people]
        judged = np.bincount(validators[on_decided], minlength=n_people)[:n_people]
        agreeing = np.bincount(validators[on_decided & (keys == decided_key)], minlength=n_people)[:n_people]
        shown = (stats["submitted"] + stats["retracted"] + stats["imported"] + given) > 0
        if flt.author_ids:
            chosen = np.zeros(n_people, dtype=np.bool_)
            chosen[[c for c in (self._code(self.people, a) for a in flt.author_ids) if c >= 0]] = True
            shown &= chosen
        people = np.nonzero(shown)[0]
        picked = {name: column[people] for name, column in stats.items()}
        ids = [self.people.values[p] for p in people]
        rows = self._rows(picked, ids, [self.names.get(i, i) for i in ids], per_person=True)
        for row, p in zip(rows, people):
            row.validations, row.validations_on_decided = int(given[p]), int(judged[p])
            row.agreement_with_decision = _ratio(agreeing[p], judged[p])
        return sorted(rows, key=lambda r: (-r.submitted, r.name.casefold()))

    def team_total(self, flt: DashboardFilter, mask: np.ndarray | None = None) -> Group:
        """Everyone's examples in view as one row of the per-annotator table: the team's totals, shown to
        someone who sees only their own row (its key is TEAM_KEY, never a person's)."""
        mask = self.example_mask(flt) if mask is None else mask
        rows = np.arange(len(self.examples))
        stats = self._groups(mask, rows, np.zeros(len(rows), dtype=np.int64), 1)
        return self._rows(stats, [TEAM_KEY], ["Team (everyone)"], per_person=True)[0]

    def breakdown(self, by: str, flt: DashboardFilter, mask: np.ndarray | None = None, *,
                  medians: bool = True) -> list[Group]:
        """Rows per round, target model, label or choice metadata field (an example with several
        target groups counts in each of them)."""
        ex = self.examples
        mask = self.example_mask(flt) if mask is None else mask
        fooled = None
        if by == "round":
            rows, codes, codebook = np.arange(len(ex)), ex["round"], self.rounds
        elif by == "label":
            rows, codes, codebook = np.arange(len(ex)), ex["label"], self.labels_codes
        elif by == "model":
            rows, codes, codebook, fooled = self.output_rows, self.output_models, self.models, self.output_fooled
        elif by in self.facet_rows:
            rows, codes, codebook = self.facet_rows[by], self.facet_values[by], self.facet_fields[by]
        else:
            return []
        stats = self._groups(mask, rows, codes, len(codebook), fooled, medians)
        present = np.nonzero(stats["submitted"] + stats["retracted"] + stats["imported"])[0]
        picked = {name: column[present] for name, column in stats.items()}
        keys = [codebook.values[i] for i in present]
        names = [self.names.get(k, k) for k in keys]
        groups = self._rows(picked, keys, names)
        if by == "round":
            return sorted(groups, key=lambda g: self.round_numbers.get(g.key, ("", 0))[1])
        return sorted(groups, key=lambda g: (-g.submitted, g.name.casefold()))

    def agreement(self, flt: DashboardFilter, mask: np.ndarray | None = None,
                  min_overlap: int = MIN_OVERLAP) -> tuple[Agreement, dict[int, str]]:
        """Agreement among peer validators on the examples in view."""
        val = self.validations
        mask = self.example_mask(flt) if mask is None else mask
        peer = val["peer"] & mask[val["example"]] if len(val) else np.zeros(0, np.bool_)
        # One peer verdict per (example, validator): the schema's unique constraint guarantees it.
        result = agreement(val["example"][peer], val["validator"][peer], val["key"][peer], min_overlap=min_overlap,
                           unique=True, dense=True)
        names = {code: self.names.get(self.people.values[code], self.people.values[code])
                 for code in {p.rater_a for p in result.pairs} | {p.rater_b for p in result.pairs}}
        return result, names


@functools.cache
def _flag_set(bits: tuple[int, ...], without: int) -> list[int]:
    """The 5-bit flag values with all of ``bits`` set and ``without`` clear."""
    return [f for f in range(32) if all(f & b for b in bits) and not f & without]


def _ratio(numerator, denominator) -> float | None:
    return float(numerator) / float(denominator) if denominator else None



def _group_median(codes: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The median of non-negative integer values (milliseconds) in each group, NaN where a group
    has none; one sort of (group, value) packed into int64."""
    result = np.full(n_groups, np.nan)
    if not len(codes):
        return result
    values = np.clip(values.astype(np.int64), 0, (1 << 32) - 1)
    keys = np.sort((codes.astype(np.int64) << 32) | values)
    groups = np.arange(n_groups, dtype=np.int64) << 32
    lo = np.searchsorted(keys, groups, side="left")
    hi = np.searchsorted(keys, groups + (1 << 32), side="left")
    count = hi - lo
    has = count > 0
    sorted_values = (keys & ((1 << 32) - 1)).astype(np.float64)
    last = len(keys) - 1
    lower = sorted_values[np.minimum(lo + (count - 1) // 2, last)]
    upper = sorted_values[np.minimum(lo + count // 2, last)]
    result[has] = ((lower + upper) / 2)[has]
    return result



EXPORT_EXTRA_COLUMNS = [
    ("writing_hours", "Writing hours", "float1", ""), ("retracted", "Retracted examples", "int", ""),
    ("fooled", "Fooling", "int", ""), ("validated_fooling", "Validated fooling", "int", ""),
    ("decided", "Decided", "int", ""), ("perturbations", "Perturbations", "int", ""),
    ("validations_on_decided", "Validations on decided", "int", ""),
]


def export_csv(rows: Sequence[Group], path, *, per_person: bool) -> Path:
    """Write the per-annotator table (``per_person``) or a breakdown as CSV: rates as fractions,
    times in seconds, empty cells where a figure is undefined."""
    from pathlib import Path

    from app.core.errors import DynadeskError

    columns = ANNOTATOR_COLUMNS + EXPORT_EXTRA_COLUMNS if per_person else BREAKDOWN_COLUMNS
    path = Path(path)
    try:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow([header for _, header, _, _ in columns])
            for row in rows:
                writer.writerow(["" if (value := getattr(row, name)) is None else value for name, *_ in columns])
    except OSError as exc:
        raise DynadeskError(f"Could not write {path}: {exc.strerror or exc}") from exc
    return path
