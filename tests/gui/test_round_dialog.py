import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction

from app.core.desk import Desk
from app.gui.main_window import MainWindow
from widgets.round_dialog import RoundDialog


@pytest.fixture
def lead_window(qtbot, data_dir, modal_log):
    desk = Desk(data_dir)
    lead = desk.people.create("Lee Lead", "lead")
    desk.switch_person(lead.id)
    task = desk.tasks.task("hate_speech")
    for name, sha in (("base model", "aa" * 32), ("strong model", "bb" * 32)):
        desk.models.register(name, "onnx", sha, task_id=task.id)
    window = MainWindow(desk)
    qtbot.addWidget(window)
    window.show()
    yield window
    window.close()
    desk.close()


def open_dialog(qtbot, window) -> RoundDialog:
    window.findChild(QAction, "rounds").trigger()
    qtbot.waitUntil(lambda: window.findChild(RoundDialog) is not None, timeout=5000)  # opened once read
    dialog = window.findChild(RoundDialog)
    qtbot.waitUntil(lambda: dialog.status.text().startswith("<b>Round 1</b>"), timeout=5000)
    return dialog


def check(dialog, name: str) -> None:
    for i in range(dialog.models.count()):
        item = dialog.models.item(i)
        if item.text().startswith(name):
            item.setCheckState(Qt.CheckState.Checked)


def test_a_lead_attaches_a_model_sets_the_goal_and_imports_contexts(qtbot, lead_window, tmp_path):
    window, desk = lead_window, lead_window.desk
    dialog = open_dialog(qtbot, window)
    assert dialog.editable and dialog.save_button.isVisible()
    assert dialog.models.count() == 2

    check(dialog, "base model")
    qtbot.mouseClick(dialog.models_button, Qt.MouseButton.LeftButton)
    round1 = desk.tasks.round("hate_speech", 1)
    qtbot.waitUntil(lambda: [m.name for m in desk.models.round_models(round1.id)] == ["base model"], timeout=5000)

    dialog.goal.clear()
    qtbot.keyClicks(dialog.goal, "Find implicit hate the model misses")
    dialog.label_start.setCurrentIndex(dialog.label_start.findData("random"))
    dialog.policy.setCurrentIndex(dialog.policy.findData("least_fooled"))
    qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: desk.tasks.round("hate_speech", 1).goal_message == "Find implicit hate the model misses",
                    timeout=5000)
    settings = desk.rounds.settings(desk.tasks.round("hate_speech", 1))
    assert (settings.label_start, settings.context_policy) == ("random", "least_fooled")
    qtbot.waitUntil(lambda: "Find implicit hate" in window.round_label.text(), timeout=5000)

    prompts = tmp_path / "prompts.csv"
    prompts.write_text("id,sentence\n1,They never belong here\n2,What a lovely morning 🌞\n3,They never belong here\n",
                       encoding="utf-8")
    dialog.import_path.setText(str(prompts))
    qtbot.keyClicks(dialog.import_column, "sentence")
    qtbot.keyClicks(dialog.import_tag, "seed")
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "Added 2 context(s); 1 were already in the round." in dialog.problem.text(), timeout=5000)
    assert dialog.contexts.rowCount() == 2
    shown = {dialog.contexts.item(r, 0).text() for r in range(2)}
    assert shown == {"They never belong here", "What a lovely morning 🌞"}
    assert dialog.contexts.item(0, 1).text() == "seed"

    dialog.import_path.setText(str(prompts))
    dialog.import_column.clear()
    qtbot.mouseClick(dialog.import_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "--column" in dialog.problem.text(), timeout=5000)  # shown in the dialog, not a popup


def test_opening_the_next_round_from_the_dialog(qtbot, lead_window):
    window, desk = lead_window, lead_window.desk
    dialog = open_dialog(qtbot, window)
    qtbot.mouseClick(dialog.next_button, Qt.MouseButton.LeftButton)
    assert "Check the target model" in dialog.problem.text()
    check(dialog, "strong model")
    qtbot.mouseClick(dialog.next_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dialog.rounds.count() == 2, timeout=5000)
    qtbot.waitUntil(lambda: dialog.status.text().startswith("<b>Round 2</b>"), timeout=5000)
    assert desk.tasks.round("hate_speech", 1).status == "closed"
    assert [m.name for m in desk.models.round_models(desk.tasks.round("hate_speech", 2).id)] == ["strong model"]
    qtbot.waitUntil(lambda: window.round_label.text().startswith("Round 2"), timeout=5000)


def test_an_annotator_reads_the_round_but_cannot_change_it(qtbot, data_dir, modal_log):
    desk = Desk(data_dir)
    annotator = desk.people.create("Ana", "annotator")
    desk.switch_person(annotator.id)
    window = MainWindow(desk)
    qtbot.addWidget(window)
    dialog = open_dialog(qtbot, window)
    assert not dialog.editable
    assert not dialog.goal.isEnabled() and dialog.description.isReadOnly()
    assert not dialog.save_button.isVisible() and not dialog.next_button.isVisible()
    assert not dialog.import_row.isVisible()
    window.close()
    desk.close()


def test_the_model_list_shows_each_int8_forms_parity_figures(qtbot, lead_window):
    """A lead choosing targets sees whether an int8 model kept its float model's labels, and by how much."""
    window, desk = lead_window, lead_window.desk
    parity = {"texts": 4957, "agreement": 0.9986, "labels_changed": 7, "p99_change": 0.0464, "max_change": 0.1685,
              "mean_change": 0.0043, "source": "labeled_data.csv dev + test split", "passed": True, "forced": False,
              "problems": []}
    desk.models.register("int8 model", "onnx", "cc" * 32, task_id=desk.tasks.task("hate_speech").id,
                         provenance={"export": {"parity": parity}})
    dialog = open_dialog(qtbot, window)
    items = {dialog.models.item(i).text().split("  (")[0]: dialog.models.item(i) for i in range(dialog.models.count())}
    shown = items["int8 model"]
    assert shown.text().endswith("\nint8 passed: 99.86% same label, p99 0.046 · 4,957 texts")
    assert "max 0.169" in shown.toolTip() and "labeled_data.csv dev + test split" in shown.toolTip()
    assert "int8" not in items["base model"].text() and items["base model"].toolTip() == ""


def test_a_lead_turns_on_the_ab_assistant_and_the_writing_session_follows_at_once(qtbot, lead_window):
    window, desk = lead_window, lead_window.desk
    workspace = window.workspace
    qtbot.waitUntil(lambda: workspace.session.writing is not None, timeout=5000)
    assert workspace.session.writing.arm is None and not workspace.session.assistant_on  # off by default
    dialog = open_dialog(qtbot, window)
    assert dialog.assistant.currentData() == "off" and dialog.assistant.isEnabled()
    dialog.assistant.setFocus()
    qtbot.keyClick(dialog.assistant, Qt.Key.Key_End)  # the last choice: A-B
    assert dialog.assistant.currentText().startswith("A-B")
    with qtbot.waitSignal(workspace.assistant.assistant_changed, timeout=5000) as changed:
        qtbot.mouseClick(dialog.save_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: desk.tasks.round("hate_speech", 1).settings.get("assistant") == "ab", timeout=5000)
    writing = workspace.session.writing
    assert writing.mode == "ab" and writing.number == 1 and writing.arm in ("on", "off")
    assert changed.args == [writing.arm == "on"] and workspace.session.assistant_on == (writing.arm == "on")
    assert workspace.session.draft.assistance.arm == writing.arm
    dialog.close()
    reopened = open_dialog(qtbot, window)
    assert reopened.assistant.currentData() == "ab"


def test_an_annotator_reads_the_assistant_setting_but_cannot_change_it(qtbot, data_dir, modal_log):
    desk = Desk(data_dir)
    desk.switch_person(desk.people.create("Ana", "annotator").id)
    window = MainWindow(desk)
    qtbot.addWidget(window)
    window.show()
    dialog = open_dialog(qtbot, window)
    assert not dialog.assistant.isEnabled() and dialog.assistant.currentText() == "Off"
    window.close()
    desk.close()
