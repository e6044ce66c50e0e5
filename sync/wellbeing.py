"""Exposure and breaks between a desk and the server. Qt-free.

A person's own spans and answered prompts go up (only theirs: the server refuses anyone else's); what
comes down is what the server lets this person read: their own, and for a lead their team's. The lead's
team limits go up when a lead set them here, and the ones in force come down to everyone in the team.

    result = sync_wellbeing(desk, client, me, handle)      # SyncClient.run calls it after the main sync
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlalchemy import select, update

from app.core.domain import SyncState
from app.core.storage.models import ExposureSpan, Person, WellbeingBreak
from app.core.wellbeing.figures import TeamLimits
from app.core.wellbeing.service import TEAM_KEY
from sync import local
from sync.protocol import Me
from sync.transport import SyncHandle
from sync.wellbeing_wire import (
    MAX_WELLBEING_RECORDS,
    BreakWire,
    ExposureWire,
    TeamLimitsUpdate,
    TeamLimitsWire,
    WellbeingFeed,
    WellbeingPushResult,
)

if TYPE_CHECKING:
    from app.core.desk import Desk
    from sync.client import SyncClient

WHAT = "wellbeing records"  # in the server's refusals: "The server refused wellbeing records: ..."

def cursor_key(server_url: str, person_id: uuid.UUID) -> str:
    return f"wellbeing.cursor:{server_url.rstrip('/')}:{person_id}"


@dataclass
class WellbeingSync:
    pushed: int = 0
    already: int = 0
    pulled: int = 0
    conflicts: list[uuid.UUID] = field(default_factory=list)
    limits: TeamLimits | None = None
    unsupported: bool = False  # an older server without these endpoints


def exposure_wire(row: ExposureSpan) -> ExposureWire:
    return ExposureWire(id=row.id, person_id=row.person_id, activity=row.activity,
                        task_code=row.task_code, example_id=row.example_id, started_at=row.started_at,
                        ended_at=row.ended_at, zone=row.zone)


def break_wire(row: WellbeingBreak) -> BreakWire:
    return BreakWire(id=row.id, person_id=row.person_id, kind=row.kind, action=row.action,
                     at=row.at, break_min=row.break_min, continuous_min=row.continuous_min, daily_min=row.daily_min,
                     zone=row.zone)


def sync_wellbeing(desk: Desk, client: SyncClient, me: Me, handle: SyncHandle | None = None) -> WellbeingSync:
    handle = handle or SyncHandle()
    out = WellbeingSync()
    with desk.db.write() as session:
        local.set_meta(session, TEAM_KEY, me.team)
    # an older server (404) has none of these endpoints: the records wait on this desk for a newer one
    if not _push(desk, client, me, handle, out) or not _pull(desk, client, me, handle, out):
        out.unsupported = True
        return out
    out.limits = _limits(desk, client, me, handle)
    return out


def _push(desk: Desk, client: SyncClient, me: Me, handle: SyncHandle, out: WellbeingSync) -> bool:
    while True:
        handle.check()
        with desk.db.read() as session:
            spans = list(session.scalars(select(ExposureSpan).where(
                ExposureSpan.person_id == me.id, ExposureSpan.sync_state == SyncState.PENDING.value)
                .order_by(ExposureSpan.ended_at).limit(MAX_WELLBEING_RECORDS)))
            breaks = list(session.scalars(select(WellbeingBreak).where(
                WellbeingBreak.person_id == me.id, WellbeingBreak.sync_state == SyncState.PENDING.value)
                .order_by(WellbeingBreak.at).limit(MAX_WELLBEING_RECORDS - len(spans))))
        if not spans and not breaks:
            return True
        records = [exposure_wire(s).model_dump(mode="json") for s in spans]
        records += [break_wire(b).model_dump(mode="json") for b in breaks]
        response = client.request("POST", "/wellbeing/push", handle, ok=(200, 404), what=WHAT,
                                  body={"records": records})
        if response.status_code == 404:
            return False
        result = WellbeingPushResult.model_validate_json(response.content)
        out.pushed += result.stored
        out.already += result.already_stored
        out.conflicts += result.conflicts
        with desk.db.write() as session:  # a conflict stays as it is here: the server keeps its own
            for model, rows in ((ExposureSpan, spans), (WellbeingBreak, breaks)):
                if rows:
                    session.execute(update(model).where(model.id.in_([r.id for r in rows]))
                                    .values(sync_state=SyncState.SYNCED.value, team=me.team))


def _pull(desk: Desk, client: SyncClient, me: Me, handle: SyncHandle, out: WellbeingSync) -> bool:
    key = cursor_key(client.url, me.id)
    with desk.db.read() as session:
        cursor = int(local.get_meta(session, key) or 0)
    while True:
        handle.check()
        response = client.request("GET", "/wellbeing/records", handle, ok=(200, 404), what=WHAT,
                                  params={"since": cursor})
        if response.status_code == 404:
            return False
        page = WellbeingFeed.model_validate_json(response.content)
        with desk.db.write() as session:
            ids = [item.record.id for item in page.records]
            present = set(session.scalars(select(ExposureSpan.id).where(ExposureSpan.id.in_(ids))))
            present |= set(session.scalars(select(WellbeingBreak.id).where(WellbeingBreak.id.in_(ids))))
            people = {item.record.person_id: item for item in page.records}
            known = set(session.scalars(select(Person.id).where(Person.id.in_(list(people)))))
            for person_id, item in people.items():
                if person_id not in known:
                    session.add(Person(id=person_id, display_name=item.person_name[:200], role=item.person_role))
            for item in page.records:
                record = item.record
                if record.id in present:
                    continue
                common = dict(id=record.id, person_id=record.person_id, zone=record.zone, team=item.team,
                              sync_state=SyncState.SYNCED.value)
                if isinstance(record, ExposureWire):
                    session.add(ExposureSpan(activity=record.activity, task_code=record.task_code,
                                             example_id=record.example_id, started_at=record.started_at,
                                             ended_at=record.ended_at, **common))
                else:
                    session.add(WellbeingBreak(kind=record.kind, action=record.action, at=record.at,
                                               break_min=record.break_min, continuous_min=record.continuous_min,
                                               daily_min=record.daily_min, **common))
                out.pulled += 1
            local.set_meta(session, key, str(page.cursor))
        if not page.more or page.cursor == cursor:
            return True
        cursor = page.cursor


def _limits(desk: Desk, client: SyncClient, me: Me, handle: SyncHandle) -> TeamLimits | None:
    here = desk.exposure.limits() if desk.exposure.limits_set() else None
    if here is not None and here.sync_state == SyncState.PENDING.value and here.set_by == me.id:
        body = TeamLimitsUpdate(daily_min=here.daily_min, continuous_min=here.continuous_min).model_dump()
        client.request("PUT", "/wellbeing/limits", handle, what="the team's limits", body=body)
    response = client.request("GET", "/wellbeing/limits", handle, ok=(200, 204), what=WHAT)
    if response.status_code == 204:
        return here
    wire = TeamLimitsWire.model_validate_json(response.content)
    limits = TeamLimits(daily_min=wire.daily_min, continuous_min=wire.continuous_min, team=wire.team,
                        set_by=wire.set_by, set_at=wire.set_at, sync_state=SyncState.SYNCED.value)
    pending_here = here is not None and here.sync_state == SyncState.PENDING.value and here.set_by != me.id
    if not pending_here:  # another profile's unsent limits on this desk wait for that profile's sync
        desk.exposure.store_limits(limits)
    return limits
