"""The smoke test behind ``dynadesk smoke-test``: the real MainWindow, driven step by step.

Each step waits (processing Qt events) until its condition holds or the overall deadline passes.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from PySide6.QtWidgets import QApplication


class SmokeTestFailed(Exception):
    pass


def run_smoke_test(data_dir: str | None, screenshot: str, *, timeout: float = 300.0,
                   text: str = "Have a lovely weekend, everyone!") -> dict:
    started = time.perf_counter()
    deadline = started + timeout
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Dynadesk")

    from app.core.desk import Desk
    from app.gui.main_window import MainWindow

    def wait(what: str, condition, *, limit: float | None = None) -> float:
        until = min(deadline, time.perf_counter() + limit) if limit else deadline
        while True:
            app.processEvents()
            if condition():
                return time.perf_counter() - started
            if time.perf_counter() > until:
                raise SmokeTestFailed(f"timed out waiting for {what} after {time.perf_counter() - started:.1f} s")
            time.sleep(0.01)

    desk = Desk(data_dir)
    window = MainWindow(desk)
    stored: list = []
    try:
        window.resize(1280, 800)
        window.show()
        window.prepare_first_start()
        window_s = wait("the main window", lambda: window.isVisible() and window.workspace.view.isVisible())
        ws = window.workspace
        view = ws.view
        ws.example_stored.connect(stored.append)

        def model_ready() -> bool:
            message = ws.no_model_message or ""
            if "could not be prepared" in message or "could not be loaded" in message:
                raise SmokeTestFailed(message)
            return ws.loaded is not None

        model_s = wait("the default model to load", model_ready)
        if view.warning.isVisible():
            view.warning.primary.click()
        wait("the editor to be enabled", lambda: view.editing.isEnabled(), limit=30)
        view.editor.fields["text"].setPlainText(text)
        view.editor.choose_label("not hate")
        typed = time.perf_counter()
        prediction_s = wait("a prediction of the typed text",
                            lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        prediction = ws.last_prediction.prediction
        first_prediction_ms = 1000 * (time.perf_counter() - typed)
        ws.submit()
        wait("the metadata form", view.form_shown, limit=60)
        view.form.set_values({"label_explanation": "smoke test"})
        view.form.confirm()
        wait("the example to be stored", lambda: bool(stored), limit=60)
        example = desk.examples.get(stored[0])
        wait("the window to settle", lambda: not view.form_shown(), limit=10)
        path = Path(screenshot).expanduser().resolve()
        path.parent.mkdir(parents=True, exist_ok=True)
        if not window.grab().save(str(path)) or not path.is_file():
            raise SmokeTestFailed(f"the screenshot could not be written to {path}")
        return {
            "ok": True,
            "data_dir": str(desk.root),
            "models": list(ws.loaded.names),
            "prediction": {"label": prediction.label, "latency_ms": round(prediction.latency_ms, 2),
                           "probabilities": {k: round(float(v), 4) for k, v in prediction.probabilities.items()}},
            "example": {"id": str(example.id), "status": str(getattr(example.status, "value", example.status)),
                        "model_fooled": example.model_fooled},
            "seconds_to_window": round(window_s, 2),
            "seconds_to_model": round(model_s, 2),
            "seconds_to_prediction": round(prediction_s, 2),
            "ms_typed_to_prediction": round(first_prediction_ms, 1),
            "seconds_total": round(time.perf_counter() - started, 2),
            "screenshot": str(path),
        }
    finally:
        window.close()
        app.processEvents()
        desk.close()
