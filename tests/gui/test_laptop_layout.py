"""The views the 1366×768 laptop showed clipped: each fits, with no horizontal scroll bar and no cut
text, at that size (the window as a maximised window gets it, less a desktop's top bar and the title
bar), in the 12-point font many Linux desktops use (Qt's offscreen default is 9 points)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QPoint, Qt
from PySide6.QtGui import QFont, QFontMetrics
from PySide6.QtWidgets import QApplication, QComboBox, QScrollArea, QWidget

from app.core.assist.types import Goal
from app.views.assist import AssistPanelView
from app.views.create import AttributionChange, DiffKind, DiffPiece, PairSide, PairView, PredictedView
from tests.gui.conftest import click_shown
from tests.gui.test_workspace import text_box, type_text, wait_for_prediction, window  # noqa: F401 (fixture)
from tests.simulation import small_team
from widgets.assist_panel import AssistPanel
from widgets.review_view import NARROW_SAMPLES, REVIEW_COLUMNS

WIDTH, HEIGHT = 1366, 700  # 768 less a 32-pixel top bar and a 36-pixel title bar
DESKTOP_POINTS = 12


@pytest.fixture(autouse=True)
def desktop_font(qapp):
    """The system font of a desktop set larger than Qt's default; the window built after it uses it."""
    default = QApplication.font()
    font = QFont(default)
    font.setPointSize(DESKTOP_POINTS)
    QApplication.setFont(font)
    yield font
    QApplication.setFont(default)


def laptop(qtbot, win) -> None:
    win.resize(WIDTH, HEIGHT)
    qtbot.waitUntil(lambda: win.width() == WIDTH and win.height() == HEIGHT)


def no_horizontal_scroll(page) -> bool:
    scroll = page.parentWidget().parentWidget()  # the PageScroll holding the page
    assert isinstance(scroll, QScrollArea)
    return not scroll.horizontalScrollBar().isVisible()


def whole(widget) -> bool:
    """Nothing of the widget is cut off by what holds it."""
    return widget.visibleRegion().boundingRect().size() == widget.size()


def test_stacked_banners_leave_the_bars_the_text_and_submit_whole(qtbot, window):
    laptop(qtbot, window)
    type_text(qtbot, window, "the quiet teacher walked near the river with all of the neighbours who had come "
                             "from the far side of the banana valley to see the parade")
    qtbot.keyClick(text_box(window), Qt.Key.Key_2, Qt.KeyboardModifier.AltModifier)  # a label: the verdict shows
    wait_for_prediction(qtbot, window)
    qtbot.waitUntil(lambda: window.workspace.view.prediction.verdict.isVisible())
    view = window.workspace_view
    view.round_notice.show_message("Round 2 opened while you were working: new examples now go to round 2. "
                                   "The draft you are writing stays in round 1 until you move it.", "OK")
    view.move_offer.show_message("Your draft was written in round 1, which a lead has closed since. Move it to "
                                 "round 2, where it is predicted again by round 2's target?", "Move to round 2",
                                 "Keep as draft")  # the offer's own buttons
    view.returned.show_message("A lead returned 2 examples to you with a comment: see Data, Returned to me, "
                               "revise them and submit them again.", "Show")
    # and what a start after a crash adds, and a perturbation's instructions
    view.draft_offer.show_message("A draft from 28 Nov 2026 02:14 was not submitted: <i>the quiet teacher walked "
                                  "near the river…</i>", "Restore it", "Discard")
    view.message.show_message("Perturbation: make a minimal edit that flips the true label, then choose the new "
                              "label.", "OK")
    qtbot.waitUntil(lambda: view.returned.isVisible())
    qtbot.wait(50)  # the layout settles
    panel = view.prediction
    assert whole(panel.combined), "a probability bar is cut"
    # the banners give way (they scroll among themselves): the page itself does not scroll, and
    # the text, the label buttons and Submit stay on screen
    page = view.parentWidget().parentWidget()
    assert isinstance(page, QScrollArea) and not page.verticalScrollBar().isVisible()
    for widget in (view.submit_button, view.editor.fields["text"], *view.editor.label_group.buttons()):
        assert whole(widget), widget
    chosen = view.editor.label_group.checkedButton()  # bold and padded: its text still fits
    bold = QFont(chosen.font())
    bold.setBold(True)
    assert chosen.width() >= QFontMetrics(bold).horizontalAdvance(chosen.text()) + 20, chosen.text()


def test_the_content_warning_stays_whole_above_banners_that_scroll(qtbot, data_dir, hate_model):
    """The warning locks the editor until read; banners that appear after it (a sync's round notice, an
    offer) scroll among themselves and never push its button out of view."""
    from tests.gui.conftest import close_window, open_window

    win = open_window(qtbot, data_dir)
    try:
        laptop(qtbot, win)
        view = win.workspace_view
        qtbot.waitUntil(lambda: win.workspace.loaded is not None and view.warning.isVisible(), timeout=60_000)
        assert not view.editing.isEnabled()
        view.round_notice.show_message("Round 1's target changed. You now write against its target: Trigger "
                                       "model, trained by the team's lead for this round.", "OK")
        offer = ("This example was written in round 1, which is no longer open. Move it to round 2 (text, "
                 "label and metadata are kept; its target predicts again), or keep it as a draft.")
        view.move_offer.show_message(offer, "Move to round 2", "Keep as draft")
        view.returned.show_message("A lead returned 2 examples to you with a comment: see Data, Returned to "
                                   "me, revise them and submit them again.", "Show")
        view.draft_offer.show_message("A draft from 28 Nov 2026 02:14 was not submitted: <i>the quiet teacher "
                                      "walked near the river…</i>", "Restore it", "Discard")
        view.message.show_message("Perturbation: make a minimal edit that flips the true label, then choose "
                                  "the new label.", "OK")
        qtbot.waitUntil(lambda: view.message.isVisible())
        qtbot.wait(50)  # the layout settles, and the newest banner is scrolled into view
        assert whole(view.warning.primary) and whole(view.warning.text)
        click_shown(qtbot, view.warning.primary)
        assert view.editing.isEnabled() and not view.warning.isVisible()
        assert "hate_speech" in win.desk.settings.acknowledged_warnings
        # the writer is pointed back to an offer further up (Ctrl+Enter on an example of a closed round)
        assert not whole(view.move_offer.primary)
        view.move_offer.show_message(offer, "Move to round 2", "Keep as draft")
        assert whole(view.move_offer.primary)
    finally:
        close_window(win)


def test_the_perturbation_tab_fits_without_a_horizontal_scroll_bar(qtbot, window):
    laptop(qtbot, window)
    view = window.workspace_view
    view.side.setCurrentWidget(view.perturbation)
    qtbot.waitUntil(view.perturbation.isVisible)
    assert no_horizontal_scroll(view.perturbation)
    assert view.perturbation.minimumSizeHint().width() <= view.side.width()
    # a real pair: each side's title names the labels and the model's answer, side by side
    view.perturbation.show_pair(PairView(
        labels=("hate", "not hate"), edit_distance=3, target="not hate",
        diff=(DiffPiece(DiffKind.EQUAL, "Those immigrants "), DiffPiece(DiffKind.DELETE, "should all go back"),
              DiffPiece(DiffKind.INSERT, "have built half of this town"), DiffPiece(DiffKind.EQUAL, ", honestly")),
        original=PairSide("hate", PredictedView("hate", {"hate": 0.93, "not hate": 0.07})),
        edited=PairSide("not hate", PredictedView("hate", {"hate": 0.61, "not hate": 0.39})),
        changes=(AttributionChange("should", 0.4, None), AttributionChange("built", None, -0.2))))
    qtbot.wait(50)  # the layout settles
    assert view.perturbation.minimumSizeHint().width() <= view.side.width()
    assert no_horizontal_scroll(view.perturbation)
    for title in (view.perturbation.original_title, view.perturbation.edited_title):
        assert whole(title), title.text()


def test_the_assistant_in_contrast_mode_shows_its_buttons_whole(qtbot):
    holder = QWidget()  # no layout: the panel gets exactly the side pane's width, whatever its minimum
    qtbot.addWidget(holder)
    panel = AssistPanel(holder)
    panel.show_panel(AssistPanelView(available=True, goal=Goal.CONTRAST, labels=("hate", "not hate"),
                                     contrast_label="not hate", status="Choose the new label, then Suggest."))
    panel.set_contrast_choices(("hate", "not hate"), "not hate")
    panel.setGeometry(0, 0, 480, 400)  # the side pane at 1366 px, a little narrower once the editor is widened
    holder.resize(480, 400)
    holder.show()
    qtbot.waitUntil(panel.isVisible)
    assert panel.minimumSizeHint().width() <= 480
    for button in (panel.suggest_button, panel.apply_button):
        assert button.width() >= button.sizeHint().width(), button.text()


def test_review_gives_the_text_column_the_spare_width(qtbot, window, desk, people, target_model):
    small_team(desk, people, target_model)
    laptop(qtbot, window)
    window.tabs.setCurrentWidget(window.review_view)
    table = window.review_view.table
    qtbot.waitUntil(lambda: table.model().rowCount() > 0, timeout=20_000)
    table.selectRow(0)  # the accept button now names the author
    qtbot.waitUntil(lambda: window.review_page.detail is not None, timeout=20_000)
    qtbot.wait(50)
    assert table.columnWidth(0) >= 0.3 * table.viewport().width()
    metrics = table.horizontalHeader().fontMetrics()
    for column, (key, title) in enumerate(REVIEW_COLUMNS[1:], start=1):  # the values stay readable
        assert table.columnWidth(column) >= metrics.horizontalAdvance(NARROW_SAMPLES[key]), title
    assert no_horizontal_scroll(window.review_view)


def test_the_dashboard_filters_show_their_choice_whole(qtbot, window, desk, people, target_model):
    small_team(desk, people, target_model)
    window.desk.switch_person(people.lead.id)
    laptop(qtbot, window)
    view = window.dashboard_view
    with qtbot.waitSignal(window.dashboard.updated, timeout=20_000):
        window.tabs.setCurrentWidget(view)
    view.round_combo.setCurrentIndex(view.round_combo.findText("Round 1"))
    qtbot.waitUntil(lambda: view.round_combo.currentText() == "Round 1")
    qtbot.wait(50)
    for combo in view.findChildren(QComboBox):
        if combo.isVisible() and combo.objectName().startswith("dashboard-"):
            assert combo.width() >= combo.minimumSizeHint().width(), combo.objectName()
    round_combo = view.round_combo
    assert round_combo.width() >= round_combo.fontMetrics().horizontalAdvance("Round 1") + 24
    assert no_horizontal_scroll(view)


def test_the_data_folder_message_never_runs_into_the_model_label(qtbot, window):
    laptop(qtbot, window)
    bar = window.statusBar()
    root = "/home/annotator-with-a-long-name/Documents/Dynadesk projects/hate speech round 2/dynadesk-data"
    window.show_data_folder(root)
    qtbot.wait(50)
    message = bar.currentMessage()
    label = window.model_label
    left = label.mapTo(window, QPoint(0, 0)).x() if label.isVisible() else WIDTH
    first = min(w.mapTo(window, QPoint(0, 0)).x() for w in bar.children()
                if hasattr(w, "isVisible") and w.isVisible() and w.parent() is bar and w is not bar
                and hasattr(w, "geometry") and w.geometry().width() > 0 and w.geometry().left() > 0)
    assert bar.fontMetrics().horizontalAdvance(message) + 8 < min(left, first), message
    assert message.startswith("Data folder:") and message.endswith("dynadesk-data")
