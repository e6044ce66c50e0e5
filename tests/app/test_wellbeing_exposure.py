"""Exposure minutes from recorded times, against hand-computed cases; the break clock's transitions
with injected times (no Qt)."""

import uuid
from datetime import UTC, date, datetime, timedelta

import pytest

from app.core.errors import DynadeskError
from app.core.wellbeing.breaks import BreakAction, BreakClock, BreakKind, ClockState
from app.core.wellbeing.exposure import Activity, Span, daily_exposure, split_by_day, zone_info
from app.core.wellbeing.harmful import HarmfulLabels
from app.core.wellbeing.profile import WellbeingProfile

UTC = UTC
P, Q = uuid.UUID(int=1), uuid.UUID(int=2)


def at(h: int, m: int = 0, s: int = 0, d: int = 10) -> datetime:
    return datetime(2026, 3, d, h, m, s, tzinfo=UTC)


def test_work_across_local_midnight_counts_on_both_days():
    # Berlin is UTC+1 on 10 March: 22:50–23:20 UTC is 23:50–00:20 local, 10 minutes then 20.
    assert split_by_day(at(22, 50), at(23, 20), "Europe/Berlin") == [(date(2026, 3, 10), 600_000),
                                                                      (date(2026, 3, 11), 1_200_000)]
    # In UTC the same span is one day; at +05:30 it is 04:20–04:50 on the 11th.
    assert split_by_day(at(22, 50), at(23, 20), "UTC") == [(date(2026, 3, 10), 1_800_000)]
    assert split_by_day(at(22, 50), at(23, 20), "+05:30") == [(date(2026, 3, 11), 1_800_000)]
    # A span longer than a day covers three local days.
    parts = split_by_day(at(12), at(12, d=12), "UTC")
    assert parts == [(date(2026, 3, 10), 12 * 3_600_000), (date(2026, 3, 11), 24 * 3_600_000),
                     (date(2026, 3, 12), 12 * 3_600_000)]
    # The night Berlin moves to summer time (29 March): 22:30–02:30 UTC is 23:30 CET to 04:30 CEST, real minutes.
    assert split_by_day(at(22, 30, d=28), at(2, 30, d=29), "Europe/Berlin") == [
        (date(2026, 3, 28), 1_800_000), (date(2026, 3, 29), 12_600_000)]
    assert zone_info("Not/AZone") == UTC and zone_info("+99:00") == UTC


def test_daily_minutes_by_activity_and_longest_run():
    spans = [
        Span(P, Activity.WRITING, at(9), at(9, 20), "UTC"),  # 20 min
        Span(P, Activity.VALIDATING, at(9, 23), at(9, 30), "UTC"),  # 7 min, 3 min pause: the run goes on
        Span(P, Activity.WRITING, at(9, 40), at(9, 52), "UTC"),  # 10 min pause: a new run of 12
        Span(P, Activity.REVIEWING, at(23, 50), at(23, 59, 30), "UTC"),  # 9.5 min
        Span(Q, Activity.WRITING, at(10), at(10, 45), "UTC"),
    ]
    days = daily_exposure(spans)
    mine = days[(P, date(2026, 3, 10))]
    assert mine.ms == {Activity.WRITING: 32 * 60_000, Activity.VALIDATING: 7 * 60_000,
                       Activity.REVIEWING: 570_000}
    assert mine.minutes() == pytest.approx(48.5)
    assert mine.longest_run_ms == 30 * 60_000  # 9:00–9:30
    assert days[(Q, date(2026, 3, 10))].minutes(Activity.WRITING) == 45
    # A break taken between two close spans splits the run.
    days = daily_exposure(spans[:2], [(P, at(9, 21))])
    assert days[(P, date(2026, 3, 10))].longest_run_ms == 20 * 60_000


def test_recorded_spans_come_from_recorded_times(desk, people, submit):
    hateful, mild = submit("hateful words", "hate"), submit("kind words", "not hate")
    end = at(12)
    span = desk.exposure.record(people.author.id, Activity.WRITING, hateful.id, 90_000, ended_at=end)
    assert (span.started_at, span.ended_at, span.ms) == (at(11, 58, 30), end, 90_000)
    assert desk.exposure.record(people.author.id, Activity.WRITING, mild.id, 90_000, ended_at=end) is None
    # Reading counts at most ten minutes: a verdict left open over lunch is not an hour of reading.
    span = desk.exposure.record(people.val1.id, Activity.VALIDATING, hateful.id, 3_600_000, ended_at=end)
    assert span.ms == 600_000
    desk.exposure.record(people.lead.id, Activity.REVIEWING, hateful.id, 45_000, ended_at=at(12, 5))
    rows = {(d.name, d.day): d for d in desk.exposure.person_days(date(2026, 3, 10), date(2026, 3, 10))}
    assert rows[("Ana Author", date(2026, 3, 10))].writing_min == 1.5
    assert rows[("Vic Validator", date(2026, 3, 10))].validating_min == 10
    assert rows[("Lee Lead", date(2026, 3, 10))].reviewing_min == 0.75
    with pytest.raises(DynadeskError, match="negative"):
        desk.exposure.record(people.author.id, Activity.WRITING, hateful.id, -1)
    with pytest.raises(DynadeskError, match="no example"):
        desk.exposure.record(people.author.id, Activity.WRITING, uuid.uuid4(), 1000)


def test_which_labels_are_hateful_is_explicit_and_a_desk_extends_it(tmp_path):
    bundled = HarmfulLabels.load()
    assert bundled.is_harmful("hate_speech", "hate") and not bundled.is_harmful("hate_speech", "not hate")
    assert not bundled.is_harmful("sentiment", "negative")
    extra = tmp_path / "harmful_labels.yaml"
    extra.write_text("sentiment: [negative]\n")
    assert HarmfulLabels.load(extra).is_harmful("sentiment", "negative")
    extra.write_text("sentiment: negative\n")
    with pytest.raises(DynadeskError, match="must map task codes to lists"):
        HarmfulLabels.load(extra)


def profile(**kw) -> WellbeingProfile:
    return WellbeingProfile(**{"break_after_min": 50, "daily_break_after_min": 240, "short_break_min": 5,
                               "long_break_min": 15, **kw})


def work(clock: BreakClock, start: datetime, minutes: float) -> datetime:
    end = start + timedelta(minutes=minutes)
    clock.worked(start, end)
    return end


def test_the_clock_prompts_only_at_a_pause_after_the_threshold():
    clock = BreakClock(profile(), "UTC")
    end = work(clock, at(9), 30)
    assert clock.prompt(end) is None and clock.state is ClockState.WORKING
    end = work(clock, end + timedelta(minutes=4), 25)  # a 4-minute pause keeps the run: 59 min
    assert clock.state is ClockState.DUE
    prompt = clock.prompt(end)
    assert (prompt.kind, prompt.continuous_min, prompt.daily_min, prompt.break_min) == (BreakKind.SHORT, 59, 55, 5)
    assert clock.state is ClockState.PROMPTED and clock.prompt(end) is None  # shown once
    until = clock.snooze(end)
    assert until == end + timedelta(minutes=10) and clock.state is ClockState.SNOOZED
    end = work(clock, end, 5)
    assert clock.prompt(end) is None  # still snoozed
    end = work(clock, end, 6)
    assert clock.state is ClockState.DUE and clock.prompt(end).kind is BreakKind.SHORT
    clock.take_break(end, BreakKind.SHORT)
    assert clock.state is ClockState.ON_BREAK and clock.continuous(end) == timedelta(0)
    end = work(clock, end + timedelta(minutes=5), 10)
    assert clock.state is ClockState.WORKING and clock.prompt(end) is None


def test_a_long_pause_resets_continuity_and_the_daily_total_asks_for_a_long_break():
    clock = BreakClock(profile(), "UTC")
    end = work(clock, at(9), 49)
    end = work(clock, end + timedelta(minutes=6), 10)  # a pause longer than the short break: a new run
    assert clock.continuous(end) == timedelta(minutes=10) and clock.prompt(end) is None
    end = work(clock, end, 45)  # a run of 55
    assert clock.state is ClockState.DUE
    assert clock.prompt(end + timedelta(minutes=6)) is None  # the pause before the next submit was the break
    assert clock.state is ClockState.WORKING
    clock = BreakClock(profile(break_after_min=480, daily_break_after_min=60), "UTC")
    end = work(clock, at(8), 40)
    end = work(clock, end + timedelta(minutes=30), 21)
    prompt = clock.prompt(end)
    assert (prompt.kind, prompt.daily_min, prompt.break_min) == (BreakKind.LONG, 61, 15)
    clock.take_break(end, BreakKind.LONG)
    end = work(clock, end + timedelta(minutes=20), 30)
    assert clock.prompt(end) is None  # once a day
    end = work(clock, at(8, d=11), 61)
    assert clock.prompt(end).kind is BreakKind.LONG  # a new local day


def test_the_clock_is_restored_from_what_was_recorded(desk, people, submit):
    hateful = submit("hateful words", "hate")
    now = datetime.now(UTC)
    desk.exposure.record(people.author.id, Activity.WRITING, hateful.id, 55 * 60_000, ended_at=now)
    clock = desk.exposure.restore_clock(people.author.id, profile(), now)
    prompt = clock.prompt(now)
    assert prompt is not None and prompt.kind is BreakKind.SHORT
    desk.exposure.record_break(people.author.id, prompt, BreakAction.TAKEN, at=now)
    clock = desk.exposure.restore_clock(people.author.id, profile(), now)
    assert clock.state is ClockState.ON_BREAK and clock.prompt(now) is None
    assert [(b.kind, b.action, b.continuous_min) for b in desk.exposure.breaks([people.author.id])] == [
        ("short", "taken", 55)]
