"""Which examples of a round are held out from every training run: about one in ten, chosen by a hash of the
example id, so the choice never changes and every desk makes the same one. Both halves of a perturbation pair
fall on the same side (the pair is hashed by its original's id)."""

from __future__ import annotations

import hashlib
import uuid

HELD_OUT_SHARE = 0.10
_BUCKETS = 10_000


def pair_root(example_id: uuid.UUID, perturbation_of: uuid.UUID | None = None) -> uuid.UUID:
    """The id a pair is hashed by: the original's, for a perturbation; the example's own otherwise."""
    return perturbation_of if perturbation_of is not None else example_id


def is_held_out(example_id: uuid.UUID, perturbation_of: uuid.UUID | None = None) -> bool:
    digest = hashlib.sha256(pair_root(example_id, perturbation_of).bytes).digest()
    return int.from_bytes(digest[:8], "big") % _BUCKETS < HELD_OUT_SHARE * _BUCKETS
