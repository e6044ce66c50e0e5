"""The lead's exposure view: minutes per person per day with hateful content, breaks, and
alerts above the team's limits. Figures for care, not performance: kept apart from the per-annotator
table and its exports, and the view says so."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

from app.core.wellbeing.figures import PersonDay, TeamLimits

CARE_NOTE = ("Figures for care, not performance. They show where someone may need a break or a lighter day, "
             "and are never part of the per-annotator table or its exports. A person's own rows reach only them "
             "and their team's leads (through the team server); an export (dynadesk exposure export) holds team "
             "totals only.")
COLUMNS = ("Person", "Day", "Writing", "Validating", "Reviewing", "Total", "Longest run", "Breaks", "Alerts")
PERIODS = ((1, "Today"), (7, "Last 7 days"), (30, "Last 30 days"))
PHRASES = {1: "today", 7: "in the last 7 days", 30: "in the last 30 days"}


@dataclass(frozen=True)
class ExposureRowView:
    cells: tuple[str, ...]  # in COLUMNS order
    alerts: tuple[str, ...]

    @property
    def alerting(self) -> bool:
        return bool(self.alerts)


@dataclass(frozen=True)
class ExposureScreen:
    rows: tuple[ExposureRowView, ...]
    headline: str
    limits_text: str
    daily_min: int
    continuous_min: int
    can_set_limits: bool
    limits_note: str  # why the limits cannot be set here, or where they come from
    empty_text: str


def minutes(value: float) -> str:
    whole = int(round(value))
    if whole < 60:
        return "0" if value == 0 else f"{whole} min" if whole else "<1 min"
    hours, rest = divmod(whole, 60)
    return f"{hours} h {rest:02d}"


def _breaks(day: PersonDay) -> str:
    if not day.breaks_taken and not day.snoozes:
        return "—"
    parts = [f"{day.breaks_taken} taken"] if day.breaks_taken else []
    if day.snoozes:
        parts.append(f"{day.snoozes} snoozed")
    return ", ".join(parts)


def alerts_for(day: PersonDay, limits: TeamLimits) -> tuple[str, ...]:
    out = []
    if day.total_min > limits.daily_min:
        out.append(f"over the daily {minutes(limits.daily_min)}")
    if day.longest_run_min > limits.continuous_min:
        out.append(f"{minutes(day.longest_run_min)} without a break")
    return tuple(out)


def exposure_screen(days: list[PersonDay], limits: TeamLimits, *, lead: bool, today: date,
                    period_days: int) -> ExposureScreen:
    """``days`` are the rows this person may see: a lead's team's (what the server let this desk pull),
    anyone else's own only."""
    rows = []
    for day in sorted(days, key=lambda d: (-d.day.toordinal(), d.name)):  # newest day first
        alerts = alerts_for(day, limits)
        label = "Today" if day.day == today else day.day.isoformat()
        rows.append(ExposureRowView((day.name, label, minutes(day.writing_min), minutes(day.validating_min),
                                     minutes(day.reviewing_min), minutes(day.total_min),
                                     minutes(day.longest_run_min), _breaks(day), "; ".join(alerts) or "—"), alerts))
    alerting = sum(r.alerting for r in rows)
    people = len({d.person_id for d in days})
    period = PHRASES.get(period_days, f"in the last {period_days} days")
    if lead:
        headline = (f"{people} {'person' if people == 1 else 'people'} worked with hateful content {period}; "
                    f"{alerting} day{'s' if alerting != 1 else ''} above the team's limits.")
    else:
        headline = f"Your time with hateful content {period}: only you and your team's leads see it."
    limits_text = (f"Alert above {minutes(limits.daily_min)} a day or {minutes(limits.continuous_min)} "
                   "without a break")
    if lead:
        note = "Saved for your team; it reaches their desks at the next sync." if limits.set_at is None or \
            limits.sync_state == "pending" else "Your team's limits, as set on the server."
    else:
        note = "Your team's lead sets these limits."
    empty = (f"No time with hateful content recorded {period}." if lead else
             f"You have no time with hateful content recorded {period}.")
    return ExposureScreen(tuple(rows), headline, limits_text, limits.daily_min, limits.continuous_min, lead, note,
                          empty)
