from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialogButtonBox, QLabel, QPushButton

from app.core.desk import Desk
from app.core.io.importers import import_file
from app.gui.main_window import MainWindow
from app.gui.pages import Menu
from tests.conftest import FIXTURES, shared_file
from widgets.import_dialog import ImportDialog
from widgets.profile_dialog import ProfileDialog


def wait_for_count(qtbot, window, text):
    qtbot.waitUntil(lambda: window.count_label.text() == text, timeout=5000)


def choose_task(window, code):
    window.task_combo.setCurrentIndex(window.task_combo.findData(code))


def test_searching_filters_what_is_shown(qtbot, window):
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    window.refresh()
    wait_for_count(qtbot, window, "10 examples")
    qtbot.keyClicks(window.filter_bar.search, "country")
    wait_for_count(qtbot, window, "2 examples")
    shown = {window.table_model.row_data(r).text for r in range(window.table_model.rowCount())}
    assert shown == {"Those people should be driven out of the country", "Those people should be welcomed into the country"}
    window.filter_bar.search.clear()
    # QTest can only synthesise Latin-1 key presses; other scripts arrive as an input method commits them
    window.filter_bar.search.insert("مرحب")  # nothing: the Arabic row says something else
    wait_for_count(qtbot, window, "0 examples")
    window.filter_bar.search.clear()
    window.filter_bar.search.insert("🌞")
    wait_for_count(qtbot, window, "1 example")

    window.filter_bar.search.clear()
    window.filter_bar.label.setCurrentIndex(window.filter_bar.label.findData("hate"))
    wait_for_count(qtbot, window, "5 examples")
    window.table.selectRow(0)
    row = window.table_model.row_data(0)
    qtbot.waitUntil(lambda: row.text in window.detail.toPlainText(), timeout=5000)
    assert "Type of hate" in window.detail.toPlainText() or "Target groups" in window.detail.toPlainText()


def test_scrolling_fetches_pages_lazily(qtbot, window):
    import_file(window.desk, shared_file("anli", "ANLI_analysis_r1_dev.csv"), "anli")
    choose_task(window, "nli")
    wait_for_count(qtbot, window, "1,000 examples")
    assert window.table_model.rowCount() == 200  # one page, not all rows
    window.table.scrollToBottom()
    qtbot.waitUntil(lambda: window.table_model.rowCount() == 400, timeout=5000)
    ids = [window.table_model.row_data(r).id for r in range(400)]
    assert len(set(ids)) == 400


def test_importing_through_the_dialog(qtbot, window, modal_log):
    window.import_action.trigger()
    dialog = window.findChild(ImportDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.path.setText(str(FIXTURES / "dynahate_sample.csv"))
    dialog.format.setCurrentIndex(dialog.format.findData("dynahate"))
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    qtbot.waitUntil(lambda: any(kind == "information" for kind, *_ in modal_log), timeout=10000)
    title, text = next((t, x) for kind, t, x in modal_log if kind == "information")
    assert title == "Import finished" and "10 examples" in text
    wait_for_count(qtbot, window, "10 examples")


def test_a_failed_import_says_why_and_changes_nothing(qtbot, window, modal_log, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("acl.id,text\n1,hello\n", encoding="utf-8")
    window.run_import(str(bad), "dynahate", None, False)
    qtbot.waitUntil(lambda: any(kind == "warning" for kind, *_ in modal_log), timeout=5000)
    assert "lacks the column" in next(x for kind, _, x in modal_log if kind == "warning")
    assert window.desk.review.count(window.browser.filter) == 0


def test_an_empty_import_path_is_refused_in_the_dialog(qtbot, window):
    window.import_action.trigger()
    dialog = window.findChild(ImportDialog)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()
    assert dialog.isVisible() and "Choose a file" in dialog.problem.text()


def test_creating_and_switching_profiles(qtbot, window):
    window.findChild(QAction, "profiles").trigger()
    qtbot.waitUntil(lambda: window.findChild(ProfileDialog) is not None, timeout=5000)  # once the people are read
    dialog = window.findChild(ProfileDialog)
    qtbot.keyClicks(dialog.name, "Grace Hopper")
    dialog.role.setCurrentText("lead")
    qtbot.mouseClick(dialog.findChild(QPushButton, "add"), Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: window.person_label.text().startswith("Grace Hopper · lead"), timeout=5000)
    person = window.desk.people.by_name("Grace Hopper")
    assert person.role == "lead" and window.desk.settings.current_person_id == str(person.id)


def test_preferences_survive_a_restart(qtbot, data_dir, modal_log):
    desk = Desk(data_dir)
    first = MainWindow(desk)
    qtbot.addWidget(first)
    first.show()
    size = first.desk.settings.font_size
    first.findChild(QAction, "larger-text").trigger()
    choose_task(first, "sentiment")
    first.close()
    desk.close()

    desk = Desk(data_dir)
    second = MainWindow(desk)
    qtbot.addWidget(second)
    assert second.task_combo.currentData() == "sentiment"
    assert second.desk.settings.font_size > size
    assert second.font().pointSize() == second.desk.settings.font_size
    second.close()
    desk.close()


def test_a_narrow_window_shortens_the_model_status_not_the_example_count(qtbot, window):
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    window.refresh()
    wait_for_count(qtbot, window, "10 examples")
    long_status = ("Round 3 ensemble: Hate speech R1 (MiniLM-L6 + trained top layer), ONNX fp32 + Hate speech R2 "
                   "(retrained on rounds 1-2), PyTorch + R3 candidate (distilled), ONNX int8 on cpu · last prediction 13.1 ms")
    window.model_label.setText(long_status)
    window.resize(window.minimumSizeHint().width(), 700)  # as narrow as the window goes
    qtbot.wait(100)
    count = window.count_label
    assert count.width() >= count.fontMetrics().horizontalAdvance("10 examples")  # shown whole
    shown = QLabel.text(window.model_label)  # what is painted
    assert "…" in shown and shown != long_status
    assert window.model_label.text() == long_status and window.model_label.toolTip() == long_status
    window.resize(2400, 800)  # room again: more of it shows
    qtbot.waitUntil(lambda: len(QLabel.text(window.model_label)) > len(shown), timeout=5000)


def test_every_tab_fits_a_small_laptop_screen(window):
    """Long one-line labels once held the window at 1,172 px or more; wrapped, it fits 1,024-1,100."""
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        assert window.minimumSizeHint().width() <= 1100, window.tabs.tabText(index)


def test_a_refresh_keeps_the_selected_example_and_its_detail(qtbot, window):
    """Refreshes also come from a sync in the background; the example being read stays."""
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    window.refresh()
    wait_for_count(qtbot, window, "10 examples")
    window.table.selectRow(3)
    chosen = window.table_model.row_data(3)
    qtbot.waitUntil(lambda: chosen.text in window.detail.toPlainText(), timeout=5000)
    with qtbot.waitSignal(window.table_model.modelReset, timeout=5000):
        window.refresh()
    qtbot.waitUntil(lambda: chosen.text in window.detail.toPlainText(), timeout=5000)
    assert window.table_model.row_data(window.table.currentIndex().row()).id == chosen.id
    assert window.table.selectionModel().isRowSelected(window.table.currentIndex().row())


def test_every_tab_fits_a_laptop_screen_and_the_text_column_takes_the_spare_width(qtbot, window):
    """1366×768 less the window's title bar: no tab may push the window's minimum past it, and
    each page fits without scrolling."""
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    window.resize(1366, 720)
    for index in range(window.tabs.count()):
        window.tabs.setCurrentIndex(index)
        qtbot.wait(50)  # the page loads what it shows
        least = window.minimumSizeHint().expandedTo(window.minimumSize())
        assert least.width() <= 1366 and least.height() <= 720, window.tabs.tabText(index)
        page = window.tabs.widget(index)
        room = window.tabs.currentWidget().parentWidget().size()  # the scroll area's viewport
        assert page.minimumSizeHint().width() <= room.width(), window.tabs.tabText(index)
        assert page.minimumSizeHint().height() <= room.height(), window.tabs.tabText(index)

    window.tabs.setCurrentWidget(window.data_page)
    window.refresh()
    wait_for_count(qtbot, window, "10 examples")
    widths = [window.table.columnWidth(c) for c in range(window.table_model.columnCount())]
    assert widths[0] == max(widths) and widths[0] >= 0.25 * window.table.viewport().width()


def test_the_detail_of_a_perturbation_shows_its_original(qtbot, window):
    import_file(window.desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    window.refresh()
    wait_for_count(qtbot, window, "10 examples")
    rows = [window.table_model.row_data(r) for r in range(10)]
    edited = next(r for r in rows if r.text.startswith("Those people should be welcomed"))
    window.table.selectRow(rows.index(edited))
    qtbot.waitUntil(lambda: edited.text in window.detail.toPlainText(), timeout=5000)
    shown = window.detail.toPlainText()
    assert "Perturbation of" in shown and "Those people should be driven out of the country" in shown
    original_id = window.desk.examples.get(edited.id).perturbation_of
    assert str(original_id) not in shown


def test_a_status_message_is_shown_whole_beside_a_long_model_status(qtbot, window):
    window.resize(1366, 720)
    window.model_label.setText("Round 1: Hate speech R1 (MiniLM-L6 + trained top layer), ONNX int8 on cpu · "
                               "last prediction 3.1 ms")
    qtbot.wait(50)
    message = "First start: step 2 of 3: building its ONNX version and checking it against the original (45 %)"
    window.statusBar().showMessage(message)
    qtbot.wait(50)
    bar = window.statusBar()
    shown_from = min(w.geometry().left() for w in bar.findChildren(QLabel) if w.isVisible() and w.text()
                     and w.parentWidget() is bar)  # the first permanent widget: the message ends before it
    assert bar.fontMetrics().horizontalAdvance(message) < shown_from
    window.statusBar().clearMessage()
    qtbot.waitUntil(lambda: window.model_label.isVisible() and "…" not in QLabel.text(window.model_label))


def test_every_page_is_mounted_with_its_tab_menu_entries_and_status(window):
    assert [a.text() for a in window.menuBar().actions()] == [
        "&File", "&View", "&Edit", "E&xample", "&Round", "&Profile", "S&ync", "&Help"]
    assert [a.text() for a in window.menus[Menu.VIEW].actions() if not a.isSeparator()] == [
        "&Refresh", "Find", "Larger text", "Smaller text", "&Create", "&Data", "&Validate", "&Review", "Dash&board",
        "Refresh the dashboard (also changes from sync)", "E&valuate", "S&uite"]
    assert [window.tabs.tabText(i) for i in range(window.tabs.count())] == [
        "&Create", "&Data", "&Validate", "&Review", "Dash&board", "Evaluate", "S&uite"]
    assert window.named_actions["sync-now"] in window.menus[Menu.SYNC].actions()
    assert window.sync_status in window.statusBar().findChildren(type(window.sync_status))
