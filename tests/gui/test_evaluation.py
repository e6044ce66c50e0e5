"""The Evaluate tab, driven as a lead drives it: Ctrl+6, tick a model, choose the HateCheck file,
run with a progress bar, read the summary, matrix, charts and failing cases, open a failing
case in Create with its attributions, cancel a run, and get a clear message for a bad file."""

from __future__ import annotations

import csv
import threading

import pytest
from PySide6.QtCore import Qt

from tests.conftest import shared_file
from tests.gui.conftest import click_shown, close_window, open_window

WAIT = 120_000


@pytest.fixture
def window(qtbot, data_dir, hate_model):
    win = open_window(qtbot, data_dir)
    ws = win.workspace
    qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
    click_shown(qtbot, ws.view.warning.primary)  # the content warning
    yield win
    close_window(win)


@pytest.fixture
def small_suite(tmp_path):
    """The first 150 cases of the shared HateCheck file (under tmp_path; never committed)."""
    with open(shared_file("hatecheck", "test_suite_cases_dev.csv"), encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    target = tmp_path / "suite.csv"
    with open(target, "w", encoding="utf-8", newline="") as handle:
        csv.writer(handle).writerows(rows[:151])
    return target


@pytest.fixture
def trigger_exports(data_dir, hate_model):
    """Two ONNX exports of the trigger model on record (fp32 by its id, int8 by its checksum)."""
    from app.core.desk import Desk

    with Desk(data_dir) as desk:
        for name, parent in (("Trigger model (ONNX)", {"id": str(hate_model.id)}),
                             ("Trigger model (ONNX int8)", {"sha256": hate_model.sha256})):
            desk.models.register(name, "onnx", name.encode().hex().ljust(64, "0")[:64],
                                 path=str(data_dir / "not-here"), provenance={"parent_model": parent})


def open_tab(qtbot, window):
    qtbot.keyClick(window, Qt.Key.Key_6, Qt.KeyboardModifier.ControlModifier)
    view = window.evaluation_view
    assert window.tabs.currentWidget() is view
    qtbot.waitUntil(lambda: len(view.model_keys()) >= 3, timeout=WAIT)
    return view


def tick_only(view, key: str) -> None:
    for each in view.model_keys():
        view.check_model(each, each == key)


def choose_suite(qtbot, view, path) -> None:
    view.suite.clear()
    qtbot.keyClicks(view.suite, str(path))


def test_evaluate_a_round_target_on_a_suite_and_open_a_failing_case(qtbot, window, small_suite, data_dir,
                                                                    monkeypatch):
    view = open_tab(qtbot, window)
    names = [name for name, _formats in view.model_entries()]
    assert names[0].startswith("Bundled default model") and "Round 1 targets: Trigger model" in names
    tick_only(view, "round:1")
    choose_suite(qtbot, view, small_suite)
    view.identity_swap.setChecked(False)
    qtbot.mouseClick(view.weights["performance"], Qt.MouseButton.LeftButton)
    view.weights["performance"].setValue(3)
    progress = []
    monkeypatch.setattr(view, "set_progress", lambda done, total, real=view.set_progress: (
        progress.append((done, total)), real(done, total)))
    with qtbot.waitSignal(window.evaluation.finished, timeout=WAIT) as finished:
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
        assert not view.run_button.isEnabled() and view.cancel_button.isEnabled()
    doc = finished.args[0]
    assert progress and progress[-1][0] == progress[-1][1]
    qtbot.waitUntil(lambda: view.run_button.isEnabled(), timeout=WAIT)  # the files are written
    assert view.progress.value() == view.progress.maximum()
    folder = window.evaluation.out_dir
    assert (folder / "evaluation.json").is_file() and (folder / "report.html").is_file()
    assert folder.parent == data_dir / "evaluations"
    assert doc["options"]["weights"]["performance"] == 3 and doc["options"]["identity_swap"] is False

    # summary: one row, with the score the document holds
    result = doc["results"]["m1"]
    assert view.summary.rowCount() == 1 and view.summary.item(0, 0).text() == "Trigger model"
    assert view.summary.item(0, 1).text() == f"{result['score']['score']:.1f}"
    assert "Spelling perturbations" in view.dimensions.text()
    # matrix: round 1 has no validated examples yet, and says so
    assert "no round has validated examples" in view.matrix.item(0, 0).text()
    # per functionality: the suite is chosen, its bars drawn worst first
    suite = result["sets"]["suite"]
    assert view.set_choice.currentData() == "suite"
    chart = view.functionality_chart
    assert [name for name, _ in chart.items] == sorted(suite["functionalities"],
                                                       key=lambda k: (suite["functionalities"][k]["accuracy"], k))
    assert f"{100 * suite['accuracy']:.1f}%" in view.set_figures.text()
    assert len(view.target_chart.items) == len(suite["targets"])
    # failing cases, listed and countable
    failing = view.failing
    assert failing.rowCount() == len(suite["failing"]) > 0
    assert view.result_tabs.tabText(4) == f"Failing cases ({failing.rowCount()})"

    # a failing case opens in Create, with the model's prediction and attributions
    view.result_tabs.setCurrentIndex(4)
    text, gold = failing.item(0, 3).text(), failing.item(0, 4).text()
    ws = window.workspace
    explained = []
    monkeypatch.setattr(ws.pairs, "attributed", lambda result, real=ws.pairs.attributed: (
        real(result), explained.append(result)))  # the handler the writer's attribution requests name
    rect = failing.visualItemRect(failing.item(0, 3))
    qtbot.mouseClick(failing.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.mouseDClick(failing.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    qtbot.waitUntil(lambda: bool(explained), timeout=WAIT)
    assert window.tabs.currentWidget() is window.workspace_view
    assert ws.view.editor.content()["inputs"]["text"] == text
    assert ws.view.editor.content()["label"] == gold
    assert ws.draft.origin["kind"] == "evaluation" and ws.draft.origin["case"] == failing.item(0, 0).text()
    assert ws.view.attribution.text.toPlainText() == text
    assert "From the evaluation" in ws.view.message.text.text()


def test_cancel_a_running_evaluation(qtbot, window, data_dir, small_suite, monkeypatch):
    from app.core.services import evaluation as ev

    # Hold the worker after its first batch until the test has pressed Cancel: no race with a fast model.
    real, gate = ev.evaluate, threading.Event()

    def held(*args, progress, **kwargs):
        report = progress._on_report

        def report_then_wait(done, total):
            report(done, total)
            if done:
                gate.wait(30)

        progress._on_report = report_then_wait
        return real(*args, progress=progress, **kwargs)

    monkeypatch.setattr(ev, "evaluate", held)
    view = open_tab(qtbot, window)
    tick_only(view, "round:1")
    choose_suite(qtbot, view, small_suite)
    started = []
    monkeypatch.setattr(view, "set_progress", lambda done, total, real=view.set_progress: (
        done and started.append(done), real(done, total)))
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: bool(started), timeout=WAIT)
    assert 0 < view.progress.value() < view.progress.maximum()
    job = window.evaluation.job
    qtbot.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    assert view.status.text() == "Cancelling after the current batch…"
    assert not view.run_button.isEnabled()  # until the job stopped
    gate.set()
    qtbot.waitUntil(lambda: job.finished, timeout=WAIT)
    assert job.state.value == "cancelled" and window.evaluation.job is None
    assert view.status.text() == "Cancelled; nothing was written."
    assert view.run_button.isEnabled() and not view.cancel_button.isEnabled()
    assert not (data_dir / "evaluations").exists()
    assert view.summary.rowCount() == 0


def test_bad_choices_get_clear_messages(qtbot, window, tmp_path):
    view = open_tab(qtbot, window)
    tick_only(view, "")
    qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    assert view.status.text() == "Tick at least one model to evaluate."
    tick_only(view, "round:1")
    bad = tmp_path / "not-hatecheck.csv"
    bad.write_text("text,label\nhello,hate\n", encoding="utf-8")
    choose_suite(qtbot, view, bad)
    with qtbot.waitSignal(window.evaluation.failed, timeout=WAIT) as failed:
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    assert "not a HateCheck suite" in failed.args[0]
    assert "not a HateCheck suite" in view.status.text() and "b3261e" in view.status.styleSheet()
    assert view.run_button.isEnabled()


def test_a_test_case_seen_in_training_is_warned_in_red(qtbot, window, hate_model, tmp_path):
    trained_on = hate_model.provenance["training"]["data"]["path"]  # recorded by the trainer
    with open(trained_on, encoding="utf-8") as handle:
        sentences = [row["sentence"] for row in csv.DictReader(handle)][:2]
    suite = tmp_path / "leaky.csv"
    with open(suite, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["functionality", "case_id", "test_case", "label_gold", "target_ident"])
        writer.writerow(["leak", "1", sentences[0], "hateful", ""])
        writer.writerow(["leak", "2", sentences[1], "non-hateful", ""])
        writer.writerow(["fresh", "3", "a sentence written only for this test", "non-hateful", ""])
    view = open_tab(qtbot, window)
    tick_only(view, "round:1")
    choose_suite(qtbot, view, suite)
    with qtbot.waitSignal(window.evaluation.finished, timeout=WAIT):
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    assert view.warnings.isVisible()
    assert view.warnings.text().startswith("WARNING: 2 evaluation case(s) also appear in the training data of Trigger model")
    qtbot.waitUntil(lambda: view.run_button.isEnabled(), timeout=WAIT)
    view.training.setText(str(tmp_path / "missing.csv"))
    with qtbot.waitSignal(window.evaluation.failed, timeout=WAIT):
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    assert "There is no training data file at" in view.status.text()


def test_jobs_let_typing_in_between_batches(qtbot, tiny_classifier_dir):
    """While an evaluation job runs on the inference thread, a prediction asked for in between is
    answered at the job's next progress report, before the job ends."""
    from app.gui.inference import InferenceService
    from local_models.engine import ModelSpec
    from tests.model_fixtures import LABELS

    service = InferenceService()
    try:
        with qtbot.waitSignal(service.model_loaded, timeout=WAIT):
            service.load([ModelSpec(tiny_classifier_dir, task_labels=tuple(LABELS))])
        posted, order, first = threading.Event(), [], []

        def job(progress):
            for step in range(3):
                progress.report(step, 3)
                if step == 0:
                    assert posted.wait(30)
            return "evaluated"

        reply = service.run_job(job, on_progress=lambda done, _total: first.append(done),
                                on_done=lambda result: order.append(("job", result)))
        qtbot.waitUntil(lambda: bool(first), timeout=WAIT)
        service.predict("typed while evaluating", on_done=lambda result: order.append(("prediction", result.inputs)))
        posted.set()
        qtbot.waitUntil(lambda: len(order) == 2, timeout=WAIT)
        assert order == [("prediction", "typed while evaluating"), ("job", "evaluated")]
        assert reply.finished and first == [0, 1, 2]
    finally:
        service.shutdown()


def test_one_entry_per_model_and_performance_per_set_with_its_size(qtbot, trigger_exports, window, hate_model,
                                                                   small_suite, tmp_path):
    """The trigger model's three formats sit under one entry; the summary shows each set's F1 with
    its number of cases and says that the sets count equally, not by size."""
    view = open_tab(qtbot, window)
    entries = dict(view.model_entries())
    assert entries["Trigger model"] == ["PyTorch folder", "ONNX", "ONNX int8"]
    assert not any(name.startswith("Trigger model (ONNX") for name in entries)
    tick_only(view, str(hate_model.id))
    held = tmp_path / "held.csv"
    held.write_text("text,label\nI hate all of them,hate\nWhat a lovely day,not hate\nThey are vermin,hate\n",
                    encoding="utf-8")
    choose_suite(qtbot, view, small_suite)
    qtbot.keyClicks(view.data, str(held))
    view.identity_swap.setChecked(False)
    view.robustness.setChecked(False)
    with qtbot.waitSignal(window.evaluation.finished, timeout=WAIT) as finished:
        qtbot.mouseClick(view.run_button, Qt.MouseButton.LeftButton)
    sets = finished.args[0]["results"]["m1"]["sets"]
    headers = [view.summary.horizontalHeaderItem(c).text() for c in range(view.summary.columnCount())]
    assert headers[2:5] == ["Performance\nmean of 2 sets", "suite\nF1, n=150", "held.csv\nF1, n=3"]
    assert [view.summary.item(0, c).text() for c in (3, 4)] == [f"{sets[k]['macro_f1']:.2f}" for k in ("suite", "data")]
    explanation = view.dimensions.text()
    assert "mean of the macro-F1 of 2 sets, each set counts equally, whatever its number of cases" in explanation
    assert "suite (n=150), held.csv (n=3)" in explanation and "held.csv: under 30 cases" in explanation
