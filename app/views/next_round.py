"""What the Next round dialog shows and sends, as typed values: the training choices (step 1), the
progress of a running step with its ETA, the comparison's table and chart (step 2) and what a
promotion did (step 3).

Built by pure functions from the desk's counts and defaults (app/core/next_round/inputs.py), the
comparison document (app/core/next_round/comparison.py) and a Promotion; Qt-free, tested in
tests/views/test_next_round_views.py.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.formatting import MISSING, pct
from app.core.next_round.promotion_rule import (  # a row's states, as the rule names them: widgets colour by them
    BETTER as BETTER,
)
from app.core.next_round.promotion_rule import (
    NO_ITEMS as NO_ITEMS,
)
from app.core.next_round.promotion_rule import (
    TOO_FEW as TOO_FEW,
)
from app.core.next_round.promotion_rule import (
    UNCLEAR as UNCLEAR,
)
from app.core.next_round.promotion_rule import (
    WORSE as WORSE,
)
from app.core.next_round.promotion_rule import (
    difference_state,
    judge,
)

FROM_TARGET, FROM_BASE = "target", "base"
METRICS = {"accuracy": "accuracy", "macro_f1": "macro-F1", "fooling_right": "fooling examples now right"}
POOLED = "held-out"
ESTIMATING = "estimating…"


class _RoundCount(Protocol):
    number: int
    status: str
    decided: int
    held_out: int
    undecided: int
    left_out: int
    imported: Mapping[str, int]
    imported_held_out: Mapping[str, int]


class _BaseDefaults(Protocol):
    path: str
    text_column: str
    label_column: str
    label_map: dict[str, str] | None
    html_unescape: bool
    source: str
    context_column: str


class _TrainDefaults(Protocol):
    @property
    def base(self) -> _BaseDefaults | None: ...
    start_from: str
    round_weight: str
    include_undecided: bool
    rounds: tuple[int, ...]
    warm_target: str | None
    suite: str
    variants: bool


@dataclass(frozen=True, slots=True)
class RoundRow:
    number: int
    text: str  # "Round 1 (open): 120 decided (12 held out), 8 undecided"
    checked: bool
    enabled: bool  # a round with nothing to take cannot be chosen


@dataclass(frozen=True, slots=True)
class TrainSetup:
    """Step 1 as it opens."""

    task_code: str
    task_name: str
    rounds: tuple[RoundRow, ...]
    include_undecided: bool
    base_path: str
    text_column: str
    label_column: str
    label_map: str  # "0=hate,1=not hate"
    html_unescape: bool
    base_note: str  # where the base data choices come from
    start_from: str
    warm_target: str  # the target a warm start starts from; "" when none can
    round_weight: str  # "auto" or a number
    suite: str
    candidates_folder: str
    promote_allowed: bool
    promote_reason: str  # why Promote is disabled ("" when it is not)
    publish_possible: bool
    publish_reason: str  # why Publish is not offered
    # imported data sets in the task's rounds and their examples: taken, with their gold labels, when chosen
    imported_sets: tuple[tuple[str, int], ...] = ()
    # a pair task (NLI): its context input's label ("Context"), whose base data column is asked for too; "" otherwise
    context_input: str = ""
    context_column: str = ""
    text_input: str = "Text"  # the written input's label ("Hypothesis" for NLI)
    validated_variants: int = 0  # the task's validated variants (the adaptive suite): offered to train on when any
    train_on_variants: bool = False  # as last used


@dataclass(frozen=True, slots=True)
class BaseColumnsView:
    """The chosen base data file's columns, and the text and label columns found by name in them."""

    columns: tuple[str, ...]
    text_column: str  # "" when no column has a known text name
    label_column: str
    note: str  # what is chosen, replacing the note the dialog opened with
    context_column: str = ""  # a pair task's context column found by name (premise, context, ...); "" otherwise


NO_BASE_NOTE = "No base data chosen yet: the model then learns from the round examples alone."


def base_columns_view(file_name: str, columns: Sequence[str], text_column: str | None,
                      label_column: str | None, context_column: str | None = None, *,
                      pairs: bool = False) -> BaseColumnsView:
    """``pairs``: the task reads (context, text) pairs, so the context column is looked for too."""
    found = [f"context “{context_column}”" if pairs and context_column else "",
             f"text “{text_column}”" if text_column else "", f"label “{label_column}”" if label_column else ""]
    found = [part for part in found if part]
    complete = text_column and label_column and (context_column or not pairs)
    guessed = (f"; columns found by name: {' and '.join(found)}" if found else "") + (
        "" if complete else "; choose the columns the file's names did not give away")
    return BaseColumnsView(tuple(columns), text_column or "", label_column or "",
                           f"Base data: {file_name} ({len(columns)} columns){guessed}.",
                           (context_column or "") if pairs else "")


@dataclass(frozen=True, slots=True)
class TrainChoices:
    """What the user chose in step 1 (the dialog sends it; the controller checks it)."""

    rounds: tuple[int, ...]
    include_undecided: bool
    base_path: str
    text_column: str
    label_column: str
    label_map: str
    html_unescape: bool
    start_from: str
    round_weight: str  # "auto" or a number, as typed
    suite: str
    epochs: int
    seed: int
    encoder: str  # "" : the packaged base encoder (or the one the target was trained from)
    learning_rate: str = "2e-4"  # as typed
    imported: tuple[str, ...] = ()  # imported data sets to take (their names), with their gold labels
    context_column: str = ""  # a pair task's base data: its context column (premise); "" for single texts
    int8_later: bool = False  # promote on the fp32 form at once; the int8 search runs in the background after
    variants: bool = False  # train on the validated variants of the rounds' training-side seeds too


@dataclass(frozen=True, slots=True)
class StepProgress:
    fraction: float | None  # None: not known yet (a busy bar)
    text: str
    eta: str


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    split: str
    metric: str
    current: str
    candidate: str
    difference: str
    interval: str
    verdict: str  # the promotion rule's reading of it: BETTER, WORSE, UNCLEAR, TOO_FEW (no colour) or NO_ITEMS
    items: int
    pooled: bool


@dataclass(frozen=True, slots=True)
class ChartGroup:
    """One held-out split's accuracy: the current target's and the candidate's, and the bounds of
    the candidate's bar from the 95 % interval of the paired difference (current + low, current + high)."""

    name: str
    current: float
    candidate: float
    low: float
    high: float
    items: int


@dataclass(frozen=True, slots=True)
class ComparisonView:
    current_name: str
    candidate_name: str
    verdict: str  # one sentence
    headline: str  # the pooled held-out accuracy: current -> candidate, difference [interval], n
    worse: bool  # refused by the promotion rule: Promote needs "Promote anyway…" with a reason
    rows: tuple[ComparisonRow, ...]
    groups: tuple[ChartGroup, ...]
    notes: tuple[str, ...]  # warnings of the evaluation (overlap) first
    report_path: str
    judged: tuple[str, ...] = ()  # the promotion rule's line for every split: its state and figures


@dataclass(frozen=True, slots=True)
class PromotionView:
    round_number: int
    lines: tuple[str, ...]
    lineage: tuple[str, ...]
    publish_rounds: tuple[int, ...]
    publish_hint: str  # how to publish later from the command line


def round_rows(counts: Sequence[_RoundCount], chosen: Sequence[int] = ()) -> tuple[RoundRow, ...]:
    """A check box per round; checked: the rounds chosen last time, else every round with decided examples."""
    rows = []
    for c in counts:
        parts = [f"{c.decided:,} decided ({c.held_out:,} held out)", f"{c.undecided:,} undecided"]
        if c.imported:
            parts.append(", ".join(f"{n:,} imported ({name}; {c.imported_held_out.get(name, 0):,} held out)"
                                   for name, n in sorted(c.imported.items())))
        if c.left_out:
            parts.append(f"{c.left_out:,} left out (flagged)")
        usable = c.decided > 0 or c.undecided > 0 or bool(c.imported)
        checked = (c.number in chosen) if chosen else c.decided > 0
        rows.append(RoundRow(c.number, f"Round {c.number} ({c.status}): " + ", ".join(parts), checked and usable,
                             usable))
    return tuple(rows)


def train_setup(task_code: str, task_name: str, counts: Sequence[_RoundCount], defaults: _TrainDefaults,
                candidates_folder: str, label_map_text: str, *, promote_reason: str = "",
                publish_reason: str = "", inputs: tuple[str, str] = ("", "Text"),
                validated_variants: int = 0) -> TrainSetup:
    """``inputs``: the labels of the task's context input ("" for a single-text task) and written input."""
    base = defaults.base
    return TrainSetup(
        task_code, task_name, round_rows(counts, defaults.rounds), defaults.include_undecided,
        base.path if base else "", base.text_column if base else "", base.label_column if base else "",
        label_map_text, base.html_unescape if base else False,
        f"Pre-filled {base.source}." if base else NO_BASE_NOTE,
        defaults.start_from if defaults.warm_target else FROM_BASE, defaults.warm_target or "",
        defaults.round_weight, defaults.suite, candidates_folder, not promote_reason, promote_reason,
        not publish_reason, publish_reason, imported_sets(counts), inputs[0],
        (base.context_column if base and inputs[0] else ""), inputs[1], validated_variants,
        defaults.variants and validated_variants > 0)


def variants_choice_text(validated: int) -> str:
    """The check box that trains on the adaptive suite's validated variants too."""
    if not validated:
        return "Train on validated variants too (none yet: grow the suite and validate its variants first)"
    return (f"Train on validated variants too ({validated:,} in the suite; those in the chosen rounds, never "
            "of held-out seeds; each weighs as a round example, and the manifest lists them)")


def imported_sets(counts: Sequence[_RoundCount]) -> tuple[tuple[str, int], ...]:
    """Each imported data set of the task's rounds with its examples (a choice of its own in step 1)."""
    totals: dict[str, int] = {}
    for c in counts:
        for name, n in c.imported.items():
            totals[name] = totals.get(name, 0) + n
    return tuple(sorted(totals.items()))


def imported_choice_text(sets: Sequence[tuple[str, int]]) -> str:
    """The check box that takes imported data sets: which, how many, and what they bring."""
    named = ", ".join(f"{name} ({n:,})" for name, n in sets)
    return f"Also take the imported data sets {named}, with their own gold labels (the manifest records it)"


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def points(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:+.1f} pt"


def family_rows(adaptive: Mapping[str, Any] | None) -> list[ComparisonRow]:
    """The adaptive suite per topic family: accuracy of each model and the difference with its interval; a
    family is read like a split (too few variants say so) but the rule judges the suite as a whole."""
    rows = []
    for row in (adaptive or {}).get("families") or []:
        now, new = row.get("current") or {}, row.get("candidate") or {}
        interval = MISSING if row.get("low") is None else f"[{points(row['low'])}, {points(row['high'])}]"
        rows.append(ComparisonRow(f"Adaptive suite · {row['family']}", "accuracy (topic family)",
                                  pct(now.get("accuracy")), pct(new.get("accuracy")), points(row.get("difference")),
                                  interval, difference_state(row.get("low"), row.get("high"), int(row["n"])),
                                  int(row["n"]), False))
    return rows


def comparison_view(document: Mapping[str, Any], report_path: str = "") -> ComparisonView:
    """The table (split × metric, pooled held-out first) and the chart (each round's held-out
    accuracy, and all held-out splits together) of a comparison document."""
    names = {s["key"]: s["name"] for s in document.get("splits", [])}
    names[POOLED] = "All held-out splits"
    rows = []
    for d in document["differences"]:
        pooled = d["split"] == POOLED
        interval = MISSING if d["low"] is None else f"[{points(d['low'])}, {points(d['high'])}]"
        rows.append(ComparisonRow(names.get(d["split"], d["split"]), METRICS.get(d["metric"], d["metric"]),
                                  pct(d["current"]), pct(d["candidate"]), points(d["difference"]), interval,
                                  difference_state(d["low"], d["high"], d["items"]), d["items"], pooled))
    rows += family_rows(document.get("adaptive_suite"))
    groups = []
    held = [s["key"] for s in document.get("splits", []) if s.get("kind") == "round"]
    for key in held + [POOLED]:
        d = next((x for x in document["differences"] if x["split"] == key and x["metric"] == "accuracy"), None)
        if d is None or not d["items"] or d["current"] is None:
            continue
        name = "All held-out" if key == POOLED else names[key].replace(" held-out", "")
        groups.append(ChartGroup(name, d["current"], d["candidate"], d["current"] + d["low"],
                                 d["current"] + d["high"], d["items"]))
    pooled_row = document["pooled"]
    rule = judge(document["differences"], names)  # the one promotion rule, over every split
    verdict = rule.sentence + (" Promoting it needs “Promote anyway…” with a reason, recorded with these figures."
                               if rule.refused else "")
    headline = (f"Held-out accuracy, all rounds: {pct(pooled_row['current'])} → {pct(pooled_row['candidate'])}, "
                f"difference {points(pooled_row['difference'])}"
                + (f" [{points(pooled_row['low'])}, {points(pooled_row['high'])}]" if pooled_row["low"] is not None else "")
                + f" over {pooled_row['items']:,} example{'' if pooled_row['items'] == 1 else 's'}.")
    evaluation = document.get("evaluation", {})
    notes = tuple(f"Warning: {w}" for w in evaluation.get("warnings", [])) + tuple(evaluation.get("notes", []))
    return ComparisonView(document["current"]["name"], document["candidate"]["name"], verdict, headline,
                          rule.refused, tuple(rows), tuple(groups), notes, report_path,
                          tuple(s.line() for s in rule.splits))


class _Record(Protocol):
    name: str
    sha256: str


class _Promotion(Protocol):
    task_code: str
    previous_round: int | None
    round_number: int
    forced: bool
    lineage: dict[str, Any]

    @property
    def targets(self) -> Sequence[_Record]: ...

    def summary_lines(self) -> list[str]: ...


def promotion_view(promotion: _Promotion) -> PromotionView:
    lineage = promotion.lineage
    lines = []
    parents = lineage.get("parent_models") or []
    lines.append("Parent target(s): " + (", ".join(f"{p['name']} ({p['sha256'][:12]})" for p in parents) or "none"))
    manifest = lineage.get("manifest") or {}
    if manifest:
        lines.append(f"Training manifest: {manifest.get('path')} (sha256 {str(manifest.get('sha256'))[:12]})")
    override = lineage.get("override") or {}
    if override.get("reason"):
        lines.append(f"Promoted anyway, because: {override['reason']}")
    comparison = lineage.get("comparison") or {}
    if comparison:
        pooled = comparison.get("pooled") or {}
        lines.append(f"Comparison: held-out accuracy {pct(pooled.get('current'))} → {pct(pooled.get('candidate'))}, "
                     f"difference {points(pooled.get('difference'))} [{points(pooled.get('low'))}, "
                     f"{points(pooled.get('high'))}]")
    when = str(lineage.get("promoted_at", "?")).replace("T", " ")[:16] + " UTC"
    lines.append(f"Promoted by {lineage.get('promoted_by', {}).get('name', '?')} on {when}"
                 + (" — over the promotion rule's refusal (recorded as forced, with the figures)"
                    if promotion.forced else ""))
    rounds = tuple(n for n in (promotion.previous_round, promotion.round_number) if n is not None)
    hint = ("Sync is not set up, so there is no team server to publish to (Sync ▸ Settings). Publish later with: "
            f"dynadesk sync publish {promotion.task_code} " + " ".join(f"--round {n}" for n in rounds))
    return PromotionView(promotion.round_number, tuple(promotion.summary_lines()), tuple(lines), rounds, hint)

