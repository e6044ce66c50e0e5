"""A round's seeds and their validated variants on a real desk, for the adaptive suite's tests: examples that fooled
the target (the seeds), variants stored as the desk stores generated ones, validated by a second lead (nobody
validates what they generated)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from app.core.tasks.content import Content
from app.core.tasks.splits import is_held_out
from tests.conftest import hate_content, hate_output

HATE = "hate_speech"


def variant_origin(seed: Any, generated_by: Any, family: str = "derogation", edit_type: str = "hedging") -> dict:
    return {"kind": "variant", "seed_id": str(seed.id), "rule": "rules", "edit_type": edit_type,
            "generated_by": str(generated_by), "seed_text": seed.text, "family": family, "seed_root": str(seed.id)}


def add_variants(desk: Any, generator: Any, validator: Any, model: Any, seed: Any,
                 texts: Sequence[tuple[str, str]], *, family: str = "derogation", validate: bool = True,
                 model_label: Callable[[str], str] = lambda _text: "not hate") -> list[Any]:
    """Store ``texts`` ((text, label) each) as variants of ``seed``, checked against ``model`` (its label from
    ``model_label``), and let ``validator`` (a lead) uphold each label."""
    items = [(Content({"text": text}, label, meta={"target_groups": ["women"], "hate_type": "derogation"}
                      if label == "hate" else {}), [hate_output(model, model_label(text))],
              variant_origin(seed, generator.id, family)) for text, label in texts]
    ids = desk.adaptive_suite.store_variants(HATE, generator.id, items)
    if validate:
        for variant_id in ids:
            desk.validation.validate(variant_id, validator.id, "correct", mode="lead")
    return ids


def fooling_seed(desk: Any, author: Any, lead: Any, model: Any, text: str, *, decide: bool = True) -> Any:
    """An example labelled hate that the model called not hate: a seed once decided."""
    example = desk.examples.create(author.id, HATE, hate_content(text, "hate"), [hate_output(model, "not hate")])
    if decide:
        desk.validation.validate(example.id, lead.id, "correct", mode="lead")
    return example


def seeds_on_both_sides(desk: Any, author: Any, lead: Any, model: Any, *, training: int, held_out: int,
                        word: str = "banana") -> tuple[list[Any], list[Any]]:
    """(training-side seeds, held-out seeds), made until there are as many as asked of each (which side a seed
    falls on follows its random id; the examples not needed stay undecided: no seed, never trained on)."""
    sides: tuple[list[Any], list[Any]] = ([], [])
    for i in range(2000):
        if len(sides[0]) >= training and len(sides[1]) >= held_out:
            break
        example = fooling_seed(desk, author, lead, model, f"the {word} people seed {i} are awful", decide=False)
        side, wanted = (sides[1], held_out) if is_held_out(example.id) else (sides[0], training)
        if len(side) < wanted:
            desk.validation.validate(example.id, lead.id, "correct", mode="lead")
            side.append(example)
    assert len(sides[0]) == training and len(sides[1]) == held_out
    return sides
