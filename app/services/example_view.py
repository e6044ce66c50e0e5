"""Plain dicts that the validation and review views show, built off the GUI thread.

Qt-free so the same dict can be checked in unit tests and reused by both tabs.
"""

from __future__ import annotations

import uuid

from app.tasks.definition import InputKind
from app.text import diff_pieces


def _written(example, definition) -> str:
    return " ".join(str(example.inputs.get(f.name, "")) for f in definition.written_inputs)


def _label(example, definition) -> str | None:
    return (example.answer or {}).get("text") if definition.is_extractive else example.true_label


def explanations(example, definition) -> list[tuple[str, str]]:
    """The author's metadata answers, in the task's order, as (question, answer)."""
    out = []
    for field in definition.metadata:
        value = example.meta.get(field.name)
        if value in (None, "", []):
            continue
        out.append((field.label, ", ".join(value) if isinstance(value, list) else str(value)))
    return out


def for_validation(desk, example_id: uuid.UUID) -> dict:
    """What a validator sees of one example (the model output travels along, hidden or not)."""
    example = desk.examples.get(example_id)
    definition = desk.tasks.definition(example.task_id)
    models = {m.id: m.name for m in desk.models.all()}
    label = _label(example, definition)
    pair = None
    if example.perturbation_of is not None:
        original = desk.examples.get(example.perturbation_of)
        pair = {"original": {"text": _written(original, definition), "label": _label(original, definition)},
                "edited": {"text": _written(example, definition), "label": label},
                "diff": diff_pieces(_written(original, definition), _written(example, definition))}
    return {
        "id": example.id,
        "task_code": definition.code,
        "context": [(f.label, str(example.inputs.get(f.name, ""))) for f in definition.inputs
                    if f.kind == InputKind.CONTEXT and example.inputs.get(f.name)],
        "written": [(f.label, str(example.inputs.get(f.name, ""))) for f in definition.written_inputs],
        "label": label,
        "label_name": "answer" if definition.is_extractive else "label",
        "labels": list(definition.labels),
        "explanations": explanations(example, definition),
        "pair": pair,
        "output": {"models": [{"model": models.get(o.model_id, "target model"), "label": o.label,
                               "probabilities": dict(o.probabilities)} for o in example.outputs],
                   "fooled": example.model_fooled, "labels": list(definition.labels)},
        "hide_output": definition.hide_model_output_until_verdict,
        "content_warning": definition.content_warning,
        "review_state": example.review_state,
        "review_comment": example.review_comment,
    }
