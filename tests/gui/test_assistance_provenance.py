"""The Create page records the writing assistant's part: the session's arm on every example, the
suggestion the writer applied kept with the draft across a killed process, and the word edit
distance from it to the submitted text measured at submit. (The suggestion panel itself is
tested with the Create panel; here the suggestion is applied through the session as the panel does.)"""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.core.assist.provenance import read_assistance
from app.core.desk import Desk
from app.core.services.rounds import parse_settings
from tests.gui.conftest import click_shown, close_window, open_window
from tests.gui.test_workspace import WAIT, stored_examples, submit, text_box, type_text, wait_for_prediction

SUGGESTION = "my neighbour sm1led at the doctor"


def assistant_on(data_dir) -> None:
    with Desk(data_dir) as desk:
        lead = desk.people.create("Lee Lead", "lead")
        round_ = desk.tasks.round("hate_speech")
        desk.rounds.update(round_.id, lead.id, settings=parse_settings({"assistant": "on"}))


def opened(qtbot, data_dir, *, closed_by_test=True):
    window = open_window(qtbot, data_dir, closed_by_test=closed_by_test)
    ws = window.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None and ws.session.writing is not None, timeout=WAIT)
    if ws.view.warning.isVisible():
        click_shown(qtbot, ws.view.warning.primary)
    return window


def test_an_applied_suggestion_survives_a_killed_process_and_its_edit_distance_is_stored(qtbot, data_dir,
                                                                                        hate_model, modal_log):
    assistant_on(data_dir)
    first = opened(qtbot, data_dir, closed_by_test=False)
    ws = first.workspace
    assert ws.session.assistant_on and ws.session.writing.number == 1
    type_text(qtbot, first, "my neighbour smiled at the doctor")
    ws.session.suggestion_applied("obfuscation", "leetspeak", SUGGESTION)  # what the panel does on Enter
    text_box(first).selectAll()
    text_box(first).insertPlainText(SUGGESTION)
    type_text(qtbot, first, " today")  # the writer goes on editing the suggestion
    qtbot.keyClick(text_box(first), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)

    def draft_saved() -> bool:
        drafts = first.desk.examples.drafts(first.desk.current_person().id)
        return bool(drafts) and drafts[0].text == SUGGESTION + " today" and drafts[0].assistance is not None \
            and drafts[0].assistance["applied"]

    qtbot.waitUntil(draft_saved, timeout=10_000)
    first.sync.stop()  # the process dies: only what autosave wrote is left
    first.db.shutdown(wait=True)
    first.inference.shutdown()
    first.desk.close()
    first.hide()
    first.deleteLater()

    second = opened(qtbot, data_dir)
    try:
        ws, view = second.workspace, second.workspace.view
        assert ws.session.writing.number == 2  # a new session: the draft recorded session 1
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        click_shown(qtbot, view.draft_offer.primary)
        assert ws.session.draft.assistance == read_assistance(
            {"arm": "on", "session": 1, "applied": True, "generator": "obfuscation", "edit_type": "leetspeak",
             "applied_text": SUGGESTION, "edit_distance": None})
        wait_for_prediction(qtbot, second)
        submit(qtbot, second)
        qtbot.waitUntil(view.form_shown, timeout=5000)
        form = view.form
        form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("derogation"))
        qtbot.mouseClick(form.editors["target_groups"][0][0], Qt.MouseButton.LeftButton)
        qtbot.keyClicks(form.editors["label_explanation"], "Leetspeak hides the insult")
        qtbot.keyClick(form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)
        (example,) = stored_examples(second)
        assert example.text == SUGGESTION + " today"
        assert example.assistance == {"arm": "on", "session": 1, "applied": True, "generator": "obfuscation",
                                      "edit_type": "leetspeak", "applied_text": SUGGESTION, "edit_distance": 1}
        # the next example starts in this session, with nothing applied
        assert ws.session.draft.assistance == read_assistance({"arm": "on", "session": 2, "applied": False})
    finally:
        close_window(second)


def test_with_the_assistant_off_examples_record_no_arm_and_nothing_is_offered(qtbot, data_dir, hate_model, modal_log):
    window = opened(qtbot, data_dir)
    try:
        ws, view = window.workspace, window.workspace.view
        assert not ws.session.assistant_on and ws.session.writing.arm is None
        type_text(qtbot, window, "a calm evening by the lake")
        qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
        wait_for_prediction(qtbot, window)
        submit(qtbot, window)
        qtbot.waitUntil(view.form_shown, timeout=5000)
        qtbot.keyClicks(view.form.editors["label_explanation"], "Nothing hateful")
        qtbot.keyClick(view.form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)
        (example,) = stored_examples(window)
        assert example.assistance == {"arm": None, "session": 1, "applied": False, "generator": None,
                                      "edit_type": None, "applied_text": None, "edit_distance": None}
    finally:
        close_window(window)
