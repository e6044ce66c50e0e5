"""What a reader sees, driven as a validator would: the task's blur words masked in
Validate, V shows them for the example on screen only, pointing shows one, the profile's Wellbeing
section is stored and takes effect (blur and opt-outs), the writer's editor is never masked, and a
long text under the content warning opens closed."""

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QAction, QTextCursor
from PySide6.QtWidgets import QPushButton

from app.core.wellbeing.profile import WellbeingProfile
from tests.conftest import hate_content, hate_output
from tests.gui.conftest import click_shown
from tests.gui.test_validate import open_validate, wait_for_example
from tests.gui.test_workspace import text_box, type_text
from widgets.masked_text import MASK_COLOUR
from widgets.profile_dialog import ProfileDialog


def make(desk, people, target_model, text, groups=("women",), explanation="because"):
    content = hate_content(text, "hate", target_groups=list(groups), label_explanation=explanation)
    return desk.examples.create(people.author.id, "hate_speech", content, [hate_output(target_model, "not hate")])


def masked_colour_at(browser, position: int) -> bool:
    cursor = QTextCursor(browser.document())
    cursor.setPosition(position + 1)
    return cursor.charFormat().background().color() == MASK_COLOUR


def test_v_shows_the_words_of_this_example_only_and_pointing_shows_one(qtbot, window, people, target_model):
    desk = window.desk
    first = make(desk, people, target_model, "They are v3rmin and parasites, every one",
                 explanation="It calls them vermin")
    second = make(desk, people, target_model, "Send the vermin back")
    desk.validation.validate(second.id, people.val2.id, "correct")  # the first comes first (fewest verdicts)
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view = window.validate_view
    wait_for_example(qtbot, view, first.id)
    written = view.written
    assert written.masked_texts() == ["v3rmin", "parasites"]  # validators read masked by default
    plain = written.toPlainText()
    assert masked_colour_at(written, plain.index("v3rmin")) and not masked_colour_at(written, plain.index("They"))
    assert "3 words masked" in view.blur_note.text()  # two in the text, one in the author's explanation
    assert f"{MASK_COLOUR.name()}'>vermin</span>" in view.explanations.text()

    qtbot.keyClick(view, Qt.Key.Key_V)
    assert written.masked_texts() == [] and not masked_colour_at(written, plain.index("v3rmin"))
    assert "It calls them vermin" in view.explanations.text()
    qtbot.keyClick(view, Qt.Key.Key_V)  # and masked again
    assert written.masked_texts() == ["v3rmin", "parasites"]

    # pointing at a masked word shows that word alone, leaving shows it masked again
    cursor = QTextCursor(written.document())
    cursor.setPosition(plain.index("parasites") + 3)
    point = written.cursorRect(cursor).center()
    qtbot.mouseMove(written.viewport(), point)
    qtbot.waitUntil(lambda: written.masked_texts() == ["v3rmin"], timeout=3000)
    qtbot.mouseMove(written.viewport(), QPoint(2, written.viewport().height() - 2))  # blank space: masked again
    qtbot.waitUntil(lambda: written.masked_texts() == ["v3rmin", "parasites"], timeout=3000)
    cursor.setPosition(plain.index("parasites") + len("parasites"))
    qtbot.mouseMove(written.viewport(), written.cursorRect(cursor).center() + QPoint(-3, 0))  # its last letter
    qtbot.waitUntil(lambda: written.masked_texts() == ["v3rmin"], timeout=3000)
    qtbot.mouseMove(written.viewport(), QPoint(2, written.viewport().height() - 2))
    qtbot.waitUntil(lambda: written.masked_texts() == ["v3rmin", "parasites"], timeout=3000)

    # V for this example, a verdict, and the next example is masked again
    qtbot.keyClick(view, Qt.Key.Key_V)
    assert written.masked_texts() == []
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(view, Qt.Key.Key_1)
        qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    wait_for_example(qtbot, view, second.id)
    assert written.masked_texts() == ["vermin"] and not written.revealed


def test_the_profile_wellbeing_section_is_stored_and_takes_effect(qtbot, window, people, target_model):
    desk = window.desk
    muslims = make(desk, people, target_model, "Muslims are vermin", ["Muslims"])
    women = make(desk, people, target_model, "Women are vermin", ["women"])
    desk.validation.validate(women.id, people.val2.id, "correct")  # Muslims' example comes first
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view = window.validate_view
    wait_for_example(qtbot, view, muslims.id)
    assert view.written.masked_texts() == ["vermin"]

    window.findChild(QAction, "profiles").trigger()
    qtbot.waitUntil(lambda: window.findChild(ProfileDialog) is not None, timeout=5000)
    dialog = window.findChild(ProfileDialog)
    qtbot.waitExposed(dialog)
    section = dialog.wellbeing
    assert section.title() == "Wellbeing · Vic Validator"
    assert section.blur_validating.isChecked() and not section.blur_browsing.isChecked()  # the defaults
    qtbot.mouseClick(section.blur_validating, Qt.MouseButton.LeftButton)  # read unmasked
    assert not section.blur_validating.isChecked()
    assert section.task.currentData() == "hate_speech"
    row = next(i for i in range(section.groups.count()) if section.groups.item(i).text() == "Muslims")
    section.groups.item(row).setCheckState(Qt.CheckState.Checked)  # not served examples targeting Muslims
    qtbot.keyClicks(section.other, "Roma")
    qtbot.keyClick(section.other, Qt.Key.Key_Return)  # adds the group; the dialog stays, nobody is switched
    assert dialog.isVisible() and window.desk.settings.current_person_id == str(people.val1.id)
    section.break_after.setValue(40)
    qtbot.mouseClick(section.findChild(QPushButton, "wellbeing-save"), Qt.MouseButton.LeftButton)
    assert "Saved" in section.saved.text(), section.saved.text()

    stored = window.desk.settings_store.load().wellbeing_for(str(people.val1.id))
    assert stored == WellbeingProfile(blur_validating=False, opted_out_groups={"hate_speech": ["Muslims", "Roma"]},
                                      break_after_min=40)
    # it takes effect: the Muslims example is no longer served, and the next is not masked
    wait_for_example(qtbot, view, women.id)
    assert view.written.masked_texts() == [] and not view.blur_note.isVisible()
    # the example first, then what is left (counting past opt-outs takes longer at 100k examples)
    qtbot.waitUntil(lambda: "1</b> left for you" in view.status.text(), timeout=5000)
    assert "1 held back by your opt-outs" in view.status.text()
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(view, Qt.Key.Key_1)
        qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    # only opted-out work is left: said plainly, never "nothing to validate"
    qtbot.waitUntil(lambda: view.pages.currentWidget() is view.empty, timeout=5000)
    assert "1 example targeting Muslims, Roma" in view.empty.text() and "Profile" in view.empty.text()
    assert "Nothing left" not in view.empty.text()


def test_the_writers_editor_is_never_masked(qtbot, window):
    window.desk.settings.wellbeing = {window.desk.settings.current_person_id or "": WellbeingProfile(
        blur_validating=True, blur_browsing=True)}
    ws = window.workspace
    qtbot.waitUntil(lambda: ws.view.warning.isVisible(), timeout=10_000)
    click_shown(qtbot, ws.view.warning.primary)  # the content warning, read
    assert ws.view.editing.isEnabled()
    type_text(qtbot, window, "they are all vermin and parasites")
    box = text_box(window)
    assert box.toPlainText() == "they are all vermin and parasites"
    for position in range(len(box.toPlainText())):
        cursor = QTextCursor(box.document())
        cursor.setPosition(position + 1)
        assert cursor.charFormat().background().color() != MASK_COLOUR
        assert cursor.charFormat().foreground().color() != MASK_COLOUR


def test_a_long_text_under_the_content_warning_opens_closed(qtbot, window, people, target_model):
    desk = window.desk
    long = make(desk, people, target_model, "They are vermin. " + "A long rant about them. " * 30)
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view = window.validate_view
    wait_for_example(qtbot, view, long.id)
    assert view.collapsed.isVisible() and not view.written.isVisible()
    assert "long" in view.collapsed_note.text() and "warns" in view.collapsed_note.text()
    qtbot.mouseClick(view.read_button, Qt.MouseButton.LeftButton)
    assert view.written.isVisible() and not view.collapsed.isVisible()
    assert view.written.masked_texts() == ["vermin"]  # opened, and still masked


def test_browsing_is_unmasked_by_default_and_masked_when_chosen_and_review_masks(qtbot, window, people, target_model):
    from tests.gui.test_main_window import wait_for_count

    desk = window.desk
    make(desk, people, target_model, "those  rats should leave")
    window.refresh()
    wait_for_count(qtbot, window, "1 example")
    window.table.selectRow(0)
    qtbot.waitUntil(lambda: "those  rats should leave" in window.detail.toPlainText(), timeout=5000)
    assert window.detail.masked_texts() == []  # browsing: off by default

    person = desk.settings.current_person_id
    desk.settings.wellbeing = {person: WellbeingProfile(blur_browsing=True)}
    window.table.clearSelection()
    window.table.selectRow(0)
    window.refresh()
    qtbot.waitUntil(lambda: window.detail.masked_texts() == ["rats"], timeout=5000)
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)  # the Data tab
    window.table.setFocus()
    qtbot.keyClick(window.table, Qt.Key.Key_V)  # from the table beside the detail
    assert window.detail.masked_texts() == [] and window.detail.revealed
    window.detail.setFocus()
    qtbot.keyClick(window.detail, Qt.Key.Key_V)
    assert window.detail.masked_texts() == ["rats"]

    # Review reads as validating does: masked by default
    from tests.gui.test_review import open_review, shown_ids

    desk.settings.wellbeing = {}
    open_review(qtbot, window)
    view = window.review_view
    qtbot.waitUntil(lambda: len(shown_ids(view)) == 1, timeout=5000)
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.masked_texts() == ["rats"], timeout=5000)


def test_the_models_top_hate_words_are_masked_when_they_arrive(qtbot, data_dir, modal_log, hate_model):
    """The real tiny target model (it says "hate" exactly when "banana" is in the text): the word list's
    masks come with the example, the model's top word joins from the explanation lane."""
    from app.core.desk import Desk
    from tests.gui.conftest import close_window, open_window

    with Desk(data_dir) as desk:
        author = desk.people.create("Ana Author", "annotator")
        validator = desk.people.create("Vic Validator", "annotator")
        desk.examples.create(author.id, "hate_speech", hate_content("vermin ate a banana at noon", "hate"), [])
    window = open_window(qtbot, data_dir)
    try:
        qtbot.waitUntil(lambda: window.workspace.loaded is not None, timeout=60_000)  # the target model is in
        window.desk.switch_person(validator.id)
        open_validate(qtbot, window)
        view = window.validate_view
        wait_for_example(qtbot, view)
        assert "vermin" in view.written.masked_texts()  # the word list, at once
        qtbot.waitUntil(lambda: "banana" in view.written.masked_texts(), timeout=60_000)
        assert view.written.masked_texts()[0] == "vermin"
        assert "Why the model" not in window.workspace.view.attribution.header.text()  # the writer's heatmap: not ours
    finally:
        close_window(window)


def test_a_lead_extends_the_tasks_blur_words_from_review(qtbot, window, people, target_model):
    from tests.gui.test_review import open_review
    from widgets.blur_words_dialog import BlurWordsDialog

    desk = window.desk
    make(desk, people, target_model, "those goblins again")
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    qtbot.mouseClick(view.actions_panel.blur_words_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.findChild(BlurWordsDialog) is not None, timeout=5000)
    dialog = window.findChild(BlurWordsDialog)
    qtbot.keyClicks(dialog.words, "x")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()  # one letter cannot be matched: refused
    qtbot.waitUntil(lambda: "fewer than two letters" in view.actions_panel.message.text(), timeout=5000)
    assert desk.tasks.settings("hate_speech").blur_words == ()

    # entries the server refuses too: the same message, naming each (one rule for desk and server)
    from app.core.wellbeing.word_list import InvalidWordList, clean_words

    hostile = ["*", "(a+)+$", "k*ke", "goblin*"]
    with pytest.raises(InvalidWordList) as refused:
        clean_words(hostile)
    qtbot.mouseClick(view.actions_panel.blur_words_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.findChildren(BlurWordsDialog)[-1].isVisible(), timeout=5000)
    dialog = window.findChildren(BlurWordsDialog)[-1]
    dialog.words.setPlainText("\n".join(hostile))
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: "'(a+)+$'" in view.actions_panel.message.text(), timeout=5000)
    assert str(refused.value) in " ".join(view.actions_panel.message.text().split())
    assert desk.tasks.settings("hate_speech").blur_words == ()

    qtbot.mouseClick(view.actions_panel.blur_words_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.findChildren(BlurWordsDialog)[-1].isVisible(), timeout=5000)
    dialog = window.findChildren(BlurWordsDialog)[-1]
    qtbot.keyClicks(dialog.words, "goblin*")
    dialog.buttons.button(dialog.buttons.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: "1 blur word added by leads" in view.actions_panel.message.text(), timeout=5000)
    assert desk.tasks.settings("hate_speech").blur_words == ("goblin*",)
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: view.detail.masked_texts() == ["goblins"], timeout=5000)  # Review masks it now


def test_data_opens_a_long_warned_text_closed_until_the_reader_clicks_read(qtbot, window, people, target_model):
    from tests.gui.test_main_window import wait_for_count

    desk = window.desk
    long = "They are vermin. " + "A long rant about them. " * 30
    make(desk, people, target_model, long, explanation="It calls them vermin")
    window.refresh()
    wait_for_count(qtbot, window, "1 example")
    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)  # the Data tab
    window.table.selectRow(0)
    detail = window.detail
    qtbot.waitUntil(lambda: "Read the text" in detail.toPlainText(), timeout=5000)
    assert detail.isVisible()
    assert long.strip() not in detail.toPlainText() and detail.collapsed
    cursor = QTextCursor(detail.document())
    cursor.setPosition(detail.toPlainText().index("Read the text") + 2)
    point = detail.cursorRect(cursor).center()
    qtbot.mouseClick(detail.viewport(), Qt.MouseButton.LeftButton, pos=point)
    qtbot.waitUntil(lambda: long.strip() in detail.toPlainText(), timeout=5000)
    assert not detail.collapsed and detail.masked_texts() == []  # Data reads unmasked by default


def test_a_reading_views_failed_attribution_leaves_the_writers_pane_and_submit_alone(qtbot, window, monkeypatch):
    """A failure of the words a reading view blurs (here toward a label the model has not) goes to the
    reading view's request alone: it must not clear the writer's pane. What a failure would clear is
    recorded, not read off the pane: a loaded machine's first start may reset the pane by itself while
    the request is on its way."""
    workspace = window.workspace
    cleared: list[str | None] = []
    monkeypatch.setattr(workspace.view, "clear_attribution", lambda message=None: cleared.append(message))
    workspace.session.pending_submit = True
    failures: list = []
    workspace.inference.attribute_for_reading("they are vermin", target="no such label", on_failed=failures.append)
    qtbot.waitUntil(lambda: bool(failures), timeout=30000)
    assert failures[0].operation == "read"  # no model yet, or no such label: either way the reader's own
    assert not [m for m in cleared if m and m.startswith("No attributions")] and workspace.session.pending_submit
