"""The break clock: when to suggest a break, as a state machine with explicit transitions and
injected times (no Qt, no wall clock of its own).

    clock = BreakClock(profile, zone)
    clock.worked(start, end)          # a span of work with hateful content ended (a submit, a verdict)
    prompt = clock.prompt(now)        # asked only at a submit or verdict: never while someone types
    clock.snooze(now) / clock.take_break(now, prompt.kind)

States: WORKING (nothing due) → DUE (a threshold was crossed; the prompt waits for the next pause
in the work) → PROMPTED (shown) → SNOOZED (until a time) or ON_BREAK (continuity reset) → WORKING.
A pause longer than the profile's short break resets continuity by itself.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from enum import StrEnum

from app.core.wellbeing.exposure import local_day, split_by_day
from app.core.wellbeing.profile import WellbeingProfile

SNOOZE = timedelta(minutes=10)


class BreakKind(StrEnum):
    SHORT = "short"  # after continuous work
    LONG = "long"  # after the daily total


class BreakAction(StrEnum):
    TAKEN = "taken"
    SNOOZED = "snoozed"


class ClockState(StrEnum):
    WORKING = "working"
    DUE = "due"
    PROMPTED = "prompted"
    SNOOZED = "snoozed"
    ON_BREAK = "on_break"


@dataclass(frozen=True)
class BreakPrompt:
    kind: BreakKind
    continuous_min: int  # minutes of continuous work with hateful content so far
    daily_min: int  # today's minutes
    break_min: int  # the break suggested


class BreakClock:
    def __init__(self, profile: WellbeingProfile, zone: str, *, snooze: timedelta = SNOOZE):
        self.profile, self.zone, self.snooze_for = profile, zone, snooze
        self.state = ClockState.WORKING
        self.run_start: datetime | None = None
        self.last_end: datetime | None = None
        self.daily_ms: dict[date, int] = {}
        self.snoozed_until: datetime | None = None
        self.on_break_since: datetime | None = None
        self.long_taken_on: set[date] = set()
        self.shown: BreakPrompt | None = None

    @property
    def short_gap(self) -> timedelta:
        return timedelta(minutes=self.profile.short_break_min)

    def continuous(self, now: datetime) -> timedelta:
        """Continuous work as of ``now``: nothing once the pause since the last work is longer than a short break."""
        if self.run_start is None or self.last_end is None or now - self.last_end > self.short_gap:
            return timedelta(0)
        return self.last_end - self.run_start

    def daily(self, now: datetime) -> timedelta:
        return timedelta(milliseconds=self.daily_ms.get(local_day(now, self.zone), 0))

    # transitions -------------------------------------------------------------------------------

    def worked(self, start: datetime, end: datetime) -> ClockState:
        """A span of work with hateful content [start, end] was recorded."""
        if self.on_break_since is not None and end > self.on_break_since:
            self.on_break_since = None
            self.state = ClockState.WORKING
        if self.run_start is None or self.last_end is None or start - self.last_end > self.short_gap:
            self.run_start = start  # a pause longer than a short break: a new run
        self.last_end = max(end, self.last_end or end)
        for day, ms in split_by_day(start, end, self.zone):
            self.daily_ms[day] = self.daily_ms.get(day, 0) + ms
        if self.state in (ClockState.WORKING, ClockState.SNOOZED) and self._due(end) is not None:
            if self.state is ClockState.WORKING or (self.snoozed_until is not None and end >= self.snoozed_until):
                self.state = ClockState.DUE
        return self.state

    def prompt(self, now: datetime) -> BreakPrompt | None:
        """At a pause in the work (a submit, a verdict): the prompt to show, if one is due."""
        if self.state is ClockState.SNOOZED and self.snoozed_until is not None and now >= self.snoozed_until:
            self.state = ClockState.DUE if self._due(now) is not None else ClockState.WORKING
        if self.state is not ClockState.DUE:
            return None
        due = self._due(now)
        if due is None:  # the pause itself was long enough
            self.state = ClockState.WORKING
            return None
        self.state, self.shown = ClockState.PROMPTED, due
        return due

    def snooze(self, now: datetime) -> datetime:
        """Ask again after ``snooze`` (at the first pause in the work after it). Returns when."""
        self.snoozed_until = now + self.snooze_for
        self.state, self.shown = ClockState.SNOOZED, None
        return self.snoozed_until

    def take_break(self, now: datetime, kind: BreakKind) -> None:
        self.on_break_since = now
        self.run_start = self.last_end = None  # continuity starts again after it
        if kind is BreakKind.LONG:
            self.long_taken_on.add(local_day(now, self.zone))
        self.state, self.shown, self.snoozed_until = ClockState.ON_BREAK, None, None

    def dismiss(self) -> None:
        """The prompt went away without an answer (the person switched profile or task): ask again at the next pause."""
        if self.state is ClockState.PROMPTED:
            self.state = ClockState.DUE

    def _due(self, now: datetime) -> BreakPrompt | None:
        daily = self.daily(now)
        continuous = self.continuous(now)
        as_min = (lambda d: int(d.total_seconds() // 60))
        if daily >= timedelta(minutes=self.profile.daily_break_after_min) \
                and local_day(now, self.zone) not in self.long_taken_on:
            return BreakPrompt(BreakKind.LONG, as_min(continuous), as_min(daily), self.profile.long_break_min)
        if continuous >= timedelta(minutes=self.profile.break_after_min):
            return BreakPrompt(BreakKind.SHORT, as_min(continuous), as_min(daily), self.profile.short_break_min)
        return None
