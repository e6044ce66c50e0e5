"""Opt-outs by target group: the examples of a task a validator chose not to be served because
they target a group they named (for example their own).

An example's target groups are its metadata field ``target_groups`` (a list, or one value from an
import). Every way an example reaches a desk (written, imported, synced) stores its choice metadata as
facets (``example_facets``, indexed by field and value, and by example), so the queue asks those:
one index lookup per example it passes over.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any, Final

from sqlalchemy import ColumnElement, and_, false, or_, select

from app.core.storage.models import Example, ExampleFacet

TARGET_GROUPS_FIELD: Final[str] = "target_groups"


def targets_opted_out(opted_out: Mapping[uuid.UUID, Collection[str]]) -> ColumnElement[bool]:
    """True for an example of a task in ``opted_out`` (task id -> groups) that targets one of its groups."""
    clauses = []
    for task_id, groups in opted_out.items():
        if not groups:
            continue
        targeting = select(ExampleFacet.example_id).where(ExampleFacet.field == TARGET_GROUPS_FIELD,
                                                          ExampleFacet.value.in_(sorted(groups)))
        clauses.append(and_(Example.task_id == task_id, Example.id.in_(targeting)))
    return or_(*clauses) if clauses else false()


def example_targets(meta: Mapping[str, Any] | None) -> frozenset[str]:
    """An example's target groups, as the queue reads them (for messages and brute-force checks)."""
    value = (meta or {}).get(TARGET_GROUPS_FIELD)
    if value is None:
        return frozenset()
    return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset([str(value)])
