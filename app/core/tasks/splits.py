"""Which examples of a round are held out from every training run: about one in ten, chosen by a hash, so the
choice never changes and every desk makes the same one.

What is hashed is the example's *split unit*:
- its group, when it has one (imported examples may carry one, e.g. the HateCheck template they were built
  from: ``dynadesk import --group-column templ_id``), so every member of a group falls on the same side and no
  held-out case shares a template with a training case;
- otherwise its pair's original id, so both halves of a perturbation pair fall on the same side;
- otherwise its own id.
A perturbation of a grouped original takes the original's group (``split_group``), so pairs stay together too.
A variant of a seed (``tasks.variants``) falls where its seed falls: it carries the seed's group and the id
the seed is hashed by, so a seed and all its variants are on one side.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping
from typing import Any

from app.core.tasks.variants import split_root

HELD_OUT_SHARE = 0.10
_BUCKETS = 10_000
GROUP_KEY = "group"  # the key of an example's ``origin`` that names its split group


def pair_root(example_id: uuid.UUID, perturbation_of: uuid.UUID | None = None) -> uuid.UUID:
    """The id a pair is hashed by: the original's, for a perturbation; the example's own otherwise."""
    return perturbation_of if perturbation_of is not None else example_id


def group_of(origin: Mapping[str, Any] | None) -> str | None:
    """The split group an example's ``origin`` names (None: the example is not grouped)."""
    value = (origin or {}).get(GROUP_KEY)
    return str(value) if value not in (None, "") else None


def split_group(origin: Mapping[str, Any] | None, original_origin: Mapping[str, Any] | None = None) -> str | None:
    """An example's split group: its own, else (for a perturbation) its original's."""
    return group_of(origin) or group_of(original_origin)


def is_held_out(example_id: uuid.UUID, perturbation_of: uuid.UUID | None = None, group: str | None = None) -> bool:
    """Whether the example is on the held-out side. Ungrouped examples hash exactly as before groups
    existed (their ids did not move between splits)."""
    key = ("group\x1f" + group).encode("utf-8") if group else pair_root(example_id, perturbation_of).bytes
    digest = hashlib.sha256(key).digest()
    return int.from_bytes(digest[:8], "big") % _BUCKETS < HELD_OUT_SHARE * _BUCKETS


def held_out_example(example_id: uuid.UUID, perturbation_of: uuid.UUID | None, origin: Mapping[str, Any] | None,
                     original_origin: Mapping[str, Any] | None = None) -> bool:
    """``is_held_out`` for a stored example (its ``origin``, and its original's for a perturbation); a
    variant on its seed's side."""
    root = split_root(origin)
    if root is not None:
        return is_held_out(root, None, group_of(origin))
    return is_held_out(example_id, perturbation_of, split_group(origin, original_origin))
