"""The lead's exposure view in the Dashboard, driven as a lead uses it: minutes per person per
day, breaks, alerts above the limits the lead sets (and saves), a care note; never in the per-annotator
table. An annotator sees only their own time and cannot set limits."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from PySide6.QtCore import Qt

from app.core.domain import utcnow
from app.core.wellbeing.breaks import BreakAction, BreakKind, BreakPrompt
from app.core.wellbeing.exposure import Activity, local_day, zone_info
from app.views.exposure import COLUMNS
from widgets.exposure_view import ALERT_BACKGROUND


def yesterday_at(desk, hour: int, minute: int = 0) -> datetime:
    zone = desk.exposure.zone
    day = local_day(utcnow(), zone) - timedelta(days=1)
    return datetime.combine(day, time(hour, minute), tzinfo=zone_info(zone))


def fill(desk, people, submit):
    hateful = submit("they are vermin", "hate")
    # Ana wrote for 4 h 20 in one run (08:00–12:20, her own time) and took one break; Vic validated 30 min.
    desk.exposure.record(people.author.id, Activity.WRITING, hateful.id, 260 * 60_000,
                         ended_at=yesterday_at(desk, 12, 20))
    desk.exposure.record_break(people.author.id, BreakPrompt(BreakKind.LONG, 260, 260, 15), BreakAction.TAKEN,
                               at=yesterday_at(desk, 12, 21))
    desk.exposure.record(people.val1.id, Activity.VALIDATING, hateful.id, 6 * 60_000,
                         ended_at=yesterday_at(desk, 10, 6))
    for start in (10, 20, 30, 40):  # four more verdicts, each after a four-minute pause (shorter than the 5-minute reset): a 46-minute run
        desk.exposure.record(people.val1.id, Activity.VALIDATING, hateful.id, 6 * 60_000,
                             ended_at=yesterday_at(desk, 10, start + 6))


def open_exposure(qtbot, window):
    qtbot.keyClick(window, Qt.Key.Key_5, Qt.KeyboardModifier.ControlModifier)
    view = window.dashboard_view
    with qtbot.waitSignal(window.dashboard.exposure.updated, timeout=10_000) as shown:
        view.sections.setCurrentWidget(view.exposure)
    return view.exposure, shown.args[0]


def table(view) -> dict[str, list[str]]:
    t = view.table
    return {t.item(r, 0).text(): [t.item(r, c).text() for c in range(t.columnCount())] for r in range(t.rowCount())}


def test_a_lead_sees_the_teams_exposure_sets_limits_and_it_stays_out_of_the_productivity_table(
        qtbot, window, desk, people, submit):
    fill(desk, people, submit)
    window.desk.switch_person(people.lead.id)
    view, screen = open_exposure(qtbot, window)
    assert view.care.isVisible() and "care, not performance" in view.care.text()
    rows = table(view)
    assert set(rows) == {"Ana Author", "Vic Validator"}
    ana, vic = rows["Ana Author"], rows["Vic Validator"]
    assert ana[2:8] == ["4 h 20", "0", "0", "4 h 20", "4 h 20", "1 taken"]
    assert vic[2:8] == ["0", "30 min", "0", "30 min", "46 min", "—"]
    # default limits (240 min a day, 60 without a break): Ana is over both, Vic under both
    assert "over the daily 4 h 00" in ana[8] and "4 h 20 without a break" in ana[8] and vic[8] == "—"
    tinted = {view.table.item(r, 0).text() for r in range(view.table.rowCount())
              if view.table.item(r, 0).background().color() == ALERT_BACKGROUND}
    assert tinted == {"Ana Author"}
    assert "2 people" in view.headline.text() and "1 day above" in view.headline.text()

    # the lead lowers the continuous limit to 30 minutes: Vic's 46-minute run now alerts
    assert view.save.isEnabled()
    view.continuous.setFocus()
    view.continuous.selectAll()
    qtbot.keyClicks(view.continuous, "30")
    with qtbot.waitSignal(window.dashboard.exposure.updated, timeout=10_000):
        qtbot.mouseClick(view.save, Qt.MouseButton.LeftButton)
    limits = desk.exposure.limits()
    assert (limits.daily_min, limits.continuous_min, limits.set_by, limits.sync_state) == (
        240, 30, people.lead.id, "pending")
    assert table(view)["Vic Validator"][8] == "46 min without a break"
    assert "next sync" in view.limits_note.text()

    # figures for care: not a column (nor a row field) of the per-annotator productivity table
    model = window.dashboard_view.annotator_model
    headers = [model.headerData(c, Qt.Orientation.Horizontal, Qt.ItemDataRole.DisplayRole)
               for c in range(model.columnCount())]
    assert headers and not set(headers) & set(COLUMNS[2:])
    assert not any(word in " ".join(map(str, headers)).lower() for word in ("exposure", "break", "hateful"))
    from app.core.services.dashboard_tables import ANNOTATOR_COLUMNS, EXPORT_EXTRA_COLUMNS
    assert not {name for name, *_ in ANNOTATOR_COLUMNS + EXPORT_EXTRA_COLUMNS} & {
        "writing_min", "validating_min", "reviewing_min", "total_min", "longest_run_min", "breaks_taken", "snoozes"}


def test_an_annotator_sees_only_their_own_time_and_cannot_set_limits(qtbot, window, desk, people, submit):
    fill(desk, people, submit)
    window.desk.switch_person(people.val1.id)
    view, screen = open_exposure(qtbot, window)
    assert set(table(view)) == {"Vic Validator"}
    assert not view.save.isEnabled() and not view.daily.isEnabled()
    assert "lead sets" in view.limits_note.text() and "only you and your team's leads" in view.headline.text()
