"""The GUI-thread guard of tests/conftest.py catches GUI code querying on the Qt main thread, and only that."""

from __future__ import annotations

import threading

from tests import conftest

PROBE = '''
def count_people(desk):
    return len(desk.people.all())
'''


def gui_probe():
    """A function whose frame belongs to a module under app.gui, as GUI code's does."""
    namespace = {"__name__": "app.gui._guard_probe"}
    exec(compile(PROBE, "app/gui/_guard_probe.py", "exec"), namespace)
    return namespace["count_people"]


def test_guard_catches_gui_code_and_ignores_test_setup(qapp, desk):
    desk.people.create("Set Up", "annotator")  # the test's own setup on the main thread: fine
    assert conftest._gui_thread_violations == []

    count_people = gui_probe()
    worker = threading.Thread(target=count_people, args=(desk,))
    worker.start()
    worker.join()  # GUI code querying off the main thread: fine
    assert conftest._gui_thread_violations == []

    assert count_people(desk) >= 1  # GUI code querying on the main thread: caught
    caught = list(conftest._gui_thread_violations)
    conftest._gui_thread_violations.clear()  # caught on purpose: this test itself passes
    assert caught and all("app/gui/_guard_probe.py:count_people line 3" in v for v in caught)
    assert any(v.startswith("SELECT") for v in caught)
