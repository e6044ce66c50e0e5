"""Bounds on free-form JSON fields: the parts of a record whose shape nobody checks (an example's
``origin``, ``edit_ops`` and ``meta``, a context's ``data``, a round's ``settings``, a task's
``definition``, a model's ``label_map`` and ``provenance``).

One record nested hundreds of levels deep breaks JSON serialisers (pydantic stops at 255 levels)
and with them every sync page that carries it; one record of megabytes makes every pull heavy.
The server (``sync.protocol``) and the desk (before a record is queued or pushed, and when records
are imported) use these same checks, so a record the desk keeps is one the server takes.

- Depth: at most ``MAX_DEPTH`` nested objects or lists. Real records use fewer than 5.
- Size: at most ``MAX_FIELD_BYTES`` of compact UTF-8 JSON per field, except the fields in
  ``FIELD_BYTES``: a task definition carries its guidelines, a model's provenance its training
  manifest (example ids per split), so both may be larger.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from app.core.errors import DynadeskError

MAX_DEPTH = 32
MAX_FIELD_BYTES = 64 * 1024
FIELD_BYTES = {"definition": 1024 * 1024, "provenance": 2 * 1024 * 1024}
FREE_FORM_FIELDS = {
    "example": ("meta", "origin", "edit_ops"),
    "context": ("data",),
    "round": ("settings",),
    "task": ("definition",),
    "model": ("label_map", "provenance"),
}


class FreeFormTooLarge(DynadeskError):
    """A free-form field is nested too deep or is too large."""


def nesting_depth(value: Any) -> int:
    """How many objects and lists are nested in ``value`` (a scalar: 0). Iterative, so any depth is measured."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        stack.extend((child, level + 1) for child in children if isinstance(child, (dict, list, tuple)))
    return deepest


def max_bytes(name: str) -> int:
    return FIELD_BYTES.get(name, MAX_FIELD_BYTES)


def free_form_problem(name: str, value: Any) -> str | None:
    """What is wrong with free-form field ``name``, in words, or None when it is within bounds."""
    if value is None or isinstance(value, (int, float, bool)):
        return None
    depth = nesting_depth(value)
    if depth > MAX_DEPTH:
        return f"{name} is nested {depth} levels deep; at most {MAX_DEPTH} allowed"
    limit = max_bytes(name)
    try:
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str,
                              allow_nan=False).encode("utf-8"))
    except ValueError as exc:
        if "Out of range float" in str(exc):
            return f"{name} holds an infinite or not-a-number value, which JSON cannot carry"
        return f"{name} is not JSON: {exc}"
    except TypeError as exc:
        return f"{name} is not JSON: {exc}"
    if size > limit:
        return f"{name} takes {_size(size)} as JSON; at most {_size(limit)} allowed"
    return None


def record_problems(kind: str, record: Any) -> list[str]:
    """The bound problems of every free-form field of one record (a dict, or an object with attributes)."""
    out = []
    for name in FREE_FORM_FIELDS.get(kind, ()):
        value = record.get(name) if isinstance(record, dict) else getattr(record, name, None)
        problem = free_form_problem(name, value)
        if problem:
            out.append(problem)
    return out


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MiB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KiB" if n >= 1024 else f"{n} bytes"
