"""The Suite tab's view-models: the task's adaptive suite as a tree (target group → edit type → seed),
each row with its variants, validated variants and, per model, how many of them the model gets wrong;
a seed with its variants; and the line said after a lead grew the suite. Pure functions of the
suite's topics and scores (``app.core.adaptive_suite``), taken structurally: the controller reads
them on the database worker and scores them in an inference job."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.wellbeing.blur import blurred
from app.views.quality import snippet
from app.views.wellbeing import BlurView, blur_view

NO_SCORE = "–"  # a model not scored on this row (yet)


class TopicLike(Protocol):
    """A topic of the suite (``app.core.adaptive_suite.topics.Topic``), read-only."""

    @property
    def seed_id(self) -> uuid.UUID: ...
    @property
    def round_number(self) -> int: ...
    @property
    def text(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def group(self) -> str: ...
    @property
    def edit_type(self) -> str: ...
    @property
    def seed_kind(self) -> str: ...
    @property
    def variants(self) -> int: ...
    @property
    def validated(self) -> int: ...


@dataclass(frozen=True, slots=True)
class ModelColumn:
    """A model whose wrong answers the tree counts: a registered record (its id as text)."""

    key: str
    name: str
    target: bool = False  # a target of the task's newest round (always scored)


@dataclass(frozen=True, slots=True)
class ModelScore:
    """One model's answers on the suite: per seed (wrong, validated variants scored)."""

    per_topic: Mapping[uuid.UUID, tuple[int, int]]
    stale: bool = False  # the suite changed since: the figures are the last ones, being brought up to date


@dataclass(frozen=True, slots=True)
class TopicRow:
    seed_id: uuid.UUID
    text: str  # one line, masked as the reader chose
    tooltip: str
    variants: int
    validated: int
    wrong: tuple[str, ...]  # per model column


@dataclass(frozen=True, slots=True)
class SuiteNode:
    """A target group, or an edit type within one: its figures and what is under it."""

    name: str
    variants: int
    validated: int
    wrong: tuple[str, ...]
    topics: tuple[TopicRow, ...] = ()  # an edit type's seeds
    children: tuple[SuiteNode, ...] = ()  # a group's edit types


@dataclass(frozen=True, slots=True)
class SuiteTreeView:
    task_code: str
    headers: tuple[str, ...]  # Topic, Variants, Validated, then one per model
    groups: tuple[SuiteNode, ...]
    summary: str
    empty: str = ""  # why there is no topic yet


def _wrong(scores: Sequence[ModelScore | None], seeds: Iterable[uuid.UUID]) -> tuple[str, ...]:
    """Per model: "wrong / validated scored" over ``seeds`` (NO_SCORE where not scored)."""
    seeds = tuple(seeds)
    cells = []
    for score in scores:
        if score is None:
            cells.append(NO_SCORE)
            continue
        wrong = n = 0
        for seed in seeds:
            w, k = score.per_topic.get(seed, (0, 0))
            wrong, n = wrong + w, n + k
        cells.append(f"{wrong} / {n}" + (" …" if score.stale else "") if n else "0" + (" …" if score.stale else ""))
    return tuple(cells)


def _plural(n: int, word: str) -> str:
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def suite_tree(task_code: str, topics: Sequence[TopicLike], columns: Sequence[ModelColumn],
               scores: Sequence[ModelScore | None], *, blur_words: Sequence[str] = ()) -> SuiteTreeView:
    """``scores``: per column, the model's answers (None: not yet scored); ``blur_words``: the reader's
    (none where they read unmasked). Groups, edit types and seeds in a stable order: the most variants first."""
    by_group: dict[str, dict[str, list[TopicLike]]] = {}
    for topic in topics:
        by_group.setdefault(topic.group, {}).setdefault(topic.edit_type, []).append(topic)

    def row(topic: TopicLike) -> TopicRow:
        text = blurred(topic.text, blur_words)
        tip = (f"{snippet(text, 400)}\nlabel {topic.label} · round {topic.round_number} · {topic.seed_kind} seed · "
               f"{_plural(topic.variants, 'variant')}, {topic.validated:,} validated")
        return TopicRow(topic.seed_id, snippet(text, 120), tip, topic.variants, topic.validated,
                        _wrong(scores, (topic.seed_id,)))

    groups = []
    for group, kinds in by_group.items():
        children = []
        for kind, members in kinds.items():
            members.sort(key=lambda t: (-t.variants, -t.validated, t.text))
            children.append(SuiteNode(kind, sum(t.variants for t in members), sum(t.validated for t in members),
                                      _wrong(scores, (t.seed_id for t in members)),
                                      topics=tuple(row(t) for t in members)))
        children.sort(key=lambda n: (-n.variants, n.name))
        seeds = [t.seed_id for members in kinds.values() for t in members]
        groups.append(SuiteNode(group, sum(n.variants for n in children), sum(n.validated for n in children),
                                _wrong(scores, seeds), children=tuple(children)))
    groups.sort(key=lambda n: (n.name == "(no group)", -n.variants, n.name))
    variants = sum(t.variants for t in topics)
    validated = sum(t.validated for t in topics)
    summary = (f"{_plural(len(topics), 'topic')} · {_plural(variants, 'variant')} · {validated:,} validated "
               "(only validated variants count in the suite)")
    empty = "" if topics else ("No topic yet: a topic grows from a validated example that fooled its round's "
                               "target, or from a perturbation that flipped the model.")
    headers = ("Topic", "Variants", "Validated", *(f"{c.name} wrong" for c in columns))
    return SuiteTreeView(task_code, headers, tuple(groups), summary, empty)


@dataclass(frozen=True, slots=True)
class VariantRow:
    example_id: uuid.UUID
    text: str  # masked as the reader chose (a table cell draws no blur bar)
    rule: str  # the variant's own edit (homoglyph, group_swap_protected, ...), else its generator
    state: str  # unvalidated | valid | corrected | flagged
    label: str  # the label it stands for: the claimed one, or the validators' correction
    prediction: str  # the checking target's label, and whether it is wrong for the row's label
    provenance: str = ""  # "generated from seed S by rule R, validated by V"
    rule_detail: str = ""  # the rule and the variant's own edits


@dataclass(frozen=True, slots=True)
class SeedDetailView:
    seed_id: uuid.UUID
    heading: str
    blur: BlurView  # the seed's text, as a reading view shows it
    variants: tuple[VariantRow, ...]
    summary: str


def _field(item: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        value = getattr(item, name, None) if not isinstance(item, Mapping) else item.get(name)
        if value is not None:
            return value
    return default


def variant_state(variant: Any) -> str:
    """unvalidated (or still being validated) | valid | corrected (validators changed its label) | flagged."""
    verdict = _field(variant, "decided_verdict")
    if verdict == "correct":
        return "valid"
    if verdict == "incorrect":
        return "corrected"
    if verdict == "flagged":
        return "flagged"
    return str(_field(variant, "state", default="unvalidated"))


def _target_said(claimed: str, fooled: bool | None, label: str, labels: Sequence[str]) -> str:
    """What the checking target answered (known from whether the claimed label fooled it: a two-label
    task names the other label), and whether that is wrong for the label the row stands for now."""
    if fooled is None:
        return "not checked"
    if not fooled:
        said = claimed
    else:
        others = [other for other in labels if other != claimed]
        said = others[0] if len(others) == 1 else f"not {claimed}"
    return f"{said} ({'right' if said == label else 'wrong'})"


def variant_row(variant: Any, blur_words: Sequence[str] = (), labels: Sequence[str] = ()) -> VariantRow:
    """One variant as the suite's ``variants_of`` gives it (its text, rule, verdicts and the target's check)."""
    state = variant_state(variant)
    claimed = str(_field(variant, "label", default=""))
    label = str(_field(variant, "decided_label", default=claimed)) if state == "corrected" else claimed
    rule, edit = str(_field(variant, "rule", default="")), str(_field(variant, "edit_type", default=""))
    provenance = getattr(variant, "provenance", None)
    return VariantRow(_field(variant, "example_id", "id"), blurred(str(_field(variant, "text", default="")), blur_words),
                      edit or rule, state, label, _target_said(claimed, _field(variant, "model_fooled", "fooled"), label, labels),
                      provenance() if callable(provenance) else "", f"{rule}: {edit}" if edit and edit != rule else rule)


def seed_detail(topic: TopicLike, variants: Sequence[Any], *, blur_words: Sequence[str] = (),
                masked: bool = False, content_warning: str | None = None, labels: Sequence[str] = ()) -> SeedDetailView:
    """``blur_words`` and ``masked``: the task's list and whether this reader reads browsing views masked;
    ``labels``: the task's."""
    words = tuple(blur_words) if masked else ()
    rows = tuple(variant_row(v, words, labels) for v in variants)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.state] = counts.get(r.state, 0) + 1
    wrong = sum(1 for r in rows if r.prediction.endswith("(wrong)"))
    states = ", ".join(f"{n} {state}" for state, n in sorted(counts.items())) or "none yet"
    heading = (f"Seed · {topic.group} · {topic.edit_type} · label <b>{topic.label}</b> · round {topic.round_number} "
               f"· {topic.seed_kind}")
    summary = f"{_plural(len(rows), 'variant')}: {states}; the checking target gets {wrong:,} of them wrong."
    return SeedDetailView(topic.seed_id, heading,
                          blur_view((topic.text,), blur_words, masked=masked, content_warning=content_warning),
                          rows, summary)


def grow_message(report: Any) -> str:
    """What a lead is told once variants were generated (the suite's ``GrowReport``: per seed, what it gave)."""
    seeds = tuple(_field(report, "seeds", default=()))
    added = int(_field(report, "added", default=0))
    fooling = int(_field(report, "fooling", default=0))
    folded = int(_field(report, "folded", default=0))
    over = sum(int(getattr(s, "over_limit", 0)) for s in seeds)
    refused = sum(int(getattr(s, "refused", 0)) for s in seeds)
    skipped: Mapping[Any, str] = _field(report, "skipped", default={})
    said = [f"Added {_plural(added, 'variant')} for {_plural(len(seeds), 'seed')} ({fooling:,} of them fool the "
            f"target); folded {folded:,} near-duplicate{'' if folded == 1 else 's'}"]
    if over:
        said.append(f"left {over:,} over the per-seed limit")
    if refused:
        said.append(f"{refused:,} refused by the task's rules")
    if skipped:
        first = next(iter(skipped.values()))
        said.append(f"{_plural(len(skipped), 'seed')} gave none ({first})")
    return "; ".join(said) + (". They wait in the Validate queue." if added else ".")


def model_columns(targets: Sequence[tuple[str, str]], others: Sequence[tuple[str, str]],
                  picked: Iterable[str]) -> tuple[ModelColumn, ...]:
    """The round's targets, then the other models the lead picked (by key)."""
    chosen = set(picked)
    return (*(ModelColumn(key, name, target=True) for key, name in targets),
            *(ModelColumn(key, name) for key, name in others if key in chosen))
