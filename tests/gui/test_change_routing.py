"""A store re-reads only the views whose data it touched: the main window routes each change.

The queries behind each view are counted: the Data tab's count, the returned-work count, the
Validate queue, the dashboard's figures, the task's rounds and the sync status.
"""

from __future__ import annotations

from collections import Counter

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QPushButton

from app.core.services.review import ExampleFilter
from sync.local import set_meta
from tests.conftest import hate_content, hate_output
from tests.gui.conftest import click_shown, close_window, open_window
from tests.gui.test_validate import open_validate, wait_for_example
from tests.gui.test_workspace import WAIT, submit, text_box, type_text, wait_for_prediction
from widgets.profile_dialog import ProfileDialog

VIEWS = ("data", "returned", "validate", "dashboard", "rounds", "sync")


@pytest.fixture
def window(qtbot, data_dir, hate_model):
    win = open_window(qtbot, data_dir)
    ws = win.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
    click_shown(qtbot, ws.view.warning.primary)  # the content warning is read
    yield win
    close_window(win)


@pytest.fixture
def fetches(window, monkeypatch) -> Counter:
    """How often each view's query ran (on whichever worker it runs)."""
    counted: Counter = Counter()
    desk = window.desk

    def counting(owner, name: str, view: str) -> None:
        real = getattr(owner, name)

        def wrapper(*args, **kwargs):
            counted[view] += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(owner, name, wrapper)

    counting(desk.review, "count", "data")  # the Data tab's count (Review's, when Review is in view)
    counting(desk.lead, "returned_count", "returned")
    counting(desk.validation, "next_for", "validate")
    counting(desk.dashboard, "view", "dashboard")
    counting(window, "_task_chosen", "rounds")
    counting(window.sync, "refresh", "sync")
    return counted


def settle(qtbot, window) -> None:
    """Until every change and the reads it started are done: the relay hands over within a turn of the
    event loop, and the database and dashboard workers answer in order."""
    done: list = []
    for rounds in range(1, 4):
        window.db.submit(lambda: None, on_done=done.append)
        window.dashboard.worker.submit(lambda: None, on_done=done.append)
        qtbot.waitUntil(lambda expected=2 * rounds: len(done) == expected, timeout=10_000)


def fetched(counted: Counter) -> dict[str, int]:
    return {view: counted[view] for view in VIEWS}


def test_submitting_an_example_rereads_the_data_tab_and_returned_work_and_nothing_else(qtbot, window, fetches):
    ws, view = window.workspace, window.workspace.view
    type_text(qtbot, window, "my neighbour smiled at the doctor today")
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)  # not hate, as the model says
    wait_for_prediction(qtbot, window)
    ws.save_draft()  # a draft saved as the writer types is nobody else's data
    settle(qtbot, window)
    assert fetched(fetches) == dict.fromkeys(VIEWS, 0)

    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    qtbot.keyClicks(view.form.editors["label_explanation"], "A kind remark")
    qtbot.keyClick(view.form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=10_000)
    settle(qtbot, window)
    # the Data tab shows the new row; the author's returned count and the sync's waiting count are read
    # again; the Validate queue and the dashboard are out of view, and the rounds did not change
    assert fetched(fetches) == {"data": 1, "returned": 1, "validate": 0, "dashboard": 0, "rounds": 0, "sync": 1}
    assert window.table_model.row_data(0).text == "my neighbour smiled at the doctor today"

    window.tabs.setCurrentWidget(window.dashboard_view)  # the figures owed are read once, when looked at
    qtbot.waitUntil(lambda: fetches["dashboard"] == 1 and window.dashboard.figures is not None, timeout=WAIT)
    assert window.dashboard.figures.matching == 1


def test_a_verdict_rereads_the_rows_it_changed_but_not_the_returned_work_nor_the_queue_on_screen(
        qtbot, window, people, target_model, fetches):
    desk = window.desk
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("they are all the same", "hate"),
                                   [hate_output(target_model, "not hate")])
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    wait_for_example(qtbot, window.validate_view, example.id)
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=10_000)
    settle(qtbot, window)
    fetches.clear()

    qtbot.keyClick(window.validate_view, Qt.Key.Key_1)
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(window.validate_view, Qt.Key.Key_Return)
    settle(qtbot, window)
    # the Data tab's rows carry the verdict count; nobody's returned work changed; the stored verdict
    # stays on screen (no next example fetched behind it); the dashboard is out of view
    assert fetched(fetches) == {"data": 1, "returned": 0, "validate": 0, "dashboard": 0, "rounds": 0, "sync": 1}
    row = window.table_model.row_data(0)
    assert (row.id, row.validations) == (example.id, 1)
    assert window.validate_view.example_id == example.id and "Stored your verdict" in window.validate_view.stored.text()


def test_a_change_of_one_kind_leaves_the_views_of_other_kinds_alone(qtbot, window, people, target_model, fetches):
    desk = window.desk
    window.tabs.setCurrentWidget(window.dashboard_view)
    qtbot.waitUntil(lambda: window.dashboard.figures is not None, timeout=WAIT)
    settle(qtbot, window)
    fetches.clear()

    desk.examples.start_draft(people.author.id, "hate_speech")  # a draft: nobody else's data yet
    with desk.db.write() as session:  # what the sync keeps for itself: its own bookkeeping
        set_meta(session, "sync.last_success", "2026-01-01T00:00:00+00:00")
    settle(qtbot, window)
    assert fetched(fetches) == {"data": 0, "returned": 0, "validate": 0, "dashboard": 0, "rounds": 0, "sync": 1}

    fetches.clear()
    with desk.changes.batch():  # three examples in one store (an import): one look, not three
        for text in ("one", "two", "three"):
            desk.examples.create(people.author.id, "hate_speech", hate_content(text, "hate"),
                                 [hate_output(target_model, "not hate")])
    settle(qtbot, window)
    assert fetched(fetches) == {"data": 1, "returned": 1, "validate": 0, "dashboard": 1, "rounds": 0, "sync": 1}
    qtbot.waitUntil(lambda: window.count_label.text() == "3 examples", timeout=10_000)
    assert window.dashboard.figures.matching == 3

    fetches.clear()
    desk.rounds.update(desk.tasks.round("hate_speech").id, people.lead.id, description="Harder now")
    settle(qtbot, window)
    # the task's rounds are read again (toolbar, Data filter, Create), which also filters the Data tab anew
    assert {view: fetches[view] for view in VIEWS if view != "sync"} == {
        "data": 1, "returned": 0, "validate": 0, "dashboard": 1, "rounds": 1}


def test_switching_profile_rereads_whose_work_is_shown(qtbot, window, people, target_model, fetches):
    desk = window.desk
    desk.examples.create(people.author.id, "hate_speech", hate_content("mine", "hate"),
                         [hate_output(target_model, "not hate")])
    desk.switch_person(people.author.id)
    (mine,) = desk.review.rows(ExampleFilter())
    desk.lead.return_examples(people.lead.id, [mine.id], "Name the target group.")
    qtbot.waitUntil(lambda: window.returned_work.count == 1, timeout=10_000)
    settle(qtbot, window)
    fetches.clear()
    desk.switch_person(people.val1.id)  # as the profile dialog does, on the database worker
    qtbot.waitUntil(lambda: window.returned_work.count == 0, timeout=10_000)
    settle(qtbot, window)
    # whose returned work, whose "mine" in the Data tab, whose waiting count; the rounds are the same
    assert {view: fetches[view] for view in ("data", "returned", "rounds", "sync")} == {
        "data": 1, "returned": 1, "rounds": 0, "sync": 1}


def test_choosing_to_browse_blurred_rereads_the_data_tab_masked_and_nothing_else(
        qtbot, window, people, target_model, fetches):
    desk = window.desk
    desk.examples.create(people.author.id, "hate_speech", hate_content("those rats should leave", "hate"),
                         [hate_output(target_model, "not hate")])
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=10_000)
    assert window.table_model.row_data(0).text == "those rats should leave"  # browsing: unmasked by default
    settle(qtbot, window)
    fetches.clear()

    window.findChild(QAction, "profiles").trigger()
    qtbot.waitUntil(lambda: window.findChild(ProfileDialog) is not None, timeout=5000)
    section = window.findChild(ProfileDialog).wellbeing
    qtbot.mouseClick(section.blur_browsing, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(section.findChild(QPushButton, "wellbeing-save"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "rats" not in window.table_model.row_data(0).text, timeout=10_000)
    settle(qtbot, window)
    # a person's own choice kept in the settings file: the reading views look again, the figures do not
    assert fetched(fetches) == {"data": 1, "returned": 0, "validate": 0, "dashboard": 0, "rounds": 0, "sync": 0}
