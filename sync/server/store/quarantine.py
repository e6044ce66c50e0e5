"""Records the server cannot send: kept aside, listed, and dropped by an owner.

Every endpoint that answers with stored records (the change feed, proposals, model forms, duplicates,
wellbeing) builds each record's answer on its own (``wires``); one that does not fit the protocol
(stored before a bound existed, or by hand) is quarantined and left out, so it cannot fail the whole
answer for everyone who would see it."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from sqlalchemy import delete, exists, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.errors import DynadeskError
from sync.server.db import ServerDatabase
from sync.server.models import (
    Change,
    Context,
    Example,
    ExampleReview,
    Person,
    Proposal,
    Quarantined,
    TaskSetting,
    Validation,
    WellbeingRecord,
)
from sync.server.store.rules import KIND_MODELS, chunks

log = logging.getLogger(__name__)

# Stored kinds served outside the change feed, and the column that names who sent one.
LISTED_MODELS: dict[str, Any] = {"proposal": Proposal, "wellbeing": WellbeingRecord}
SENDER = {"proposal": "proposer_id", "wellbeing": "person_id"}
DROPPABLE = (Validation, ExampleReview, TaskSetting, Proposal, WellbeingRecord)


def reason_of(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors()[:5])
    return str(exc) or "it could not be sent"


def wires(rows: Iterable, kind: str, build: Callable[[Any], Any], broken: list) -> list:
    """``build(row)`` for each row on its own; a row that does not fit the protocol is noted in ``broken``
    (for :func:`quarantine`) and left out."""
    out = []
    for row in rows:
        try:
            out.append(build(row))
        except Exception as exc:  # one bad record must not fail the answer; it is quarantined and named
            broken.append((row, kind, reason_of(exc)))
    return out


def not_quarantined(column: Any) -> Any:
    """A condition: the record whose id is ``column`` is not in quarantine."""
    return ~exists().where(Quarantined.record_id == column)


def quarantine(db: ServerDatabase, broken: list[tuple[Any, str, str]]) -> None:
    """Set aside each (row, kind, reason) of ``broken`` (in a write of its own: call it outside a read)."""
    if not broken:
        return

    def work(session: Session) -> None:
        for row, kind, reason in broken:
            if session.get(Quarantined, row.id) is not None:
                continue
            change = session.get(Change, row.id)
            team = change.team if change else getattr(row, "team", None)
            owner = change.owner_id if change else getattr(row, SENDER.get(kind, ""), None)
            session.add(Quarantined(record_id=row.id, kind=kind, team=team, owner_id=owner, reason=reason[:10_000]))
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
    """The records the server leaves out, oldest first, with who sent them and why."""
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
        model = {**KIND_MODELS, **LISTED_MODELS}[entry.kind]
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
        elif model not in DROPPABLE:
            raise DynadeskError(f"a {entry.kind} cannot be dropped (others refer to it); publish it again in a form "
                                "that fits, and it leaves quarantine.")
        session.execute(delete(model).where(model.id == record_id))
        for chunk in chunks(gone):
            session.execute(delete(Change).where(Change.record_id.in_(chunk)))
        session.delete(entry)
        return said

    return db.write_retrying(work)
