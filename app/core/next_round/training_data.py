"""Training data from the desk: which examples of a task's rounds a new target model learns from.

Taken: examples of the chosen rounds that are decided, with the decided label (a *correct* verdict
keeps the author's label, an *incorrect* one the agreed corrected label, a lead's adjudication
overrides both: ``validation.summarise`` keeps that on the example). Left out, and counted by reason:
drafts, retracted examples, examples decided as flagged, flagged-but-undecided and undecided ones
(``include_undecided`` takes the undecided ones with the author's label), imported data sets
that are not named, and the adaptive suite's generated variants, which are never round examples.

Variants: with ``variants`` the chosen rounds' validated variants of training-side seeds join as a part of
their own (``variant_training``; source ``VARIANT``, their decided label), which the trainer weighs apart.

Splits: ``app.core.tasks.splits.held_out_example`` decides which examples are held out (never trained
on); the rest is training data. Base data (a labelled file) joins as its own part; the trainer
splits it.

Inputs: what the task's model reads (``target_models.model_input``): a text, or for a task with a context
(NLI) the pair (context, written text), e.g. (premise, hypothesis); base data for such a task is read as
pairs too. Extractive QA is refused (``extractive_refusal``): its models need a span head, which is not
trained here.

De-duplication: by normalised text (NFC, line ends, case, whitespace) across rounds and base data; a pair
by both of its texts.
The same text with the same label is kept once (a held-out copy wins: its text then stays out of
training); the same text with different labels is a conflict, reported with every id and left out
of training (held-out copies stay held out, since the split is fixed by id).
"""

from __future__ import annotations

import collections
import hashlib
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from app.core.domain import ExampleStatus, ValidationState, Verdict
from app.core.errors import DynadeskError
from app.core.storage.models import Example, Round
from app.core.tasks.splits import held_out_example
from app.core.tasks.variants import is_variant
from app.core.text import clean_text
from local_models.tokenization import ModelInput
from local_models.train import LabelledData

TRAIN, HELD_OUT, BASE, VARIANTS = "train", "held_out", "base", "variants"
VARIANT = "variant"  # the source of a validated variant of the adaptive suite (taken only when asked for)
SPLITS = (TRAIN, HELD_OUT, BASE, VARIANTS)
CONFLICT_POLICY = ("Texts that appear with different labels are left out of training (round and base data) and "
                   "listed under conflicts with every id; held-out copies stay held out.")


class TrainingDataError(DynadeskError):
    """The desk's data cannot make a training set as asked (unknown round, unsupported task, bad labels)."""


@dataclass(frozen=True)
class TrainingExample:
    id: str  # the example's uuid; "base:<n>" for the n-th row kept from the base data file
    text: ModelInput  # the text, or the pair (context, written text) of a task with a context
    label: str
    round: int | None  # None for base data
    source: str  # "decided", "undecided", "imported", "base" or "variant"


@dataclass(frozen=True)
class Conflict:
    """One normalised text with more than one label: every copy, as (id, label)."""

    text: ModelInput
    members: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Duplicate:
    id: str  # the copy left out
    kept: str  # the copy kept


@dataclass
class TrainingSet:
    task: str
    labels: list[str]  # the task's labels, in its order
    rounds: list[int]
    train: list[TrainingExample]  # round examples trained on
    held_out: list[TrainingExample]  # round examples never trained on (splits.held_out_example)
    base: list[TrainingExample]  # base-data rows left after de-duplication
    conflicts: list[Conflict]
    duplicates: list[Duplicate]
    excluded: dict[str, int]  # reason -> examples of the chosen rounds left out
    include_undecided: bool = False
    imported: list[str] = field(default_factory=list)
    # validated variants trained on (``variant_training``), only when asked; with what each was made from
    variants: list[TrainingExample] = field(default_factory=list)
    variant_origins: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> seed_id, rule, family
    variants_left_out: dict[str, int] = field(default_factory=dict)  # reason -> validated variants not taken
    with_variants: bool = False

    def split(self, name: str) -> list[TrainingExample]:
        if name not in SPLITS:
            raise ValueError(f"unknown split '{name}'; the splits are {', '.join(SPLITS)}")
        return {TRAIN: self.train, HELD_OUT: self.held_out, BASE: self.base, VARIANTS: self.variants}[name]

    def texts(self, name: str) -> list[ModelInput]:
        return [e.text for e in self.split(name)]

    def labels_of(self, name: str) -> list[str]:
        return [e.label for e in self.split(name)]

    def ids(self, name: str) -> list[str]:
        return [e.id for e in self.split(name)]

    def hashes(self) -> dict[str, str]:
        """sha256 of every (text, label), by id, over all splits."""
        return {e.id: example_hash(e.text, e.label) for name in SPLITS for e in self.split(name)}

    def summary(self) -> dict[str, Any]:
        per_round: dict[str, dict[str, int]] = {}
        for name in (TRAIN, HELD_OUT):
            for example in self.split(name):
                counts = per_round.setdefault(str(example.round), {TRAIN: 0, HELD_OUT: 0})
                counts[name] += 1
        return {
            "task": self.task, "rounds": list(self.rounds),
            "counts": {name: len(self.split(name)) for name in SPLITS},
            "per_round": per_round,
            "per_label": {name: dict(collections.Counter(self.labels_of(name))) for name in SPLITS},
            "per_source": dict(collections.Counter(e.source for e in self.train + self.held_out)),
            "excluded": dict(self.excluded),
            "duplicates_left_out": len(self.duplicates),
            "conflicts": len(self.conflicts),
            "include_undecided": self.include_undecided,
            "imported": list(self.imported),
            "variants": {"taken": len(self.variants), "seeds": len({o["seed_id"] for o in self.variant_origins.values()}),
                         "left_out": dict(self.variants_left_out)} if self.with_variants else False,
        }


def normalised(text: ModelInput) -> str:
    """The key texts are de-duplicated by: the same words, whatever their case and spacing (a pair: both texts,
    each in its place)."""
    if not isinstance(text, str):
        return "\x1f".join(normalised(part) for part in text)
    return " ".join(clean_text(text).casefold().split())


def extractive_refusal(task_code: str) -> str:
    """Why an extractive QA task does not train from the desk, in one sentence."""
    return (f"The task '{task_code}' is extractive QA: training from the desk trains classification heads only, not "
            "the span head (answer start and end positions) a QA model needs.")


def example_hash(text: ModelInput, label: str) -> str:
    return hashlib.sha256(json.dumps([text, label], ensure_ascii=False).encode("utf-8")).hexdigest()


def _imported_names(example: Example) -> set[str]:
    origin = example.origin or {}
    return {str(n) for n in (origin.get("format"), origin.get("file"), example.source) if n}


def imported_name(example: Any) -> str:
    """The name an imported example's data set is taken by (``training_set(imported=...)``): its format."""
    origin = example.origin or {}
    return str(example.source or origin.get("format") or origin.get("file") or "imported")


def _choose(example: Example, include_undecided: bool, imported: set[str], *,
            variants: bool = False) -> tuple[str, str] | tuple[None, str]:
    """(label, source) when the example is taken; (None, reason) when it is left out. A generated variant only
    with ``variants`` (which counts the validated ones: ``inputs.round_counts``); training takes them apart."""
    if example.status == ExampleStatus.DRAFT:
        return None, "draft"
    if example.status == ExampleStatus.RETRACTED:
        return None, "retracted"
    if is_variant(example.origin):  # generated, not written: only when asked, and only once people validated it
        if not variants:
            return None, "variant_not_asked"
        if example.validation_state != ValidationState.DECIDED or example.decided_verdict == Verdict.FLAGGED \
                or not example.decided_label or example.status == ExampleStatus.FLAGGED:
            return None, "variant_not_validated"
        return example.decided_label, VARIANT
    is_import = (example.origin or {}).get("kind") == "import"
    if is_import and not (_imported_names(example) & imported):
        return None, "imported_not_named"
    if example.validation_state == ValidationState.DECIDED:
        if example.decided_verdict == Verdict.FLAGGED or not example.decided_label:
            return None, "decided_flagged"
        return example.decided_label, "imported" if is_import else "decided"
    if example.status == ExampleStatus.FLAGGED or example.flag_count:
        return None, "flagged_undecided"
    if is_import and example.true_label:
        return example.true_label, "imported"  # a named data set comes with its own gold labels
    if include_undecided and example.true_label:
        return example.true_label, "undecided"
    return None, "undecided"


def training_set(desk: Any, task_code: str, rounds: Sequence[int], *, include_undecided: bool = False,
                 imported: Sequence[str] = (), base: LabelledData | None = None,
                 variants: bool = False) -> TrainingSet:
    """The examples of ``rounds`` of the task a new model may learn from, split and de-duplicated
    (with ``base``, the labelled base data joins the de-duplication as the ``base`` part; with ``variants``,
    the validated variants of the rounds' training-side seeds join as the ``variants`` part)."""
    from app.core.services.target_models import model_input

    task = desk.tasks.task(task_code)
    definition = desk.tasks.definition(task.id)
    if definition.is_extractive:
        raise TrainingDataError(extractive_refusal(task_code))
    wanted = sorted(set(int(r) for r in rounds))
    if not wanted:
        raise TrainingDataError("Name at least one round (--rounds 1,2).")
    labels = list(definition.labels)
    if base is not None:
        unknown = sorted(set(base.label_names) - set(labels))
        if unknown:
            raise TrainingDataError(f"The base data's labels {', '.join(unknown)} are not labels of the task "
                                    f"'{task_code}' ({', '.join(labels)}); map them with --label-map.")
        _check_base_inputs(task_code, definition, base)
    named = {str(n) for n in imported}
    with desk.db.read() as session:
        numbers = {r.number: r.id for r in session.scalars(select(Round).where(Round.task_id == task.id))}
        missing = [n for n in wanted if n not in numbers]
        if missing:
            raise TrainingDataError(f"The task '{task_code}' has no round {', '.join(map(str, missing))} "
                                    f"(its rounds: {', '.join(map(str, sorted(numbers))) or 'none'}).")
        round_of = {numbers[n]: n for n in wanted}
        examples = list(session.scalars(
            select(Example).where(Example.task_id == task.id, Example.round_id.in_(list(round_of)))
            .order_by(Example.submitted_at, Example.id)))
        excluded: collections.Counter[str] = collections.Counter()
        chosen: list[tuple[TrainingExample, bool]] = []
        seen_imports: set[str] = set()
        origins = {e.id: e.origin for e in examples}
        for example in examples:
            label, source = _choose(example, include_undecided, named)
            if source == "variant_not_asked" and variants:
                continue  # taken apart, by their seeds (``variant_training``)
            if (example.origin or {}).get("kind") == "import":
                seen_imports |= _imported_names(example)
            if label is None:
                excluded[source] += 1
                continue
            if label not in labels:
                excluded["unknown_label"] += 1
                continue
            text = model_input(definition, example.inputs)
            chosen.append((TrainingExample(str(example.id), text, label, round_of[example.round_id], source),
                           held_out_example(example.id, example.perturbation_of, example.origin,
                                            _original_origin(session, example, origins))))
    not_found = sorted(named - seen_imports)
    if not_found:
        raise TrainingDataError(f"No imported data set named {', '.join(not_found)} in those rounds "
                                f"(imported here: {', '.join(sorted(seen_imports)) or 'none'}).")
    base_rows = [] if base is None else [
        TrainingExample(f"base:{i}", text, base.label_names[label], None, "base")
        for i, (text, label) in enumerate(zip(base.texts, base.labels))]
    variant_rows: list[TrainingExample] = []
    variant_origins: dict[str, dict[str, str]] = {}
    variants_left_out: dict[str, int] = {}
    if variants:
        from app.core.next_round.variant_training import select_variants

        selection = select_variants(desk, task_code, wanted, labels)
        variants_left_out = dict(selection.left_out)
        held_texts = {normalised(item) for item in selection.held_out_items}
        for v in selection.taken:
            if normalised(v.text) in held_texts:  # the identity swaps of two seeds can meet across the split
                variants_left_out["text_of_held_out_variant"] = variants_left_out.get("text_of_held_out_variant", 0) + 1
                continue
            variant_rows.append(TrainingExample(v.id, v.text, v.label, v.round, VARIANT))
            variant_origins[v.id] = {"seed_id": v.seed_id, "rule": v.rule, "family": v.family}
    train, held_out, base_kept, conflicts, duplicates, variants_kept = _deduplicate(chosen, base_rows, variant_rows)
    return TrainingSet(task_code, labels, wanted, train, held_out, base_kept, conflicts, duplicates,
                       dict(sorted(excluded.items())), include_undecided, sorted(named), variants_kept,
                       {e.id: variant_origins[e.id] for e in variants_kept}, variants_left_out, variants)


def _check_base_inputs(task_code: str, definition: Any, base: LabelledData) -> None:
    """Base data must be what the task's model reads: pairs for a task with a context, texts otherwise."""
    pairs = bool(base.texts) and not isinstance(base.texts[0], str)
    if definition.context_inputs and not pairs:
        context = " and ".join(f.name for f in definition.context_inputs)
        written = " and ".join(f.name for f in definition.written_inputs)
        raise TrainingDataError(f"The task '{task_code}' reads ({context}, {written}) pairs; name the base data's "
                                f"{context} column too (--context-column; in the dialog, its column box).")
    if pairs and not definition.context_inputs:
        raise TrainingDataError(f"The task '{task_code}' reads single texts; its base data takes a text column only "
                                "(no --context-column).")


def _original_origin(session: Any, example: Example, origins: dict[Any, Any]) -> dict[str, Any] | None:
    """The origin of a perturbation's original (its split group decides the pair's side)."""
    if example.perturbation_of is None:
        return None
    if example.perturbation_of not in origins:
        original = session.get(Example, example.perturbation_of)
        origins[example.perturbation_of] = original.origin if original is not None else None
    return origins[example.perturbation_of]


def _deduplicate(chosen: Iterable[tuple[TrainingExample, bool]], base_rows: list[TrainingExample],
                 variant_rows: Sequence[TrainingExample] = ()):
    """Group by normalised text; keep one copy per text and label, none to train on for a conflict. A
    written copy wins over a variant, and both over a base row."""
    held = [e for e, h in chosen if h]
    rounds = sorted((e for e, h in chosen if not h), key=lambda e: e.round or 0)  # stable: submission order within
    groups: dict[str, list[tuple[TrainingExample, str]]] = collections.defaultdict(list)
    for part, members in ((HELD_OUT, held), (TRAIN, rounds), (VARIANTS, variant_rows), (BASE, base_rows)):
        for example in members:
            groups[normalised(example.text)].append((example, part))
    keep: dict[str, set[str]] = {TRAIN: set(), HELD_OUT: set(), BASE: set(), VARIANTS: set()}
    conflicts, duplicates = [], []
    for members in groups.values():
        if len({e.label for e, _ in members}) > 1:
            conflicts.append(Conflict(members[0][0].text, tuple((e.id, e.label) for e, _ in members)))
            keep[HELD_OUT] |= {e.id for e, part in members if part == HELD_OUT}
            continue
        held_copies = [e for e, part in members if part == HELD_OUT]
        kept = held_copies or [members[0][0]]
        for example, part in members:
            if example in kept:
                keep[part].add(example.id)
            else:
                duplicates.append(Duplicate(example.id, kept[0].id))
    return ([e for e in rounds if e.id in keep[TRAIN]], [e for e in held if e.id in keep[HELD_OUT]],
            [e for e in base_rows if e.id in keep[BASE]], conflicts, duplicates,
            [e for e in variant_rows if e.id in keep[VARIANTS]])
