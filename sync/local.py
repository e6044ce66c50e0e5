"""The desk's own sync bookkeeping and status: its sync meta keys (identity, cursors, last
success and error), what waits and why (with what fixes it), and the outbox's refused entries.

Records going out live in ``sync.outgoing``, pulled pages in ``sync.incoming``; the network lives in
``sync.client``.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import CursorResult, func, select, update
from sqlalchemy.orm import Session

from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import Example, Meta, OutboxEntry, Task
from sync.protocol import StorageUse

LAST_SUCCESS = "sync.last_success"
LAST_ERROR = "sync.last_error"
PERSON = "sync.person"


def cursor_key(server_url: str, person_id: uuid.UUID) -> str:
    digest = hashlib.sha1(f"{server_url.rstrip('/')}|{person_id}".encode()).hexdigest()[:20]
    return f"sync.cursor.{digest}"


def get_meta(session: Session, key: str) -> str | None:
    row = session.get(Meta, key)
    return row.value if row is not None else None


def set_meta(session: Session, key: str, value: str) -> None:
    row = session.get(Meta, key)
    if row is None:
        session.add(Meta(key=key, value=value))
    else:
        row.value = value



@dataclass(frozen=True)
class WaitingReason:
    """One reason the server put records off, how many wait for it, and what fixes it."""

    reason: str  # the server's words, e.g. "task 'hate_speech' is not published on this server yet"
    count: int
    fix: str  # who must do what, e.g. "the owner must run `dynadesk sync publish hate_speech`"


# The server's "deferred" reasons (sync/server/store/push.py) and what fixes each; the first match wins.
_FIXES = (
    (re.compile(r"task '(?P<task>[^']+)' is not published"), "the owner must run `dynadesk sync publish {task}`"),
    (re.compile(r"publish task '(?P<task>[^']+)' first"), "the owner must run `dynadesk sync publish {task}`"),
    (re.compile(r"round (?P<round>\d+) of '(?P<task>[^']+)' is not published"),
     "the owner must publish round {round}: `dynadesk sync publish {task} --round {round}`"),
    (re.compile(r"its context is not published in round (?P<round>\d+)"),
     "the owner must publish round {round} again with its contexts: `dynadesk sync publish {task} --round {round}`"),
    (re.compile(r"model (?P<model>\S+) is not published"),
     "the owner must publish the round with its target model: `dynadesk sync publish {task}`"),
    (re.compile(r"example \S+ is not on the server yet"),
     "its example goes first; it waits for the example's own reason, or the example's author must sync"),
)


_MODEL = re.compile(r"model (?P<model>[0-9a-f]+)… is not published")


def fix_for(reason: str, task: str | None, session: Session | None = None) -> str:
    """What fixes a deferred record, in words a person can act on (with ``session``, a model the server
    lacks is looked up on this desk: only a round's target or an imported data set's model is published)."""
    model = _MODEL.search(reason)
    if model and session is not None:
        unpublishable = _unpublishable_model(session, model["model"])
        if unpublishable:
            return unpublishable
    for pattern, fix in _FIXES:
        found = pattern.search(reason)
        if found:
            return fix.format(**{"task": task or "TASK", **found.groupdict()})
    return "it goes out once the server has what it refers to; the owner may need to run `dynadesk sync publish TASK`"


def _unpublishable_model(session: Session, sha_prefix: str) -> str | None:
    """Why no publish sends a model that examples were written against, or None when a publish does
    (a round's target, an imported data set's model record, or a model this desk does not know)."""
    from app.core.domain import ModelFormat
    from app.core.storage.models import ModelRecord, RoundModel

    models = list(session.scalars(select(ModelRecord).where(ModelRecord.sha256.like(f"{sha_prefix}%"))))
    if not models or any(m.format == ModelFormat.IMPORTED.value for m in models):
        return None
    if session.scalar(select(func.count()).select_from(RoundModel)
                      .where(RoundModel.model_id.in_([m.id for m in models]))):
        return None
    from sync.target_recheck import PROBLEM, same_model

    targets = session.scalars(select(ModelRecord).join(RoundModel, RoundModel.model_id == ModelRecord.id))
    twin = next((t for t in targets if same_model(models[0], t)), None)
    if twin is not None:  # another form of a round's target: each sync re-checks them against the team's form
        problem = get_meta(session, PROBLEM)
        return (f"{models[0].name} is this desk's own form of the round's target {twin.name}; the next sync "
                f"re-checks these examples against the team's form" + (f" ({problem})" if problem else ""))
    return (f"no command fixes it: {models[0].name} is a model of this desk only, not a target of any round, and the "
            "server takes examples judged against their round's target models; these stay on this desk (write them "
            "again against the round's target)")


def waiting_reasons(session: Session, person_id: uuid.UUID | None) -> tuple[WaitingReason, ...]:
    """This person's deferred outbox entries, grouped by the server's reason, most first."""
    query = (select(OutboxEntry.last_error, func.count(), func.min(Example.task_id))
             .outerjoin(Example, (OutboxEntry.kind == "example") & (Example.id == OutboxEntry.record_id))
             .where(OutboxEntry.state == outbox.PENDING, OutboxEntry.last_error.like("deferred:%"))
             .group_by(OutboxEntry.last_error))
    if person_id is not None:
        query = query.where(OutboxEntry.person_id == person_id)
    # last_error is never NULL here: the query keeps 'deferred:%' errors only
    rows = cast("list[tuple[str, int, uuid.UUID | None]]", session.execute(query).all())
    codes: dict[uuid.UUID | None, str] = dict(
        session.execute(select(Task.id, Task.code).where(Task.id.in_({r[2] for r in rows if r[2]}))).all())
    out = [WaitingReason(error.removeprefix("deferred:").strip(), n,
                         fix_for(error, codes.get(task_id), session)) for error, n, task_id in rows]
    return tuple(sorted(out, key=lambda w: (-w.count, w.reason)))


@dataclass(frozen=True)
class LocalStatus:
    pending: int  # this person's records waiting to go out
    deferred: int  # of those, records the server put off (they refer to something it does not have yet)
    held: int  # other profiles' records (they sync with their own token)
    rejected: int
    conflicts: int
    last_success: datetime | None
    last_error: str | None
    waiting: tuple[WaitingReason, ...] = ()  # why the deferred records wait, and what fixes it
    # mixed versions, as of the last sync: of ``pending``, those an older server cannot take yet (and the
    # release they wait for); changes a newer server held back from this desk
    waiting_for_server: int = 0
    server_upgrade: str = ""
    held_back: int = 0


def local_status(db: Database, person_id: uuid.UUID | None) -> LocalStatus:
    with db.read() as session:
        counts = outbox.counts(session, person_id)
        last = get_meta(session, LAST_SUCCESS)
        error = get_meta(session, LAST_ERROR)
        waiting = waiting_reasons(session, person_id) if counts["deferred"] else ()
    mixed = versions(db)
    return LocalStatus(pending=counts[outbox.PENDING], deferred=counts["deferred"], held=counts["held"],
                       rejected=counts[outbox.REJECTED],
                       conflicts=counts[outbox.CONFLICT], last_success=datetime.fromisoformat(last) if last else None,
                       last_error=error or None, waiting=waiting, waiting_for_server=mixed.waiting,
                       server_upgrade=mixed.upgrade, held_back=mixed.held_back)


def problems(db: Database, limit: int = 200) -> list[OutboxEntry]:
    """Outbox entries the server refused, newest first, with its reasons."""
    with db.read() as session:
        return list(session.scalars(select(OutboxEntry).where(OutboxEntry.state != outbox.PENDING)
                                    .order_by(OutboxEntry.updated_at.desc()).limit(limit)))


def retry_problems(db: Database) -> int:
    """Put refused entries back in line (after the cause was fixed, e.g. a round was published)."""
    with db.write() as session:
        result = cast(CursorResult[Any], session.execute(update(OutboxEntry).where(OutboxEntry.state != outbox.PENDING)
                                 .values(state=outbox.PENDING, last_error=None)))
        return result.rowcount


def note(db: Database, *, success: datetime | None = None, error: str | None = None) -> None:
    with db.write() as session:
        if success is not None:
            set_meta(session, LAST_SUCCESS, success.isoformat())
            set_meta(session, LAST_ERROR, "")
        if error is not None:
            set_meta(session, LAST_ERROR, error[:2000])


WAITING_FOR_SERVER = "sync.waiting_for_server"
HELD_BACK = "sync.held_back"


@dataclass(frozen=True)
class Versions:
    """Mixed versions as of the last sync (sync.negotiation): this desk's records that wait for the server's
    upgrade (and the release they need), and changes a newer server held back from this desk."""

    waiting: int = 0
    upgrade: str = ""
    held_back: int = 0


def note_versions(db: Database, *, waiting: int | None = None, upgrade: str = "", held_back: int | None = None) -> None:
    values = {WAITING_FOR_SERVER: None if waiting is None else (f"{waiting} {upgrade}" if waiting else ""),
              HELD_BACK: None if held_back is None else (str(held_back) if held_back else "")}
    changed = {key: value for key, value in values.items() if value is not None and value != (db.get_meta(key) or "")}
    if changed:  # most syncs change neither: no write for them
        with db.write() as session:
            for key, value in changed.items():
                set_meta(session, key, value)


def versions(db: Database) -> Versions:
    waiting, _, upgrade = (db.get_meta(WAITING_FOR_SERVER) or "").partition(" ")
    held = db.get_meta(HELD_BACK) or ""
    return Versions(int(waiting) if waiting.isdigit() else 0, upgrade, int(held) if held.isdigit() else 0)


SERVER_STORAGE = "sync.server_storage"


def note_storage(db: Database, use: StorageUse) -> None:
    """The server's count of this person's model files, as of this sync (shown by ``dynadesk sync``)."""
    with db.write() as session:
        set_meta(session, SERVER_STORAGE, use.model_dump_json())


def server_storage(db: Database) -> StorageUse | None:
    value = db.get_meta(SERVER_STORAGE)
    if not value:
        return None
    try:
        return StorageUse.model_validate_json(value)
    except ValueError:
        return None
