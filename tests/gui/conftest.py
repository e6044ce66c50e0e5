"""Opening the real main window on a test's data folder, and a target model for it."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt

from app.core.desk import Desk
from app.core.services.target_models import register_model
from app.gui.main_window import MainWindow


def open_window(qtbot, data_dir, *, closed_by_test: bool = True) -> MainWindow:
    """The main window on its own Desk, shown and active. ``closed_by_test=False`` leaves the
    closing to the test (to destroy it without a close event, as a killed process would)."""
    window = MainWindow(Desk(data_dir))
    if closed_by_test:
        qtbot.addWidget(window)
    window.resize(1280, 800)
    with qtbot.waitActive(window):
        window.show()
        window.activateWindow()
    return window


def close_window(window: MainWindow) -> None:
    window.close()
    window.desk.close()


@pytest.fixture
def window(qtbot, data_dir, modal_log):
    win = open_window(qtbot, data_dir)
    yield win
    close_window(win)


@pytest.fixture
def hate_model(data_dir, hate_trigger_model_dir):
    """Round 1 of the hate-speech task has the tiny trigger model as its target."""
    with Desk(data_dir) as desk:
        record = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
        assert desk.rounds.adopt_first_models("hate_speech", [record.id])
    return record


@pytest.fixture
def service(qtbot):
    """An inference service of its own (no window), shut down after the test."""
    from app.gui.inference import InferenceService

    service = InferenceService()
    yield service
    service.shutdown()
    assert not service._thread.isRunning()


def click_shown(qtbot, button, timeout: int = 10_000) -> None:
    """Click ``button`` as a person does: once it is on screen, laid out and whole. A banner just shown is
    laid out at the event loop's next turn; a click before that lands on the button's edge and misses."""
    qtbot.waitUntil(lambda: button.isVisible() and not button.visibleRegion().isEmpty()
                    and button.visibleRegion().boundingRect().size() == button.size(), timeout=timeout)
    qtbot.mouseClick(button, Qt.MouseButton.LeftButton)
