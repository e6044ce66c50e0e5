"""A reply per request: whoever asks the inference service is told its own request's progress, messages
and end, and nobody else's; a newer request of the same key cancels the older one, which reports
cancelled and never done. Real service, real lanes; waits are on replies, never sleeps."""

from __future__ import annotations

import threading

from PySide6.QtCore import QCoreApplication

from app.core.errors import DynadeskError
from tests.gui.test_inference_service import SIGNAL_TIMEOUT, Told, load, spec


def held_job(name: str, gate: threading.Event, *, fail: bool = False, checks: bool = True):
    """A job that reports and says its ``name``, waits for ``gate``, then returns (or raises) its name."""

    def job(progress):
        progress.say(f"{name} working")
        progress.report(1, 2)
        assert gate.wait(SIGNAL_TIMEOUT / 1000), "the test never let the job go on"
        if checks:
            progress.check()
        progress.report(2, 2)
        if fail:
            raise DynadeskError(f"{name} failed")
        return f"{name} result"

    return job


def test_two_owners_jobs_at_once_each_hear_only_their_own(qtbot, service, tiny_classifier_dir):
    """Two owners' jobs outstanding at once (the second queued behind the first), a prediction and a reading
    view's failing attribution in between: every answer, failure and report reaches its own request only."""
    load(qtbot, service, spec(tiny_classifier_dir))
    evaluation, board, typing, reading = Told(), Told(), Told(), Told()
    evaluation_gate, board_gate = threading.Event(), threading.Event()
    service.run_job(held_job("evaluation", evaluation_gate, fail=True), key="evaluation", **evaluation.callbacks(job=True))
    service.run_job(held_job("board", board_gate), key="leaderboard", **board.callbacks(job=True))
    qtbot.waitUntil(lambda: evaluation.progress == [(1, 2)], timeout=SIGNAL_TIMEOUT)  # running; the board's waits
    service.predict("typed meanwhile", **typing.callbacks())  # served at the job's next report
    service.attribute_for_reading("a reader's text", target="no such label", **reading.callbacks())
    qtbot.waitUntil(lambda: reading.ends == 1, timeout=SIGNAL_TIMEOUT)

    evaluation_gate.set()
    qtbot.waitUntil(lambda: evaluation.ends == 1 and board.progress == [(1, 2)], timeout=SIGNAL_TIMEOUT)
    board_gate.set()
    qtbot.waitUntil(lambda: board.ends == 1 and typing.ends == 1, timeout=SIGNAL_TIMEOUT)

    assert [f.message for f in evaluation.failed] == ["evaluation failed"] and not evaluation.done
    assert evaluation.progress == [(1, 2), (2, 2)] and evaluation.messages == ["evaluation working"]
    assert board.done == ["board result"] and not board.failed and not board.cancelled
    assert board.progress == [(1, 2), (2, 2)] and board.messages == ["board working"]
    assert [r.inputs for r in typing.done] == ["typed meanwhile"] and not typing.failed
    assert [f.operation for f in reading.failed] == ["read"] and "not a label" in reading.failed[0].message
    assert not reading.done and not reading.cancelled


def test_a_newer_job_of_the_same_key_cancels_the_older(qtbot, service):
    older, newer, queued, queued_newer = Told(), Told(), Told(), Told()
    gate = threading.Event()
    ran: list[str] = []

    def job(name):
        return lambda progress: ran.append(name) or f"{name} result"

    older_reply = service.run_job(held_job("older", gate), key="spreads", **older.callbacks(job=True))
    qtbot.waitUntil(lambda: older.progress == [(1, 2)], timeout=SIGNAL_TIMEOUT)  # it runs
    service.run_job(job("queued"), key="board", **queued.callbacks(job=True))
    service.run_job(job("newer"), key="spreads", **newer.callbacks(job=True))
    # the running job stops at its next check: its reply says so then, and hears no more progress meanwhile
    assert older.ends == 0 and not older_reply.pending and not older_reply.finished
    service.run_job(job("queued, newer"), key="board", **queued_newer.callbacks(job=True))
    assert queued.cancelled == 1  # never started: cancelled at once, and never runs
    gate.set()
    qtbot.waitUntil(lambda: newer.ends == 1 and queued_newer.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert older.cancelled == 1 and older.ends == 1 and older.progress == [(1, 2)]  # never done, never failed
    assert newer.done == ["newer result"] and queued_newer.done == ["queued, newer result"]
    assert ran == ["newer", "queued, newer"] and queued.ends == 1


def test_a_job_that_ends_before_it_sees_its_cancel_reports_cancelled_not_done(qtbot, service):
    told, gate = Told(), threading.Event()
    reply = service.run_job(held_job("unchecked", gate, checks=False), **told.callbacks(job=True))
    qtbot.waitUntil(lambda: told.progress == [(1, 2)], timeout=SIGNAL_TIMEOUT)
    reply.cancel()
    gate.set()  # it returns its result without a check
    qtbot.waitUntil(lambda: told.ends == 1, timeout=SIGNAL_TIMEOUT)
    assert told.cancelled == 1 and not told.done and told.progress == [(1, 2)]  # nor the report after the cancel
    reply.cancel()  # cancelling an ended reply changes nothing
    assert told.ends == 1


def test_a_cancelled_reply_is_told_nothing_more_and_a_shut_service_tells_nothing(qtbot, tiny_classifier_dir):
    from app.gui.inference import InferenceService

    service = InferenceService()
    try:
        load(qtbot, service, spec(tiny_classifier_dir))
        cancelled, later = Told(), Told()
        service.predict("asked, then taken back", **cancelled.callbacks()).cancel()
        assert cancelled.cancelled == 1
        service.predict("asked after", **later.callbacks())
        qtbot.waitUntil(lambda: later.ends == 1, timeout=SIGNAL_TIMEOUT)
        assert cancelled.ends == 1 and not cancelled.done and [r.inputs for r in later.done] == ["asked after"]
        gate, held = threading.Event(), Told()
        service.run_job(held_job("held", gate), **held.callbacks(job=True))
        qtbot.waitUntil(lambda: held.progress == [(1, 2)], timeout=SIGNAL_TIMEOUT)
        gate.set()  # it ends while the service shuts down
    finally:
        service.shutdown()
    QCoreApplication.processEvents()  # whatever the lane said before it stopped is delivered now, to no one
    assert held.ends == 0 and held.progress == [(1, 2)]  # the window is closing: its owner hears nothing more
