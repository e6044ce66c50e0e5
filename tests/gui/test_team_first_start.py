"""A team desk's first seconds: the status bar says sync is about to run (not "Sync off"), and the bundled
model's preparation bar goes as soon as round 1's target came from elsewhere (the team's server) and
answers; the prediction pane's wait is stated as measured, not as "a few seconds"."""

from __future__ import annotations

import threading

from PySide6.QtWidgets import QProgressBar

from app.core.desk import Desk
from app.core.services import default_model_forms
from app.core.services.target_models import register_model
from sync.tokens import TokenStore
from tests.gui.conftest import close_window
from tests.gui.test_first_start import open_fresh
from tests.gui.test_workspace import WAIT, type_text, wait_for_prediction
from widgets.sync_status import SyncStatusWidget


def test_a_configured_desk_does_not_say_sync_off_before_its_first_sync(qtbot, data_dir, modal_log):
    with Desk(data_dir) as desk:
        desk.settings.server_url = "http://127.0.0.1:9"  # nothing listens: the first sync, 3 s later, is offline
        desk.save_settings()
        TokenStore(desk.root).set(desk.settings.server_url, "ddk_token")
    win = open_fresh(qtbot, data_dir)
    try:
        widget = win.findChild(SyncStatusWidget)
        assert widget.text.text() == "Syncing in a moment…"  # from the window's first paint
        qtbot.waitUntil(lambda: win.sync._status is not None, timeout=WAIT)  # the first read: still not "off"
        assert widget.text.text() == "Syncing in a moment…"
        qtbot.waitUntil(lambda: widget.text.text().startswith("Offline"), timeout=WAIT)  # then the truth
    finally:
        close_window(win)


def test_the_preparation_bar_goes_once_round_one_answers_with_the_teams_model(qtbot, data_dir, hate_trigger_model_dir,
                                                                            monkeypatch, modal_log):
    release, asked = threading.Event(), threading.Event()

    def slow_torch_files(desk, *, progress=None):  # the bundled model's PyTorch form, still assembling
        asked.set()
        progress.stage(1, 2, "Assembling", 0, 100).report(0, 10)
        while not release.wait(0.05):
            progress.check()
        return None

    monkeypatch.setattr(default_model_forms, "prepare_torch_files", slow_torch_files)
    win = open_fresh(qtbot, data_dir)
    try:
        bar = lambda: win.statusBar().findChild(QProgressBar, "first-start-progress")  # noqa: E731
        qtbot.waitUntil(lambda: asked.is_set() and bar() is not None and bar().isVisible(), timeout=WAIT)
        panel = win.workspace_view.prediction
        qtbot.waitUntil(lambda: "first start only" in panel.verdict.text(), timeout=WAIT)
        assert "a few seconds" not in panel.verdict.text() and "5 to 15 seconds" in panel.verdict.text()
        # what a pull does: round 1 gets the target the lead published (the window hears the change)
        record = register_model(win.desk, hate_trigger_model_dir, task_code="hate_speech", name="Team model")
        assert win.desk.rounds.adopt_first_models("hate_speech", [record.id])
        type_text(qtbot, win, "the quiet teacher walked near the river")
        wait_for_prediction(qtbot, win)
        qtbot.waitUntil(lambda: bar().isHidden(), timeout=WAIT)
        assert "Preparing the model" not in win.statusBar().currentMessage()
    finally:
        release.set()
        close_window(win)
