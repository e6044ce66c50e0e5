"""Which registered model gives the assistant its gradients.

The desk runs a round's target in its fastest form (ONNX, int8 when it passes parity), which has
no gradients; word substitution needs the PyTorch form it was exported from. Every export names
that form in ``provenance.parent_model`` (the default model's first start, promotion, registering
an export), so this follows the link, as the evaluation's model families do. The caller loads the form
it finds (``services.target_models.model_spec``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

from app.core.domain import ModelFormat
from app.core.errors import NotFound
from app.core.storage.models import ModelRecord

_MAX_HOPS = 4  # an export of an export at most; a longer chain is a loop in hand-edited provenance


def gradient_form(desk, record: ModelRecord) -> ModelRecord | None:
    """The PyTorch record whose files give gradients for ``record``'s model: ``record`` itself when
    it is one, else the one it was exported from, when its files are on this desk; None otherwise."""
    by_sha = {r.sha256: r for r in desk.models.all()}
    current: ModelRecord | None = record
    for _ in range(_MAX_HOPS):
        if current is None:
            return None
        if current.format == ModelFormat.HF_TORCH.value:
            return current if current.path and Path(current.path).exists() else None
        parent = (current.provenance or {}).get("parent_model") or {}
        current = _record(desk, parent.get("id")) or by_sha.get(parent.get("sha256") or "")
    return None


def first_gradient_form(desk, records) -> ModelRecord | None:
    """The gradient form of the first of a round's targets that has one (an ensemble's substitutions
    follow one member's gradients; every suggestion is still checked against the whole ensemble)."""
    return next((form for form in (gradient_form(desk, r) for r in records) if form is not None), None)


def _record(desk, model_id: object) -> ModelRecord | None:
    if not model_id:
        return None
    try:
        record: ModelRecord = desk.models.get(uuid.UUID(str(model_id)))
        return record
    except (ValueError, NotFound):  # a malformed id, or a model this desk does not have
        return None
