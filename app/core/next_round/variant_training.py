"""Validated variants as training data: ``dynadesk train --task T --rounds 1,2 --variants [W]`` and the Next round
dialog's "Train on validated variants too". Qt-free.

Which variants: the task's validated variants (``desk.adaptive_suite.cases``: a decided valid verdict, with the
decided or corrected label) stored in one of the chosen rounds (the round open when they were generated, as
``inputs.round_counts`` counts them) whose seed lies on the training side of the held-out split. A seed and all its variants fall on one side (the seed's split unit decides it,
``splits.held_out_example`` of the seed), so variants of held-out seeds are never trained on; nor is a variant
whose text is also the text of a variant of a held-out seed (the identity swaps of two seeds can meet).

Weight: ``W`` times a written round example's weight (``DEFAULT_VARIANT_WEIGHT``: a variant weighs as much as
the example it was made from), so that ``--round-weight auto`` keeps its meaning for what people wrote.

    selection = select_variants(desk, "hate_speech", round_ids={round_1_id: 1})
    selection.taken, selection.left_out, selection.held_out_items
    side = seed_sides(desk, seed_ids)[seed_id]        # (round number, held out?) or absent: seed not here
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.errors import DynadeskError

DEFAULT_VARIANT_WEIGHT = 1.0  # a validated variant weighs as a written round example
MAX_VARIANT_WEIGHT = 100.0
_CHUNK = 500  # ids per IN (...) query


@dataclass(frozen=True)
class SeedSide:
    round_number: int
    held_out: bool


@dataclass(frozen=True)
class SelectedVariant:
    id: str
    seed_id: str
    rule: str
    family: str
    text: Any  # what the task's model reads: a text, or a (context, text) pair
    label: str
    round: int  # the variant's own round


@dataclass
class VariantSelection:
    taken: list[SelectedVariant] = field(default_factory=list)
    left_out: dict[str, int] = field(default_factory=dict)  # reason -> validated variants not taken
    held_out_items: list[Any] = field(default_factory=list)  # what the model reads of variants of held-out seeds


def parse_variant_weight(value: str | float | None) -> float | None:
    """``--variants`` as given: None (not asked), "" or the flag alone (the default weight), or a number."""
    if value is None:
        return None
    if isinstance(value, str) and value.strip() in ("", "default"):
        return DEFAULT_VARIANT_WEIGHT
    try:
        weight = float(value)
    except ValueError:
        raise DynadeskError(f"--variants '{value}' is not a weight: give a positive number (1 weighs a validated "
                            "variant as a written round example), or the flag alone.") from None
    if not 0 < weight <= MAX_VARIANT_WEIGHT:
        raise DynadeskError(f"--variants must be a positive weight up to {MAX_VARIANT_WEIGHT:g} (1 weighs a "
                            f"validated variant as a written round example); got {value}.")
    return weight


def _chunks(ids: list[uuid.UUID]) -> Iterable[list[uuid.UUID]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start:start + _CHUNK]


def seed_sides(desk: Any, seed_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, SeedSide]:
    """Each seed's round and side of the held-out split, as training splits the seed itself (its group, its
    pair's original, its own id); seeds not on this desk are absent."""
    from sqlalchemy import select

    from app.core.storage.models import Example, Round
    from app.core.tasks.splits import held_out_example

    wanted = sorted({uuid.UUID(str(s)) for s in seed_ids})
    sides: dict[uuid.UUID, SeedSide] = {}
    with desk.db.read() as session:
        rows = [row for part in _chunks(wanted) for row in session.execute(
            select(Example.id, Example.perturbation_of, Example.origin, Round.number)
            .join(Round, Round.id == Example.round_id).where(Example.id.in_(part)))]
        originals = sorted({r.perturbation_of for r in rows if r.perturbation_of is not None})
        origins: dict[Any, Any] = {}
        for part in _chunks(originals):
            origins.update(session.execute(select(Example.id, Example.origin).where(Example.id.in_(part))).all())
    for row in rows:
        original = origins.get(row.perturbation_of) if row.perturbation_of is not None else None
        sides[row.id] = SeedSide(int(row.number),
                                 held_out_example(row.id, row.perturbation_of, row.origin, original))
    return sides


def select_variants(desk: Any, task_code: str, rounds: Iterable[int], labels: Iterable[str]) -> VariantSelection:
    """The validated variants a model trained on ``rounds`` may learn from, and what was left out, by reason
    (``training_data`` then leaves out a taken variant whose text is one of ``held_out_items``)."""
    from app.core.services.target_models import model_input

    definition = desk.tasks.definition_by_code(task_code)
    cases = desk.adaptive_suite.cases(task_code)
    sides = seed_sides(desk, [c.seed_id for c in cases])
    chosen, known = set(int(r) for r in rounds), set(labels)
    selection = VariantSelection()
    left: dict[str, int] = {}
    for case in cases:
        side = sides.get(case.seed_id)
        item = model_input(definition, case.inputs) if case.inputs else case.text
        text = tuple(item) if isinstance(item, (list, tuple)) else item
        if side is None:
            reason = "seed_not_here"
        elif side.held_out:
            selection.held_out_items.append(text)
            reason = "seed_held_out"
        elif case.round_number not in chosen:
            reason = "other_round"
        elif case.label not in known:
            reason = "unknown_label"
        else:
            selection.taken.append(SelectedVariant(str(case.example_id), str(case.seed_id), case.rule, case.family,
                                                   text, case.label, case.round_number))
            continue
        left[reason] = left.get(reason, 0) + 1
    selection.left_out = dict(sorted(left.items()))
    return selection


def variants_manifest(selection_taken: Iterable[Mapping[str, Any]], weight: float, sample_weight: float,
                      left_out: Mapping[str, int]) -> dict[str, Any]:
    """The manifest's ``variants`` section: every variant trained on (id, seed id, rule, family) and the weights."""
    taken = [dict(v) for v in selection_taken]
    return {"weight": weight, "relative_to": "a written round example", "sample_weight": sample_weight,
            "count": len(taken), "seeds": len({v["seed_id"] for v in taken}), "taken": taken,
            "left_out": dict(left_out),
            "rule": "validated variants in the chosen rounds whose seeds are on the training side; variants of "
                    "held-out seeds are never trained on (a seed and all its variants fall on one side)"}
