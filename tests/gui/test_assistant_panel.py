"""The writing assistant's panel on the Create page, driven as a writer drives it: ask for
suggestions with the keyboard, apply one, undo it, apply another, submit; the provenance is read
back from the desk's database. NLI (only the hypothesis is edited) and sentiment panels too, and
the panel says why it offers nothing when the round runs without the assistant."""

from __future__ import annotations

from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.core.assist.types import Goal
from app.core.desk import Desk
from app.core.services.rounds import parse_settings
from app.core.services.target_models import register_model
from app.views.assist import PAGE
from tests.gui.conftest import click_shown, close_window, open_window
from tests.gui.test_workspace import WAIT, stored_examples, submit, text_box, type_text, wait_for_prediction
from tests.model_fixtures import built_once, save_tiny

HATEFUL = "the banana people ruin everything"  # the trigger model says "hate" for "banana"
NLI_LABELS = ["entailment", "neutral", "contradiction"]
SENTIMENT_LABELS = ["positive", "negative", "neutral"]


def key(qtbot, widget, name, modifier=Qt.KeyboardModifier.NoModifier) -> None:
    qtbot.keyClick(widget, name, modifier)


def assistant(data_dir, task_code: str, mode: str = "on", contexts: list[str] | None = None) -> None:
    with Desk(data_dir) as desk:
        lead = desk.people.create("Lee Lead", "lead")
        round_ = desk.tasks.round(task_code)
        desk.rounds.update(round_.id, lead.id, settings=parse_settings({"assistant": mode}))
        if contexts:
            path = data_dir.parent / f"{task_code}-contexts.txt"
            path.write_text("\n".join(contexts), encoding="utf-8")
            desk.rounds.import_contexts(round_.id, lead.id, path)


def opened(qtbot, data_dir, task_code: str = "hate_speech"):
    window = open_window(qtbot, data_dir)
    if task_code != "hate_speech":
        window.task_combo.setCurrentIndex(window.task_combo.findData(task_code))
    ws = window.workspace
    qtbot.waitUntil(lambda: ws.task_code == task_code and ws.loaded is not None and ws.session.writing is not None,
                    timeout=WAIT)
    if ws.view.warning.isVisible():
        click_shown(qtbot, ws.view.warning.primary)
    return window


def suggestions_shown(qtbot, window) -> list:
    """Ctrl+Shift+G from the text, until the checked suggestions for the text on screen are listed."""
    panel = window.workspace.view.assist
    key(qtbot, window.workspace.view.editor.fields[window.workspace.assist.session.written_field], Qt.Key.Key_G,
        Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: bool(panel.rows) and panel.view.current and not panel.view.busy, timeout=WAIT)
    assert window.workspace.view.side.currentWidget() is panel  # brought forward
    return panel.rows


def test_a_writer_applies_a_suggestion_undoes_it_applies_another_and_submits(qtbot, data_dir, hate_model,
                                                                             modal_log):
    assistant(data_dir, "hate_speech")
    window = opened(qtbot, data_dir)
    try:
        ws, view = window.workspace, window.workspace.view
        panel, box = view.assist, text_box(window)
        assert not panel.body.isHidden() and panel.reason.isHidden()  # offered (the tab may be behind another)
        type_text(qtbot, window, HATEFUL)
        # no label yet: fooling the model means keeping the writer's label, so it is asked for first
        key(qtbot, box, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        assert "Choose your label first" in panel.status.text() and not panel.rows
        key(qtbot, box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate
        assert wait_for_prediction(qtbot, window).label == "hate"  # not fooled yet

        rows = suggestions_shown(qtbot, window)
        first, second = rows[0].row, rows[1].row
        assert first.fools and "fools the model" in rows[0].title.text()  # fooling suggestions come first
        assert first.text != HATEFUL and "banana" not in first.text.lower()
        assert "line-through" in rows[0].diff.text() and "banana" in rows[0].diff.text()  # the word diff
        assert "not hate" in rows[0].probabilities.text() and "%" in rows[0].probabilities.text()
        assert "Word substitution" not in panel.notes.text() or "PyTorch" in panel.notes.text()
        assert box.hasFocus()  # typing was never interrupted

        key(qtbot, box, Qt.Key.Key_Return, Qt.KeyboardModifier.AltModifier)  # apply the selected (top) one
        assert box.toPlainText() == first.text
        assert ws.session.draft.assistance.applied and ws.session.draft.assistance.applied_text == first.text
        assert wait_for_prediction(qtbot, window).label == "not hate"  # the live prediction follows

        key(qtbot, box, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # undo: the writer's text is back
        assert box.toPlainText() == HATEFUL and not ws.session.draft.assistance.applied
        assert panel.view.current  # the suggestions are for this text again

        assert len(panel.rows) == PAGE < panel.view.total  # a page at a time: the GUI thread stays free
        qtbot.mouseClick(panel.more_button, Qt.MouseButton.LeftButton)
        assert len(panel.rows) == min(2 * PAGE, panel.view.total) and panel.rows[:2] == rows[:2]
        assert panel.selected == 0 and box.hasFocus()  # the click left the cursor in the text
        key(qtbot, box, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)
        assert panel.selected == 1 and rows[1].selected
        key(qtbot, box, Qt.Key.Key_Return, Qt.KeyboardModifier.AltModifier)
        assert box.toPlainText() == second.text
        assert box.textCursor().position() < len(second.text)  # the cursor sits after the change, not at the end
        key(qtbot, box, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
        type_text(qtbot, window, " today")  # the writer edits the suggestion before submitting
        wait_for_prediction(qtbot, window)
        assert not panel.view.current and "changed since" in panel.status.text()

        submit(qtbot, window)
        qtbot.waitUntil(view.form_shown, timeout=5000)
        form = view.form
        form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("derogation"))
        qtbot.mouseClick(form.editors["target_groups"][0][0], Qt.MouseButton.LeftButton)
        qtbot.keyClicks(form.editors["label_explanation"], "Still an insult, spelled to slip past")
        key(qtbot, form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)

        (example,) = stored_examples(window)
        assert example.text == second.text + " today" and example.true_label == "hate"
        generator = {"obfuscation": "obfuscation", "word substitution": "substitution", "rule": "rules"}[
            second.generator]
        recorded = ws.assist.session  # the edit type as the engine named it
        assert example.assistance["applied"] is True and example.assistance["arm"] == "on"
        assert example.assistance["generator"] == generator
        assert example.assistance["applied_text"] == second.text and example.assistance["edit_distance"] == 1
        assert example.assistance["edit_type"].replace("_", " ").lower() == second.edit_type.lower()
        assert not recorded.shown and not panel.rows  # the next example starts with nothing shown
    finally:
        close_window(window)


def test_with_the_assistant_off_the_panel_says_why_in_one_line(qtbot, data_dir, hate_model, modal_log):
    window = opened(qtbot, data_dir)
    try:
        panel = window.workspace.view.assist
        qtbot.waitUntil(lambda: not panel.reason.isHidden(), timeout=WAIT)
        assert panel.body.isHidden() and "off in this round" in panel.reason.text()
        type_text(qtbot, window, HATEFUL)
        key(qtbot, text_box(window), Qt.Key.Key_G,
            Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        assert not panel.rows and window.workspace.assist.session.requested is None  # nothing asked of the model
    finally:
        close_window(window)


def test_under_a_b_the_panel_shows_only_in_the_assisted_session_of_each_pair(qtbot, data_dir, hate_model,
                                                                             modal_log):
    assistant(data_dir, "hate_speech", mode="ab")
    arms = []
    for _session in range(2):  # sessions 1 and 2 of this writer form a pair: one of them is assisted
        window = opened(qtbot, data_dir)
        try:
            ws, panel = window.workspace, window.workspace.view.assist
            arm = ws.session.writing.arm
            arms.append(arm)
            qtbot.waitUntil(lambda panel=panel, arm=arm: panel.view.available == (arm == "on"), timeout=WAIT)
            if arm == "on":
                assert panel.reason.isHidden()
            else:
                assert panel.body.isHidden() and "without it" in panel.reason.text()
            type_text(qtbot, window, "save the draft")  # the draft records its session's arm either way
            qtbot.waitUntil(lambda ws=ws: ws.session.draft.id is not None, timeout=10_000)
            assert ws.session.draft.assistance.arm == arm
        finally:
            close_window(window)
    assert sorted(arms) == ["off", "on"]


@pytest.fixture(scope="session")
def three_label_model_dir(tmp_path_factory) -> Path:
    """A tiny (untrained) classifier answering with three labels, named as each test needs."""
    from transformers import BertForSequenceClassification

    def build(root: Path) -> None:
        save_tiny(BertForSequenceClassification, root / "three", num_labels=3, id2label={0: "a", 1: "b", 2: "c"},
                  label2id={"a": 0, "b": 1, "c": 2})

    return built_once(tmp_path_factory, "three-label-classifier", build) / "three"


def attach(data_dir, model_dir, task_code: str, labels: list[str]) -> None:
    with Desk(data_dir) as desk:
        record = register_model(desk, model_dir, task_code=task_code, name=f"Tiny {task_code}",
                                label_map=dict(zip(["a", "b", "c"], labels)))
        assert desk.rounds.adopt_first_models(task_code, [record.id])


def test_the_nli_panel_edits_the_hypothesis_only(qtbot, data_dir, three_label_model_dir, modal_log):
    premise = "A man in a red coat is playing a guitar on a busy street."
    attach(data_dir, three_label_model_dir, "nli", NLI_LABELS)
    assistant(data_dir, "nli", contexts=[premise])
    window = opened(qtbot, data_dir, "nli")
    try:
        view = window.workspace.view
        fields = view.editor.fields
        qtbot.waitUntil(lambda: fields["context"].toPlainText() == premise, timeout=WAIT)
        fields["hypothesis"].setFocus()
        qtbot.keyClicks(fields["hypothesis"], "A man is playing music outside.")
        key(qtbot, fields["hypothesis"], Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # entailment
        wait_for_prediction(qtbot, window)
        rows = suggestions_shown(qtbot, window)
        assert all(set(NLI_LABELS) <= set(r.row.probabilities) for r in rows)  # each checked by the model
        key(qtbot, fields["hypothesis"], Qt.Key.Key_Return, Qt.KeyboardModifier.AltModifier)
        assert fields["hypothesis"].toPlainText() == rows[0].row.text != "A man is playing music outside."
        assert fields["context"].toPlainText() == premise  # the premise is never edited
        key(qtbot, fields["hypothesis"], Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert fields["hypothesis"].toPlainText() == "A man is playing music outside."
    finally:
        close_window(window)


def test_the_sentiment_panel_asks_for_the_new_label_of_a_contrast_pair_and_applies_suggestions(
        qtbot, data_dir, three_label_model_dir, modal_log):
    attach(data_dir, three_label_model_dir, "sentiment", SENTIMENT_LABELS)
    assistant(data_dir, "sentiment")
    window = opened(qtbot, data_dir, "sentiment")
    try:
        view, box = window.workspace.view, text_box(window)
        panel, sentence = view.assist, "The food was good and the staff were friendly."
        type_text(qtbot, window, sentence)
        key(qtbot, box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # positive
        view.side.setCurrentIndex(view.side.indexOf(panel))  # the writer opens the Suggestions tab
        qtbot.mouseClick(panel.goal_buttons[Goal.CONTRAST], Qt.MouseButton.LeftButton)
        assert panel.contrast.isVisible()
        assert [panel.contrast.itemData(i) for i in range(panel.contrast.count())] == [None, "negative", "neutral"]
        key(qtbot, box, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        assert "Pick the new label" in panel.status.text() and not panel.rows  # three labels: the writer picks
        panel.contrast.setCurrentIndex(panel.contrast.findData("negative"))
        panel.contrast.activated.emit(panel.contrast.currentIndex())
        wait_for_prediction(qtbot, window)
        rows = suggestions_shown(qtbot, window)
        assert all(set(r.row.probabilities) == set(SENTIMENT_LABELS) for r in rows)  # each checked by the model
        # the rules start from the writer's label (positive), whatever the model says of the text
        assert any(r.row.claimed_label == "negative" and r.row.generator == "rule" for r in rows)

        qtbot.mouseClick(panel.goal_buttons[Goal.FOOL], Qt.MouseButton.LeftButton)
        assert not panel.rows  # the contrast suggestions are not offered for the other goal
        rows = suggestions_shown(qtbot, window)
        qtbot.mouseDClick(rows[0], Qt.MouseButton.LeftButton)  # a double click applies, too
        assert box.toPlainText() == rows[0].row.text != sentence
        key(qtbot, box, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert box.toPlainText() == sentence and view.editor.content()["label"] == "positive"
    finally:
        close_window(window)


def test_a_contrast_pair_changes_the_label_only_when_the_writer_confirms_it(qtbot, data_dir, hate_model, modal_log):
    assistant(data_dir, "hate_speech")
    window = opened(qtbot, data_dir)
    try:
        view, box = window.workspace.view, text_box(window)
        panel = view.assist
        type_text(qtbot, window, HATEFUL)
        key(qtbot, box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate
        view.side.setCurrentIndex(view.side.indexOf(panel))
        qtbot.mouseClick(panel.goal_buttons[Goal.CONTRAST], Qt.MouseButton.LeftButton)
        assert panel.contrast.currentData() == "not hate"  # two labels: the other one, shown to confirm
        wait_for_prediction(qtbot, window)
        rows = suggestions_shown(qtbot, window)
        claimed = [r for r in rows if r.row.claimed_label == "not hate"]
        assert claimed and "meant to be <b>not hate</b>" in claimed[0].probabilities.text()
        assert "Obfuscation: this generator keeps the meaning" in panel.notes.text()  # said, not silently empty
        panel.select(rows.index(claimed[0]))
        key(qtbot, box, Qt.Key.Key_Return, Qt.KeyboardModifier.AltModifier)
        assert box.toPlainText() == claimed[0].row.text
        assert view.editor.content()["label"] == "hate"  # nothing changes the label behind the writer
        assert panel.confirm.isVisible() and "not hate" in panel.confirm_button.text()
        qtbot.mouseClick(panel.confirm_button, Qt.MouseButton.LeftButton)
        assert view.editor.content()["label"] == "not hate" and not panel.confirm.isVisible()
        key(qtbot, box, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)  # the label change goes first
        assert view.editor.content()["label"] == "hate" and box.toPlainText() == claimed[0].row.text
        key(qtbot, box, Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
        assert box.toPlainText() == HATEFUL and not panel.confirm.isVisible()
    finally:
        close_window(window)


def test_the_contrast_labels_are_listed_again_only_when_they_change(qtbot):
    """The panel is refreshed on every keystroke; the contrast list keeps the writer's pick and is
    rebuilt only when the labels on offer (or the one chosen) change."""
    from widgets.assist_panel import AssistPanel

    panel = AssistPanel()
    qtbot.addWidget(panel)
    inserted = []
    panel.contrast.model().rowsInserted.connect(lambda *_: inserted.append(1))
    panel.set_contrast_choices(("negative", "neutral"), "negative")
    assert [panel.contrast.itemData(i) for i in range(panel.contrast.count())] == [None, "negative", "neutral"]
    assert panel.contrast.currentData() == "negative" and inserted
    inserted.clear()
    panel.set_contrast_choices(("negative", "neutral"), "negative")  # a keystroke: nothing changed
    assert not inserted and panel.contrast.currentData() == "negative"
    panel.set_contrast_choices(("positive", "neutral"), None)  # the writer's label changed
    assert [panel.contrast.itemData(i) for i in range(panel.contrast.count())] == [None, "positive", "neutral"]
    assert panel.contrast.currentData() is None and inserted


def test_suggestions_are_masked_with_blur_on_and_slurs_only_when_the_writer_asks(qtbot, data_dir, hate_model):
    from app.core.wellbeing.blur import lexicon_spans
    from app.core.wellbeing.word_list import bundled_words
    from tests.gui.test_blur_walk import unmasked  # the blur walk's check, on the assistant's panel

    words = bundled_words("hate_speech")
    assistant(data_dir, "hate_speech")
    window = opened(qtbot, data_dir)
    try:
        ws, view = window.workspace, window.workspace.view
        panel, box = view.assist, text_box(window)
        type_text(qtbot, window, "Women belong in the kitchen, not in parliament")
        key(qtbot, box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate
        wait_for_prediction(qtbot, window)
        suggestions_shown(qtbot, window)
        made = [s.candidate for s in ws.assist.session.shown.suggestions]
        assert made and not any(c.edit_type == "description_to_slur" for c in made)  # not asked for
        assert not panel.slurs.isChecked()

        panel.slurs.click()  # the writer asks for them
        assert window.desk.settings.wellbeing_for(str(window.desk.current_person_id)).suggest_slurs  # stored
        qtbot.waitUntil(lambda: bool(ws.assist.session.blur_words), timeout=WAIT)  # blur on by default
        type_text(qtbot, window, " ")  # another text, for new suggestions
        suggestions_shown(qtbot, window)
        while panel.view.total > len(panel.rows):  # every row, not only the first page
            qtbot.mouseClick(panel.more_button, Qt.MouseButton.LeftButton)
        made = [s.candidate for s in ws.assist.session.shown.suggestions]
        slurred = [c.text for c in made if c.edit_type == "description_to_slur"]
        assert any(lexicon_spans(text, words) for text in slurred)  # a slur the writer never typed…
        assert len(panel.rows) == panel.view.total and not unmasked(panel)  # …shown masked, in every row
        assert any("•" in row.diff.text() for row in panel.rows)
        assert all("•" not in c.text for c in made)  # applying puts in the real text
    finally:
        close_window(window)
