"""The data-quality guard on the Create page, driven as a writer drives it: the novelty indicator
follows the draft (closest example on hover), and submitting a near-duplicate of an example already
in the task warns, with that example and the similarity; the writer goes back (nothing lost) or
submits anyway. Real desk, real tiny target model."""

from __future__ import annotations

from PySide6.QtCore import Qt

from app.views.quality import NoveltyLevel
from tests.conftest import hate_content
from tests.gui.conftest import click_shown
from tests.gui.test_workspace import WAIT, stored_examples, submit, text_box, type_text, wait_for_prediction, window  # noqa: F401

EARLIER = "Those people are vermin and they should all leave"
EARLIER_MASKED = "Those people are •••••• and they should all leave"  # another's text, read with blur on


def fill_explanation_and_store(qtbot, window, stored: int) -> None:
    view = window.workspace.view
    qtbot.waitUntil(view.form_shown, timeout=10_000)
    qtbot.keyClicks(view.form.editors["label_explanation"], "says so plainly")
    qtbot.keyClick(view.form.editors["label_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(stored_examples(window)) == stored and not view.form_shown(), timeout=10_000)


def test_a_near_duplicate_is_shown_while_typing_and_warned_at_submit(qtbot, window):  # noqa: F811
    desk, view, guard = window.desk, window.workspace.view, window.workspace.guard
    other = desk.people.create("Olu Other", "annotator")
    desk.examples.create(other.id, "hate_speech", hate_content(EARLIER, "hate"))  # synced or written: in the task

    type_text(qtbot, window, "those people are VERMIN and they should all leave!!")
    qtbot.waitUntil(lambda: view.novelty.isVisible() and "Novelty 0%" in view.novelty.text(), timeout=WAIT)
    assert NoveltyLevel.DUPLICATE.colour in view.novelty.text()
    assert EARLIER_MASKED in view.novelty.toolTip() and "100% similar" in view.novelty.toolTip()
    assert "vermin" not in view.novelty.toolTip()
    assert "Olu Other, round 1" in view.novelty.toolTip()

    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    qtbot.waitUntil(view.duplicate_warning_shown, timeout=WAIT)
    warning = view.duplicate_warning.text.text()
    assert "Near-duplicate" in warning and "the same text as" in warning and EARLIER_MASKED in warning
    assert "Olu Other" in warning and not view.form_shown()

    click_shown(qtbot, view.duplicate_warning.secondary)  # go back and edit
    assert not view.duplicate_warning_shown() and not view.form_shown()
    assert text_box(window).toPlainText() == "those people are VERMIN and they should all leave!!"  # nothing lost
    assert len(stored_examples(window)) == 1

    type_text(qtbot, window, " today")  # still near (94%): warned again, with the similarity
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    qtbot.waitUntil(view.duplicate_warning_shown, timeout=WAIT)
    assert "% similar to" in view.duplicate_warning.text.text()
    click_shown(qtbot, view.duplicate_warning.primary)  # submit anyway
    fill_explanation_and_store(qtbot, window, 2)
    texts = [e.text for e in stored_examples(window)]
    assert texts == [EARLIER, "those people are VERMIN and they should all leave!! today"]
    assert not view.novelty.isVisible() and not guard.warning_shown()

    # a novel text goes straight to the metadata form; the indicator says it is novel
    type_text(qtbot, window, "the quiet teacher walked near the river")
    qtbot.waitUntil(lambda: view.novelty.isVisible() and NoveltyLevel.NOVEL.colour in view.novelty.text(),
                    timeout=WAIT)
    assert "No example of this round" in view.novelty.toolTip()
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    fill_explanation_and_store(qtbot, window, 3)
    assert not view.duplicate_warning_shown()

    # Ctrl+Enter again on the warning: the writer has read it, and submits anyway
    type_text(qtbot, window, EARLIER)
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)
    wait_for_prediction(qtbot, window)
    submit(qtbot, window)
    qtbot.waitUntil(view.duplicate_warning_shown, timeout=WAIT)
    submit(qtbot, window)
    fill_explanation_and_store(qtbot, window, 4)
    assert [e.text for e in stored_examples(window)].count(EARLIER) == 2
