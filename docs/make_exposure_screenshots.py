"""Screenshots of the break prompt and the lead's exposure view, taken offscreen from the real
application at 1366×768.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_exposure_screenshots.py

A scratch data folder with the project's DynaHate-layout fixture, a team of five whose time with hateful
content over the last week is recorded as their desks would record it (spans ending at submits and
verdicts), and a validator 52 minutes into a run who gives one more verdict.
"""

import random
import tempfile
from datetime import datetime, time, timedelta

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from screenshot_kit import OUT, ROOT, application, lead_desk, show_window, wait, wait_until


def record_week(desk, people, example_id) -> None:
    """Plausible days: runs of 6-minute pieces of work, short pauses, one long day and one long run."""
    from app.core.domain import utcnow
    from app.core.wellbeing.breaks import BreakAction, BreakKind, BreakPrompt
    from app.core.wellbeing.exposure import Activity, local_day, zone_info

    rng = random.Random(22)
    zone = desk.exposure.zone
    today = local_day(utcnow(), zone)
    activities = [Activity.WRITING, Activity.VALIDATING, Activity.VALIDATING, Activity.REVIEWING]
    for back in range(1, 7):
        day = today - timedelta(days=back)
        for n, person in enumerate(people):
            if rng.random() < 0.25:
                continue
            at = datetime.combine(day, time(9 + n % 2), tzinfo=zone_info(zone))
            pieces = rng.randint(12, 28) + (18 if (back, n) == (2, 1) else 0)
            for piece in range(pieces):
                spent = rng.randint(3, 8)
                activity = Activity.REVIEWING if person.role == "lead" else rng.choice(activities[:3])
                at += timedelta(minutes=spent)
                desk.exposure.record(person.id, activity, example_id, spent * 60_000, ended_at=at)
                pause = 15 if piece % 7 == 6 and (back, n) != (3, 2) else rng.randint(1, 4)
                if pause == 15:
                    desk.exposure.record_break(person.id, BreakPrompt(BreakKind.SHORT, 50, 0, 5), BreakAction.TAKEN,
                                               at=at)
                at += timedelta(minutes=pause)


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from sqlalchemy import select

    from app.core.domain import utcnow
    from app.core.io.importers import import_file
    from app.core.storage.models import Example
    from app.core.wellbeing.exposure import Activity

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        with desk.db.read() as session:
            hateful = session.scalar(select(Example.id).where(Example.true_label == "hate").limit(1))
        names = ["Noor Haddad", "Tomás Ortega", "Mei Lin", "Kwame Mensah"]
        team = [desk.people.create(name, "annotator") for name in names]
        lead = desk.current_person()
        record_week(desk, [*team, lead], hateful)
        noor = team[0]
        now = utcnow()
        for k in range(8):  # 52 minutes of validating today, in eight verdicts of 6.5 minutes
            desk.exposure.record(noor.id, Activity.VALIDATING, hateful, 390_000,
                                 ended_at=now - timedelta(seconds=390 * (7 - k)))
        desk.exposure.set_limits(lead.id, daily_min=180, continuous_min=60)

        desk.switch_person(noor.id)
        window = show_window(desk, 1366, 768)
        window.tabs.setCurrentWidget(window.validate_view)
        view = window.validate_view
        wait_until(lambda: view.example_id is not None)
        wait(800)
        QTest.keyClick(view, Qt.Key.Key_1)  # correct
        QTest.keyClick(view, Qt.Key.Key_Return)
        wait_until(lambda: window.breaks.bar.isVisible())
        wait(400)
        window.grab().save(str(OUT / "break_prompt.png"))

        window._profile_chosen(str(lead.id))  # as the Profile dialog does
        wait_until(lambda: "Ada Lovelace" in window.person_label.text())
        window.tabs.setCurrentWidget(window.dashboard_view)
        wait(1500)
        window.dashboard_view.sections.setCurrentWidget(window.dashboard_view.exposure)
        wait_until(lambda: window.dashboard_view.exposure.table.rowCount() > 0)
        wait(600)
        window.grab().save(str(OUT / "exposure_view.png"))
        window.close()
        desk.close()


if __name__ == "__main__":
    main()
