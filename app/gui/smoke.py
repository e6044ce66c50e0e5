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
        task_id = ws.session.round.task_id
        # A run on a data folder that holds this text already (the second run of a package check)
        # must meet the near-duplicate warning; with the task's index still being built, submitting
        # would go on unchecked, so the run waits for it, as a writer's first pause would.
        same_text = _stored_with_text(desk, task_id, text)
        prediction_s, first_prediction_ms, warned = None, 0.0, False  # both set by the first attempt
        for _attempt in range(3):
            wait("a prediction of the typed text",
                 lambda: ws.last_prediction is not None and ws._current_prediction_matches())
            # the models that answered: the prepared faster form may replace them at any moment
            answered = ws.last_prediction
            prediction, models = answered.prediction, list(ws.loaded.names)
            if prediction_s is None:
                prediction_s = time.perf_counter() - started
                first_prediction_ms = 1000 * (time.perf_counter() - typed)
            wait("the near-duplicate index", lambda: task_id in ws.guard._built_tasks, limit=60)
            ws.submit()

            def replaced(answered=answered) -> bool:  # a new target judged the text again
                return ws.last_prediction is not answered

            wait("the metadata form or the near-duplicate warning",
                 lambda: view.form_shown() or view.duplicate_warning_shown() or replaced(), limit=60)
            if view.duplicate_warning_shown():  # the writer's way on: "Submit anyway" stores it all the same
                warned = True
                view.duplicate_warning.primary.click()
                wait("the metadata form after “Submit anyway”", lambda: view.form_shown() or replaced(), limit=60)
            if view.form_shown():
                break
            # the faster form replaced the target before the form appeared: the text is kept, judged
            # again by the new target, and submitted again, as a writer would
        else:
            raise SmokeTestFailed("the target model was replaced on every submit; no metadata form appeared")
        if same_text and not warned:
            raise SmokeTestFailed(f"no near-duplicate warning, although {same_text} example(s) of the task have "
                                  "this very text")
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
            "models": models,
            "prediction": {"label": prediction.label, "latency_ms": round(prediction.latency_ms, 2),
                           "probabilities": {k: round(float(v), 4) for k, v in prediction.probabilities.items()}},
            "example": {"id": str(example.id), "status": str(getattr(example.status, "value", example.status)),
                        "model_fooled": example.model_fooled},
            "near_duplicate_warning": warned,
            "examples_with_this_text": _stored_with_text(desk, task_id, text),
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


def _stored_with_text(desk, task_id, text: str) -> int:
    """How many stored examples of the task (those the near-duplicate check compares with) have exactly
    ``text``: counted in the database, not through the index the check uses."""
    from sqlalchemy import func, select

    from app.core.quality.near_duplicates import COUNTED_STATUSES
    from app.core.storage.models import Example

    with desk.db.read() as session:
        return session.scalar(select(func.count()).select_from(Example).where(
            Example.task_id == task_id, Example.text == text, Example.status.in_(COUNTED_STATUSES))) or 0
