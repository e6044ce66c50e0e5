"""What makes an example a *variant*: a label-keeping edit of a seed example that the desk generated
(the adaptive suite, ``app.core.adaptive_suite``), not anything a person wrote.

A variant is an example row whose ``origin`` is ``{"kind": "variant", "seed_id": ..., "rule": ...,
"edit_type": ..., "generated_by": ..., "seed_text": ...}`` and whose ``source`` is ``VARIANT_SOURCE``.
The source is what the figures read: whatever has a source was not written on a desk against the
round's target (``tasks.figures.is_written``), so no one's MER, vMER or fooling count takes a variant,
and the imported counts leave the variant source out by name. Both marks travel with the example.

The held-out split keeps a seed and all its variants on one side: a variant's origin carries the
seed's split group (``group``, when the seed had one) and the id its seed is hashed by (``seed_root``).
Pure Python: the desk, the server and view-models read it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, Final

VARIANT_KIND: Final[str] = "variant"
VARIANT_SOURCE: Final[str] = "adaptive-suite"  # the ``source`` of every variant (see above)
SEED_ROOT_KEY: Final[str] = "seed_root"  # the id the seed's side of the held-out split is hashed by


def is_variant(origin: Mapping[str, Any] | None) -> bool:
    """Whether an example with this ``origin`` is a generated variant of a seed."""
    return isinstance(origin, Mapping) and origin.get("kind") == VARIANT_KIND


def is_variant_source(source: str | None) -> bool:
    return source == VARIANT_SOURCE


def seed_of(origin: Mapping[str, Any] | None) -> uuid.UUID | None:
    """The seed a variant was generated from (None: not a variant, or its origin names no valid seed)."""
    if not is_variant(origin):
        return None
    assert origin is not None
    try:
        return uuid.UUID(str(origin.get("seed_id")))
    except ValueError:
        return None


def split_root(origin: Mapping[str, Any] | None) -> uuid.UUID | None:
    """The id a variant is hashed by for the held-out split: its seed's pair root (None: not a variant)."""
    if not is_variant(origin):
        return None
    assert origin is not None
    try:
        return uuid.UUID(str(origin.get(SEED_ROOT_KEY) or origin.get("seed_id")))
    except ValueError:
        return None


def sql_not_variant(source: Any) -> Any:
    """A SQLAlchemy condition over a ``source`` column: the row is not a variant (SQLite and PostgreSQL)."""
    return source.is_(None) | (source != VARIANT_SOURCE)


def sql_variant(source: Any) -> Any:
    """A SQLAlchemy condition over a ``source`` column: the row is a variant."""
    return source == VARIANT_SOURCE
