"""Shared test set-up.

- Qt runs offscreen; this is set before anything imports Qt.
- Every test gets its own data folder (database and settings) under tmp_path.
- Modal dialogs never block: message boxes answer with their default and are recorded;
  dialogs' exec() returns Rejected unless a test says otherwise.
- Nothing may reach a model hub.
"""

from __future__ import annotations

import os

os.environ["QT_QPA_PLATFORM"] = "offscreen"
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# SQLite files stay real, without waiting on the disk for each commit (as CI's PostgreSQL runs with fsync=off);
# a killed process still loses nothing. Children inherit it. tests/app/test_storage.py checks the desk's default.
os.environ.setdefault("DYNADESK_TEST_NO_FSYNC", "1")

# --- pytest-xdist (`make test` runs two workers) -------------------------------------------------
# Each worker is a process with its own QApplication, data folders (tmp_path), PostgreSQL schemas
# (uuid names) and loopback ports (bound to port 0); session-built models are shared through
# tests.model_fixtures.built_once. Two workers share the 2 cores, so PyTorch's OpenMP pool gets one
# thread per worker (two spinning threads per process on a shared core are many times slower; see
# local_models.engine.default_num_threads). Set before anything imports torch; children inherit it.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("MKL_NUM_THREADS", "1")
# --- end pytest-xdist ------------------------------------------------------------------------------

from pathlib import Path  # noqa: E402

import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
FIXTURES = Path(__file__).resolve().parent / "fixtures"
pytest_plugins = ["tests.model_fixtures"]  # session-wide model fixtures, for every test folder


@pytest.fixture(autouse=True)
def data_dir(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "dynadesk-data"
    folder.mkdir()
    monkeypatch.setenv("DYNADESK_DATA_DIR", str(folder))
    return folder


@pytest.fixture
def desk(data_dir):
    from app.core.desk import Desk

    with Desk(data_dir) as opened:
        yield opened


def shared_file(*parts: str) -> Path:
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data file {path} is not present")
    return path


@pytest.fixture
def modal_log(monkeypatch) -> list:
    """Replaces blocking Qt dialogs; each call is recorded as (kind, title, text)."""
    calls: list = []
    try:
        from PySide6.QtWidgets import QDialog, QMessageBox
    except ImportError:  # pragma: no cover - Qt is a dependency
        return calls

    def fake(kind):
        def answer(parent, title, text, *args, **kwargs):
            calls.append((kind, title, text))
            buttons = args[0] if args else kwargs.get("buttons")
            default = args[1] if len(args) > 1 else kwargs.get("defaultButton")
            if default not in (None, QMessageBox.StandardButton.NoButton):
                return default
            if kind == "question":
                return QMessageBox.StandardButton.Yes
            return QMessageBox.StandardButton.Ok if buttons is None else buttons

        return staticmethod(answer)

    for kind in ("information", "warning", "critical", "question"):
        monkeypatch.setattr(QMessageBox, kind, fake(kind))
    monkeypatch.setattr(QMessageBox, "exec", lambda self: calls.append(("exec", self.windowTitle(), self.text()))
                        or QMessageBox.StandardButton.Ok)
    monkeypatch.setattr(QDialog, "exec", lambda self: calls.append(("dialog", self.windowTitle(), "")) or 0)
    return calls


@pytest.fixture(autouse=True)
def _no_blocking_dialogs(request, monkeypatch):
    """Every test that has Qt loaded gets non-blocking dialogs, whether it asked or not."""
    import sys

    if "PySide6.QtWidgets" in sys.modules or "qtbot" in request.fixturenames:
        request.getfixturevalue("modal_log")


@pytest.fixture
def people(desk):
    """An author, two peers and a lead."""
    from types import SimpleNamespace

    return SimpleNamespace(
        author=desk.people.create("Ana Author", "annotator"),
        val1=desk.people.create("Vic Validator", "annotator"),
        val2=desk.people.create("Wen Validator", "annotator"),
        val3=desk.people.create("Xia Validator", "annotator"),
        lead=desk.people.create("Lee Lead", "lead"),
    )


@pytest.fixture
def target_model(desk):
    """A registered target model record for the hate-speech task."""
    task = desk.tasks.task("hate_speech")
    return desk.models.register("test hate model", "hf-torch", "ab" * 32, task_id=task.id,
                                label_map={"0": "not hate", "1": "hate"})


@pytest.fixture
def submit(desk, people, target_model):
    """Submits a hate-speech example (by the author unless told) that fooled the target model."""
    def make(text="some text", label="hate", model_label="not hate", author=None):
        return desk.examples.create((author or people.author).id, "hate_speech", hate_content(text, label),
                                    [hate_output(target_model, model_label)])
    return make


def hate_output(model, label: str, p_hate: float | None = None):
    from app.core.domain import ModelOutput

    p = p_hate if p_hate is not None else (0.9 if label == "hate" else 0.1)
    return ModelOutput(model.id, model.sha256, label, {"hate": p, "not hate": 1 - p}, 4.2)


def hate_content(text: str, label: str, **meta):
    from app.core.tasks.content import Content

    if label == "hate":
        meta.setdefault("hate_type", "derogation")
        meta.setdefault("target_groups", ["women"])
    meta.setdefault("label_explanation", "because")
    return Content({"text": text}, label, meta=meta)


# The GUI-thread guard: GUI code (a frame in app.gui or widgets) never runs SQL on the Qt main thread.
# A listener on every Engine records such a query; the test then fails at teardown, naming the statement and
# the GUI frame that reached it. Test code setting up data through a Desk on the main thread is fine (no GUI
# frame on the stack). Only queries on the main thread, with a QApplication alive, pay for the stack walk.

_GUI_PACKAGES = ("app.gui", "widgets")
_gui_thread_violations: list[str] = []


def _gui_frame(frame):
    """The innermost frame of GUI code on the stack, or None."""
    while frame is not None:
        name = frame.f_globals.get("__name__", "")
        if any(name == package or name.startswith(package + ".") for package in _GUI_PACKAGES):
            return frame
        frame = frame.f_back
    return None


def _where(frame) -> str:
    path = Path(frame.f_code.co_filename)
    try:
        path = path.resolve().relative_to(ROOT)
    except ValueError:
        pass
    return f"{path.as_posix()}:{frame.f_code.co_name}"


def _on_cursor_execute(conn, cursor, statement, parameters, context, executemany) -> None:
    import sys
    import threading

    if threading.current_thread() is not threading.main_thread():
        return
    widgets = sys.modules.get("PySide6.QtWidgets")
    if widgets is None or widgets.QApplication.instance() is None:
        return
    frame = _gui_frame(sys._getframe(1))
    if frame is None:
        return
    first_line = next((line.strip() for line in str(statement).splitlines() if line.strip()), "")
    _gui_thread_violations.append(f"{first_line[:100]}  <- {_where(frame)} line {frame.f_lineno}")


@pytest.fixture(scope="session")
def _gui_thread_listener():
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    event.listen(Engine, "before_cursor_execute", _on_cursor_execute)
    yield
    event.remove(Engine, "before_cursor_execute", _on_cursor_execute)


@pytest.fixture(autouse=True)
def no_query_on_gui_thread(_gui_thread_listener):
    """Fails the test (at teardown) when GUI code ran SQL on the Qt main thread."""
    _gui_thread_violations.clear()
    yield
    found = list(dict.fromkeys(_gui_thread_violations))
    _gui_thread_violations.clear()
    if found:
        pytest.fail("GUI code ran SQL on the Qt main thread (move it onto the page's SerialWorker):\n  "
                    + "\n  ".join(found), pytrace=False)


# Files whose tests take minutes together (measured: `pytest --durations`), started first: the two workers
# then end together instead of one finishing a long test alone while the other sits idle. Kept in their
# files' order, so module fixtures are still built once.
START_FIRST = (
    "tests/sync/test_next_round_evidence.py",
    "tests/sync/test_faults.py",
    "tests/sync/test_proposals_sync.py",
    "tests/gui/test_next_round_dialog.py",
    "tests/gui/test_leaderboard.py",
    "tests/test_packaging.py",
    "tests/sync/test_concurrency.py",
    "tests/app/test_validation_queue.py",
)


def pytest_collection_modifyitems(session, config, items) -> None:
    rank = {path: i for i, path in enumerate(START_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(START_FIRST)))  # stable
