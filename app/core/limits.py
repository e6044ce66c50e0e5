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
- Control characters: none in keys or strings but tab and line ends (a terminal or a reader's view
  would act on them).
- Numbers: finite, and integers within a signed 64-bit range (what every JSON column and reader takes).

Every field on the wire carries one :class:`Bound` in its annotation (``Annotated[str, Bound.line(200)]``,
``Annotated[dict[str, Any], Bound.json()]``): the bound is also the validator, so a field that carries it
is checked, and a test (``unbounded_fields``) finds any wire field of free text or free JSON without one.
"""

from __future__ import annotations

import json
import re
import types
import typing
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from enum import Enum
from typing import Any, Literal, Union

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


MAX_JSON_INT = 2**63 - 1
MAX_JSON_KEY_CHARS = 1000
# Characters that steer a terminal or reorder the text around them: C0 and C1 controls, DEL, and the
# bidirectional embeddings, overrides and isolates. Free text may still hold tabs and line ends.
CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
TEXT_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_char(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def text_problem(name: str, value: str, max_chars: int, *, multiline: bool) -> str | None:
    """What is wrong with one string field: too long, or holding control characters (tab and line ends
    are allowed in ``multiline`` text)."""
    if len(value) > max_chars:
        return f"{name} has {len(value)} characters; at most {max_chars} allowed"
    found = (TEXT_CONTROL if multiline else CONTROL).findall(value)
    if found:
        return (f"{name} holds control characters ({', '.join(sorted({escape_char(c) for c in found}))}), which "
                "could rewrite what a reader sees; use letters, digits, spaces and punctuation")
    return None


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


def free_form_problem(name: str, value: Any, limit: int | None = None) -> str | None:
    """What is wrong with free-form field ``name``, in words, or None when it is within bounds."""
    if value is None or isinstance(value, bool):
        return None
    depth = nesting_depth(value)
    if depth > MAX_DEPTH:
        return f"{name} is nested {depth} levels deep; at most {MAX_DEPTH} allowed"
    problem = _scalar_problem(name, value)
    if problem:
        return problem
    limit = limit or max_bytes(name)
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


def _scalar_problem(name: str, value: Any) -> str | None:
    """The first string with control characters or number out of range in ``value`` (depth already checked)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key in item:
                if isinstance(key, str):
                    if len(key) > MAX_JSON_KEY_CHARS or TEXT_CONTROL.search(key):
                        return text_problem(f"a key of {name}", key, MAX_JSON_KEY_CHARS, multiline=True)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, str):
            if TEXT_CONTROL.search(item):
                return text_problem(name, item, len(item), multiline=True)
        elif isinstance(item, bool):
            continue
        elif isinstance(item, int):
            if abs(item) > MAX_JSON_INT:
                return f"{name} holds an integer beyond ±2^63, which not every reader can carry"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"{name} holds an infinite or not-a-number value, which JSON cannot carry"
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


@dataclass(frozen=True)
class Bound:
    """The one bound of a field on the wire, carried in its annotation, where it is also the validator.

    ``line``: one line of at most ``max_chars`` characters, no control characters. ``text``: free text
    of at most ``max_chars``, tab and line ends allowed. ``json``: free JSON (``dict[str, Any]``,
    ``list[Any]``, ``Any``) within ``free_form_problem``'s depth, size, character and number bounds
    (``max_json_bytes``: its size limit, by default the field's in ``FIELD_BYTES``). ``shown``: text the
    server writes for a reader (an error's detail): its control characters are escaped and it is cut
    to ``max_chars``, never refused."""

    kind: Literal["line", "text", "json", "shown"]
    max_chars: int = 0
    max_json_bytes: int | None = None

    @classmethod
    def line(cls, max_chars: int) -> Bound:
        return cls("line", max_chars)

    @classmethod
    def text(cls, max_chars: int) -> Bound:
        return cls("text", max_chars)

    @classmethod
    def json(cls, max_json_bytes: int | None = None) -> Bound:
        return cls("json", max_json_bytes=max_json_bytes)

    @classmethod
    def shown(cls, max_chars: int) -> Bound:
        return cls("shown", max_chars)

    def check(self, name: str, value: Any) -> Any:
        """``value`` as it may travel; ValueError naming the problem otherwise."""
        if self.kind == "json":
            problem = free_form_problem(name, value, self.max_json_bytes)
        elif self.kind == "shown":
            return shown_text(value, self.max_chars) if isinstance(value, str) else value
        elif isinstance(value, str):
            problem = text_problem(name, value, self.max_chars, multiline=self.kind == "text")
        else:
            problem = None
        if problem:
            raise ValueError(problem)
        return value

    def __get_pydantic_core_schema__(self, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        def validate(value: Any, info: Any) -> Any:
            return self.check(info.field_name or "the value", value)

        return core_schema.with_info_after_validator_function(validate, handler(source))


def shown_text(value: str, max_chars: int) -> str:
    """``value`` with its control characters escaped (tab and line ends kept), cut to ``max_chars``."""
    escaped = TEXT_CONTROL.sub(lambda m: escape_char(m.group()), value)
    return escaped if len(escaped) <= max_chars else escaped[:max(0, max_chars - 1)] + "…"


# Types that carry no free text: what pydantic checks of them is their whole shape.
_CLOSED_TYPES = (bool, int, float, uuid.UUID, datetime, date, time, timedelta, type(None))


def unbounded_fields(model: type, seen: set[type] | None = None) -> list[str]:
    """The fields of pydantic ``model`` (and of the models it nests) that hold free text or free JSON
    (``str``, ``Any``, ``dict[str, Any]``, ``list[Any]``, ...) without a :class:`Bound`, as
    ``Model.field``. Empty when every such field is bounded."""
    seen = set() if seen is None else seen
    if model in seen:
        return []
    seen.add(model)
    out: list[str] = []
    for name, field in getattr(model, "model_fields", {}).items():
        out += _unbounded(field.annotation, list(field.metadata), f"{model.__name__}.{name}", seen)
    return list(dict.fromkeys(out))


def _unbounded(annotation: Any, metadata: list[Any], where: str, seen: set[type]) -> list[str]:
    if any(isinstance(m, Bound) for m in metadata):
        return []
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return _unbounded(args[0], [*metadata, *args[1:]], where, seen)
    if origin in (Union, types.UnionType):
        return [w for arg in args for w in _unbounded(arg, metadata, where, seen)]
    if origin is Literal:
        return []
    if origin is not None:  # a container: each of its item types must be bounded
        if not args:
            return [where]
        return [w for arg in args if arg is not Ellipsis for w in _unbounded(arg, [], f"{where}[]", seen)]
    if annotation in (dict, list, tuple, set, frozenset, str, bytes, Any, object):
        return [where]
    if isinstance(annotation, type):
        if issubclass(annotation, Enum) or issubclass(annotation, _CLOSED_TYPES):
            return []
        if hasattr(annotation, "model_fields"):
            return unbounded_fields(annotation, seen)
        if annotation.__module__ == "pydantic.types" and annotation.__name__.endswith("Datetime"):
            return []  # AwareDatetime and its kin: a datetime with a rule
    return [where]
