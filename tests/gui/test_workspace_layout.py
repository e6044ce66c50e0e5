"""The Create page at laptop size: nothing moves when the first prediction arrives, fooling the
model reads as the writer's success, and discarding a draft is far from storing it."""

from __future__ import annotations

from PySide6.QtCore import QPoint, Qt

from tests.gui.test_workspace import text_box, type_text, wait_for_prediction, window  # noqa: F401 (fixture)

SUCCESS = "#1e6b35"


def _places(window) -> dict:
    view = window.workspace.view
    parts = {"editor": view.editor, "prediction": view.prediction, "verdict": view.prediction.verdict,
             "side": view.side, "submit": view.submit_button, "tabs": window.tabs, "status": window.statusBar(),
             "page": view, "combined": view.prediction.combined}
    return {name: (w.mapTo(window, QPoint(0, 0)), w.size()) for name, w in parts.items()}


def test_the_first_prediction_moves_nothing_and_fooling_reads_as_success(qtbot, window):
    window.resize(1366, 720)
    qtbot.waitUntil(lambda: window.width() == 1366)
    before = _places(window)
    type_text(qtbot, window, "the quiet teacher walked near the river")
    wait_for_prediction(qtbot, window)
    qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # my label: hate
    panel = window.workspace.view.prediction
    assert panel.verdict.text() == "Model fooled"
    assert SUCCESS in panel.verdict.styleSheet()
    assert _places(window) == before


def test_discarding_a_draft_is_far_from_submitting_and_storing(qtbot, window):
    window.resize(1366, 720)
    view = window.workspace.view
    qtbot.waitUntil(lambda: window.width() == 1366)

    def gap(a, b) -> int:
        left, right = sorted((a.mapTo(window, QPoint(0, 0)).x(), b.mapTo(window, QPoint(0, 0)).x()))
        return right - left

    assert gap(view.discard_button, view.submit_button) > 300
    view.show_form(True)
    assert view.discard_button.isVisible()
    assert gap(view.discard_button, view.form.confirm_button) > 300


def test_first_start_shows_the_preparation_steps_and_percentage(qtbot, data_dir, default_model_cache, tmp_path,
                                                              monkeypatch):
    """The bundled model's faster form takes tens of seconds to prepare the first time: the status
    bar says which step it is on and how far along, while the PyTorch form answers."""
    from PySide6.QtWidgets import QProgressBar

    from tests.gui.conftest import close_window
    from tests.gui.test_first_start import hold_back_fast_form, open_fresh

    arrive, _asked = hold_back_fast_form(monkeypatch, data_dir, default_model_cache, tmp_path)
    win = open_fresh(qtbot, data_dir)
    try:
        def bar():
            return win.statusBar().findChild(QProgressBar, "first-start-progress")

        qtbot.waitUntil(lambda: bar() is not None and bar().isVisible() and bar().value() == 37, timeout=60_000)
        message = win.statusBar().currentMessage()
        assert message == "Preparing the faster form · Step 2 of 3: Building its ONNX version and checking it"
        assert bar().toolTip() == "Answering from the PyTorch form; preparing the faster form in the background…"
        assert win.statusBar().fontMetrics().horizontalAdvance(message) < bar().geometry().left()  # shown whole
        win.grab().save(str(tmp_path / "preparing.png"))
        arrive.set()
        qtbot.waitUntil(bar().isHidden, timeout=60_000)
    finally:
        close_window(win)
