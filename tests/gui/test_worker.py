"""The serial worker's "newest request wins" rule, which every page's background refresh relies on."""

from __future__ import annotations

import threading

from app.gui.worker import SerialWorker


def test_only_the_newest_request_of_a_key_is_delivered(qtbot):
    worker = SerialWorker("test-latest")
    release = threading.Event()
    shown, errors = [], []
    worker.submit_latest("page", release.wait, on_done=lambda _: shown.append("old"))
    worker.submit_latest("page", lambda: 1 / 0, on_error=lambda e: errors.append(e))  # replaced too
    worker.submit_latest("other", lambda: "other", on_done=shown.append)  # another key is not affected
    worker.submit_latest("page", lambda: "new", on_done=shown.append)
    release.set()
    qtbot.waitUntil(lambda: "new" in shown)
    assert shown == ["other", "new"] and errors == []
    worker.shutdown()


def test_a_closed_worker_starts_no_more_work(qtbot):
    """A signal still in flight when the window closes (an inference failure, say) may ask for a refresh;
    the worker refuses it quietly instead of raising inside the Qt event loop."""
    worker = SerialWorker("test-closed")
    worker.shutdown()
    ran = []
    future = worker.submit_latest("page", lambda: ran.append("ran"), on_done=ran.append)
    assert future.cancelled()
    qtbot.wait(50)
    assert ran == []
