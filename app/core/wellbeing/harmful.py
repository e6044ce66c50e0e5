"""Which examples count as hateful content, per task: the labels named in
``resources/wellbeing/harmful_labels.yaml`` (extended, never narrowed, by a desk's own file)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from app.core.errors import DynadeskError

FILENAME = "harmful_labels.yaml"


def bundled_path() -> Path:
    import resources

    return resources.ROOT / "wellbeing" / FILENAME


def _read(path: Path) -> dict[str, frozenset[str]]:
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DynadeskError(f"The list of hateful labels {path} cannot be read ({exc}); fix or remove the file.") from exc
    if not isinstance(raw, dict) or not all(
            isinstance(code, str) and isinstance(labels, list) and all(isinstance(x, str) for x in labels)
            for code, labels in raw.items()):
        raise DynadeskError(f"{path} must map task codes to lists of labels, e.g. 'hate_speech: [hate]'.")
    return {code: frozenset(labels) for code, labels in raw.items()}


class HarmfulLabels:
    """Task code → the labels whose examples are hateful content."""

    def __init__(self, labels: Mapping[str, frozenset[str]]):
        self.labels = dict(labels)

    @classmethod
    def load(cls, extra: Path | None = None) -> HarmfulLabels:
        labels = _read(bundled_path())
        if extra is not None and extra.exists():
            for code, more in _read(extra).items():
                labels[code] = labels.get(code, frozenset()) | more
        return cls(labels)

    def is_harmful(self, task_code: str, label: str | None) -> bool:
        return label is not None and label in self.labels.get(task_code, frozenset())
