"""The figures of the amplification evidence (``bench.evidence_amplification``): the round-2 candidate trained
WITH the validated variants against the one trained WITHOUT them, on the same items, each difference with a
paired-bootstrap 95 % interval (``app.core.services.bootstrap``: both models scored on the same resample, whole
groups drawn together), and what the intervals say in words.

A difference counts as help (or hurt) only when its whole interval lies above (below) 0; otherwise it is no clear
difference. The round-1 target's score is shown beside them for context (no interval: it is not compared here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

WITHOUT, WITH, ROUND_ONE = "without", "with", "round-1 target"
MODELS = (ROUND_ONE, WITHOUT, WITH)
HELPED, HURT, UNCLEAR, TOO_FEW = "helped", "hurt", "no clear difference", "too few units to tell"
# a resample draws whole units (templates, topics); with fewer than this many the percentile interval is degenerate
# (one template: every resample is the same items, so any difference "excludes 0")
MIN_UNITS = 5


@dataclass(frozen=True)
class Item:
    """One scored item: what the models read, its gold label and the unit a resample draws whole."""

    id: str
    text: str
    gold: str
    group: str  # a HateCheck template, a topic (seed), or the row itself
    functionality: str | None = None  # HateCheck's functionality, or a variant's edit type (its topic family)
    fooled: bool = False  # a held-out case that fooled the round-1 target and was validated (a held-out seed)
    edit: str | None = None  # a variant's own edit type (the generator's)


@dataclass
class Split:
    key: str
    name: str
    items: list[Item]
    metrics: tuple[str, ...] = ("accuracy", "macro_f1")
    part: str = ""  # the evidence's part: (a), (b), (c), (d)
    units: str = "items"  # what one resample unit is, in words

    @property
    def groups(self) -> int:
        return len({i.group for i in self.items})


@dataclass
class Row:
    part: str
    split: str
    name: str
    metric: str
    items: int
    groups: int
    round_one: float | None
    without: float | None
    with_: float | None
    difference: float | None
    low: float | None
    high: float | None
    reading: str

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["with"] = out.pop("with_")
        return out


@dataclass
class Figures:
    rows: list[Row] = field(default_factory=list)
    resamples: int = 2000
    seed: int = 0

    def by_reading(self, reading: str) -> list[Row]:
        return [r for r in self.rows if r.reading == reading]


def reading_of(low: float | None, high: float | None, units: int = MIN_UNITS) -> str:
    """Help or hurt only when the interval excludes 0, and it was drawn from at least ``MIN_UNITS`` units."""
    if units < MIN_UNITS:
        return TOO_FEW
    if low is None or high is None:
        return UNCLEAR
    if low > 0:
        return HELPED
    if high < 0:
        return HURT
    return UNCLEAR


def score(metric: str, gold: Sequence[str], predicted: Sequence[str]) -> float | None:
    from app.core.services.evaluation_scoring import accuracy, macro_f1

    return accuracy(gold, predicted) if metric == "accuracy" else macro_f1(gold, predicted)


def compare_split(split: Split, predictions: Mapping[str, Mapping[str, str]], *, resamples: int,
                  seed: int) -> list[Row]:
    """One row per metric: without -> with on the split's items, paired bootstrap by the split's groups."""
    from app.core.services.bootstrap import paired_bootstrap

    gold = [i.gold for i in split.items]
    labels = {m: [predictions[m][i.id] for i in split.items] for m in MODELS}
    groups = [i.group for i in split.items]
    rows = []
    for metric in split.metrics:
        interval = paired_bootstrap(gold, labels[WITHOUT], labels[WITH], metric, groups=groups, resamples=resamples,
                                    seed=seed, stream=f"{split.key}:{metric}")
        rows.append(Row(split.part, split.key, split.name, metric, interval.items, split.groups,
                        score(metric, gold, labels[ROUND_ONE]), interval.current, interval.candidate,
                        interval.difference, interval.low, interval.high,
                        reading_of(interval.low, interval.high, split.groups)))
    return rows


def per_functionality(split: Split, part: str, what: str, *, minimum: int = 1) -> list[Split]:
    """The split's items, one split per functionality (accuracy only: most functionalities hold one label, so
    their macro-F1 is not informative), in name order."""
    names = sorted({i.functionality for i in split.items if i.functionality})
    out = []
    for name in names:
        items = [i for i in split.items if i.functionality == name]
        if len(items) >= minimum:
            out.append(Split(f"{split.key}/{name}", f"{what}: {name}", items, ("accuracy",), part, split.units))
    return out


def compare_all(splits: Sequence[Split], predictions: Mapping[str, Mapping[str, str]], *, resamples: int,
                seed: int) -> Figures:
    figures = Figures(resamples=resamples, seed=seed)
    for split in splits:
        if split.items:
            figures.rows += compare_split(split, predictions, resamples=resamples, seed=seed)
    return figures


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.3f}"


METRIC_WORDS = {"accuracy": "accuracy", "macro_f1": "macro-F1"}


def markdown_table(figures: Figures) -> str:
    header = ["part", "split", "measure", "n (units)", ROUND_ONE, "without variants", "with variants",
              "with - without", "95 % interval", "reading"]
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in figures.rows:
        cells = [r.part, r.name, METRIC_WORDS.get(r.metric, r.metric), f"{r.items} ({r.groups})",
                 _number(r.round_one), _number(r.without), _number(r.with_), _signed(r.difference),
                 "-" if r.low is None else f"[{_signed(r.low)}, {_signed(r.high)}]",
                 f"**{r.reading}**" if r.reading in (HELPED, HURT) else r.reading]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plain_words(figures: Figures) -> list[str]:
    """Where amplification helped, where it hurt, and the rest, in sentences (intervals excluding 0 only)."""

    def named(rows: list[Row]) -> str:
        return "; ".join(f"{r.name} {METRIC_WORDS.get(r.metric, r.metric)} {_signed(r.difference)} "
                         f"[{_signed(r.low)}, {_signed(r.high)}]" for r in rows)

    helped, hurt = figures.by_reading(HELPED), figures.by_reading(HURT)
    unclear, few = figures.by_reading(UNCLEAR), figures.by_reading(TOO_FEW)
    lines = [f"Amplification HELPED (95 % interval above 0) on {len(helped)} of {len(figures.rows)} rows"
             + (f": {named(helped)}." if helped else "."),
             f"Amplification HURT (95 % interval below 0) on {len(hurt)} of {len(figures.rows)} rows"
             + (f": {named(hurt)}." if hurt else "."),
             f"No clear difference (interval includes 0) on {len(unclear)} rows; {len(few)} rows rest on fewer than "
             f"{MIN_UNITS} units (templates or topics) and tell nothing either way."]
    many = [r for r in figures.rows if r.part == "(c)" and r.reading != TOO_FEW]
    if many:
        lines.append(f"Part (c) reads {len(many)} per-functionality intervals: at 95 % about "
                     f"{0.05 * len(many):.1f} of them would exclude 0 by chance alone if nothing changed; the "
                     "intervals are not corrected for multiple comparisons.")
    return lines


def write_json(path: Path, figures: Figures, **extra: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    document = {"format": "dynadesk-amplification-evidence", "version": 1,
                "interval": {"method": "paired bootstrap, percentile, whole groups drawn together",
                             "confidence": 0.95, "resamples": figures.resamples, "seed": figures.seed,
                             "difference": "with variants - without variants",
                             "reading": f"helped/hurt only when the interval excludes 0 and rests on at least "
                                        f"{MIN_UNITS} units"},
                "rows": [r.to_json() for r in figures.rows],
                "helped": [f"{r.split} {r.metric}" for r in figures.by_reading(HELPED)],
                "hurt": [f"{r.split} {r.metric}" for r in figures.by_reading(HURT)], **extra}
    path.write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    return path
