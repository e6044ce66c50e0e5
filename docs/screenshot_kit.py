"""What every screenshot script needs: the project importable, an offscreen QApplication, and
waiting on Qt's event loop (so workers and timers run) instead of sleeping."""

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


def application() -> QApplication:
    """The one QApplication; keep a reference for as long as windows live."""
    return QApplication.instance() or QApplication(sys.argv[:1])


def wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def wait_until(condition, seconds: float = 120) -> None:
    """Let the event loop run until ``condition()`` holds; a scene that never gets ready is an error,
    not a screenshot of the wrong thing."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("the screenshot scene did not get ready")
        wait(50)


def lead_desk(folder):
    """A desk in ``folder`` with Ada Lovelace, a team lead, as the current profile."""
    from app.core.desk import Desk

    desk = Desk(folder)
    desk.switch_person(desk.people.create("Ada Lovelace", "lead").id)
    return desk


def show_window(desk, width: int, height: int):
    """The real main window on ``desk``, shown at a fixed size so screenshots are comparable."""
    from app.gui.main_window import MainWindow

    window = MainWindow(desk)
    window.resize(width, height)
    window.show()
    return window


def assistant_window(folder, width: int = 1366, height: int = 768):
    """A lead's desk on the shipped default model with the assistant on in hate speech's round, its window
    shown and loaded: (window, workspace, workspace view)."""
    from app.core.services.rounds import parse_settings
    from app.core.services.target_models import ensure_default_model

    desk = lead_desk(folder)
    desk.rounds.adopt_first_models("hate_speech", [ensure_default_model(desk).id])
    round_ = desk.tasks.round("hate_speech")
    desk.rounds.update(round_.id, desk.current_person_id, settings=parse_settings({"assistant": "on"}))
    desk.settings.last_task = "hate_speech"
    desk.settings.acknowledged_warnings = ["hate_speech"]
    window = show_window(desk, width, height)
    ws = window.workspace
    wait_until(lambda: ws.loaded is not None and ws.session.assistant_on, seconds=300)
    return window, ws, window.workspace_view


def anli_desk(folder, examples: int = 80):
    """A desk in ``folder`` with the ANLI round-1 development set, validated by four simulated people
    (tests/validation_sim.py); returns the desk and the simulation."""
    from app.core.desk import Desk
    from tests.validation_sim import import_anli, simulate

    desk = Desk(folder)
    import_anli(desk)
    return desk, simulate(desk, examples=examples)


def snap(widget, name: str, *, ready=None, settle_ms: int = 300) -> None:
    """Wait for ``ready()`` (if given), let the scene settle, and save ``widget`` as OUT/``name``."""
    if ready is not None:
        wait_until(ready)
    wait(settle_ms)
    widget.grab().save(str(OUT / name))
