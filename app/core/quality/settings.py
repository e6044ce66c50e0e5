"""A lead's data-quality settings for a task: the near-duplicate threshold and the two alert lines.

They are one of a task's lead settings (``app.core.task_settings.TaskSettings.quality``), which
travel to the team in one ``task_setting`` record. This module is free of storage, so view-models
may use it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any, Final

from app.core.errors import DynadeskError
from app.core.quality.similarity import DEFAULT_NEAR_THRESHOLD, SIMILARITY_FLOOR

#: Bounds a lead may choose in, per field: (lowest, highest).
BOUNDS: Final[dict[str, tuple[float, float]]] = {
    "near_threshold": (SIMILARITY_FLOOR, 1.0),
    "token_association_threshold": (1.0, 50.0),
    "duplicate_rate_threshold": (0.01, 1.0),
}


class InvalidQualitySettings(DynadeskError):
    pass


@dataclass(frozen=True)
class QualitySettings:
    """``near_threshold``: the character 4-gram Jaccard similarity (``app.core.quality.similarity``)
    at or above which two examples are near-duplicates.
    ``token_association_threshold``: the z-score of a word's or bigram's label share against the
    label's base rate (the artifact table) at or above which the dashboard alerts.
    ``duplicate_rate_threshold``: the share of a writer's examples that repeat an earlier example
    at or above which the dashboard alerts."""

    near_threshold: float = DEFAULT_NEAR_THRESHOLD
    token_association_threshold: float = 5.0
    duplicate_rate_threshold: float = 0.25

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            low, high = BOUNDS[item.name]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not low <= value <= high:
                raise InvalidQualitySettings(
                    f"{LABELS[item.name]} must be a number from {low:g} to {high:g}; got {value!r}.")

    def to_json(self) -> dict[str, float]:
        return {key: float(value) for key, value in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> QualitySettings:
        """Settings from their JSON form; missing fields take their defaults, unknown ones are refused."""
        if not data:
            return cls()
        unknown = sorted(set(data) - set(BOUNDS))
        if unknown:
            raise InvalidQualitySettings(f"Unknown quality setting(s): {', '.join(unknown)}. "
                                         f"Known: {', '.join(BOUNDS)}.")
        return cls(**data)


LABELS: Final[dict[str, str]] = {
    "near_threshold": "The near-duplicate threshold",
    "token_association_threshold": "The token alert threshold (z-score)",
    "duplicate_rate_threshold": "The duplicate-rate alert threshold",
}
