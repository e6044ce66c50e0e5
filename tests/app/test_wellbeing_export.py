"""Exposure leaves a desk only in aggregate: `dynadesk exposure export` writes one row per
team and day, never a row per person, and withholds a team-day of fewer than --min-group people."""

import csv
from datetime import UTC, date, datetime, timedelta

from app.core.domain import SyncState
from app.core.storage.models import ExposureSpan, WellbeingBreak
from tests.app.test_bad_files import run_cli

DAY = date(2026, 3, 10)


def span(person, team, activity, start_h, minutes):
    start = datetime(2026, 3, 10, start_h, tzinfo=UTC)
    return ExposureSpan(person_id=person.id, activity=activity, task_code="hate_speech", started_at=start,
                        ended_at=start + timedelta(minutes=minutes), zone="UTC", team=team,
                        sync_state=SyncState.SYNCED.value)


def test_the_export_is_team_days_and_small_groups_are_withheld(desk, people, tmp_path, capsys):
    a_team = [people.author, people.val1, people.val2, people.val3]
    with desk.db.write() as session:
        for n, person in enumerate(a_team):  # 10, 20, 30, 40 minutes of writing; one 15-minute review
            session.add(span(person, "A", "writing", 9, 10 * (n + 1)))
        session.add(span(people.val1, "A", "reviewing", 14, 15))
        session.add(span(people.lead, "B", "validating", 9, 300))  # team B: one person that day
        session.add(WellbeingBreak(person_id=people.val2.id, kind="short", action="taken", break_min=5,
                                   continuous_min=50, daily_min=50, zone="UTC", team="A",
                                   at=datetime(2026, 3, 10, 10, tzinfo=UTC),
                                   sync_state=SyncState.SYNCED.value))
    desk.close()
    out = tmp_path / "exposure.csv"
    code, printed, err = run_cli(capsys, "exposure", "export", out, "--until", "2026-03-10", "--days", "1")
    assert code == 0, err
    assert "2 team-day(s)" in printed and "1 withheld (fewer than 3 people)" in printed
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert rows == [
        {"team": "A", "day": "2026-03-10", "people": "4", "writing_min": "100.0", "validating_min": "0.0",
         "reviewing_min": "15.0", "total_min": "115.0", "mean_min_per_person": "28.8",
         "people_over_daily_limit": "0", "breaks_taken": "1", "snoozes": "0", "withheld": "no"},
        {"team": "B", "day": "2026-03-10", "people": "<3", "writing_min": "", "validating_min": "", "reviewing_min": "",
         "total_min": "", "mean_min_per_person": "", "people_over_daily_limit": "", "breaks_taken": "", "snoozes": "",
         "withheld": "yes"}]
    text = out.read_text(encoding="utf-8")
    assert not any(p.display_name in text or str(p.id) in text for p in [*a_team, people.lead])  # nobody by name

    code, printed, err = run_cli(capsys, "exposure", "export", out, "--until", "2026-03-10", "--min-group", "1")
    assert code != 0 and "min-group" in err
