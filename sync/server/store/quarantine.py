"""Records the change feed cannot send: kept aside, listed, and dropped by an owner."""

from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.errors import DynadeskError
from sync.server.db import ServerDatabase
from sync.server.models import Change, Context, Example, ExampleReview, Person, Quarantined, TaskSetting, Validation
from sync.server.store.rules import KIND_MODELS, chunks

log = logging.getLogger(__name__)


def quarantine(db: ServerDatabase, broken: list[tuple[Any, str, str]]) -> None:
    def work(session: Session) -> None:
        for row, kind, reason in broken:
            if session.get(Quarantined, row.id) is not None:
                continue
            change = session.get(Change, row.id)
            session.add(Quarantined(record_id=row.id, kind=kind, team=change.team if change else None,
                                    owner_id=change.owner_id if change else None, reason=reason))
            log.warning("quarantined %s %s: it cannot be sent (%s); see 'dynadesk serve quarantine list'",
                        kind, row.id, reason)

    try:
        db.write_retrying(work)
    except IntegrityError:  # another worker quarantined it at the same moment
        pass


@dataclass(frozen=True)
class QuarantineEntry:
    record_id: uuid.UUID
    kind: str
    team: str | None
    sender: str | None
    reason: str
    quarantined_at: Any


def quarantined(db: ServerDatabase) -> list[QuarantineEntry]:
    """The records the change feed leaves out, oldest first, with who sent them and why."""
    with db.read() as session:
        rows = list(session.scalars(select(Quarantined).order_by(Quarantined.quarantined_at)))
        names: dict[uuid.UUID | None, str] = dict(session.execute(select(Person.id, Person.display_name)
                                     .where(Person.id.in_({r.owner_id for r in rows if r.owner_id}))).all())
    return [QuarantineEntry(r.record_id, r.kind, r.team, names.get(r.owner_id), r.reason, r.quarantined_at)
            for r in rows]


def drop_quarantined(db: ServerDatabase, record_id: uuid.UUID) -> str:
    """Delete a quarantined record from the server for good (an example with its validations and
    reviews). Returns what was deleted, in words."""

    def work(session: Session) -> str:
        entry = session.get(Quarantined, record_id)
        if entry is None:
            raise DynadeskError(f"{record_id} is not in quarantine; 'dynadesk serve quarantine list' shows what is.")
        model = KIND_MODELS[entry.kind]
        gone = [record_id]
        said = f"{entry.kind} {record_id}"
        if model is Example:
            dependants = [*session.scalars(select(Validation.id).where(Validation.example_id == record_id)),
                          *session.scalars(select(ExampleReview.id).where(ExampleReview.example_id == record_id))]
            session.execute(delete(Validation).where(Validation.example_id == record_id))
            session.execute(delete(ExampleReview).where(ExampleReview.example_id == record_id))
            session.execute(update(Example).where(Example.duplicate_of == record_id).values(duplicate_of=None))
            gone += dependants
            if dependants:
                said += f" with its {len(dependants)} validation(s) and review(s)"
        elif model is Context:
            if session.scalar(select(func.count()).select_from(Example).where(Example.context_id == record_id)):
                raise DynadeskError(f"examples were written on context {record_id}; it cannot be dropped. "
                                    "Publish it again in a form that fits instead.")
        elif model not in (Validation, ExampleReview, TaskSetting):
            raise DynadeskError(f"a {entry.kind} cannot be dropped (others refer to it); publish it again in a form "
                                "that fits, and it leaves quarantine.")
        session.execute(delete(model).where(model.id == record_id))
        for chunk in chunks(gone):
            session.execute(delete(Change).where(Change.record_id.in_(chunk)))
        session.delete(entry)
        return said

    return db.write_retrying(work)
