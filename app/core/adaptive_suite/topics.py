"""Topics and suite cases, derived from the desk's examples (nothing of their own is stored).

A *seed* is an example that showed a weakness of its round's target:
- a decided-valid example (not a variant) the target got wrong: decided 'correct' and it fooled the
  target, or decided 'incorrect' with a corrected label the target's label differs from;
- a perturbation whose target label differs from its original's (the pair flipped the model), unless
  validators flagged it.
A *topic* is its seed, placed in a tree: group (the seed's first target group, else ``NO_GROUP``) ->
edit type (the HateCheck functionality of an imported case, the perturbation's edit type, the seed's
``hate_type``, else ``WRITTEN``) -> seed. Every desk derives the same tree from the same synced rows.

A *suite case* is one validated variant (decided 'correct', or 'incorrect' with the corrected label):
its label is the decided one. Only validated variants are in the suite.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.domain import ModelOutput, ValidationState, Verdict
from app.core.tasks.fooling import ensemble_label

NO_GROUP = "(no group)"
WRITTEN = "written"
PERTURBATION = "perturbation"
SEED_KINDS = ("written", "perturbation", "imported")


@dataclass(frozen=True)
class Topic:
    seed_id: uuid.UUID
    task_code: str
    round_number: int
    text: str
    label: str
    group: str
    edit_type: str
    seed_kind: str  # "written" | "perturbation" | "imported"
    variants: int  # every variant of the seed (not retracted)
    validated: int  # of them, validated (in the suite)


@dataclass(frozen=True)
class SuiteCase:
    """One validated variant."""

    example_id: uuid.UUID
    seed_id: uuid.UUID
    family: str  # the topic's edit type
    rule: str  # the variant's own edit ("group_swap_protected", "leetspeak", ...)
    group: str  # the group the variant names
    text: str
    inputs: dict[str, str]
    label: str
    round_number: int


def decided_label(validation_state: str, decided_verdict: str | None, label: str | None) -> str | None:
    """The label people decided an example has (None: not decided valid)."""
    if validation_state != ValidationState.DECIDED.value or not label:
        return None
    return label if decided_verdict in (Verdict.CORRECT.value, Verdict.INCORRECT.value) else None


def model_label(outputs: Sequence[tuple[str, Mapping[str, float]]]) -> str | None:
    """The target's label from stored outputs ((label, probabilities) per member; the mean decides)."""
    if not outputs:
        return None
    members = [ModelOutput(model_id=uuid.UUID(int=i), model_sha256="", label=label, probabilities=dict(p or {}))
               for i, (label, p) in enumerate(outputs)]
    return ensemble_label(members)


def seed_group(meta: Mapping[str, Any] | None) -> str:
    """The tree's group of a seed: its first target group."""
    groups = (meta or {}).get("target_groups")
    if isinstance(groups, str) and groups.strip():
        return groups.strip()
    if isinstance(groups, list):
        for group in groups:
            if isinstance(group, str) and group.strip():
                return group.strip()
    return NO_GROUP


def seed_kind(origin: Mapping[str, Any] | None, perturbation_of: uuid.UUID | None) -> str:
    if perturbation_of is not None:
        return "perturbation"
    return "imported" if (origin or {}).get("kind") == "import" else "written"


def edit_type(origin: Mapping[str, Any] | None, meta: Mapping[str, Any] | None,
              assistance: Mapping[str, Any] | None, perturbation_of: uuid.UUID | None, *,
              label_stands: bool = True) -> str:
    """The tree's edit type of a seed (see the module's doc). ``label_stands``: the decided label is the
    author's (a hate type given for a label the validators corrected describes nothing)."""
    functionality = (origin or {}).get("functionality")
    if isinstance(functionality, str) and functionality.strip():
        return functionality.strip()
    if perturbation_of is not None:
        applied = (assistance or {}).get("edit_type")
        return applied if isinstance(applied, str) and applied else PERTURBATION
    hate_type = (meta or {}).get("hate_type") if label_stands else None
    if isinstance(hate_type, str) and hate_type.strip():
        return hate_type.strip()
    return WRITTEN
