"""The Next round dialog's progress, driven as a lead would: a training run names each stage with its own
counts ("1 of 3: frozen layers — 1,200 of 2,645 texts"), never reads 100 % and then 0 % under the same words;
with "Prepare the int8 form later" ticked, the round opens on the fp32 form and the window switches it to the
int8 form in the background once the search passes, and the status bar says so."""

from __future__ import annotations

import re

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QMessageBox

from app.core.next_round.deferred_int8 import pending_int8
from tests.gui.conftest import close_window, open_window
from tests.gui.test_next_round_dialog import TASK, choose_base, open_dialog, set_up, wait_for_comparison, write_base

WAIT = 180_000


def test_training_names_its_stages_and_an_int8_form_left_for_later_follows_in_the_background(
        qtbot, data_dir, tmp_path, monkeypatch, hate_trigger_model_dir, tiny_base_dir):
    set_up(data_dir, hate_trigger_model_dir)
    base = write_base(tmp_path / "base.csv", 2500, seed=34)  # enough held-out texts for the int8 check
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        choose_base(qtbot, dialog, base)
        dialog.encoder.setText(str(tiny_base_dir))
        assert not dialog.int8_later.isChecked()  # the int8 form is searched in training unless asked
        dialog.int8_later.setChecked(True)
        seen: list[tuple[str, int, int, str]] = []

        def look(view, real=dialog.show_progress) -> None:  # what the dialog shows after each report of the job
            real(view)
            seen.append((dialog.step_text.text(), dialog.progress.value(), dialog.progress.maximum(),
                         dialog.eta.text()))

        monkeypatch.setattr(dialog, "show_progress", look)
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        wait_for_comparison(qtbot, dialog)

        texts = [text for text, *_ in seen]
        assert any(re.fullmatch(r"1 of 3: frozen layers — .*— [\d,]+ of [\d,]+ texts", t) for t in texts), texts
        assert any(re.fullmatch(r"2 of 3: training — .* — [\d,]+ of [\d,]+ steps", t) for t in texts), texts
        assert any(t.startswith("3 of 3: assembling the model") for t in texts), texts
        assert not any("of 4:" in t for t in texts)  # no int8 search in training
        order = [int(t.split(" of ", 1)[0]) for t in texts if re.match(r"\d of 3: ", t)]
        assert order == sorted(order)  # stages go forward
        for (before, value, top, _), (after, value_after, top_after, _) in zip(seen, seen[1:]):
            if top and top_after and value == top and value_after == 0:  # a bar that starts again...
                assert before.split(" — ")[0] != after.split(" — ")[0], (before, after)  # ...says another stage

        qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
        assert "int8 form was left for later" in dialog.promote_intro.text()
        monkeypatch.setattr(QMessageBox, "question", lambda *args: QMessageBox.StandardButton.Yes)
        monkeypatch.setattr(QMessageBox, "getText", lambda *args, **kwargs: ("a test", True), raising=False)
        with qtbot.waitSignal(window.deferred_int8.finished, timeout=WAIT) as finished:
            qtbot.mouseClick(dialog.promote_button, Qt.MouseButton.LeftButton)
            qtbot.waitUntil(lambda: "Round 2 is open" in dialog.summary.text(), timeout=WAIT)
            assert "ONNX fp32" in dialog.summary.text()  # the round opened at once, on the fp32 form
        message = finished.args[0]
        assert "round 2 now runs the int8 form" in message and "int8 parity passed" in message
        desk = window.desk
        round_2 = desk.tasks.round(TASK, 2)
        (target,) = desk.models.round_models(round_2.id)
        assert target.name.endswith("ONNX int8") and target.provenance["int8_of"]
        assert pending_int8(desk) == []
        qtbot.waitUntil(lambda: window.workspace.loaded is not None
                        and window.workspace.loaded.sha256s == (target.sha256,), timeout=WAIT)
    finally:
        close_window(window)
