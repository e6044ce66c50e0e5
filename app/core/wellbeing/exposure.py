"""Exposure arithmetic, pure and Qt-free: spans of work with hateful content, cut into the person's
local days (work that crosses midnight counts on both days), daily minutes by activity, and the
continuous runs between pauses.

A span is recorded when the work ends (a submit, a verdict, a lead's accept or return) from the time
that work recorded: an example's ``time_spent_ms``, a validation's ``time_spent_ms``, the time a lead
had the example open. It ends at the moment of recording and starts that long before.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from enum import StrEnum
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

# A screen left open is not reading: a verdict or review counts at most this long.
MAX_READING_MS = 10 * 60 * 1000
# A pause longer than this ends a continuous run where no profile says otherwise (the default short break).
DEFAULT_RESET_GAP = timedelta(minutes=5)


class Activity(StrEnum):
    WRITING = "writing"
    VALIDATING = "validating"
    REVIEWING = "reviewing"


@dataclass(frozen=True)
class Span:
    person_id: uuid.UUID
    activity: Activity
    started_at: datetime  # aware UTC
    ended_at: datetime
    zone: str  # the person's time zone when it was recorded: an IANA name or a fixed offset "+05:30"

    @property
    def ms(self) -> int:
        return max(0, int((self.ended_at - self.started_at).total_seconds() * 1000))


def zone_info(zone: str) -> tzinfo:
    """An IANA name or a fixed offset ("+05:30", "-08:00"); anything else is UTC."""
    if zone[:1] in "+-" and len(zone) == 6 and zone[3] == ":":
        sign = 1 if zone[0] == "+" else -1
        try:
            return timezone(sign * timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
        except ValueError:
            return UTC
    try:
        return ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


def local_zone_name() -> str:
    """This machine's time zone, by its IANA name where the system says it, else its current offset."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    try:
        target = str(Path("/etc/localtime").resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    except OSError:
        pass
    for name in candidates:
        if name:
            try:
                ZoneInfo(name)
                return name
            except (ZoneInfoNotFoundError, ValueError):
                continue
    offset = datetime.now().astimezone().utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "+" if minutes >= 0 else "-"
    return f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"


def local_day(moment: datetime, zone: str) -> date:
    return moment.astimezone(zone_info(zone)).date()


def split_by_day(started_at: datetime, ended_at: datetime, zone: str) -> list[tuple[date, int]]:
    """Milliseconds of [started_at, ended_at) on each local day of ``zone``."""
    tz = zone_info(zone)
    out: list[tuple[date, int]] = []
    cursor = started_at
    while cursor < ended_at:
        day = cursor.astimezone(tz).date()
        next_midnight = datetime.combine(day + timedelta(days=1), time(0), tzinfo=tz).astimezone(UTC)
        end = min(ended_at, next_midnight)
        out.append((day, int(round((end - cursor).total_seconds() * 1000))))
        cursor = end
    return out


@dataclass
class DayExposure:
    """One person's day: milliseconds by activity, and the longest run of work without a pause."""

    person_id: uuid.UUID
    day: date
    ms: dict[Activity, int] = field(default_factory=lambda: {a: 0 for a in Activity})
    longest_run_ms: int = 0

    @property
    def total_ms(self) -> int:
        return sum(self.ms.values())

    def minutes(self, activity: Activity | None = None) -> float:
        return (self.total_ms if activity is None else self.ms[activity]) / 60_000


def daily_exposure(spans: Iterable[Span], breaks_at: Iterable[tuple[uuid.UUID, datetime]] = (),
                   reset_gap: timedelta = DEFAULT_RESET_GAP) -> dict[tuple[uuid.UUID, date], DayExposure]:
    """Per person and local day: minutes by activity and the longest continuous run (spans closer
    than ``reset_gap`` join; a break taken between them splits them). Overlapping spans of one person
    (writing while a verdict was open elsewhere) count once in a run, by activity each."""
    days: dict[tuple[uuid.UUID, date], DayExposure] = {}
    by_person: dict[uuid.UUID, list[Span]] = {}
    for span in spans:
        by_person.setdefault(span.person_id, []).append(span)
        for day, ms in split_by_day(span.started_at, span.ended_at, span.zone):
            entry = days.setdefault((span.person_id, day), DayExposure(span.person_id, day))
            entry.ms[span.activity] += ms
    breaks: dict[uuid.UUID, list[datetime]] = {}
    for person, at in breaks_at:
        breaks.setdefault(person, []).append(at)
    for person, person_spans in by_person.items():
        for start, end, zone in continuous_runs(person_spans, breaks.get(person, []), reset_gap):
            for day, ms in split_by_day(start, end, zone):  # a run past midnight counts its part of each day
                entry = days.get((person, day))
                if entry is not None:
                    entry.longest_run_ms = max(entry.longest_run_ms, ms)
    return days


def continuous_runs(spans: Iterable[Span], breaks_at: Iterable[datetime] = (),
                    reset_gap: timedelta = DEFAULT_RESET_GAP) -> list[tuple[datetime, datetime, str]]:
    """One person's runs of work: (start, end, zone), spans joined across pauses no longer than ``reset_gap``."""
    ordered = sorted(spans, key=lambda s: (s.started_at, s.ended_at))
    pauses = sorted(breaks_at)
    runs: list[tuple[datetime, datetime, str]] = []
    for span in ordered:
        if runs:
            start, end, zone = runs[-1]
            took_break = any(end <= b <= span.started_at for b in pauses)
            if span.started_at - end <= reset_gap and not took_break:
                runs[-1] = (start, max(end, span.ended_at), span.zone)
                continue
        runs.append((span.started_at, span.ended_at, span.zone))
    return runs
