"""The promotion rules: whether a compared candidate may become the next round's target, and who may
promote it. One definition of each, used by the comparison report, ``promote_candidate`` (the dialog,
``dynadesk rounds next``, proposals), the view-models and the team server's check of a promotion decision.
Pure and Qt-free: the verdict reads only the differences (split, metric, current, candidate, difference,
95 % interval, n) a comparison computed; who may promote reads only a role and the task's policy.

    verdict = judge(report.differences, names)
    verdict.refused, verdict.sentence, verdict.lines()
    difference_state(low, high, items)       # one difference: WORSE, BETTER, UNCLEAR, TOO_FEW or NO_ITEMS
    may_promote(role, leads_may_promote, team_server=True)

Every split is judged on its own: each round's held-out examples, all of them taken together (when
there are several rounds), the base data's test split, every functional suite and the adaptive suite of
validated variants (one more split: a candidate worse on it is refused, one too small to judge decides nothing).

- A split with fewer items than its minimum n (``minimum_items``) says "too few to judge" and decides
  nothing: its interval says little (one item right twice has the interval [0, 0]).
- A difference is *worse* when the upper bound of its 95 % interval lies below zero, *better* when the
  lower bound lies above zero, else *unclear* (``difference_state``). A judged split is worse when its
  accuracy or macro-F1 difference is, better when its accuracy difference is and nothing is worse.
- The candidate is **refused** when any judged split is worse, or when no split has enough items.
  "Promote anyway" overrides it with a reason, recorded with these figures in the lineage.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.domain import Role
from app.core.formatting import pct

JUDGED_METRICS = ("accuracy", "macro_f1")  # "fooling examples now right" is 0 for the current target by definition
METRIC_WORDS = {"accuracy": "accuracy", "macro_f1": "macro-F1"}
Z_95 = 1.959964  # the normal quantile of a two-sided 95 % interval
MAX_HALF_WIDTH = 0.20  # a split is judged once its interval can be no wider than ±20 points
MAX_REASON_CHARS = 500  # a "Promote anyway" reason: what a proposal decision carries (sync.protocol.Short)
POOLED = "held-out"  # the comparison's key of every round's held-out split taken together
WORSE, BETTER, UNCLEAR, TOO_FEW, NO_ITEMS = "worse", "better", "unclear", "too few", "no items"


def minimum_items(half_width: float = MAX_HALF_WIDTH) -> int:
    """A split's minimum n: the fewest items at which the 95 % interval of its paired accuracy difference
    is at most ±``half_width`` wide even in the worst case. Each item's difference (candidate right
    minus current right) is -1, 0 or +1, so its standard deviation is at most 1 and the interval's
    half-width at most z·1/√n; n ≥ (z / half_width)² keeps it within ±half_width (97 items for ±20
    points). Below it an interval can look narrow only by chance (n = 1: [0, 0])."""
    return math.ceil((Z_95 / half_width) ** 2)


@dataclass(frozen=True)
class SplitJudgement:
    split: str  # the comparison's key ("held-out-1", "base-test", "suite-…", "adaptive-suite", "held-out")
    name: str  # as a reader knows it ("Round 1 held-out")
    items: int
    minimum: int
    state: str  # WORSE, BETTER, UNCLEAR, TOO_FEW or NO_ITEMS
    figures: tuple[Mapping[str, Any], ...]  # the judged metrics' differences, as dicts

    @property
    def judged(self) -> bool:
        return self.state in (WORSE, BETTER, UNCLEAR)

    def figure(self, metric: str) -> Mapping[str, Any] | None:
        return next((f for f in self.figures if f["metric"] == metric), None)

    def figure_text(self, metric: str = "accuracy") -> str:
        f = self.figure(metric)
        if f is None or f.get("difference") is None:
            return f"{METRIC_WORDS.get(metric, metric)}: no items"
        return (f"{METRIC_WORDS.get(metric, metric)} {pct(f['current'])} → {pct(f['candidate'])}, "
                f"{_points(f['difference'])} [{_bound(f['low'])}, {_bound(f['high'])}]")

    def line(self) -> str:
        """'Base test: worse — accuracy 92.0 % → 91.2 %, -0.7 pt [-1.3, -0.1]; macro-F1 …; n = 2,479'."""
        if self.state == NO_ITEMS:
            return f"{self.name}: no items"
        figures = "; ".join(self.figure_text(m) for m in JUDGED_METRICS if self.figure(m) is not None)
        if self.state == TOO_FEW:
            return f"{self.name}: too few to judge (n = {self.items:,}; at least {self.minimum:,}) — {figures}"
        return f"{self.name}: {self.state} — {figures}; n = {self.items:,}"

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "name": self.name, "items": self.items, "minimum": self.minimum,
                "state": self.state, "figures": [dict(f) for f in self.figures]}


@dataclass(frozen=True)
class Verdict:
    refused: bool
    sentence: str  # one sentence; it names the worst split
    splits: tuple[SplitJudgement, ...]
    worst: SplitJudgement | None

    def lines(self) -> list[str]:
        """The sentence, then every split with its figures (what a refusal lists)."""
        return [self.sentence] + [f"  {s.line()}" for s in self.splits]

    def to_json(self) -> dict[str, Any]:
        return {"refused": self.refused, "sentence": self.sentence, "minimum_rule":
                f"n ≥ (1.96 / {MAX_HALF_WIDTH:.2f})² = {minimum_items()}",
                "worst": self.worst.split if self.worst else None, "splits": [s.to_json() for s in self.splits]}


def _points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f} pt"


def _bound(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def _field(row: Any, name: str) -> Any:
    return row.get(name) if isinstance(row, Mapping) else getattr(row, name, None)


def difference_state(low: float | None, high: float | None, items: int, minimum: int | None = None) -> str:
    """How one difference (candidate − current, with its 95 % interval, over ``items`` items) reads: NO_ITEMS
    when nothing was scored, TOO_FEW below the minimum n (``minimum_items()`` unless given: its interval
    says little, so it decides nothing), WORSE when the interval lies below zero, BETTER above, else UNCLEAR.
    Every table, chart and colour of a comparison reads a difference through this."""
    if items <= 0 or low is None or high is None:
        return NO_ITEMS
    if items < (minimum_items() if minimum is None else minimum):
        return TOO_FEW
    if high < 0:
        return WORSE
    return BETTER if low > 0 else UNCLEAR


def _state(figures: Sequence[Mapping[str, Any]], items: int, minimum: int) -> str:
    """A split's state from its judged metrics' differences (all over the split's ``items``)."""
    states = {f["metric"]: difference_state(f.get("low"), f.get("high"), items, minimum) for f in figures}
    if not states or all(state == NO_ITEMS for state in states.values()):
        return NO_ITEMS
    if items < minimum:
        return TOO_FEW
    if WORSE in states.values():
        return WORSE
    return BETTER if states.get("accuracy") == BETTER else UNCLEAR


def judge(differences: Iterable[Any], names: Mapping[str, str] | None = None) -> Verdict:
    """The rule over a comparison's differences (``Difference`` objects or their dicts); ``names``
    maps a split's key to the name a reader knows. The pooled held-out split is judged when it pools
    more than one round's split (with one, it is that split again)."""
    names = dict(names or {})
    rows: dict[str, list[dict[str, Any]]] = {}
    for row in differences:
        metric = _field(row, "metric")
        if metric not in JUDGED_METRICS:
            continue
        entry = {k: _field(row, k) for k in ("metric", "current", "candidate", "difference", "low", "high")}
        entry["items"] = int(_field(row, "items") or 0)
        rows.setdefault(str(_field(row, "split")), []).append(entry)
    rounds = [k for k in rows if k.startswith(POOLED + "-") and any(f["items"] for f in rows[k])]
    if POOLED in rows and len(rounds) < 2:
        rows.pop(POOLED)
    minimum = minimum_items()
    splits = []
    for key, figures in rows.items():
        figures.sort(key=lambda f: JUDGED_METRICS.index(f["metric"]))
        items = max(f["items"] for f in figures)
        name = names.get(key) or ("All held-out splits" if key == POOLED else key)
        splits.append(SplitJudgement(key, name, items, minimum, _state(figures, items, minimum), tuple(figures)))
    return _verdict(tuple(splits), minimum)


def _lowest(split: SplitJudgement) -> tuple[float, float]:
    """How bad a split looks: its lowest upper bound, then its lowest difference, over the judged metrics."""
    highs = [f["high"] for f in split.figures if f.get("high") is not None]
    differences = [f["difference"] for f in split.figures if f.get("difference") is not None]
    return (min(highs) if highs else math.inf, min(differences) if differences else math.inf)


def _verdict(splits: tuple[SplitJudgement, ...], minimum: int) -> Verdict:
    judged = [s for s in splits if s.judged]
    too_few = [s for s in splits if s.state == TOO_FEW]
    worse = [s for s in judged if s.state == WORSE]
    few = f" ({len(too_few)} split{'s' if len(too_few) != 1 else ''} too few to judge)" if too_few else ""
    if worse:
        worst = min(worse, key=_lowest)
        others = f", and on {len(worse) - 1} other split{'s' if len(worse) > 2 else ''}" if len(worse) > 1 else ""
        metric = next(f["metric"] for f in worst.figures
                      if difference_state(f.get("low"), f.get("high"), worst.items, minimum) == WORSE)
        sentence = (f"Refused: the candidate is worse than the current target on {worst.name} "
                    f"({worst.figure_text(metric)}, n = {worst.items:,}){others}.")
        return Verdict(True, sentence, splits, worst)
    if not judged:
        largest = max(too_few, key=lambda s: s.items, default=None)
        sentence = ("Refused: no split has enough examples to judge the candidate"
                    + (f" (the largest, {largest.name}, has n = {largest.items:,}; at least {minimum:,})"
                       if largest else ": nothing was compared") + ".")
        return Verdict(True, sentence, splits, largest)
    worst = min(judged, key=_lowest)
    if all(s.state == BETTER for s in judged):
        sentence = (f"The candidate is better than the current target on every split with enough examples{few}; "
                    f"the least gain is on {worst.name} ({worst.figure_text()}, n = {worst.items:,}).")
    else:
        sentence = (f"No split with enough examples finds the candidate worse{few}; the weakest is {worst.name} "
                    f"({worst.figure_text()}, n = {worst.items:,}).")
    return Verdict(False, sentence, splits, worst)


def figures_verdict(figures: Mapping[str, Any]) -> Verdict:
    """The rule over a comparison's key figures as a proposal carries them (``sync.proposals.key_figures``):
    JSON from another desk, so rows that are not well-formed differences are left out, never trusted."""
    rows = []
    for row in figures.get("differences") or [] if isinstance(figures, Mapping) else []:
        if not isinstance(row, Mapping) or not isinstance(row.get("split"), str):
            continue
        try:
            numbers = {k: None if row.get(k) is None else float(row[k])
                       for k in ("current", "candidate", "difference", "low", "high")}
            rows.append({"split": row["split"], "metric": str(row.get("metric")), **numbers,
                         "items": int(row.get("items") or 0)})
        except (TypeError, ValueError):
            continue
    names = figures.get("names") if isinstance(figures, Mapping) else None
    return judge(rows, {str(k): str(v) for k, v in names.items()} if isinstance(names, Mapping) else None)


def no_comparison_verdict(reason: str) -> Verdict:
    """The verdict without a comparison (nothing to compare on, or none made): refused, like too few items."""
    return Verdict(True, f"Refused: there is no comparison to judge the candidate by ({reason}).", (), None)


def may_promote(role: Role | str, leads_may_promote: bool, *, team_server: bool = True) -> bool:
    """Who may promote a task's candidate and publish the round it opens: owners always; leads where the
    task's policy lets them (``leads_may_promote``), or on a desk without a team server (``team_server``
    False), where nobody else could decide (the server still judges a round the lead publishes later);
    annotators never. (The server also limits a lead to the round their own promotion opens:
    ``store.publish``.)"""
    return role == Role.OWNER.value or (role == Role.LEAD.value and (leads_may_promote or not team_server))


def may_propose(role: Role | str, *, team_server: bool) -> bool:
    """Who may propose a candidate to the task's owner instead: a lead, through the team server."""
    return role == Role.LEAD.value and team_server
