"""The leaderboard in the Evaluate tab, driven as a lead drives it: Ctrl+6 fills it in the background
(two rounds of decided examples, two tiny real targets), best figures in green, the current target
marked, n and intervals in the tooltips; a new decision shows stale cells until Refresh; a round
opened elsewhere fills the new cells on its own; a running fill can be cancelled."""

from __future__ import annotations

import shutil
import threading

import pytest
from PySide6.QtCore import Qt

from app.core.desk import Desk
from tests.app.test_comparison import _collect
from tests.conftest import hate_content, hate_output
from tests.gui.conftest import click_shown, close_window, open_window

WAIT = 120_000


@pytest.fixture
def two_rounds(data_dir, hate_trigger_model_dir, tiny_classifier_dir, tmp_path):
    """Round 1 (closed): the trigger model; round 2 (open): a tiny random classifier; decided examples in both."""
    from types import SimpleNamespace

    from app.core.services.target_models import register_model

    with Desk(data_dir) as desk:
        author = desk.people.create("Ana Author", "annotator")
        lead = desk.people.create("Lee Lead", "lead")
        desk.switch_person(lead.id)
        people = SimpleNamespace(author=author, lead=lead)
        folder = tmp_path / "random-model"
        shutil.copytree(tiny_classifier_dir, folder)
        banana = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
        plain = register_model(desk, folder, task_code="hate_speech", name="Random tiny")
        desk.rounds.set_models(desk.tasks.round("hate_speech", 1).id, lead.id, [banana.id])
        _collect(desk, people, banana, 1, 90)
        desk.rounds.open_next("hate_speech", lead.id, [plain.id])
        _collect(desk, people, plain, 2, 90)
    return {"banana": banana, "plain": plain, "author": author, "lead": lead}


@pytest.fixture
def window(qtbot, data_dir, two_rounds):
    win = open_window(qtbot, data_dir)
    ws = win.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
    click_shown(qtbot, ws.view.warning.primary)  # the content warning
    yield win
    close_window(win)


def open_tab(qtbot, window, *, expect_fill: bool = True):
    """Ctrl+6: the Evaluate tab opens on the leaderboard, which fills in the background."""
    if expect_fill:
        with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT) as filled:
            qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
        scored = filled.args[0]
    else:
        qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
        scored = None
    view = window.evaluation_view
    assert window.tabs.currentWidget() is view and view.result_tabs.currentWidget() is view.leaderboard
    return view.leaderboard, scored


def stored_board(data_dir):
    from app.core.next_round.leaderboard import read_leaderboard

    with Desk(data_dir) as desk:
        return read_leaderboard(desk, "hate_speech")


def test_the_leaderboard_fills_marks_and_refreshes(qtbot, window, data_dir, two_rounds):
    panel, scored = open_tab(qtbot, window)
    assert scored == 4  # two models × two rounds, scored once
    board = stored_board(data_dir)
    assert panel.model_names() == ["Trigger model", "▶ Random tiny"]  # the open round's target is marked
    assert panel.table.item(0, 1).text().startswith("Round 1") and "closed" in panel.table.item(0, 1).text()
    assert [panel.table.item(1, c).text() for c in (1, 2, 3)] == ["accuracy", "macro-F1", "fooling right"]
    for r, row in enumerate(board.rows):
        for g, column in enumerate(board.columns):
            cell = board.cell(row, column)
            item = panel.item(r, g, 0)
            assert item.text() == f"{100 * cell.accuracy:.1f}%"
            assert f"n={cell.n}" in item.toolTip() and "95 % interval" in item.toolTip()
            assert panel.item(r, g, 1).text() == f"{cell.macro_f1:.3f}"
            best = row.key in board.best(column, "accuracy")
            assert item.font().bold() == best
            assert (item.background().color().name() == "#c8e6c9") == best
    assert panel.status.text() == "Scored 4 cells." and panel.refresh_button.isEnabled()
    assert not panel.progress.isVisible()

    # opening the tab again scores nothing: every cell is kept
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert open_tab(qtbot, window)[1] == 0

    # a new decision on a held-out example of round 2: its cells turn stale until Refresh
    from app.core.tasks.splits import is_held_out

    desk = window.desk
    example, n = None, 0
    while example is None or not is_held_out(example.id):
        n += 1
        example = desk.examples.create(two_rounds["author"].id, "hate_speech",
                                       hate_content(f"one more banana {n}", "hate"),
                                       [hate_output(two_rounds["plain"], "hate")])
    desk.validation.validate(example.id, two_rounds["lead"].id, "correct", mode="lead")
    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    assert open_tab(qtbot, window)[1] == 0
    for r in range(2):
        assert panel.item(r, 1, 0).text().endswith("*") and panel.item(r, 1, 0).font().italic()
        assert "STALE" in panel.item(r, 1, 0).toolTip()
        assert not panel.item(r, 0, 0).text().endswith("*")
    assert "Refresh" in panel.status.text() and "2 stale" in panel.summary.text()
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT) as filled:
        qtbot.mouseClick(panel.refresh_button, Qt.MouseButton.LeftButton)
    assert filled.args[0] == 2
    assert not any(panel.item(r, g, 0).text().endswith("*") for r in range(2) for g in range(2))
    assert "Scored 2 cells" in panel.status.text()

    # a round opened by a write the window did not ask for (a sync, a promotion): its cells fill on their own
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT):
        window.desk.rounds.open_next("hate_speech", two_rounds["lead"].id, [two_rounds["banana"].id])
    assert panel.model_names() == ["▶ Trigger model", "Random tiny"]
    assert panel.table.item(0, 7).text().startswith("Round 3") and panel.item(0, 2, 0).text() == "no held-out examples"


def test_a_running_fill_can_be_cancelled_and_keeps_what_it_scored(qtbot, window, data_dir, monkeypatch):
    from app.gui import leaderboard as controller_module

    real, gate, first_scored = controller_module.compute_cells, threading.Event(), threading.Event()

    def held(plan, progress, **kwargs):
        """The first model is scored, then the job waits for the test's Cancel."""
        first, rest = plan.work[:1], plan.work[1:]
        plan.work = first
        real(plan, progress, **kwargs)
        plan.work = rest
        first_scored.set()
        while not gate.wait(0.01):
            progress.check()
        return real(plan, progress, **kwargs)

    monkeypatch.setattr(controller_module, "compute_cells", held)
    qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
    panel = window.evaluation_view.leaderboard
    qtbot.waitUntil(first_scored.is_set, timeout=WAIT)
    assert panel.cancel_button.isEnabled() and panel.progress.isVisible() and not panel.refresh_button.isEnabled()
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT) as filled:
        qtbot.mouseClick(panel.cancel_button, Qt.MouseButton.LeftButton)
        assert "Cancelling" in panel.status.text()
    gate.set()
    assert filled.args[0] == 2  # the first model's two cells
    assert panel.status.text().startswith("Cancelled; 2 cells")
    assert panel.refresh_button.isEnabled() and not panel.cancel_button.isEnabled()
    texts = [panel.item(r, g, 0).text() for r in range(2) for g in range(2)]
    assert sum(t == "not scored yet" for t in texts) == 2 and sum("%" in t for t in texts) == 2


def test_an_extractive_task_gets_a_note_not_an_error(qtbot, window):
    panel, _scored = open_tab(qtbot, window)
    combo = window.task_combo
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT):
        combo.setCurrentIndex(combo.findData("extractive_qa"))
    assert "extractive QA task" in panel.table.item(0, 0).text()
    assert panel.status.text() == "" and panel.refresh_button.isEnabled()


def test_a_round_changed_in_the_rounds_dialog_fills_the_board_once(qtbot, window, data_dir, two_rounds, monkeypatch):
    """The stored round reaches the window as one change, which re-reads the task's rounds, which is
    what fills the board: once, not once more from the dialog's own signal."""
    from app.gui import leaderboard as controller_module

    open_tab(qtbot, window)
    real, plans = controller_module.plan_leaderboard, []

    def counted(*args, **kwargs):
        plans.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(controller_module, "plan_leaderboard", counted)
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT):  # as the rounds dialog opens one
        window.desk.rounds.open_next("hate_speech", two_rounds["lead"].id, [two_rounds["banana"].id])
    assert plans == ["hate_speech"] and not window.leaderboard.running
    assert window.evaluation_view.leaderboard.table.item(0, 7).text().startswith("Round 3")


def test_two_controllers_jobs_at_once_never_hear_each_others_answers(qtbot, window, monkeypatch):
    """The leaderboard's fill and an evaluation are both jobs of the one inference service, outstanding
    at once (the evaluation queued behind the fill): the fill's failure, progress and messages reach
    the leaderboard panel only, the evaluation's result and progress the Evaluate tab only."""
    from app.core.errors import DynadeskError
    from app.gui import leaderboard as controller_module

    gate = threading.Event()

    def failing(plan, progress, **_kwargs):
        progress.say("Scoring, held by the test")
        progress.report(1, 7)
        assert gate.wait(WAIT / 1000)
        raise DynadeskError("The leaderboard's own failure.")

    monkeypatch.setattr(controller_module, "compute_cells", failing)
    evaluation, panel, view = window.evaluation, window.evaluation_view.leaderboard, window.evaluation_view
    board_texts, tab_texts, tab_progress, tab_failures = [], [], [], []
    monkeypatch.setattr(panel, "set_status", lambda text, error=False, real=panel.set_status: (
        board_texts.append(text), real(text, error=error)))
    monkeypatch.setattr(view, "set_status", lambda text, error=False, real=view.set_status: (
        tab_texts.append(text), real(text, error=error)))
    monkeypatch.setattr(view, "set_progress", lambda done, total, real=view.set_progress: (
        tab_progress.append((done, total)), real(done, total)))
    evaluation.failed.connect(tab_failures.append)

    qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: "Scoring, held by the test" in board_texts, timeout=WAIT)  # the fill's job runs
    qtbot.waitUntil(lambda: "round:2" in view.model_keys(), timeout=WAIT)
    for key in view.model_keys():
        view.check_model(key, key == "round:2")
    view.identity_swap.setChecked(False)
    view.robustness.setChecked(False)
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)  # on the rounds' decided examples
    qtbot.waitUntil(lambda: evaluation.job is not None, timeout=WAIT)  # queued behind the fill
    with qtbot.waitSignal(window.leaderboard.filled, timeout=WAIT) as filled:
        gate.set()
    assert filled.args[0] == 0 and panel.status.text() == "The leaderboard could not be scored: " \
                                                          "The leaderboard's own failure."
    finished: list[dict] = []
    evaluation.finished.connect(finished.append)
    qtbot.waitUntil(lambda: bool(finished), timeout=WAIT)  # the evaluation ran after the fill's failure
    assert finished[0]["models"] and view.status.text().startswith("Done.") and tab_failures == []
    assert not any("leaderboard" in text or "held by the test" in text for text in tab_texts)
    assert (1, 7) not in tab_progress and tab_progress[-1][0] == tab_progress[-1][1]  # only its own progress
    assert not any(text.startswith(("Evaluating", "Done.")) for text in board_texts)
