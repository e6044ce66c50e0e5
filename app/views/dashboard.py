"""What the Dashboard tab shows, as typed values: the filter the user chose, the choices the filters
offer, and the figures for one filter with every cell already formatted. Built by pure functions
from the dashboard service's results (:class:`app.core.services.dashboard.DashboardView`), which the
controller fetches on its worker; nothing here touches the database or Qt."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.formatting import num, pct

MISSING = "—"  # a dashboard figure that cannot be computed (the tables' own dash, wider than formatting's)
ColumnSpec = tuple[str, str, str, str]  # field, header, kind (text, int, rate, float1, kappa, seconds), tooltip

PAIR_COLUMNS: tuple[ColumnSpec, ...] = (
    ("a", "Validator", "text", ""), ("b", "Validator", "text", ""),
    ("items", "Shared", "int", "Examples both validated"),
    ("observed", "Same", "rate", "Share of shared examples given the same verdict"),
    ("kappa", "κ", "kappa", "Agreement beyond chance: 1 perfect, 0 chance level, below 0 worse than chance"),
)


# --- what the builders read from the service (app.core.services.dashboard, app.core.services.agreement) --
# Described here, not imported: widgets import this module, and the service reaches the storage layer.

class _Pair(Protocol):
    rater_a: int
    rater_b: int
    items: int
    observed: float
    kappa: float | None


class Agreement(Protocol):
    pairs: Sequence[_Pair]
    fleiss_kappa: float | None
    fleiss_items: int
    krippendorff_alpha: float | None
    ratings: int


class _Keyed(Protocol):
    key: str


class _Series(Protocol):
    key: str
    name: str
    mer: Sequence[float]
    vmer: Sequence[float]


class _Bar(Protocol):
    key: str
    name: str
    value: float
    second: float | None


class Figures(Protocol):
    """The service's DashboardView: every figure for one filter."""

    total_examples: int
    matching: int
    annotators: Sequence[_Keyed]
    breakdowns: Mapping[str, Sequence[_Keyed]]
    breakdown_titles: Mapping[str, str]
    agreement: Agreement
    rater_names: Mapping[int, str]
    time_edges: Sequence[float]
    time_series: Sequence[_Series]
    labels: Sequence[_Bar]
    facets: Mapping[str, Sequence[_Bar]]
    fooling_by_round: Sequence[_Bar]
    backlog_times: Sequence[float]
    backlog: Sequence[int]
    bin_seconds: float


@dataclass(frozen=True, slots=True)
class FilterValues:
    """What the filter row says: keys of a round and an author, a label, choice-metadata values,
    and a period in unix seconds (``period`` names a range picked on the backlog chart)."""

    round: str | None = None
    author: str | None = None
    label: str | None = None
    facets: tuple[tuple[str, str], ...] = ()  # (field, value), only fields with a value chosen
    since: float | None = None
    until: float | None = None
    period: str | None = None

    def facet(self, name: str) -> str | None:
        return next((value for field_name, value in self.facets if field_name == name), None)


def facet_values(chosen: Mapping[str, str | None] | Iterable[tuple[str, str | None]]) -> tuple[tuple[str, str], ...]:
    """Facet choices as FilterValues holds them: in the order given, empty ones left out."""
    pairs = chosen.items() if isinstance(chosen, Mapping) else chosen
    return tuple((name, value) for name, value in pairs if value)


@dataclass(frozen=True, slots=True)
class Choice:
    key: str
    name: str


@dataclass(frozen=True, slots=True)
class FacetChoice:
    name: str  # the metadata field
    title: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FilterChoices:
    """What the filter combos offer for a task."""

    rounds: tuple[Choice, ...] = ()
    people: tuple[Choice, ...] = ()
    labels: tuple[str, ...] = ()
    facets: tuple[FacetChoice, ...] = ()


def build_choices(rounds: Iterable[tuple[str, int]], people: Iterable[tuple[str, str]], labels: Iterable[str],
                  facets: Iterable[tuple[str, str, Sequence[str], Iterable[str]]]) -> FilterChoices:
    """Rounds as (key, number), people as (key, name), labels, and per choice-metadata field
    (name, title, its declared choices, the values the snapshot has seen): people by name, the
    values seen but not declared after the declared ones, sorted."""
    facet_choices = []
    for name, title, declared, seen in facets:
        extra = sorted(v for v in seen if v not in declared)
        facet_choices.append(FacetChoice(name, title, tuple(declared) + tuple(extra)))
    return FilterChoices(
        rounds=tuple(Choice(key, f"Round {number}") for key, number in rounds),
        people=tuple(Choice(key, name) for key, name in sorted(people, key=lambda p: p[1].casefold())),
        labels=tuple(labels), facets=tuple(facet_choices))


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    tip: str = ""
    text: bool = False  # a text column: left-aligned, its value in the tooltip; figures align right


@dataclass(frozen=True, slots=True)
class Cell:
    text: str
    sort: float | str | None  # what the column sorts by; None: an empty figure, kept last


@dataclass(frozen=True, slots=True)
class Row:
    key: str  # a person's key in the per-annotator table (for choosing the time charts' lines)
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class Table:
    columns: tuple[Column, ...] = ()
    rows: tuple[Row, ...] = ()


def format_value(kind: str, value: Any) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return MISSING
    if kind == "int":
        return f"{int(value):,}"
    if kind == "rate":
        return pct(value)
    if kind == "float1":
        return f"{value:,.1f}"
    if kind == "kappa":
        return num(value, 2)
    if kind == "seconds":
        seconds = int(round(value))
        return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
    return str(value)


def cell(kind: str, value: object) -> Cell:
    sort = value if isinstance(value, (int, float, str)) and not isinstance(value, bool) else None
    if isinstance(sort, float) and math.isnan(sort):
        sort = None
    if isinstance(sort, str):
        sort = sort.casefold()
    return Cell(format_value(kind, value), sort)


def build_table(columns: Sequence[ColumnSpec], rows: Iterable[object | Mapping[str, object]]) -> Table:
    """Rows (objects with the columns' fields as attributes, or mappings) as formatted cells."""
    def get(row: object, name: str) -> object:
        return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)

    return Table(
        columns=tuple(Column(header, tip, kind == "text") for _name, header, kind, tip in columns),
        rows=tuple(Row(str(get(row, "key") or ""), tuple(cell(kind, get(row, name)) for name, _h, kind, _t in columns))
                   for row in rows))


def interpretation(value: float | None) -> str:
    """Landis and Koch's (1977) words for a κ or α, as reviewers usually read them."""
    if value is None:
        return ""
    for limit, words in ((0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if value < limit:
            return f"Agreement is {words} (Landis & Koch)."
    return "Agreement is almost perfect (Landis & Koch)."


@dataclass(frozen=True, slots=True)
class AgreementView:
    fleiss: str  # Fleiss' κ, formatted
    fleiss_items: int
    alpha: str  # Krippendorff's α, formatted
    ratings: int
    interpretation: str  # "" when α cannot be computed
    min_overlap: int
    pairs: Table  # Cohen's κ per pair of validators, lowest first


def build_agreement(agreement: Agreement, names: Mapping[int, str], min_overlap: int) -> AgreementView:
    pairs = sorted(agreement.pairs, key=lambda p: (p.kappa is None, p.kappa if p.kappa is not None else 0))
    rows = [{"key": f"{p.rater_a}-{p.rater_b}", "a": names.get(p.rater_a, "?"), "b": names.get(p.rater_b, "?"),
             "items": p.items, "observed": p.observed, "kappa": p.kappa} for p in pairs]

    def kappa(value: float | None) -> str:
        return MISSING if value is None else num(value, 2)

    return AgreementView(
        fleiss=kappa(agreement.fleiss_kappa), fleiss_items=agreement.fleiss_items,
        alpha=kappa(agreement.krippendorff_alpha), ratings=agreement.ratings,
        interpretation=interpretation(agreement.krippendorff_alpha), min_overlap=min_overlap,
        pairs=build_table(PAIR_COLUMNS, rows))


@dataclass(frozen=True, slots=True)
class Bar:
    key: str  # what a click filters on
    name: str
    value: float
    second: float | None = None  # vMER next to MER


@dataclass(frozen=True, slots=True)
class Line:
    key: str
    name: str
    values: tuple[float, ...]  # NaN where there is nothing yet


@dataclass(frozen=True, slots=True)
class FacetBars:
    name: str  # the metadata field
    bars: tuple[Bar, ...]


@dataclass(frozen=True, slots=True)
class FiguresView:
    """Everything the dashboard shows for one filter."""

    summary: str
    annotators: Table
    breakdown: str  # the breakdown shown
    breakdowns: tuple[Choice, ...]  # every breakdown on offer: (name, title)
    breakdown_table: Table
    agreement: AgreementView
    time_edges: tuple[float, ...] = ()
    bin_seconds: float = 86400.0
    mer_lines: tuple[Line, ...] = ()
    vmer_lines: tuple[Line, ...] = ()
    people_note: str = ""  # beside the over-time charts' legend
    rounds: tuple[Bar, ...] = ()
    labels: tuple[Bar, ...] = ()
    facets: tuple[FacetBars, ...] = ()
    backlog_times: tuple[float, ...] = ()
    backlog: tuple[float, ...] = ()
    threshold_warning: str = ""  # "" when the team can reach the task's agreement threshold

    def facet(self, name: str) -> tuple[Bar, ...]:
        return next((f.bars for f in self.facets if f.name == name), ())


def shown_breakdown(figures: Figures, wanted: str) -> str:
    return wanted if wanted in figures.breakdowns else next(iter(figures.breakdowns))


def build_figures(figures: Figures, *, breakdown: str, chart_people_chosen: bool,
                  annotator_columns: Sequence[ColumnSpec], breakdown_columns: Sequence[ColumnSpec],
                  min_overlap: int, threshold_warning: str | None = None) -> FiguresView:
    """The page for one filter, from the service's figures (``breakdown``: the one asked for;
    the figures hold it or fall back to their first)."""
    breakdown = shown_breakdown(figures, breakdown)
    filtered = figures.matching != figures.total_examples
    series = figures.time_series
    note = "" if chart_people_chosen else (f"top {len(series)} by examples; select rows to choose" if series else "")
    return FiguresView(
        summary=(f"{figures.matching:,} of {figures.total_examples:,} examples" if filtered
                 else f"{figures.total_examples:,} examples"),
        annotators=build_table(annotator_columns, figures.annotators),
        breakdown=breakdown,
        breakdowns=tuple(Choice(name, title) for name, title in figures.breakdown_titles.items()),
        breakdown_table=build_table(breakdown_columns, figures.breakdowns[breakdown]),
        agreement=build_agreement(figures.agreement, figures.rater_names, min_overlap),
        time_edges=tuple(figures.time_edges), bin_seconds=figures.bin_seconds,
        mer_lines=tuple(Line(s.key, s.name, tuple(s.mer)) for s in series),
        vmer_lines=tuple(Line(s.key, s.name, tuple(s.vmer)) for s in series),
        people_note=note,
        rounds=tuple(Bar(b.key, b.name, b.value, b.second) for b in figures.fooling_by_round),
        labels=tuple(Bar(b.key, b.name, b.value) for b in figures.labels),
        facets=tuple(FacetBars(name, tuple(Bar(b.key, b.name, b.value) for b in bars))
                     for name, bars in figures.facets.items()),
        backlog_times=tuple(figures.backlog_times), backlog=tuple(float(v) for v in figures.backlog),
        threshold_warning=threshold_warning or "",
    )
