"""A fresh desk's first start with the real default model: it answers from PyTorch at once,
switches to ONNX while the annotator types (no prediction lost, none shown for other text), and a
failed preparation leaves PyTorch answering with a message in the status bar.

The background export itself (a child process, tens of seconds) is tested in
tests/local_models/test_child_process.py; here the ONNX form, prepared once per test run, is held
back until the test lets it arrive."""

from __future__ import annotations

import shutil
import threading

import pytest

from app.core import paths
from app.core.desk import Desk
from app.core.services import default_model_forms
from app.core.services.target_models import TargetModelError, model_input
from tests.gui.conftest import close_window, open_window
from tests.gui.test_workspace import WAIT, text_box, wait_for_prediction

pytestmark = pytest.mark.slow


def hold_back_fast_form(monkeypatch, data_dir, default_model_cache, tmp_path, *, error: Exception | None = None):
    """The data folder gets the default model's PyTorch form; its ONNX form arrives (from the
    session's prepared copy) once the returned event is set, as if the export had just ended."""
    cache = paths.models_cache_dir(data_dir)
    shutil.copytree(default_model_cache, cache)
    [root] = [p for p in cache.iterdir() if (p / "torch").is_dir()]
    held = tmp_path / "held"
    held.mkdir()
    for item in root.iterdir():
        if item.name != "torch":
            shutil.move(str(item), held / item.name)
    arrive, asked = threading.Event(), threading.Event()

    def prepare_fast_files(desk, *, progress=None):
        asked.set()
        step = progress.stage(2, 3, "Building its ONNX version and checking it", 5, 70)
        step.report(1, 2)
        while not arrive.wait(0.05):
            progress.check()  # the window closed: stop, as the child process would
        if error is not None:
            raise error
        for item in held.iterdir():
            shutil.move(str(item), root / item.name)
        return default_model_forms.prepared_fast_files(desk)

    monkeypatch.setattr(default_model_forms, "prepare_fast_files", prepare_fast_files)
    return arrive, asked


def open_fresh(qtbot, data_dir):
    with Desk(data_dir) as desk:  # the content warning is read: the editor is open at once
        desk.settings.acknowledged_warnings = ["hate_speech"]
        desk.save_settings()
    win = open_window(qtbot, data_dir)
    win.resize(1366, 740)
    win.prepare_first_start()
    return win


def test_the_switch_to_onnx_while_typing_loses_no_prediction_and_shows_none_for_other_text(
        qtbot, data_dir, default_model_cache, tmp_path, monkeypatch):
    arrive, asked = hold_back_fast_form(monkeypatch, data_dir, default_model_cache, tmp_path)
    win = open_fresh(qtbot, data_dir)
    try:
        ws, status = win.workspace, win.statusBar()
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        assert ws.loaded.formats == ("hf-torch",) and ws.records[0].name.endswith(", PyTorch")
        qtbot.waitUntil(asked.is_set, timeout=WAIT)
        qtbot.waitUntil(lambda: "Preparing the faster form · Step 2 of 3" in status.currentMessage(), timeout=WAIT)

        shown = []  # every prediction the page showed: the text it was for, and the editor's text then

        def record(result) -> None:
            if ws.last_prediction is result:
                editor = model_input(ws.definition, dict(ws.view.content().inputs))
                shown.append((result.inputs, editor, result.prediction.members[0].model_sha,
                              ws.records[0].sha256, ws.loaded.formats[0]))

        monkeypatch.setattr(ws, "_predicted", lambda result, real=ws._predicted: (real(result), record(result)))
        switching = []  # from round 1's switch (in the database) until the page has the ONNX form loaded
        win.first_start.switched.connect(lambda _record: switching.append(True))
        ws.inference.model_loaded.connect(lambda models: switching and models.formats == ("onnx",)
                                          and switching.append(False))
        box = text_box(win)
        box.setFocus()
        words = iter(("I love spending time with my family and my friends on sunny days in the garden " * 40).split())
        for word in words:  # the PyTorch form answers, word by word
            qtbot.keyClicks(box, word + " ")
            wait_for_prediction(qtbot, win)
            if len(shown) == 3:
                break
        arrive.set()  # the ONNX form is ready: from here on the annotator types without pausing
        typed_while_switching = 0
        for word in words:
            qtbot.keyClicks(box, word + " ")
            qtbot.wait(30)
            typed_while_switching += switching[-1:] == [True]
            if switching[-1:] == [False]:
                break
        assert switching == [True, False], "the switch did not happen while typing"
        qtbot.keyClicks(box, "the end")
        final = wait_for_prediction(qtbot, win)
        assert typed_while_switching > 0  # keystrokes came while the ONNX form was being registered and loaded
        assert shown[-1][0] == box.toPlainText() == "".join(shown[-1][1])  # the last one arrived
        assert final.members[0].model_sha == ws.records[0].sha256
        for for_text, editor_text, made_by, target, _form in shown:
            assert for_text == editor_text  # never a prediction of other text
            assert made_by == target  # never one of the replaced form, judged as the new one
        forms = [form for *_, form in shown]
        switch = forms.index("onnx")
        assert switch > 0 and set(forms[:switch]) == {"hf-torch"} and set(forms[switch:]) == {"onnx"}
        qtbot.waitUntil(lambda: status.currentMessage().startswith("Switched to the faster form: ONNX"), timeout=WAIT)
        assert "ONNX" in win.model_label.text()
        win.grab().save(str(tmp_path / "switched.png"))
    finally:
        close_window(win)
    with Desk(data_dir) as desk:  # round 1 runs the ONNX form; the PyTorch form stays registered
        [target] = desk.models.round_models(desk.tasks.round("hate_speech").id)
        assert target.format == "onnx" and target.provenance["parent_model"]["sha256"]
        assert default_model_forms.waiting_stand_in(desk) is None


def test_a_failed_preparation_leaves_pytorch_answering_and_says_so(qtbot, data_dir, default_model_cache, tmp_path,
                                                                   monkeypatch):
    arrive, _asked = hold_back_fast_form(monkeypatch, data_dir, default_model_cache, tmp_path,
                                         error=TargetModelError("The faster form could not be exported: disk full"))
    arrive.set()
    win = open_fresh(qtbot, data_dir)
    try:
        ws, status = win.workspace, win.statusBar()
        qtbot.waitUntil(lambda: "could not be prepared" in status.currentMessage(), timeout=WAIT)
        assert "disk full" in status.currentMessage()
        assert "keeps answering from its PyTorch form" in status.currentMessage()
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        qtbot.keyClicks(text_box(win), "I love my family")
        assert wait_for_prediction(qtbot, win).label == "not hate"
        assert ws.loaded.formats == ("hf-torch",)
    finally:
        close_window(win)
    with Desk(data_dir) as desk:  # the next start tries again
        assert default_model_forms.waiting_stand_in(desk) is not None


def test_closing_during_the_preparation_stops_it_and_the_next_start_resumes(qtbot, data_dir, default_model_cache,
                                                                         tmp_path, monkeypatch):
    arrive, asked = hold_back_fast_form(monkeypatch, data_dir, default_model_cache, tmp_path)
    win = open_fresh(qtbot, data_dir)
    qtbot.waitUntil(asked.is_set, timeout=WAIT)
    progress = win.first_start._progress
    close_window(win)
    assert progress.cancelled  # the child process would be ended here
    with Desk(data_dir) as desk:
        assert default_model_forms.waiting_stand_in(desk).format == "hf-torch"
    arrive.set()  # the next start: the background part picks up and switches
    win = open_window(qtbot, data_dir)
    try:
        win.prepare_first_start()
        ws = win.workspace
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.loaded.formats == ("onnx",), timeout=WAIT)
        qtbot.waitUntil(lambda: win.statusBar().currentMessage().startswith("Switched to the faster form"),
                        timeout=WAIT)
    finally:
        close_window(win)
