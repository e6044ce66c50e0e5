"""Growing the adaptive suite: for each seed, label-keeping drafts (``growth``), every one checked against the
loaded target in one batch, the fooling ones preferred, near-duplicates folded, at most the lead's number per
seed, stored as variants in the task's open round (the Validate queue takes them from there).

    report = desk.adaptive_suite.grow("hate_speech", ensemble, per_seed=20)
    report.added, report.folded, report.skipped      # and per seed: report.seeds
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from app.core.adaptive_suite.growth import (
    Draft,
    Kept,
    NoDrafts,
    drafts_for,
    folds,
    kept,
)
from app.core.adaptive_suite.topics import NO_GROUP, Topic
from app.core.adaptive_suite.variants import SEED_ROOT_KEY, VARIANT_KIND, seed_of, variant_clause
from app.core.domain import FooledRule, ModelOutput
from app.core.errors import DynadeskError, NotFound
from app.core.services.target_models import model_input, to_model_output
from app.core.storage.models import Example, ModelRecord
from app.core.tasks.content import Content, check_content
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.figures import COUNTED
from app.core.tasks.fooling import is_fooled
from app.core.tasks.splits import pair_root, split_group
from local_models.engine import Ensemble, EnsemblePrediction
from local_models.progress import Progress

if TYPE_CHECKING:
    from app.core.adaptive_suite.service import AdaptiveSuite

CHECK_BATCH = 64
CHECK_CHUNK = 256  # texts between two looks at the cancel button
# A seed's drafts are checked in pools of this many times the variants it still has room for (at least
# MIN_POOL): enough to prefer fooling ones and to fill up after the fold, without checking hundreds it cannot keep.
POOL_FACTOR = 3
MIN_POOL = 24
ATTRIBUTION_METHOD = "ablation"  # one batched forward pass on the target, as the assistant's fallback


class GrowError(DynadeskError):
    """The suite cannot grow as asked (no open round, a model this desk does not know, not a lead...)."""


@dataclass(frozen=True)
class SeedGrowth:
    """What one seed gave: drafts made (and how many of them were checked), variants added (of them fooling),
    folded as near-duplicates, checked but left over the limit; ``reason`` says why nothing was added."""

    seed_id: uuid.UUID
    drafted: int = 0
    added: int = 0
    fooling: int = 0
    folded: int = 0
    over_limit: int = 0
    refused: int = 0  # drafts the task's content rules refuse (too long after an edit, ...)
    reason: str | None = None
    checked: int = 0  # drafts run through the target (in pools, until the seed was full)


@dataclass(frozen=True)
class GrowReport:
    task_code: str
    round_number: int
    seeds: tuple[SeedGrowth, ...]
    added_ids: tuple[uuid.UUID, ...] = ()
    timings_ms: dict[str, float] = field(default_factory=dict)

    @property
    def added(self) -> int:
        return sum(s.added for s in self.seeds)

    @property
    def fooling(self) -> int:
        return sum(s.fooling for s in self.seeds)

    @property
    def folded(self) -> int:
        return sum(s.folded for s in self.seeds)

    @property
    def skipped(self) -> dict[uuid.UUID, str]:
        """Seeds that gave nothing, and why."""
        return {s.seed_id: s.reason for s in self.seeds if s.added == 0 and s.reason}

    def summary(self) -> str:
        said = (f"{self.added} variant(s) added to round {self.round_number} ({self.fooling} fooling the target), "
                f"{self.folded} near-duplicate(s) folded, {len(self.skipped)} seed(s) gave none")
        return said + "."


@dataclass
class _Seed:
    """One seed's growth under way: its drafts, how far they were checked, and what is kept."""

    topic: Topic
    inputs: dict[str, str]
    meta: dict[str, Any]
    origin_extra: dict[str, str]
    against: list[Kept]  # what a draft is folded against: the seed, its variants, those kept now
    room: int
    drafts: list[Draft] = field(default_factory=list)
    reason: str | None = None
    checked: int = 0
    items: list[tuple[Content, Sequence[ModelOutput], dict[str, Any]]] = field(default_factory=list)
    fooling: int = 0
    folded: int = 0
    refused: int = 0

    def wants(self) -> bool:
        return self.reason is None and len(self.items) < self.room and self.checked < len(self.drafts)

    def next_pool(self) -> list[Draft]:
        size = max(MIN_POOL, POOL_FACTOR * (self.room - len(self.items)))
        pool = self.drafts[self.checked:self.checked + size]
        self.checked += len(pool)
        return pool

    def growth(self) -> SeedGrowth:
        sid = self.topic.seed_id
        if self.reason is not None:
            return SeedGrowth(sid, reason=self.reason)
        added = len(self.items)
        over = max(0, self.checked - self.folded - self.refused - added)
        reason = None
        if not added:
            reason = ("every draft was a near-duplicate of the seed or of its variants" if self.folded
                      else "no draft passed the task's content rules" if self.refused else "no draft was made")
        return SeedGrowth(sid, len(self.drafts), added, self.fooling, self.folded, over, self.refused, reason,
                          self.checked)


def grow(suite: AdaptiveSuite, task_code: str, models: Ensemble, *, seeds: Sequence[uuid.UUID] | None = None,
         per_seed: int | None = None, generated_by: uuid.UUID, progress: Progress | None = None) -> GrowReport:
    started = time.perf_counter()
    progress = progress or Progress()
    definition = suite.tasks.definition_by_code(task_code)
    if definition.is_extractive:
        raise GrowError(f"The adaptive suite grows for labelled tasks; '{task_code}' asks for answer spans.")
    if len(definition.written_inputs) != 1:
        raise GrowError(f"Task '{task_code}' has {len(definition.written_inputs)} written inputs; variants edit one.")
    settings = suite.tasks.settings(task_code)
    limit = settings.variants_per_seed if per_seed is None else per_seed
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise GrowError(f"Ask for at least one variant per seed; got {per_seed!r}.")
    try:
        round_ = suite.tasks.round(task_code)
    except NotFound as exc:
        raise GrowError(f"{exc} Variants go to the open round: open one first.") from exc
    records = _records(suite, models)
    topics = {t.seed_id: t for t in suite.topics(task_code)}
    chosen = list(topics) if seeds is None else list(dict.fromkeys(seeds))
    lexicon = suite.tasks.assist_lexicon(task_code)
    threshold = settings.quality.near_threshold
    timings: dict[str, float] = {}

    prepared = _prepare(suite, task_code, chosen, topics, limit)
    began = time.perf_counter()
    for done, seed in enumerate(prepared):
        progress.check()
        progress.report(done, len(prepared) * 2)
        if seed.reason is not None:
            continue
        try:
            seed.drafts = drafts_for(seed.topic.text, seed.topic.label, definition.labels, task_code, lexicon,
                                     _attributions(models, definition, seed.inputs))
        except NoDrafts as exc:
            seed.reason = str(exc)
    timings["draft"] = (time.perf_counter() - began) * 1000

    # The check, in pools: each seed's next drafts (a few times what it still has room for) in one batch over
    # every seed, until each seed is full or out of drafts; most seeds fill from their first pool.
    rule = FooledRule(round_.fooled_rule)
    checking = choosing = 0.0
    while wanting := [seed for seed in prepared if seed.reason is None and seed.wants()]:
        began = time.perf_counter()
        batch = [(seed, draft) for seed in wanting for draft in seed.next_pool()]
        model_inputs = [model_input(definition, _with_text(definition, seed.inputs, d.text)) for seed, d in batch]
        predictions: list[EnsemblePrediction] = []
        for first in range(0, len(model_inputs), CHECK_CHUNK):  # cancellable between chunks
            progress.check()
            predictions += models.predict_batched(model_inputs[first:first + CHECK_CHUNK], batch_size=CHECK_BATCH)
        checking += time.perf_counter() - began
        began = time.perf_counter()
        checked: dict[uuid.UUID, list[tuple[Draft, list[ModelOutput], bool, float]]] = {}
        for (seed, draft), prediction in zip(batch, predictions):
            outputs = [to_model_output(member, record) for member, record in zip(prediction.members, records)]
            fooled = bool(is_fooled(definition, outputs, true_label=seed.topic.label, rule=rule))
            checked.setdefault(seed.topic.seed_id, []).append((draft, outputs, fooled,
                                                               _shift(prediction, seed.topic.label)))
        for seed in wanting:
            _take(seed, checked.get(seed.topic.seed_id, []), definition, threshold, generated_by)
        choosing += time.perf_counter() - began
        progress.report(len(prepared) + sum(not s.wants() for s in prepared), len(prepared) * 2)
    timings["check"] = checking * 1000
    began = time.perf_counter()
    report = {seed.topic.seed_id: seed.growth() for seed in prepared}
    items = [item for seed in prepared for item in seed.items]
    ids = suite.store_variants(task_code, generated_by, items) if items else []
    timings["store"] = (time.perf_counter() - began) * 1000
    timings["fold"] = choosing * 1000
    timings["total"] = (time.perf_counter() - started) * 1000
    progress.report(len(prepared) * 2, len(prepared) * 2)
    return GrowReport(task_code, round_.number, tuple(report[s.topic.seed_id] for s in prepared), tuple(ids), timings)


def _records(suite: AdaptiveSuite, models: Ensemble) -> list[ModelRecord]:
    """The registered record of each member of the loaded target (by checksum)."""
    shas = [engine.sha256 for engine in models.engines]
    with suite.db.read() as session:
        found = {r.sha256: r for r in session.scalars(select(ModelRecord).where(ModelRecord.sha256.in_(shas)))}
    missing = [e.name or e.sha256[:12] for e in models.engines if e.sha256 not in found]
    if missing:
        raise GrowError(f"The model(s) {', '.join(missing)} are not registered on this desk; a variant records the "
                        "registered model that checked it. Register the round's target first.")
    return [found[sha] for sha in shas]


def _prepare(suite: AdaptiveSuite, task_code: str, chosen: list[uuid.UUID], topics: dict[uuid.UUID, Topic],
             limit: int) -> list[_Seed]:
    """Each chosen seed with what its variants copy (inputs, meta, its side of the held-out split) and its
    existing variants (what the fold compares with, and the room left under the limit)."""
    task = suite.tasks.task(task_code)
    with suite.db.read() as session:
        rows = {r.id: r for r in session.execute(select(
            Example.id, Example.inputs, Example.meta, Example.origin, Example.perturbation_of)
            .where(Example.id.in_([s for s in chosen if s in topics]))).all()}
        originals = {r.perturbation_of for r in rows.values() if r.perturbation_of is not None}
        original_origins: dict[Any, Any] = dict(session.execute(select(Example.id, Example.origin)
                                                .where(Example.id.in_(originals))).all()) if originals else {}
        existing: dict[uuid.UUID, list[Kept]] = {}
        for text, origin, meta in session.execute(select(Example.text, Example.origin, Example.meta).where(
                Example.task_id == task.id, variant_clause(), Example.status.in_(COUNTED))):
            seed = seed_of(origin)
            if seed in rows:
                assert seed is not None
                existing.setdefault(seed, []).append(
                    kept(text, _named_group(meta, None), str((origin or {}).get("edit_type") or "")))
    out = []
    for seed_id in chosen:
        topic = topics.get(seed_id)
        if topic is None:
            out.append(_Seed(_unknown(seed_id), {}, {}, {}, [], 0, reason=(
                "not a seed of this task: it did not fool its round's target as validated, nor flip the model "
                "as a perturbation")))
            continue
        row = rows[seed_id]
        group = split_group(row.origin, original_origins.get(row.perturbation_of))
        extra = {SEED_ROOT_KEY: str(pair_root(seed_id, row.perturbation_of)), "family": topic.edit_type,
                 "topic_group": topic.group, **({"group": group} if group else {})}
        before = existing.get(seed_id, [])
        seed = _Seed(topic, {k: str(v) for k, v in (row.inputs or {}).items()}, dict(row.meta or {}), extra,
                     [kept(topic.text, topic.group, None), *before], max(0, limit - len(before)))
        if seed.room == 0:
            seed.reason = f"it has {len(before)} variant(s) already; the most per seed is {limit}"
        out.append(seed)
    return out


def _unknown(seed_id: uuid.UUID) -> Topic:
    return Topic(seed_id, "", 0, "", "", NO_GROUP, "", "", 0, 0)


def _attributions(models: Ensemble, definition: TaskDefinition, inputs: dict[str, str]) -> tuple[Any, ...]:
    """The target's word scores for the seed's written text (what respellings aim at); none when it cannot say."""
    from app.core.assist.pipeline import word_scores

    item = model_input(definition, inputs)
    segment = 0 if isinstance(item, str) else 1
    try:
        attribution = models.engines[0].attribute(item, method=ATTRIBUTION_METHOD,
                                                  segments=None if isinstance(item, str) else [segment])
    except Exception:  # a target that cannot explain still gets identity swaps and rules
        return ()
    return word_scores(attribution, segment)


def _with_text(definition: TaskDefinition, inputs: dict[str, str], text: str) -> dict[str, str]:
    return {**inputs, definition.written_inputs[0].name: text}


def _shift(prediction: EnsemblePrediction, label: str) -> float:
    """How far the target's probability of the label the text keeps fell (1 - p(label))."""
    return 1.0 - float(prediction.probabilities.get(label, 0.0))


def _named_group(meta: Any, fallback: str | None) -> str:
    groups = (meta or {}).get("target_groups")
    if isinstance(groups, list) and groups and isinstance(groups[0], str):
        return groups[0]
    return fallback or NO_GROUP


def _take(seed: _Seed, checked: list[tuple[Draft, list[ModelOutput], bool, float]], definition: TaskDefinition,
          threshold: float, generated_by: uuid.UUID) -> None:
    """Keep the checked drafts the seed has room for: fooling ones first (the furthest moved first), then the
    rest, each folded when near what is kept."""
    order = sorted(range(len(checked)), key=lambda i: (not checked[i][2], -checked[i][3], i))
    sid = seed.topic.seed_id
    for i in order:
        if len(seed.items) >= seed.room:
            break
        draft, outputs, fooled, _ = checked[i]
        group = draft.group or seed.topic.group
        if folds(draft.text, group, draft.edit_type, seed.against, threshold):
            seed.folded += 1
            continue
        meta = dict(seed.meta)
        if draft.group is not None:
            meta["target_groups"] = [draft.group]
        content = Content(_with_text(definition, seed.inputs, draft.text), seed.topic.label, meta=meta)
        try:
            check_content(definition, content, require_metadata=False)
        except DynadeskError:
            seed.refused += 1
            continue
        seed.against.append(kept(draft.text, group, draft.edit_type))
        origin = {"kind": VARIANT_KIND, "seed_id": str(sid), "rule": draft.rule, "edit_type": draft.edit_type,
                  "generated_by": str(generated_by), "seed_text": seed.topic.text, "note": draft.note,
                  **seed.origin_extra}
        seed.items.append((content, outputs, origin))
        seed.fooling += fooled
