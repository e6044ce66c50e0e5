"""Exposure and break records on the server: the person pushes their own; the person and the
leads (and owners) of their team read them; nobody else does. A lead sets their team's alert lines."""

from __future__ import annotations

from datetime import datetime

from pydantic import TypeAdapter
from sqlalchemy import or_, select, update
from sqlalchemy.orm import Session

from app.core.domain import utcnow
from app.core.errors import DynadeskError
from sync.protocol import RecordError
from sync.server.db import ServerDatabase
from sync.server.models import WELLBEING_SEQ, Counter, Person, WellbeingLimits, WellbeingRecord
from sync.server.store.quarantine import not_quarantined, quarantine, wires
from sync.server.store.rules import CLOCK_SLACK, LEADS, Forbidden
from sync.wellbeing_wire import (
    TeamLimitsUpdate,
    TeamLimitsWire,
    WellbeingFeed,
    WellbeingItem,
    WellbeingPushResult,
    WellbeingWire,
)

_WIRE: TypeAdapter[WellbeingWire] = TypeAdapter(WellbeingWire)


def _moment(record: WellbeingWire) -> datetime:
    return record.ended_at if record.record == "exposure" else record.at


def push(db: ServerDatabase, me: Person, records: list[WellbeingWire]) -> WellbeingPushResult:
    """Store ``me``'s records (idempotent by id). A record of anyone else, or dated ahead of the server's
    clock by more than a day, refuses the whole request (403 / 422), naming each."""
    theirs = [RecordError(index=i, id=str(r.id), reason="a person pushes only their own exposure and breaks")
              for i, r in enumerate(records) if r.person_id != me.id]
    if theirs:
        raise Forbidden("Nobody sends exposure or breaks as someone else.", theirs)
    limit = utcnow() + CLOCK_SLACK
    ahead = [i for i, r in enumerate(records) if _moment(r) > limit]
    if ahead:
        raise DynadeskError(f"Records {ahead} are dated more than a day ahead of the server's clock; "
                            "check this computer's date and time zone.")

    def work(session: Session) -> WellbeingPushResult:
        wanted = {r.id: r for r in records}
        held = {row.id: row for row in session.scalars(select(WellbeingRecord).where(
            WellbeingRecord.id.in_(list(wanted))))}
        fresh = [r for r in wanted.values() if r.id not in held]
        conflicts = [rid for rid, row in held.items()
                     if row.body != wanted[rid].model_dump(mode="json") or row.person_id != me.id]
        if fresh:
            # Numbers taken last, under the counter's row lock: commits become visible in number order.
            top = session.execute(update(Counter).where(Counter.name == WELLBEING_SEQ)
                                  .values(value=Counter.value + len(fresh)).returning(Counter.value)).scalar_one()
            for seq, record in zip(range(top - len(fresh) + 1, top + 1), fresh):
                session.add(WellbeingRecord(id=record.id, seq=seq, kind=record.record, person_id=me.id, team=me.team,
                                            body=record.model_dump(mode="json")))
        return WellbeingPushResult(stored=len(fresh), already_stored=len(held) - len(conflicts), conflicts=conflicts)

    return db.write_retrying(work)


def feed(db: ServerDatabase, me: Person, since: int, limit: int) -> WellbeingFeed:
    """Records after ``since``: a lead's or owner's own team's, anyone else's only their own."""
    query = select(WellbeingRecord, Person.display_name, Person.role).join(Person, Person.id == WellbeingRecord.person_id)
    if me.role in LEADS:
        query = query.where(or_(WellbeingRecord.team == me.team, WellbeingRecord.person_id == me.id))
    else:
        query = query.where(WellbeingRecord.person_id == me.id)
    with db.read() as session:
        rows = session.execute(query.where(WellbeingRecord.seq > since, not_quarantined(WellbeingRecord.id)).order_by(WellbeingRecord.seq)
                               .limit(limit + 1)).all()
    broken: list = []
    items = wires(rows[:limit], "wellbeing", lambda row: WellbeingItem(
        seq=row[0].seq, team=row[0].team, person_name=row[1], person_role=row[2],
        record=_WIRE.validate_python(row[0].body)), broken)
    quarantine(db, [(row[0], kind, reason) for row, kind, reason in broken])
    page = rows[:limit]  # the cursor passes a record set aside too
    return WellbeingFeed(records=items, cursor=page[-1][0].seq if page else since, more=len(rows) > limit)


def set_limits(db: ServerDatabase, me: Person, update_: TeamLimitsUpdate) -> TeamLimitsWire:
    if me.role not in LEADS:
        raise Forbidden("Only a team's lead sets its exposure limits.")

    def work(session: Session) -> TeamLimitsWire:
        row = WellbeingLimits(team=me.team, lead_id=me.id, daily_min=update_.daily_min,
                              continuous_min=update_.continuous_min, received_at=utcnow())
        session.add(row)
        session.flush()
        return _limits_wire(row)

    return db.write_retrying(work)


def limits(db: ServerDatabase, me: Person) -> TeamLimitsWire | None:
    """The alert lines in force for ``me``'s team (the latest a lead of it set), if any."""
    with db.read() as session:
        row = session.scalar(select(WellbeingLimits).where(WellbeingLimits.team == me.team)
                             .order_by(WellbeingLimits.received_at.desc(), WellbeingLimits.id.desc()).limit(1))
        return _limits_wire(row) if row is not None else None


def _limits_wire(row: WellbeingLimits) -> TeamLimitsWire:
    return TeamLimitsWire(daily_min=row.daily_min, continuous_min=row.continuous_min, team=row.team,
                          set_by=row.lead_id, set_at=row.received_at)
