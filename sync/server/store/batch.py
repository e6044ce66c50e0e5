"""What one push or publish transaction shares: look-ups, results, the changes it records."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.domain import utcnow
from app.core.tasks.definition import TaskDefinition
from sync.protocol import RecordError, RecordResult
from sync.server.models import ModelRecord, Person, Round, Task
from sync.server.store.changelog import record_changes
from sync.server.store.rules import CLOCK_SLACK, Forbidden


@dataclass
class Batch:
    """Shared look-ups and bookkeeping for one push or publish transaction."""

    session: Session
    me: Person
    results: list[RecordResult | None]
    changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]] = field(default_factory=list)
    updated: set[uuid.UUID] = field(default_factory=set)
    forbidden: list[RecordError] = field(default_factory=list)
    _tasks: dict[str, Task | None] = field(default_factory=dict)
    _definitions: dict[uuid.UUID, TaskDefinition] = field(default_factory=dict)
    _rounds: dict[tuple[uuid.UUID, int], Round | None] = field(default_factory=dict)
    _models: dict[str, ModelRecord | None] = field(default_factory=dict)
    now: datetime = field(default_factory=utcnow)  # when this request arrived: received_at, server_time

    def in_time(self, records: Sequence) -> list[tuple[int, Any]]:
        """The records whose times are not ahead of the server's clock (beyond the slack); the
        others are rejected, naming the time."""
        limit = self.now + CLOCK_SLACK
        kept = []
        for i, r in enumerate(records):
            late = next(((name, value) for name in _time_fields(type(r))
                         if (value := getattr(r, name)) is not None and value > limit), None)
            if late is None:
                kept.append((i, r))
                continue
            name, value = late
            self.result(i, r, "rejected", reason=(
                f"its {name} ({value.astimezone(UTC):%Y-%m-%d %H:%M} UTC) is more than a day ahead of the "
                f"server's clock ({self.now:%Y-%m-%d %H:%M} UTC); check the date and time of the computer "
                "that wrote it"))
        return kept

    def result(self, index: int, record, status: str, *, revision: int | None = None, reason: str | None = None,
               server: dict | None = None) -> None:
        self.results[index] = RecordResult(index=index, id=record.id, record=record.record, status=status,
                                           revision=revision, reason=reason, server=server)

    def changed(self, row, kind: str, team: str | None, owner: uuid.UUID | None, *, is_new: bool) -> None:
        self.changes.append((row.id, kind, team, owner))
        if not is_new:
            self.updated.add(row.id)

    def task(self, code: str) -> Task | None:
        if code not in self._tasks:
            self._tasks[code] = self.session.scalar(select(Task).where(Task.code == code))
        return self._tasks[code]

    def definition(self, task: Task) -> TaskDefinition:
        if task.id not in self._definitions:
            self._definitions[task.id] = TaskDefinition.model_validate(task.definition)
        return self._definitions[task.id]

    def round(self, task: Task, number: int) -> Round | None:
        key = (task.id, number)
        if key not in self._rounds:
            self._rounds[key] = self.session.scalar(select(Round).where(Round.task_id == task.id, Round.number == number))
        return self._rounds[key]

    def model(self, sha256: str) -> ModelRecord | None:
        if sha256 not in self._models:
            self._models[sha256] = self.session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha256))
        return self._models[sha256]

    def target_shas(self, round_: Round) -> list[str]:
        """The sha256 of each of the round's target models, in the round's order."""
        models = [self.session.get(ModelRecord, uuid.UUID(str(m))) for m in round_.target_models]
        return [m.sha256 for m in models if m is not None]

    def finish(self) -> list[int]:
        if self.forbidden:
            raise Forbidden(f"{len(self.forbidden)} record(s) in this request are not yours to write; "
                            "nothing was stored.", self.forbidden)
        if not self.changes:
            return []
        self.session.flush()
        return record_changes(self.session, self.changes, self.updated)


_TIME_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {}


def _time_fields(kind: type[BaseModel]) -> tuple[str, ...]:
    """The fields of a record kind that hold a time the sender chose (created_at, submitted_at, ...)."""
    if kind not in _TIME_FIELDS:
        _TIME_FIELDS[kind] = tuple(name for name, f in kind.model_fields.items()
                                   if "Datetime" in str(f.annotation) and name != "received_at")  # set by the server
    return _TIME_FIELDS[kind]


class PendingRow:
    """A row about to be inserted, with attribute access (for ``summarise``) over its values."""

    __slots__ = ("values",)

    def __init__(self, values: dict):
        object.__setattr__(self, "values", values)

    def __getattr__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self.values[name] = value
