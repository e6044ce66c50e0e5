"""What the server's store shares: who counts as a lead, the status rules, the refusal, chunked look-ups."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.domain import Role
from app.core.errors import DynadeskError
from sync.protocol import RecordError
from sync.server.models import (
    Context,
    Example,
    ExampleReview,
    ModelRecord,
    Person,
    Round,
    Task,
    TaskSetting,
    Validation,
)

LEADS = (Role.LEAD.value, Role.OWNER.value)
TRANSITIONS = {("submitted", "flagged"), ("submitted", "retracted"), ("flagged", "retracted")}
# Ids that each desk maps to its own rows (compared through round_number, context_hash, model_sha256).
MAPPED = {"round", "context", "duplicate_of"}
# How far ahead of the server's clock a record's times may be (a desk's clock a little fast, time zones
# set wrong); beyond that they are forged or broken, and would sort ahead of everything written later.
CLOCK_SLACK = timedelta(days=1)


class Forbidden(DynadeskError):
    """The request asks for something this person may not do; nothing of it was stored."""

    def __init__(self, detail: str, errors: Sequence[RecordError] = ()):
        super().__init__(detail)
        self.errors = list(errors)


def chunks(items: list, size: int = 1000):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def fetch(session: Session, model: Any, ids: Iterable[uuid.UUID | None]) -> dict[Any, Any]:
    ids = list(dict.fromkeys(ids))
    out: dict[Any, Any] = {}
    for start in range(0, len(ids), 1000):
        out.update((row.id, row) for row in session.scalars(select(model).where(model.id.in_(ids[start:start + 1000]))))
    return out


KIND_MODELS: dict[str, Any] = {"person": Person, "task": Task, "model": ModelRecord, "round": Round, "context": Context,
               "example": Example, "validation": Validation, "example_review": ExampleReview,
               "task_setting": TaskSetting}
