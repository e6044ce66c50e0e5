"""The plain records the annotation workspace keeps: the draft on screen and a perturbation's original."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass
class DraftRef:
    """The draft of the example on screen. Its id is set on the database worker only, so the
    serial worker's order guarantees exactly one draft however many autosaves are queued."""

    task_code: str
    round_number: int
    author_id: uuid.UUID
    context_id: uuid.UUID | None = None
    perturbation_of: uuid.UUID | None = None
    origin: dict | None = None
    id: uuid.UUID | None = None


@dataclass
class Original:
    """The example a perturbation starts from, with what is known about it."""

    id: uuid.UUID
    text: str
    label: str | None
    prediction: dict | None  # stored outputs, as {label, probabilities}
    attribution: list[tuple[str, float]] | None = None  # per word of ``text``, once explained (raw units)
    edited_attribution: list[tuple[str, float]] | None = None
    target: str | None = None
    units: str = "probability"  # what the attributions measure (of ``target``)
