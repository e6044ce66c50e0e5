"""The review dashboard's figures: who produces good model-fooling data.

:class:`DashboardService` keeps a compact numpy snapshot of every non-draft example (with its
target-model outputs and choice metadata) and every validation. The first :meth:`refresh`
loads it all (a few hundred ms for 100k examples: run it off the GUI thread); later refreshes
load only what changed: rows added since (by rowid) and rows whose ``updated_at`` moved past
the last one seen. Every figure is then computed from the arrays with numpy, so filtering and
recomputing over 100k examples takes milliseconds (DESIGN.md §5).

Definitions (DESIGN.md §1; MER and vMER once, in app/core/tasks/figures.py):
- *submitted*: status submitted or flagged (drafts and retracted examples are not).
- *MER*: model-fooling ÷ submitted. *vMER*: model-fooling and decided 'correct' ÷ submitted.
- *rejection rate*: decided 'incorrect' ÷ decided examples.
- *retraction rate*: retracted ÷ (submitted + retracted).
- *examples per hour*: submitted ÷ hours of writing time recorded on the author's submitted
  and retracted examples (examples with no recorded time, such as imports, add none; with no
  recorded time at all the figure is empty).
- *median time per example*: over submitted examples with recorded writing time.
- *mean edit distance*: word edit distance of the author's submitted perturbations.
- *agreement with the final decision*: share of a person's peer verdicts on decided examples
  that match the decision (verdict, and the corrected label for 'incorrect').
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import numpy as np

from app.core.services.agreement import Agreement
from app.core.services.assistant_split import AssistantSplit, SplitBy, snapshot_split
from app.core.services.dashboard_snapshot import DECIDED_CODES, STATUS_CODES, DashboardFilter
from app.core.services.dashboard_tables import DashboardTables, Group
from app.core.tasks import figures as rule
from app.core.tasks.definition import MetadataKind

CHART_ANNOTATORS = 6  # lines in the MER/vMER-over-time charts unless people are chosen


@dataclass
class Series:
    key: str  # person id
    name: str
    mer: list[float]  # NaN before their first example
    vmer: list[float]


@dataclass
class Bar:
    key: str  # what a click filters on (a label, facet value, round id)
    name: str
    value: float
    second: float | None = None  # vMER next to MER in the by-round chart


@dataclass
class DashboardView:
    """Everything the dashboard shows for one filter."""

    total_examples: int  # non-draft examples of the task, before filtering
    matching: int  # submitted + retracted examples that pass the filter
    annotators: list[Group]
    breakdowns: dict[str, list[Group]]  # breakdown name -> rows
    breakdown_titles: dict[str, str]  # breakdown name -> title for a selector
    agreement: Agreement
    rater_names: dict[int, str]  # agreement's rater codes -> names
    time_edges: list[float]  # MER over time: bin ends, unix seconds
    time_series: list[Series]
    labels: list[Bar]
    facets: dict[str, list[Bar]]  # choice metadata field -> value counts
    facet_titles: dict[str, str]
    fooling_by_round: list[Bar]
    backlog_times: list[float]
    backlog: list[int]
    bin_seconds: float = 86400.0


class DashboardService(DashboardTables):
    """Figures for the review dashboard, from an incrementally refreshed snapshot.

    Not thread-safe: use one instance from one thread at a time (the GUI runs it on one worker).
    """
    def view(self, flt: DashboardFilter, *, breakdown: str = "round", chart_people: Sequence[uuid.UUID | str] = (),
             now: datetime | None = None, only_person: uuid.UUID | None = None) -> DashboardView:
        """Every figure the dashboard shows for this filter, with one breakdown in full (the
        others are a selector's click away: :meth:`breakdown`).

        ``only_person``: the figures as someone who is not a lead sees them: per-person figures are
        theirs alone (their own row, the team's totals, their own line over time, the agreement pairs
        they are in); the breakdowns and charts are team totals already."""
        with self._lock:
            if only_person is not None:
                flt = replace(flt, author_ids=())  # a colleague's examples are not theirs to pick out
                chart_people = (only_person,)
            view = self._view(flt, breakdown, chart_people, now)
            if only_person is not None:
                view = self._own_share(view, flt, only_person.hex)
            return view

    def _own_share(self, view: DashboardView, flt: DashboardFilter, key: str) -> DashboardView:
        code = self.people.index.get(key, -1)
        agreement = replace(view.agreement, pairs=[p for p in view.agreement.pairs if code in (p.rater_a, p.rater_b)])
        names = {c: name for c, name in view.rater_names.items() if c == code}
        names.update({c: "a colleague" for p in agreement.pairs for c in (p.rater_a, p.rater_b) if c != code})
        return replace(view, annotators=[a for a in view.annotators if a.key == key] + [self.team_total(flt)],
                       agreement=agreement, rater_names=names,
                       time_series=[s for s in view.time_series if s.key == key])

    def assistant_split(self, flt: DashboardFilter, by: SplitBy = "annotator", *,
                        only_person: uuid.UUID | None = None) -> AssistantSplit:
        """The writing assistant's split of the figures for this filter (app.core.services.assistant_split).

        ``only_person``: as :meth:`view` takes it: per annotator, their own row and the team's totals only."""
        with self._lock:
            if only_person is not None:
                flt = replace(flt, author_ids=())
            split = snapshot_split(self, flt, by)
        if only_person is not None and by == "annotator":
            split = replace(split, groups=[g for g in split.groups if g.key == only_person.hex])
        return split

    def breakdown_titles(self, task_id: uuid.UUID | None) -> tuple[dict[str, str], dict[str, str]]:
        """Breakdown name -> title, and choice metadata field -> its label, for a task."""
        titles = {"round": "Per round", "model": "Per target model", "label": "Per label"}
        facets = {}
        if task_id is not None:
            for spec in self.tasks.definition(task_id).metadata:
                if spec.kind != MetadataKind.TEXT:
                    facets[spec.name] = spec.label
        else:
            facets = {name: name.replace("_", " ").capitalize() for name in self.facet_rows}
        titles.update({name: f"Per {label.casefold()}" for name, label in facets.items()})
        return titles, facets

    def _view(self, flt: DashboardFilter, breakdown: str, chart_people, now) -> DashboardView:
        ex = self.examples
        task_only = DashboardFilter(task_id=flt.task_id)
        in_task = self.example_mask(task_only)
        wide = self.example_mask(flt, authors=False)
        mask = wide.copy()
        if flt.author_ids:
            mask &= np.isin(ex["author"], [self._code(self.people, a) for a in flt.author_ids])
        annotators = self.annotators(flt, mask, wide)
        breakdown_titles, facet_titles = self.breakdown_titles(flt.task_id)
        if breakdown not in breakdown_titles:
            breakdown = "round"
        breakdowns = {breakdown: self.breakdown(breakdown, flt, mask)}
        agreement_result, rater_names = self.agreement(flt, mask)
        counted = mask & rule.submitted_mask(ex["status"], STATUS_CODES, ex["imported"])

        def chart(name: str, **without) -> list[Group]:
            """A chart's bars ignore the chart's own filter, so that the other bars stay to click
            (the chosen one is highlighted); they need counts and rates, not medians."""
            if not any(getattr(flt, field) for field in without):
                return breakdowns.get(name) or self.breakdown(name, flt, mask, medians=False)
            others = replace(flt, **without)
            return self.breakdown(name, others, self.example_mask(others), medians=False)

        labels = [Bar(g.key, g.name, g.submitted) for g in chart("label", labels=())]
        facets = {}
        for name in facet_titles:
            if flt.facets.get(name):
                others = replace(flt, facets={k: v for k, v in flt.facets.items() if k != name})
                groups = self.breakdown(name, others, self.example_mask(others), medians=False)
            else:
                groups = chart(name)
            facets[name] = [Bar(g.key, g.name, g.submitted) for g in groups]
        by_round = [Bar(g.key, g.name, g.mer or 0.0, g.vmer or 0.0) for g in chart("round", round_ids=())]
        edges, series, bin_seconds = self._time_series(counted, annotators, chart_people)
        backlog_times, backlog = self._backlog(counted, now)
        return DashboardView(
            total_examples=int(in_task.sum()), matching=int(mask.sum()), annotators=annotators, breakdowns=breakdowns,
            breakdown_titles=breakdown_titles, agreement=agreement_result, rater_names=rater_names,
            time_edges=edges, time_series=series, labels=labels, facets=facets, facet_titles=facet_titles,
            fooling_by_round=by_round, backlog_times=backlog_times, backlog=backlog, bin_seconds=bin_seconds,
        )

    def _time_series(self, counted: np.ndarray, annotators: list[Group], chart_people) -> tuple[list, list, float]:
        """Cumulative MER and vMER at the end of each time bin, for the chosen people (or the most
        productive few)."""
        ex = self.examples
        times = ex["submitted_at"]
        usable = counted & ~np.isnan(times)
        if not usable.any():
            return [], [], 86400.0
        start, end = float(times[usable].min()), float(times[usable].max())
        width = _bin_width(end - start)
        n_bins = int((end - start) // width) + 1
        wanted = [p.hex if isinstance(p, uuid.UUID) else str(p) for p in chart_people]
        if not wanted:
            wanted = [a.key for a in annotators if a.submitted][:CHART_ANNOTATORS]
        series = []
        # Each wanted person gets a slot; one bincount over (slot, bin) counts them all.
        slot_of = np.full(len(self.people) + 1, -1, dtype=np.int64)
        wanted = [key for key in wanted if self.people.index.get(key, -1) >= 0]
        for slot, key in enumerate(wanted):
            slot_of[self.people.index[key]] = slot
        slots = slot_of[ex["author"]]
        mine = usable & (slots >= 0)
        bins = ((times[mine] - start) // width).astype(np.int64)
        cells = slots[mine] * n_bins + bins
        fooled = rule.fooling_mask(ex["fooled"][mine])
        validated = rule.validated_mask(fooled, ex["decided"][mine], DECIDED_CODES)
        size = len(wanted) * n_bins

        def cumulative(selection) -> np.ndarray:
            return np.cumsum(np.bincount(cells[selection], minlength=size)[:size].reshape(len(wanted), n_bins), axis=1)

        submitted = cumulative(slice(None))
        mer, vmer = rule.rates(cumulative(fooled), submitted), rule.rates(cumulative(validated), submitted)
        for slot, key in enumerate(wanted):
            if submitted[slot, -1]:
                series.append(Series(key, self.names.get(key, key), mer[slot].tolist(), vmer[slot].tolist()))
        edges = (start + width * (np.arange(n_bins) + 1)).tolist()
        return edges, series, width

    def _backlog(self, counted: np.ndarray, now: datetime | None) -> tuple[list[float], list[int]]:
        """Examples submitted but not yet decided, at the end of each time bin."""
        ex = self.examples
        submitted_at = ex["submitted_at"][counted]
        submitted_at = submitted_at[~np.isnan(submitted_at)]
        if not len(submitted_at):
            return [], []
        decided = self.decided_at()[counted]
        decided = decided[~np.isnan(decided)]
        start = float(submitted_at.min())
        end = max(float(submitted_at.max()), float(decided.max()) if len(decided) else start,
                  (now or datetime.now(UTC)).timestamp())
        width = _bin_width(end - start)
        n_bins = int((end - start) // width) + 1
        edges = start + width * (np.arange(n_bins) + 1)
        edges[-1] = min(edges[-1], end + 1)

        def arrived_by_each_edge(times: np.ndarray) -> np.ndarray:  # counts per bin, summed up: no sort
            bins = np.clip((times - start) // width, 0, n_bins - 1).astype(np.int64)
            return np.cumsum(np.bincount(bins, minlength=n_bins))

        backlog = arrived_by_each_edge(submitted_at) - arrived_by_each_edge(decided)
        return edges.tolist(), backlog.astype(int).tolist()



def _bin_width(span_seconds: float) -> float:
    """Hours, days or weeks: the smallest that keeps the charts to about 60 points."""
    for width in (3600.0, 6 * 3600.0, 86400.0, 7 * 86400.0, 30 * 86400.0):
        if span_seconds / width <= 60:
            return width
    return 365 * 86400.0

