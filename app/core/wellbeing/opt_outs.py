"""Opt-outs by target group: the examples of a task a validator chose not to be served because
they target a group they named (for example their own).

An example's target groups are its metadata field ``target_groups`` (a list, or one value from an
import); the test runs in SQL with ``json_each`` so that examples that came by import or sync, whatever
their facets, are judged by what they say.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping
from typing import Any, Final

from sqlalchemy import ColumnElement, and_, exists, false, literal_column, or_, select, func

from app.core.storage.models import Example

TARGET_GROUPS_FIELD: Final[str] = "target_groups"


def targets_opted_out(opted_out: Mapping[uuid.UUID, Collection[str]]) -> ColumnElement[bool]:
    """True for an example of a task in ``opted_out`` (task id -> groups) that targets one of its groups."""
    clauses = []
    for task_id, groups in opted_out.items():
        if not groups:
            continue
        each = func.json_each(Example.meta, f"$.{TARGET_GROUPS_FIELD}").table_valued("value")
        targets = exists(select(literal_column("1")).select_from(each).where(each.c.value.in_(sorted(groups))))
        clauses.append(and_(Example.task_id == task_id, targets))
    return or_(*clauses) if clauses else false()


def example_targets(meta: Mapping[str, Any] | None) -> frozenset[str]:
    """An example's target groups, as the queue reads them (for messages and brute-force checks)."""
    value = (meta or {}).get(TARGET_GROUPS_FIELD)
    if value is None:
        return frozenset()
    return frozenset(str(v) for v in value) if isinstance(value, list) else frozenset([str(value)])
