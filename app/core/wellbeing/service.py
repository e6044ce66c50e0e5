"""Exposure and breaks on a desk: recording spans and answered prompts (on the database writer's
lane, at a submit, a verdict or a lead's review, never per keystroke), the team's limits a lead set,
and the figures of the lead's exposure view and the aggregate export."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import date, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.domain import SyncState, utcnow
from app.core.errors import DynadeskError, NotFound
from app.core.storage.db import Database
from app.core.storage.models import Example, ExposureSpan, Meta, Person, Task, Validation, WellbeingBreak
from app.core.tasks.variants import is_variant_source
from app.core.wellbeing.breaks import BreakAction, BreakClock, BreakKind, BreakPrompt
from app.core.wellbeing.exposure import (
    MAX_READING_MS,
    Activity,
    DayExposure,
    Span,
    daily_exposure,
    local_day,
    local_zone_name,
)
from app.core.wellbeing.figures import PersonDay, TeamLimits
from app.core.wellbeing.harmful import HarmfulLabels
from app.core.wellbeing.profile import WellbeingProfile

LIMITS_KEY = "wellbeing.team_limits"
TEAM_KEY = "wellbeing.team"  # the team this desk last synced in (sync.wellbeing)


def span_of(row: ExposureSpan) -> Span:
    return Span(row.person_id, Activity(row.activity), row.started_at, row.ended_at, row.zone)


class WellbeingService:
    def __init__(self, db: Database, harmful: HarmfulLabels, *, zone: str | None = None):
        self.db, self.harmful = db, harmful
        self.zone = zone or local_zone_name()

    # recording ---------------------------------------------------------------------------------

    def record(self, person_id: uuid.UUID, activity: Activity, example_id: uuid.UUID, spent_ms: int, *,
               ended_at: datetime | None = None) -> Span | None:
        """Record ``spent_ms`` of ``activity`` on an example ending at ``ended_at`` (now), if the example is
        hateful content by the label its reader saw (the author's label). Returns the span, or None."""
        if spent_ms < 0:
            raise DynadeskError(f"Time spent cannot be negative ({spent_ms} ms).")
        with self.db.write() as session:
            return self._record(session, person_id, activity, example_id, spent_ms, ended_at or utcnow())

    def record_stored(self, person_id: uuid.UUID, activity: Activity, example_id: uuid.UUID, *,
                      ended_at: datetime | None = None) -> Span | None:
        """Record writing or validating an example from the time its stored record holds: the example's
        ``time_spent_ms`` (its author's) or this person's latest verdict's ``time_spent_ms``."""
        if activity is Activity.REVIEWING:
            raise DynadeskError("A lead's review time is not stored with the review; pass it to record().")
        with self.db.write() as session:
            if activity is Activity.WRITING:
                spent = session.scalar(select(Example.time_spent_ms).where(Example.id == example_id,
                                                                           Example.author_id == person_id))
            else:
                spent = session.scalar(select(Validation.time_spent_ms).where(
                    Validation.example_id == example_id, Validation.validator_id == person_id)
                    .order_by(Validation.created_at.desc()).limit(1))
            if spent is None:
                return None  # not this person's work (the profile changed meanwhile): nothing to count
            return self._record(session, person_id, activity, example_id, max(0, int(spent)), ended_at or utcnow())

    def _record(self, session: Session, person_id: uuid.UUID, activity: Activity, example_id: uuid.UUID,
                spent_ms: int, ended_at: datetime) -> Span | None:
        if activity is not Activity.WRITING:
            spent_ms = min(spent_ms, MAX_READING_MS)
        found = session.execute(select(Task.code, Example.true_label, Example.source)
                                .join(Task, Task.id == Example.task_id).where(Example.id == example_id)).first()
        if found is None:
            raise NotFound(f"There is no example with id {example_id}.")
        code, label, source = found
        if not spent_ms or not self.harmful.is_harmful(code, label):
            return None
        if activity is Activity.WRITING and is_variant_source(source):
            return None  # generated, not written: reading it (validating, reviewing) counts, "writing" it does not
        row = ExposureSpan(person_id=person_id, activity=activity.value, task_code=code, example_id=example_id,
                           started_at=ended_at - timedelta(milliseconds=spent_ms), ended_at=ended_at,
                           zone=self.zone, sync_state=SyncState.PENDING.value)
        session.add(row)
        session.flush()
        return span_of(row)

    def record_break(self, person_id: uuid.UUID, prompt: BreakPrompt, action: BreakAction, *,
                     at: datetime | None = None) -> None:
        with self.db.write() as session:
            session.add(WellbeingBreak(person_id=person_id, kind=prompt.kind.value, action=action.value,
                                       at=at or utcnow(), break_min=prompt.break_min,
                                       continuous_min=prompt.continuous_min, daily_min=prompt.daily_min,
                                       zone=self.zone, sync_state=SyncState.PENDING.value))

    # reading -----------------------------------------------------------------------------------

    def spans(self, person_ids: Iterable[uuid.UUID] | None = None, *, since: datetime | None = None,
              until: datetime | None = None) -> list[Span]:
        query = select(ExposureSpan).order_by(ExposureSpan.started_at)
        if person_ids is not None:
            query = query.where(ExposureSpan.person_id.in_(list(person_ids)))
        if since is not None:
            query = query.where(ExposureSpan.ended_at >= since)
        if until is not None:
            query = query.where(ExposureSpan.started_at < until)
        with self.db.read() as session:
            return [span_of(row) for row in session.scalars(query)]

    def breaks(self, person_ids: Iterable[uuid.UUID] | None = None, *,
               since: datetime | None = None) -> list[WellbeingBreak]:
        query = select(WellbeingBreak).order_by(WellbeingBreak.at)
        if person_ids is not None:
            query = query.where(WellbeingBreak.person_id.in_(list(person_ids)))
        if since is not None:
            query = query.where(WellbeingBreak.at >= since)
        with self.db.read() as session:
            return list(session.scalars(query))

    def restore_clock(self, person_id: uuid.UUID, profile: WellbeingProfile, now: datetime | None = None) -> BreakClock:
        """The person's break clock as their recorded work and answers of the last two days leave it."""
        now = now or utcnow()
        since = now - timedelta(days=2)
        clock = BreakClock(profile, self.zone)
        events: list[tuple[datetime, int, object]] = [(s.ended_at, 0, s) for s in self.spans([person_id], since=since)]
        events += [(b.at, 1, b) for b in self.breaks([person_id], since=since)]
        for _, _, event in sorted(events, key=lambda e: (e[0], e[1])):
            if isinstance(event, Span):
                clock.worked(event.started_at, event.ended_at)
            else:
                assert isinstance(event, WellbeingBreak)
                if event.action == BreakAction.TAKEN.value:
                    clock.take_break(event.at, BreakKind(event.kind))
                else:
                    clock.snooze(event.at)
        return clock

    def person_days(self, since: date, until: date) -> list[PersonDay]:
        """Everyone's days on this desk (a lead's desk: their team's, pulled) from ``since`` to ``until`` inclusive."""
        start = datetime.combine(since - timedelta(days=1), datetime.min.time()).replace(tzinfo=utcnow().tzinfo)
        end = datetime.combine(until + timedelta(days=2), datetime.min.time()).replace(tzinfo=utcnow().tzinfo)
        spans = self.spans(since=start, until=end)
        breaks = self.breaks(since=start)
        taken = [(b.person_id, b.at) for b in breaks if b.action == BreakAction.TAKEN.value]
        days = daily_exposure(spans, taken)
        answered: dict[tuple[uuid.UUID, date], list[int]] = {}
        for b in breaks:
            counts = answered.setdefault((b.person_id, local_day(b.at, b.zone)), [0, 0])
            counts[b.action != BreakAction.TAKEN.value] += 1
        people = {key[0] for key in days} | {key[0] for key in answered}
        with self.db.read() as session:
            names = dict(session.execute(select(Person.id, Person.display_name).where(Person.id.in_(people))).all())
        out = []
        for key in sorted(set(days) | set(answered), key=lambda k: (k[1], names.get(k[0], ""), str(k[0]))):
            person, day = key
            if not since <= day <= until:
                continue
            exposure = days.get(key) or DayExposure(person, day)
            took, snoozed = answered.get(key, [0, 0])
            out.append(PersonDay(person, names.get(person, f"person {str(person)[:8]}"), day,
                                 exposure.minutes(Activity.WRITING), exposure.minutes(Activity.VALIDATING),
                                 exposure.minutes(Activity.REVIEWING), exposure.longest_run_ms / 60_000, took, snoozed))
        return out

    def teams(self) -> dict[uuid.UUID, str]:
        """Each person's team as the server named it (pulled records; this desk's own once synced)."""
        with self.db.read() as session:
            rows = list(session.execute(select(ExposureSpan.person_id, ExposureSpan.team)
                                        .where(ExposureSpan.team.is_not(None)).order_by(ExposureSpan.ended_at)))
            rows += list(session.execute(select(WellbeingBreak.person_id, WellbeingBreak.team)
                                         .where(WellbeingBreak.team.is_not(None)).order_by(WellbeingBreak.at)))
            own = session.get(Meta, TEAM_KEY)
            synced_as = session.get(Meta, "sync.person")
        teams = {person: team for person, team in rows if team}
        if own is not None and synced_as is not None:
            teams.setdefault(uuid.UUID(synced_as.value), own.value)
        return teams

    # the team's limits -------------------------------------------------------------------------

    def limits(self) -> TeamLimits:
        raw = self.db.get_meta(LIMITS_KEY)
        return TeamLimits.model_validate_json(raw) if raw else TeamLimits()

    def limits_set(self) -> bool:
        return self.db.get_meta(LIMITS_KEY) is not None

    def set_limits(self, lead_id: uuid.UUID, daily_min: int, continuous_min: int) -> TeamLimits:
        """A lead's alert lines for their team; they go to the server at the next sync."""
        with self.db.read() as session:
            lead = session.get(Person, lead_id)
        if lead is None or lead.role not in ("lead", "owner"):
            raise DynadeskError("Only a team's lead sets its exposure limits; switch to a lead's profile.")
        limits = TeamLimits(daily_min=daily_min, continuous_min=continuous_min, set_by=lead_id, set_at=utcnow())
        self.store_limits(limits)
        return limits

    def store_limits(self, limits: TeamLimits) -> None:
        with self.db.write() as session:
            row = session.get(Meta, LIMITS_KEY)
            text = limits.model_dump_json()
            if row is None:
                session.add(Meta(key=LIMITS_KEY, value=text))
            else:
                row.value = text
