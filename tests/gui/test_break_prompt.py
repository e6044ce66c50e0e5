"""The break prompt, driven as analysts meet it: typing across the threshold shows nothing,
the submit or verdict that follows shows the prompt (a bar, never a dialog, the keyboard stays where it
was), and snoozing or taking the break is recorded. Time is injected: the controller's clock is the
test's, moved on while the person types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication
from sqlalchemy import select

from app.core.storage.models import ExposureSpan, WellbeingBreak
from app.core.wellbeing.exposure import Activity
from tests.conftest import hate_content, hate_output
from tests.gui.test_validate import open_validate, wait_for_example
from tests.gui.test_workspace import WAIT, submit, text_box
from tests.gui.test_workspace import window as create_window  # noqa: F401  (the Create page with a target model)


class FakeNow:
    def __init__(self):
        self.value = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.value

    def advance(self, minutes: float) -> None:
        self.value += timedelta(minutes=minutes)


def rows(desk, model):
    with desk.db.read() as session:
        return list(session.scalars(select(model).order_by(model.created_at)))


def type_slowly(qtbot, widget, text: str, now: FakeNow, minutes: float, bar) -> None:
    """Type ``text`` while ``minutes`` pass on the controller's clock; the prompt never shows meanwhile."""
    step = minutes / len(text)
    for char in text:
        qtbot.keyClicks(widget, char)
        now.advance(step)
        QApplication.processEvents()
        assert not bar.isVisible()
        assert QApplication.focusWidget() is widget


def test_a_verdict_after_the_threshold_prompts_and_a_snooze_is_recorded(qtbot, window, people, target_model):
    desk = window.desk
    first = desk.examples.create(people.author.id, "hate_speech", hate_content("they are all vermin", "hate"),
                                 [hate_output(target_model, "not hate")])
    now = FakeNow()
    controller, bar = window.breaks, window.breaks.bar
    controller.now = now
    # 48 minutes of validating hateful content already today, ending a moment ago
    earlier = desk.examples.create(people.val2.id, "hate_speech", hate_content("an earlier one", "hate"),
                                   [hate_output(target_model, "not hate")])
    desk.exposure.record(people.val1.id, Activity.VALIDATING, earlier.id, 10 * 60_000, ended_at=now())
    for gap in range(1, 5):  # four more reading spans of ten minutes, each after a short pause: one run
        desk.exposure.record(people.val1.id, Activity.VALIDATING, earlier.id, 9 * 60_000,
                             ended_at=now() - timedelta(minutes=10 * gap))
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view, form = window.validate_view, window.validate_view.form
    wait_for_example(qtbot, view, first.id)

    qtbot.keyClick(view, Qt.Key.Key_3)  # flag: a reason is typed, across the 50-minute line
    type_slowly(qtbot, form.reason, "Names a group as vermin", now, 3, bar)
    with qtbot.waitSignal(controller.prompted, timeout=5000) as shown:
        qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    prompt = shown.args[0]
    assert prompt.kind == "short" and prompt.continuous_min >= 50
    assert bar.isVisible() and "short break" in bar.title.text() and "without a pause" in bar.text.text()
    assert not any(w.isModal() for w in QApplication.topLevelWidgets() if w.isVisible())
    spans = rows(desk, ExposureSpan)
    assert [(s.activity, s.example_id) for s in spans if s.example_id == first.id] == [("validating", first.id)]

    with qtbot.waitSignal(controller.answered, timeout=5000):  # by keyboard: the Profile menu's entry
        window.named_actions["break-snooze"].trigger()
    assert not bar.isVisible()
    window.named_actions["break-take"].trigger()  # nothing is suggested now: nothing is recorded
    assert "No break is suggested" in window.statusBar().currentMessage()
    (snoozed,) = rows(desk, WellbeingBreak)
    assert (snoozed.person_id, snoozed.kind, snoozed.action, snoozed.break_min) == (people.val1.id, "short",
                                                                                   "snoozed", 5)


def test_typing_across_the_threshold_shows_nothing_until_submit_and_a_break_taken_is_recorded(
        qtbot, create_window):  # noqa: F811
    window = create_window
    desk, now = window.desk, FakeNow()
    controller, bar = window.breaks, window.breaks.bar
    controller.now = now
    me = desk.current_person_id
    with desk.db.write() as session:  # 49 minutes of writing hateful content, ending now
        from app.core.domain import SyncState
        session.add(ExposureSpan(person_id=me, activity="writing", task_code="hate_speech", example_id=None,
                                 started_at=now() - timedelta(minutes=49), ended_at=now(), zone="UTC",
                                 sync_state=SyncState.PENDING.value))
    box = text_box(window)
    box.setFocus()
    type_slowly(qtbot, box, "those people ruin everything", now, 2, bar)
    qtbot.keyClick(box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate
    view = window.workspace.view
    qtbot.waitUntil(lambda: window.workspace.last_prediction is not None, timeout=WAIT)
    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    assert not bar.isVisible()  # the metadata form is still part of writing
    form = view.form
    form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("derogation"))
    qtbot.mouseClick(form.editors["target_groups"][0][0], Qt.MouseButton.LeftButton)
    qtbot.keyClicks(form.editors["label_explanation"], "It blames a group")
    with qtbot.waitSignal(controller.prompted, timeout=10_000):
        qtbot.keyClick(form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    assert bar.isVisible() and "Take a 5-minute break" == bar.take.text()
    assert QApplication.focusWidget() not in (bar.take, bar.snooze)
    with qtbot.waitSignal(controller.answered, timeout=5000):
        qtbot.mouseClick(bar.take, Qt.MouseButton.LeftButton)
    assert "see you in 5 minutes" in bar.text.text() and not bar.take.isVisible()
    (taken,) = rows(desk, WellbeingBreak)
    assert (taken.person_id, taken.kind, taken.action) == (me, "short", "taken")
    written = [s for s in rows(desk, ExposureSpan) if s.example_id is not None]
    assert [(s.activity, s.person_id) for s in written] == [("writing", me)]


def test_a_leads_review_time_is_recorded_at_the_return(qtbot, window, people, target_model):
    from tests.gui.test_review import lead_reviews_three, shown_ids

    desk = window.desk
    view, split, agreed, flagged = lead_reviews_three(qtbot, window, people, target_model)
    view.table.selectRow(shown_ids(view).index(split.id))
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == split.id,
                    timeout=5000)
    qtbot.keyClicks(view.actions_panel.comment, "Say which group is attacked")
    assert rows(desk, ExposureSpan) == []  # nothing while the lead reads and types
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        qtbot.keyClick(view.actions_panel.comment, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: len(rows(desk, ExposureSpan)) == 1, timeout=5000)
    (span,) = rows(desk, ExposureSpan)
    assert (span.person_id, span.activity, span.example_id) == (people.lead.id, "reviewing", split.id)
    assert 0 < (span.ended_at - span.started_at).total_seconds() <= 600
