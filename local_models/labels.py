"""Mapping a model's output classes onto a task's labels.

A model's config names its classes (``id2label``); a task names its labels. They match when
their names agree up to case, spaces, hyphens and underscores ("NOT_HATE" is "not hate").
When they do not, the user maps them by hand: ``{"0": "hate", "1": "not hate"}`` by output
index, or ``{"LABEL_0": "hate"}`` by the model's own name. Several classes may map onto one
label (offensive and neither both onto "not hate"); their probabilities then add up.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from local_models.errors import LabelMismatch

_SEPARATORS = re.compile(r"[\s_\-]+")


def normalise_label(label: str) -> str:
    return _SEPARATORS.sub(" ", label.strip().lower()).strip()


def resolve_label_map(
    model_labels: Sequence[str],
    task_labels: Sequence[str] | None,
    manual: Mapping[str, str] | None = None,
) -> dict[int, str]:
    """Output index -> task label, or a ``LabelMismatch`` that says what does not fit."""
    model_labels = list(model_labels)
    if manual:
        return _manual(model_labels, task_labels, manual)
    if task_labels is None:
        return dict(enumerate(model_labels))
    by_name = {normalise_label(t): t for t in task_labels}
    mapping: dict[int, str] = {}
    unmatched = []
    for index, name in enumerate(model_labels):
        task_label = by_name.get(normalise_label(name))
        if task_label is None:
            unmatched.append(name)
        else:
            mapping[index] = task_label
    uncovered = [t for t in task_labels if t not in mapping.values()]
    if unmatched or uncovered or len(set(mapping.values())) != len(mapping):
        raise LabelMismatch(
            f"The model's labels ({_names(model_labels)}) do not match the task's labels "
            f"({_names(task_labels)}). Map them by hand, for example "
            f"{_example(model_labels, task_labels)}.",
            model_labels, list(task_labels),
        )
    return mapping


def _manual(model_labels: list[str], task_labels: Sequence[str] | None,
            manual: Mapping[str, str]) -> dict[int, str]:
    index_of = {name: i for i, name in enumerate(model_labels)}
    mapping: dict[int, str] = {}
    problems = []
    for key, value in manual.items():
        key = str(key)
        index = int(key) if key.isdigit() and int(key) < len(model_labels) else index_of.get(key)
        if index is None:
            problems.append(f"'{key}' is neither an output index nor a label of the model")
        elif task_labels is not None and value not in task_labels:
            problems.append(f"'{value}' is not a label of the task")
        else:
            mapping[index] = value
    missing = [model_labels[i] for i in range(len(model_labels)) if i not in mapping]
    if missing:
        problems.append(f"no task label given for the model's {_names(missing)}")
    if problems:
        raise LabelMismatch(
            "The label map does not fit: " + "; ".join(problems) + ".",
            model_labels, list(task_labels or []),
        )
    return mapping


def _names(labels: Sequence[str]) -> str:
    return ", ".join(f"'{label}'" for label in labels)


def _example(model_labels: Sequence[str], task_labels: Sequence[str]) -> str:
    pairs = [f"{i}={task_labels[i % len(task_labels)]}" for i in range(len(model_labels))]
    return "--label-map " + ",".join(pairs)
