"""What an annotator writes, checked against the task's definition: its inputs, its label (or answer
span) and its metadata, as the desk stores them and the server accepts them.

    checked = check_content(definition, Content(inputs={"text": "..."}, true_label="hate"))
    written_text(definition, checked.inputs)   # the written inputs, one per line
    facet_values(definition, checked.meta)     # [("target_groups", "women"), ...]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.core.domain import Span
from app.core.errors import InvalidExample
from app.core.tasks.definition import MetadataKind, TaskDefinition
from app.core.text import ZERO_WIDTH, clean_text


@dataclass
class Content:
    """What the annotator has written, as the editor holds it."""

    inputs: dict[str, str] = field(default_factory=dict)
    true_label: str | None = None
    answer: Span | None = None
    meta: dict[str, Any] = field(default_factory=dict)


def _is_blank(text: str) -> bool:
    return not "".join(ch for ch in text if ch not in ZERO_WIDTH).strip()


def check_content(definition: TaskDefinition, content: Content, *, require_metadata: bool = True) -> Content:
    """The content as it will be stored, or :class:`InvalidExample` naming what is wrong.

    Metadata that does not apply to the chosen label is dropped; required metadata that
    applies must be there (unless ``require_metadata`` is off, as for imported data sets
    that never collected it).
    """
    inputs: dict[str, str] = {}
    for spec in definition.inputs:
        value = content.inputs.get(spec.name)
        if not isinstance(value, str) or _is_blank(value):
            raise InvalidExample(f"'{spec.label}' is empty.")
        value = clean_text(value)
        if len(value) > spec.max_chars:
            raise InvalidExample(f"'{spec.label}' has {len(value):,} characters; this task allows {spec.max_chars:,}.")
        inputs[spec.name] = value
    unknown_inputs = set(content.inputs) - set(inputs)
    if unknown_inputs:
        raise InvalidExample(f"Task '{definition.code}' has no input(s) {sorted(unknown_inputs)}.")

    answer = content.answer
    if definition.is_extractive:
        if answer is None:
            raise InvalidExample("Select the answer in the passage.")
        assert definition.answer is not None  # is_extractive
        passage = inputs[definition.answer.span_of]
        if not (0 <= answer.start < answer.end <= len(passage)) or passage[answer.start:answer.end] != answer.text:
            raise InvalidExample("The answer must be a span of the passage (its text and position must match).")
        label = answer.text
    else:
        if content.true_label not in definition.labels:
            raise InvalidExample(f"Choose a label: one of {', '.join(definition.labels)}.")
        if answer is not None:
            raise InvalidExample(f"Task '{definition.code}' takes a label, not an answer span.")
        label = content.true_label

    known = {f.name for f in definition.metadata}
    unknown = set(content.meta) - known
    if unknown:
        raise InvalidExample(f"Task '{definition.code}' has no metadata field(s) {sorted(unknown)}.")
    meta: dict[str, Any] = {}
    for spec in definition.metadata:
        if not spec.applies(label):
            continue
        value = content.meta.get(spec.name)
        if spec.kind == MetadataKind.TEXT:
            value = clean_text(value).strip() if isinstance(value, str) else None
            empty = not value
        elif spec.kind == MetadataKind.CHOICE:
            value = value.strip() if isinstance(value, str) else None
            empty = not value
            if value and value not in spec.choices and not spec.allow_other:
                raise InvalidExample(f"'{spec.label}' must be one of: {', '.join(spec.choices)}.")
        else:
            if value is None:
                value = []
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise InvalidExample(f"'{spec.label}' takes a list of values.")
            value = list(dict.fromkeys(v.strip() for v in value if v.strip()))
            empty = not value
            strays = [v for v in value if v not in spec.choices]
            if strays and not spec.allow_other:
                raise InvalidExample(f"'{spec.label}' does not offer {', '.join(strays)}.")
        if empty:
            if spec.required and require_metadata:
                when = f" (required when the label is {' or '.join(spec.applies_when.label)})" if spec.applies_when else ""
                raise InvalidExample(f"Fill in '{spec.label}'{when}.")
            continue
        meta[spec.name] = value
    return Content(inputs=inputs, true_label=None if definition.is_extractive else label, answer=answer, meta=meta)


def written_text(definition: TaskDefinition, inputs: dict[str, str]) -> str:
    """The inputs the annotator wrote (not a given passage), one a line."""
    return "\n".join(inputs.get(f.name, "") for f in definition.written_inputs)


def facet_values(definition: TaskDefinition, meta: dict[str, Any]) -> list[tuple[str, str]]:
    """The (field, value) pairs of the example's choice metadata, each once: what review filters and
    breakdowns pick from (free text is searched, not faceted)."""
    pairs: list[tuple[str, str]] = []
    for spec in definition.metadata:
        if spec.kind == MetadataKind.TEXT or spec.name not in meta:
            continue
        values = meta[spec.name] if isinstance(meta[spec.name], list) else [meta[spec.name]]
        pairs.extend((spec.name, value) for value in dict.fromkeys(str(v) for v in values))
    return pairs
