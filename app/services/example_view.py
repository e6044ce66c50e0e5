"""Plain dicts that the validation and review views show, built off the GUI thread.

Qt-free so the same dict can be checked in unit tests and reused by both tabs.
"""

from __future__ import annotations

import uuid

from app.tasks.definition import InputKind
from app.text import diff_pieces


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
        # ``text`` is what the author wrote (the written inputs), stored at submission
        pair = {"original": {"text": original.text, "label": _label(original, definition)},
                "edited": {"text": example.text, "label": label},
                "diff": diff_pieces(original.text, example.text)}
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


def _original(desk, example, definition) -> dict | None:
    """For a perturbation, the example it edits: its text and label, which say more than its id."""
    if example.perturbation_of is None:
        return None
    from app.errors import NotFound

    try:
        original = desk.examples.get(example.perturbation_of)
    except NotFound:
        return {"text": None, "label": None}
    return {"text": original.text, "label": _label(original, definition)}


def for_data_tab(desk, example_id: uuid.UUID) -> dict:
    """Everything the Data tab's detail pane shows about one example."""
    example = desk.examples.get(example_id)
    definition = desk.tasks.definition(example.task_id)
    names = {p.id: p.display_name for p in desk.people.all()}
    models = {m.id: m.name for m in desk.models.all()}
    labels = {f.name: f.label for f in definition.inputs}
    meta_labels = {f.name: f.label for f in definition.metadata}
    return {
        "review": (example.review_state, example.review_comment),
        "original": _original(desk, example, definition),
        "inputs": [(labels.get(k, k), v) for k, v in example.inputs.items()],
        "label": _label(example, definition),
        "fooled": example.model_fooled,
        "meta": [(meta_labels.get(k, k), ", ".join(v) if isinstance(v, list) else v) for k, v in example.meta.items()],
        "outputs": [{"model": models.get(o.model_id, str(o.model_id)), "label": o.label,
                     "probabilities": ", ".join(f"{k} {v:.2f}" for k, v in o.probabilities.items())}
                    for o in example.outputs],
        "validations": [f"{v.verdict}{' → ' + v.corrected_label if v.corrected_label else ''}"
                        f"{' (' + v.reason + ')' if v.reason else ''} — {names.get(v.validator_id, '?')}, {v.mode}"
                        for v in example.validations],
        "facts": [("id", example.id), ("author", names.get(example.author_id, "?")),
                  ("status", example.status + (f" ({example.status_reason})" if example.status_reason else "")),
                  ("validation", example.validation_state.replace("_", " ")),
                  ("time spent", f"{example.time_spent_ms / 1000:.0f} s"),
                  ("edit distance (words)", example.edit_distance if example.edit_distance is not None else "—"),
                  ("origin", example.origin.get("kind", "") + (f" {example.origin.get('format')}"
                                                               if example.origin.get("format") else ""))],
    }
