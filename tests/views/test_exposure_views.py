"""The exposure view-model: minutes as people read them, alerts above the team's limits, and who sees what."""

import uuid
from datetime import date

from app.core.wellbeing.breaks import BreakKind, BreakPrompt
from app.core.wellbeing.figures import PersonDay, TeamLimits
from app.views.breaks import break_prompt_view, break_taken_text
from app.views.exposure import CARE_NOTE, alerts_for, exposure_screen, minutes

TODAY = date(2026, 3, 10)


def day(name, d, writing=0.0, validating=0.0, reviewing=0.0, run=0.0, taken=0, snoozed=0):
    return PersonDay(uuid.uuid5(uuid.NAMESPACE_DNS, name), name, d, writing, validating, reviewing, run, taken, snoozed)


def test_minutes_read_as_minutes_and_hours():
    assert [minutes(x) for x in (0, 0.2, 1, 59.4, 60, 125)] == ["0", "<1 min", "1 min", "59 min", "1 h 00", "2 h 05"]


def test_alerts_above_the_limits_and_the_lead_screen():
    limits = TeamLimits(daily_min=120, continuous_min=45)
    long_day = day("Ana", TODAY, writing=100, validating=30, run=50, taken=1, snoozed=2)
    assert alerts_for(long_day, limits) == ("over the daily 2 h 00", "50 min without a break")
    assert alerts_for(day("Bo", TODAY, writing=120, run=45), limits) == ()  # at the line is not above it
    screen = exposure_screen([day("Bo", date(2026, 3, 9), writing=10, run=10), long_day], limits, lead=True,
                             today=TODAY, period_days=7)
    assert [r.cells[:2] for r in screen.rows] == [("Ana", "Today"), ("Bo", "2026-03-09")]  # newest first
    assert screen.rows[0].cells[5:8] == ("2 h 10", "50 min", "1 taken, 2 snoozed") and screen.rows[0].alerting
    assert "2 people" in screen.headline and "1 day above" in screen.headline and screen.can_set_limits
    mine = exposure_screen([], limits, lead=False, today=TODAY, period_days=1)
    assert not mine.can_set_limits and "You have no time" in mine.empty_text and "today" in mine.empty_text


def test_the_prompt_says_why_and_what_to_do():
    short = break_prompt_view(BreakPrompt(BreakKind.SHORT, 52, 130, 5), 10)
    assert short.title == "Time for a short break" and "52 min without a pause" in short.text
    assert (short.take_label, short.snooze_label) == ("Take a 5-minute break", "Remind me in 10 min")
    long = break_prompt_view(BreakPrompt(BreakKind.LONG, 20, 245, 15), 10)
    assert "4 h 05 min with hateful content today" in long.text and long.take_label == "Take a 15-minute break"


def test_one_minute_is_singular_and_more_are_plural():
    one = BreakPrompt(BreakKind.SHORT, 52, 130, 1)
    assert break_prompt_view(one, 10).text.endswith("Step away for 1 minute.")
    assert break_taken_text(one) == "Break started: see you in 1 minute. Your work is saved."
    assert "see you in 5 minutes." in break_taken_text(BreakPrompt(BreakKind.SHORT, 52, 130, 5))


def test_the_care_note_is_true_of_the_lead_screen_it_sits_on():
    """A lead's screen shows a row per person: the note must not say figures leave the desk only as team
    totals; it says who sees a person's rows, and that only the export is team totals."""
    limits = TeamLimits(daily_min=120, continuous_min=45)
    screen = exposure_screen([day("Ana", TODAY, writing=10), day("Bo", TODAY, writing=5)], limits, lead=True,
                             today=TODAY, period_days=1)
    assert len({r.cells[0] for r in screen.rows}) == 2  # per person, as it should be for a lead
    assert "only as team totals" not in CARE_NOTE
    assert "reach only them and their team's leads" in CARE_NOTE and "holds team totals only" in CARE_NOTE
