"""The annotation workspace, driven as an analyst drives it: typing against a real (tiny, trained)
target model, choosing labels with the keyboard, submitting with Ctrl+Enter, undoing, explaining,
perturbing, and getting a draft back after the program died. Every check looks at what the
screen shows and at what the database holds."""

from __future__ import annotations

import shutil

import pytest
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from app.core import paths
from app.core.desk import Desk
from app.core.io.importers import import_file
from tests.conftest import FIXTURES
from tests.gui.conftest import click_shown, close_window, open_window

WAIT = 60_000  # the first model load imports torch; a busy CI machine is slow at it
TRIGGER = "banana"  # the tiny model says "hate" exactly when this word is present


@pytest.fixture
def window(qtbot, data_dir, hate_model):
    win = open_window(qtbot, data_dir)
    ws = win.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
    assert ws.view.warning.isVisible() and not ws.view.editing.isEnabled()  # content warning first
    click_shown(qtbot, ws.view.warning.primary)
    assert ws.view.editing.isEnabled()
    yield win
    close_window(win)


def text_box(window):
    return window.workspace.view.editor.fields["text"]


def wait_for_prediction(qtbot, window):
    """Until the prediction shown is for exactly the text on screen."""
    ws = window.workspace
    qtbot.waitUntil(lambda: ws.last_prediction is not None and ws._current_prediction_matches()
                    and not ws.view.prediction.stale.isVisible(), timeout=WAIT)
    return ws.last_prediction.prediction


def attributions_shown(window) -> list:
    """From now on, every attribution the writer's pane is given (after it showed it): the handler the
    writer's attribution requests name."""
    pairs, shown = window.workspace.pairs, []
    real = pairs.attributed

    def attributed(result) -> None:
        real(result)
        shown.append(result)

    pairs.attributed = attributed
    return shown


def stored_examples(window):
    with window.desk.db.read() as session:
        from sqlalchemy import select
        from sqlalchemy.orm import selectinload

        from app.core.storage.models import Example

        return list(session.scalars(select(Example).where(Example.status != "draft")
                                    .options(selectinload(Example.outputs)).order_by(Example.created_at)))


def submit(qtbot, window):
    qtbot.keyClick(text_box(window), Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)


def type_text(qtbot, window, text: str) -> None:
    box = text_box(window)
    box.setFocus()
    qtbot.keyClicks(box, text)


def test_live_prediction_follows_the_text_and_says_when_the_model_is_fooled(qtbot, window):
    ws, panel = window.workspace, window.workspace.view.prediction
    type_text(qtbot, window, "the quiet teacher walked near the river")
    assert wait_for_prediction(qtbot, window).label == "not hate"
    assert "Choose your label" in panel.verdict.text()

    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # my label: hate
    assert ws.view.editor.content()["label"] == "hate"
    assert panel.verdict.text() == "Model fooled"

    type_text(qtbot, window, f" {TRIGGER}")
    assert wait_for_prediction(qtbot, window).label == "hate"
    assert panel.verdict.text() == "Not fooled yet"
    assert "Trigger model" in panel.combined_title.text() and "hate" in panel.combined_title.text()
    assert "cpu" in panel.note.text() and " ms" in panel.note.text()
    status = window.model_label.text()
    assert "Trigger model on cpu" in status and "last prediction" in status


def test_submitting_stores_every_output_and_asks_only_for_metadata_that_applies(qtbot, window):
    ws, view = window.workspace, window.workspace.view
    type_text(qtbot, window, "my neighbour smiled at the doctor today")
    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate: the model says not
    prediction = wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    form = view.form
    assert form.rows["hate_type"][0].isVisible() and form.rows["target_groups"][0].isVisible()
    assert "fooled" in view.status.text()

    qtbot.keyClick(form, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)  # nothing filled in yet
    assert "Fill in" in form.problem.text() and "Type of hate" in form.problem.text()
    qtbot.keyClick(form, Qt.Key.Key_Escape)  # back to editing: the label can still change
    assert not view.form_shown()
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)  # not hate after all
    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    assert not form.rows["hate_type"][0].isVisible() and not form.rows["target_groups"][0].isVisible()
    qtbot.keyClick(text_box(window), Qt.Key.Key_Escape)
    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)

    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("dehumanization"))
    checks, other = form.editors["target_groups"]
    qtbot.mouseClick(checks[1], Qt.MouseButton.LeftButton)  # trans people
    qtbot.keyClicks(other, "Roma")
    qtbot.keyClicks(form.editors["label_explanation"], "It compares a group to vermin")
    qtbot.keyClicks(form.editors["model_explanation"], "No slur words")
    qtbot.keyClick(form.editors["model_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)

    qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)
    assert "fooled the model" in view.message.text.text()
    (example,) = stored_examples(window)
    assert example.text == "my neighbour smiled at the doctor today" and example.true_label == "hate"
    assert example.model_fooled is True and example.time_spent_ms > 0
    assert example.meta["hate_type"] == "dehumanization"
    assert example.meta["target_groups"] == ["trans people", "Roma"]
    assert example.meta["model_explanation"] == "No slur words"
    (output,) = example.outputs
    assert output.label == prediction.label == "not hate" and output.model_sha256 == ws.records[0].sha256
    assert output.probabilities == pytest.approx(prediction.probabilities)
    # the editor is ready for the next example, and the stored text is one undo away
    assert text_box(window).toPlainText() == "" and not view.form_shown()
    qtbot.keyClick(text_box(window), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert text_box(window).toPlainText() == "my neighbour smiled at the doctor today"


def test_a_prediction_for_older_text_never_shows_and_submit_waits_for_the_current_one(qtbot, window):
    ws = window.workspace
    type_text(qtbot, window, f"the old {TRIGGER} stayed")
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    for _ in range(len(f"{TRIGGER} stayed")):  # delete the trigger word fast, then submit at once
        qtbot.keyClick(text_box(window), Qt.Key.Key_Backspace)
    submit(qtbot, window)
    qtbot.waitUntil(ws.view.form_shown, timeout=WAIT)
    assert ws._current_prediction_matches() and ws.last_prediction.prediction.label == "not hate"
    assert ws.frozen_outputs[0].label == "not hate"  # the outputs stored are for "the old " itself
    assert "Trigger model</b>: not hate" in ws.view.prediction.combined_title.text()  # the screen agrees


def test_undo_and_redo_cover_text_and_label_edits(qtbot, window):
    editor = window.workspace.view.editor
    type_text(qtbot, window, "quiet river")
    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert editor.content()["label"] == "hate"
    qtbot.keyClick(text_box(window), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert editor.content()["label"] is None and text_box(window).toPlainText() == "quiet river"
    assert not any(b.isChecked() for b in editor.label_group.buttons())
    qtbot.keyClick(text_box(window), Qt.Key.Key_Z, Qt.KeyboardModifier.ControlModifier)
    assert text_box(window).toPlainText() == ""
    qtbot.keyClick(text_box(window), Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert text_box(window).toPlainText() == "quiet river"
    qtbot.keyClick(text_box(window), Qt.Key.Key_Z,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    assert editor.content()["label"] == "hate" and editor.label_group.checkedButton().text() == "hate"


HARD_TEXT = "Zero\u200bwidth 👩🏽‍🚀 emoji and עברית מימין לשמאל, then a banana"


def test_a_draft_survives_a_killed_process_exactly_as_typed(qtbot, data_dir, hate_model):
    first = open_window(qtbot, data_dir, closed_by_test=False)
    ws = first.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
    click_shown(qtbot, ws.view.warning.primary)
    text_box(first).setFocus()
    text_box(first).insertPlainText(HARD_TEXT)  # as an input method commits it
    qtbot.keyClick(text_box(first), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)

    def draft_saved() -> bool:
        drafts = first.desk.examples.drafts(first.desk.current_person().id)
        return bool(drafts) and drafts[0].inputs.get("text") == HARD_TEXT and drafts[0].true_label == "hate"

    qtbot.waitUntil(draft_saved, timeout=10_000)
    # The process dies: no closeEvent, no saving on the way out. Only what autosave wrote is left.
    first.sync.stop()
    first.db.shutdown(wait=True)
    first.inference.shutdown()
    first.desk.close()
    first.hide()
    first.deleteLater()  # destroyed without a close event

    second = open_window(qtbot, data_dir)
    try:
        view = second.workspace.view
        assert not view.warning.isVisible()  # acknowledged once, remembered
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        assert "unfinished example" in view.draft_offer.text.text()
        click_shown(qtbot, view.draft_offer.primary)
        assert text_box(second).toPlainText() == HARD_TEXT
        assert view.editor.content() == {"inputs": {"text": HARD_TEXT}, "label": "hate", "answer": None}
        assert wait_for_prediction(qtbot, second).label == "hate"
    finally:
        close_window(second)


def test_the_heatmap_colours_exactly_the_typed_words_and_finds_the_trigger(qtbot, window):
    ws, attribution = window.workspace, window.workspace.view.attribution
    text = "the 👩🏽‍🚀 teacher saw a banana near עברית"
    text_box(window).setFocus()
    text_box(window).insertPlainText(text)
    wait_for_prediction(qtbot, window)
    shown_attributions = attributions_shown(window)
    qtbot.keyClick(text_box(window), Qt.Key.Key_A,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: bool(shown_attributions), timeout=WAIT)
    assert ws.view.side.currentWidget() is attribution
    shown = attribution.text.words
    assert [w["shown"] for w in shown] == [w["text"] for w in shown]  # each colour sits on its own word
    assert {"teacher", "banana", "עברית"} <= {w["text"] for w in shown}
    top = max(shown, key=lambda w: w["score"])
    assert top["text"] == TRIGGER
    assert "Why the model leans to" in attribution.header.text() and "hate" in attribution.header.text()
    assert attribution.text.toPlainText() == text
    # two labels: one view, toward "hate"; no selector offering its mirror image
    assert attribution.target_choice.isHidden() and "hate" in attribution.fixed_target.text()
    assert attribution.legend.scale is not None and "full colour" in attribution.scale_note.text()

    type_text(qtbot, window, " x")
    assert attribution.stale.isVisible()  # the heatmap is for the text before this edit


def test_a_perturbation_pair_shows_its_diff_and_is_stored_as_a_pair(qtbot, window):
    ws, view = window.workspace, window.workspace.view
    type_text(qtbot, window, f"our {TRIGGER} walked slowly")
    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    view.form.set_values({"hate_type": "animosity", "target_groups": ["women"], "label_explanation": "because"})
    qtbot.keyClick(view.form, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(stored_examples(window)) == 1, timeout=10_000)
    original = stored_examples(window)[0]

    qtbot.keyClick(window, Qt.Key.Key_2, Qt.KeyboardModifier.ControlModifier)  # the Data tab
    qtbot.waitUntil(lambda: window.table_model.rowCount() == 1, timeout=10_000)
    window.table.selectRow(0)
    qtbot.keyClick(window.table, Qt.Key.Key_E,
                   Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: ws.original is not None, timeout=10_000)
    assert window.tabs.currentWidget() is view and view.side.currentWidget() is view.perturbation
    assert text_box(window).toPlainText() == f"our {TRIGGER} walked slowly"

    box = text_box(window)
    box.selectAll()
    box.insertPlainText("our river walked slowly")  # one word swapped
    qtbot.keyClick(box, Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)  # the true label flips
    wait_for_prediction(qtbot, window)
    qtbot.waitUntil(lambda: "model followed" in view.perturbation.summary.text(), timeout=WAIT)
    summary = view.perturbation.summary.text()
    assert "1 word changed" in summary and "hate → not hate (flipped)" in summary
    assert "hate → not hate." in summary
    diff_text = view.perturbation.diff.toPlainText()
    assert TRIGGER in diff_text and "river" in diff_text
    # the label alone changes (Alt+N): the summary follows at once, not at the next keystroke
    qtbot.keyClick(box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert "hate → hate (not flipped" in view.perturbation.summary.text()
    assert "did not follow" in view.perturbation.summary.text()
    qtbot.keyClick(box, Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    assert "hate → not hate (flipped)" in view.perturbation.summary.text()

    shown_attributions = attributions_shown(window)
    ws.explain("predicted")
    qtbot.waitUntil(lambda: bool(shown_attributions), timeout=WAIT)  # the original's, then the edit's
    qtbot.waitUntil(lambda: view.perturbation.changes.rowCount() > 0, timeout=WAIT)
    words = [view.perturbation.changes.item(r, 0).text() for r in range(view.perturbation.changes.rowCount())]
    assert TRIGGER in words and "river" in words
    # like with like: both texts in probability units on one scale, not each stretched to its own ±1
    table = view.perturbation.changes
    rows = {table.item(r, 0).text(): [table.item(r, c).text() for c in (1, 2)] for r in range(table.rowCount())}
    assert float(rows[TRIGGER][0]) > 0.3
    assert all(abs(float(after)) < 0.1 for _, after in rows.values() if after != "–")
    assert "one scale for both texts" in view.perturbation.changes_note.text()

    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=WAIT)
    view.form.set_values({"label_explanation": "a fruit is not a group"})
    qtbot.keyClick(view.form, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(stored_examples(window)) == 2, timeout=10_000)
    pair = stored_examples(window)[1]
    assert pair.perturbation_of == original.id and pair.edit_distance == 1
    assert pair.origin == {"kind": "perturbation", "of": str(original.id)} and pair.true_label == "not hate"


def test_my_history_lists_my_examples_and_retracts_one(qtbot, window, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    type_text(qtbot, window, "the small garden")
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    view = window.workspace.view
    qtbot.waitUntil(view.form_shown, timeout=5000)
    view.form.set_values({"label_explanation": "harmless"})
    qtbot.keyClick(view.form, Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(stored_examples(window)) == 1, timeout=10_000)
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")  # other people's work
    window.tabs.setCurrentWidget(window.data_page)
    window.refresh()
    qtbot.waitUntil(lambda: window.count_label.text() == "11 examples", timeout=10_000)
    mine = window.filter_bar.author
    mine.setCurrentIndex(mine.findData("mine"))  # my history
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=10_000)
    assert window.table_model.row_data(0).text == "the small garden"
    window.table.selectRow(0)
    monkeypatch.setattr(QInputDialog, "getText", staticmethod(lambda *a, **k: ("typo in the label", True)))
    window.retract_action.trigger()
    qtbot.waitUntil(lambda: stored_examples(window)[0].status == "retracted", timeout=10_000)
    assert stored_examples(window)[0].status_reason == "typo in the label"


def test_first_start_makes_the_bundled_model_round_one_target(qtbot, data_dir, default_model_cache):
    shutil.copytree(default_model_cache, paths.models_cache_dir(data_dir))  # skip the 20 s build here
    win = open_window(qtbot, data_dir)
    try:
        win.prepare_first_start()
        ws = win.workspace
        # PyTorch answers first; the ONNX form, already in the cache here, replaces it at once
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.loaded.formats == ("onnx",), timeout=WAIT)
        assert [r.name for r in ws.records] == [
            "Hate speech R1 (MiniLM-L6 + trained top layer), ONNX fp32"] or "ONNX int8" in ws.records[0].name
        assert "on cpu" in win.model_label.text()
        click_shown(qtbot, ws.view.warning.primary)
        type_text(qtbot, win, "I love spending time with my family")
        assert wait_for_prediction(qtbot, win).label == "not hate"
    finally:
        close_window(win)
    # A second start finds round 1 set up and prepares nothing.
    with Desk(data_dir) as desk:
        from app.core.services.target_models import needs_default_model

        assert not needs_default_model(desk)
        round_ = desk.tasks.round("hate_speech")
        assert len(desk.models.round_models(round_.id)) == 1
    QApplication.processEvents()


def test_following_the_text_never_holds_up_a_prediction(qtbot, window, monkeypatch):
    """With "Follow the text" on, every keystroke also asks for an attribution. While one is
    still running, the prediction of the newest text is shown; each heatmap that arrives is for
    the text on screen at that moment, and the last one is for the final text."""
    import threading

    from local_models.engine import InferenceEngine

    ws, view = window.workspace, window.workspace.view
    permits, started = threading.Semaphore(0), []
    attribute = InferenceEngine.attribute

    def held(engine, item, **options):  # the explanation lane waits here until the test lets it go
        started.append(item)
        if not permits.acquire(timeout=WAIT / 1000):
            raise TimeoutError("the test never let the attribution run")
        return attribute(engine, item, **options)

    monkeypatch.setattr(InferenceEngine, "attribute", held)
    shown_for = []
    monkeypatch.setattr(ws.pairs, "attributed", lambda r, real=ws.pairs.attributed: (
        real(r), shown_for.append((r.inputs, text_box(window).toPlainText()))))
    qtbot.mouseClick(view.attribution.pin, Qt.MouseButton.LeftButton)
    assert view.attribution.pin.isChecked()

    type_text(qtbot, window, "the teacher")
    qtbot.waitUntil(lambda: len(started) == 1, timeout=WAIT)  # an attribution is running
    type_text(qtbot, window, f" saw a {TRIGGER}")
    assert wait_for_prediction(qtbot, window).label == "hate"  # answered while the attribution still runs
    assert shown_for == [] and len(started) == 1  # the first attribution is still held

    permits.release(1000)
    final = f"the teacher saw a {TRIGGER}"
    qtbot.waitUntil(lambda: bool(shown_for) and shown_for[-1][0] == final, timeout=WAIT)
    assert all(asked == on_screen for asked, on_screen in shown_for)  # never a heatmap of another text
    assert not view.attribution.stale.isVisible() and view.attribution.text.toPlainText() == final
    assert max(view.attribution.text.words, key=lambda w: w["score"])["text"] == TRIGGER
