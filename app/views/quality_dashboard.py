"""What the Dashboard's quality view shows, as typed values: the artifact table of a round (or of one
annotator in it), the diversity figures over rounds, the alerts, and the examples of a term a lead
clicked. Built by pure functions from app.core.quality.report's results, on the controller's worker."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from app.core.wellbeing.blur import blurred
from app.views.dashboard import ColumnSpec, Table, build_table

if TYPE_CHECKING:  # named, never imported: the report module reaches the model layer (progress handles)
    from app.core.quality.artifacts import Artifact
    from app.core.quality.report import Alert, QualityReport

ARTIFACT_COLUMNS: tuple[ColumnSpec, ...] = (
    ("term", "Term", "text", "A word or two adjacent words; click it to see its examples"),
    ("label", "Label", "text", "The label the term is most over-represented in"),
    ("count", "Examples", "int", "Examples that contain the term"),
    ("with_label", "With label", "int", "Of them, how many carry the label"),
    ("share", "Share", "rate", "Conditional label share: with label ÷ examples"),
    ("base_rate", "Base rate", "rate", "The label's share of all the examples counted"),
    ("z", "z", "kappa", "(share − base rate) ÷ √(base rate (1 − base rate) ÷ examples): grows with the evidence"),
    ("mark", "Rounds", "text", "Rounds whose artifact list has this term with this label; ↻: several rounds"),
)


@dataclass(frozen=True, slots=True)
class RoundSeries:
    name: str
    values: tuple[float, ...]  # one per round of QualityFigures.rounds; NaN where there is no figure


@dataclass(frozen=True, slots=True)
class QualityFigures:
    heading: str  # what the artifact table describes
    artifacts: Table  # each row's key is its term
    artifact_note: str
    significant: tuple[str, ...]  # terms above the Bonferroni bound (shown bold)
    recurring: tuple[str, ...]  # terms listed in several rounds (marked)
    rounds: tuple[int, ...] = ()
    distinct: tuple[RoundSeries, ...] = ()
    spread: tuple[RoundSeries, ...] = ()
    novelty: tuple[RoundSeries, ...] = ()
    spread_note: str = ""
    alerts: tuple[str, ...] = ()
    duplicates: str = ""  # duplicate rates per writer and per round, as a line


@dataclass(frozen=True, slots=True)
class TermExample:
    text: str
    label: str
    author: str


@dataclass(frozen=True, slots=True)
class TermExamples:
    term: str
    title: str
    examples: tuple[TermExample, ...]


def _value(value: float | None) -> float:
    return math.nan if value is None else float(value)


def build_quality(report: QualityReport, *, round_number: int | None, author: str | None = None,
                  alerts: Sequence[Alert] = (), spread_note: str = "", duplicates: str = "",
                  blur_words: Sequence[str] = ()) -> QualityFigures:
    """The quality view for one round (default: the latest) and, with ``author``, that person's
    own artifact table in it; the over-round series cover every round of the report. ``blur_words``:
    the task's blur list where the lead reads masked (the terms and the alerts naming them shown masked;
    a row's key stays the term, for its examples)."""
    rounds = report.rounds
    if not rounds:
        return QualityFigures("No submitted examples yet", build_table(ARTIFACT_COLUMNS, ()), "", (), (),
                              alerts=tuple(blurred(a.message, blur_words) for a in alerts))
    shown = next((r for r in rounds if r.number == round_number), rounds[-1])
    table = shown.artifacts
    heading = f"Round {shown.number}: {shown.examples:,} examples"
    if author is not None:
        name = report.author_names.get(author, "this annotator")
        mine = shown.annotators.get(author)
        table = mine if mine is not None else replace(table, examples=0, tested=0, rows=())
        heading = f"Round {shown.number}, {name}: " + (f"{mine.examples:,} examples" if mine else "no examples")
    recurring = {row.term for row in shown.artifacts.rows if row.recurring}
    # an annotator's rows carry the round table's marks: the rounds whose list has the term with that label
    marks = {(row.term, row.label): row.rounds for row in shown.artifacts.rows}

    def mark(row: Artifact) -> str:
        listed = row.rounds or marks.get((row.term, row.label), ())
        return ", ".join(map(str, listed)) + (" ↻" if len(listed) > 1 else "")

    rows = [{"key": r.term, "term": blurred(r.term, blur_words), "label": r.label, "count": r.count, "with_label": r.with_label,
             "share": r.share, "base_rate": r.base_rate, "z": r.z, "mark": mark(r)} for r in table.rows]
    bound = (f"bold: z above {table.critical_z:.2f} (Bonferroni over {table.tested:,} tests, 1 %)"
             if table.tested else "nothing seen often enough to test")
    note = f"Terms in at least {table.min_count} examples, strongest first; {bound}. Click a term for its examples."
    return QualityFigures(
        heading=heading, artifacts=build_table(ARTIFACT_COLUMNS, rows), artifact_note=note,
        significant=tuple(r.term for r in table.rows if r.significant),
        recurring=tuple(sorted(recurring)),
        rounds=tuple(r.number for r in rounds),
        distinct=(RoundSeries("distinct-1", tuple(_value(r.distinct.distinct_1) for r in rounds)),
                  RoundSeries("distinct-2", tuple(_value(r.distinct.distinct_2) for r in rounds))),
        spread=(RoundSeries("mean cosine distance", tuple(_value(r.spread) for r in rounds)),),
        novelty=(RoundSeries("novel share", tuple(_value(r.novel_share) for r in rounds)),),
        spread_note=spread_note, alerts=tuple(blurred(a.message, blur_words) for a in alerts), duplicates=duplicates)


def build_term_examples(term: str, texts: Sequence[str], labels: Sequence[str], authors: Sequence[str], *,
                        where: str, limit: int = 200, blur_words: Sequence[str] = ()) -> TermExamples:
    """The examples that contain a clicked term (at most ``limit`` shown; the title gives the count).
    ``blur_words``: the task's blur list where the lead reads masked (texts and the term shown masked)."""
    count = len(texts)
    shown = min(count, limit)
    texts = [blurred(text, blur_words) for text in texts[:limit]]
    title = (f"“{blurred(term, blur_words)}” in {where}: {count:,} example{'s' if count != 1 else ''}"
             + (f" (first {shown:,} shown)" if shown < count else ""))
    return TermExamples(term, title, tuple(TermExample(t, l, a) for t, l, a in
                                           zip(texts[:limit], labels[:limit], authors[:limit])))
