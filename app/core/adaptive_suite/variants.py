"""A variant is an example row the desk generated from a seed (``app.core.tasks.variants`` defines the
marks; here are the clauses over the desk's ``Example`` table, for SQLite and PostgreSQL alike).

    select(Example).where(not_variant_clause())   # what people wrote or imported
    select(Example).where(variant_clause())       # the generated variants only
"""

from __future__ import annotations

from typing import Any

from app.core.storage.models import Example
from app.core.tasks.variants import (
    SEED_ROOT_KEY,
    VARIANT_KIND,
    VARIANT_SOURCE,
    is_variant,
    is_variant_source,
    seed_of,
    split_root,
    sql_not_variant,
    sql_variant,
)

__all__ = ["SEED_ROOT_KEY", "VARIANT_KIND", "VARIANT_SOURCE", "is_variant", "is_variant_source", "not_variant_clause",
           "seed_of", "split_root", "variant_clause"]


def not_variant_clause() -> Any:
    """Examples that are not variants (on the ``source`` column, which its index serves; every variant's
    origin kind is ``VARIANT_KIND`` too)."""
    return sql_not_variant(Example.source)


def variant_clause() -> Any:
    """The variants alone."""
    return sql_variant(Example.source)
