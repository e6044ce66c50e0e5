"""The assistant's panel on a synced annotator desk whose target runs as ONNX int8: the writer types,
asks for suggestions, sees the others at once and the PyTorch form coming from the team's server (its
progress in the panel, the GUI never waiting), then word substitutions, each checked by the target.
A real window, a real server on loopback, real small models."""

from __future__ import annotations

import threading

import pytest
from PySide6.QtCore import Qt

from app.core.assist.types import Generator
from app.core.services.target_models import load_engine_for
from tests.gui.conftest import click_shown, close_window, open_window
from tests.gui.test_workspace import WAIT, text_box, type_text, wait_for_prediction
from tests.sync.test_gradient_form_sync import (
    HATEFUL,
    FaultyBlobs,
    hate_trigger_int8_dir,  # noqa: F401 (a fixture)
    largest_file,
    owner_publishes_round_3,
    synced_annotator,
)

pytestmark = pytest.mark.slow


def ask(qtbot, window) -> None:
    qtbot.keyClick(text_box(window), Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)


def test_the_panel_fetches_the_pytorch_form_with_progress_then_shows_word_substitutions(
        qtbot, team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    torch_record, int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
    big = largest_file(server_db, torch_record.sha256)
    synced_annotator(team, tmp_path / "ann").close()

    window = open_window(qtbot, tmp_path / "ann")
    try:
        window.sync.timer.stop()  # synced already; the form comes only when the assistant asks for it
        gate = threading.Event()
        held = FaultyBlobs(big.sha256, faults=0, gate=gate)  # the form's largest file waits for the test
        window.sync.clients.options["transport"] = held
        ws, panel = window.workspace, window.workspace.view.assist
        shown: list[tuple[str, float | None]] = []
        show_panel = panel.show_panel

        def recorded(view) -> None:
            shown.append((view.fetch_line, view.fetch_fraction))
            show_panel(view)

        panel.show_panel = recorded
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.session.writing is not None, timeout=WAIT)
        if ws.view.warning.isVisible():
            click_shown(qtbot, ws.view.warning.primary)
        assert [r.sha256 for r in ws.records] == [int8.sha256] and ws.loaded.formats == ("onnx",)
        qtbot.waitUntil(lambda: ws.assist.gradient_source is not None, timeout=WAIT)  # nothing fetched yet
        assert not held.ranges

        type_text(qtbot, window, HATEFUL)
        qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # the writer's label: hate
        assert wait_for_prediction(qtbot, window).label == "hate"
        ask(qtbot, window)

        # the other generators' suggestions come at once; the PyTorch form is on its way, said in the panel
        qtbot.waitUntil(lambda: bool(panel.rows) and not panel.view.busy and bool(held.ranges), timeout=WAIT)
        assert not panel.fetch.isHidden() and panel.fetch.text().startswith("Word substitution: ")
        assert "team's server" in panel.fetch.text() and not panel.fetch_bar.isHidden()
        assert "needs the PyTorch form" not in panel.notes.text()  # the fetch's line says it instead
        assert not [s for s in ws.assist.session.shown.suggestions if s.candidate.generator is Generator.SUBSTITUTION]
        assert text_box(window).hasFocus()  # typing was never interrupted

        gate.set()  # the file comes: the form is installed, and the writer's request is asked again with it
        qtbot.waitUntil(lambda: ws.assist.session.shown is not None and not panel.view.busy and any(
            s.candidate.generator is Generator.SUBSTITUTION for s in ws.assist.session.shown.suggestions),
            timeout=WAIT)
        assert panel.view.current and panel.fetch.isHidden() and panel.fetch_bar.isHidden()
        fetching = [(line, fraction) for line, fraction in shown if "fetching the target's PyTorch form" in line]
        assert fetching and fetching[-1][1] == 1.0 and "100%" in fetching[-1][0]
        fractions = [fraction for _line, fraction in fetching]
        assert fractions == sorted(fractions)  # the bar only moves forward

        while not any(w.row.generator == "word substitution" for w in panel.rows):  # listed a page at a time
            qtbot.mouseClick(panel.more_button, Qt.MouseButton.LeftButton)
        rows = [w.row for w in panel.rows if w.row.generator == "word substitution"]
        assert rows and all(row.needs_judgement for row in rows)
        target = load_engine_for(ws.records[0], num_threads=1)
        try:
            for row in rows:  # as the int8 target answers them
                answer = target.predict_one(row.text)
                assert answer.label == row.predicted
                assert answer.probabilities["hate"] == pytest.approx(row.probabilities["hate"], abs=1e-5)
        finally:
            target.close()
        assert [r.format for r in window.desk.models.all() if r.sha256 == torch_record.sha256] == ["hf-torch"]
    finally:
        gate.set()
        close_window(window)


def test_the_panel_says_in_one_sentence_what_the_owner_can_do_when_the_server_lacks_the_form(
        qtbot, team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir, with_gradient_forms=False)
    synced_annotator(team, tmp_path / "ann").close()
    window = open_window(qtbot, tmp_path / "ann")
    try:
        window.sync.timer.stop()
        ws, panel = window.workspace, window.workspace.view.assist
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.session.writing is not None, timeout=WAIT)
        if ws.view.warning.isVisible():
            click_shown(qtbot, ws.view.warning.primary)
        qtbot.waitUntil(lambda: ws.assist.gradient_source is not None, timeout=WAIT)
        type_text(qtbot, window, HATEFUL)
        qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
        wait_for_prediction(qtbot, window)
        ask(qtbot, window)
        qtbot.waitUntil(lambda: "does not have" in panel.fetch.text() and bool(panel.rows) and not panel.view.busy,
                        timeout=WAIT)
        assert panel.fetch.text().startswith("Word substitution needs the PyTorch form of Trigger R3, ONNX int8")
        assert "`dynadesk sync publish hate_speech --round 3`" in panel.fetch.text()
        assert panel.fetch_bar.isHidden() and "needs the PyTorch form" not in panel.notes.text()
        assert not ws.assist.gradient_fetch.may_fetch(ws.assist.gradient_source.sha256)  # not asked again at once
    finally:
        close_window(window)
