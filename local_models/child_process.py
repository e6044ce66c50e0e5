"""Long model work in a child process at lower priority, so the desk's own process stays free.

Measured on the 2-core machine (PyTorch predictions at typing pace while the default model's
ONNX export runs): p95 30.7 ms alone, 62.3 ms with the export in a thread of the same process
(the export holds the interpreter lock while it traces), 30.6 ms with it in a child at nice 10.

    prepared = run_in_child(prepare_fast_forms, {"part_dir": ..., "cache_dir": ...}, progress=progress)

``target`` is a module-level function taking ``progress=``; its reports and lines come back to
``progress`` as they happen, and cancelling ``progress`` ends the child (which writes only to
staging folders until its work is complete, so nothing half-written is ever used). A child whose
parent dies stops by itself. The child is started with "spawn": the same in a frozen bundle
(the entry point calls ``multiprocessing.freeze_support()``) and on every platform.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from local_models.errors import Cancelled, ExportFailed, ModelError
from local_models.progress import Progress

log = logging.getLogger(__name__)

T = TypeVar("T")
NICENESS = 10  # below the desk's own threads: the export waits whenever the desk has work
POLL_S = 0.1


def run_in_child(target: Callable[..., T], kwargs: dict[str, Any], *, progress: Progress | None = None,
                 niceness: int = NICENESS) -> T:
    """``target(**kwargs, progress=...)`` in a child process; returns what it returns, raises what
    it raised (a ``ModelError`` keeps its message), ``Cancelled`` when ``progress`` is cancelled."""
    progress = progress or Progress()
    progress.check()
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_child_main, args=(target, kwargs, send, os.getpid(), niceness),
                            name="dynadesk-prepare", daemon=True)
    child.start()
    send.close()  # the child holds the only sending end: its death closes the pipe
    try:
        while True:
            if progress.cancelled:
                raise Cancelled("The preparation was stopped; the next start resumes it.")
            if not receive.poll(POLL_S):
                if not child.is_alive() and not receive.poll(0):
                    raise ExportFailed(f"The background preparation stopped unexpectedly (exit code {child.exitcode}).")
                continue
            try:
                kind, *values = receive.recv()
            except EOFError:
                child.join(5)
                raise ExportFailed(
                    f"The background preparation stopped unexpectedly (exit code {child.exitcode}).") from None
            if kind == "report":
                progress.report(*values)
            elif kind == "say":
                progress.say(values[0])
            elif kind == "done":
                result: T = values[0]
                return result
            else:
                raise _rebuilt(*values)
    finally:
        receive.close()
        if child.is_alive():
            child.terminate()
        child.join(10)


def _child_main(target: Callable[..., Any], kwargs: dict[str, Any], send: Any, parent_pid: int,
                niceness: int) -> None:
    try:
        os.nice(niceness)
    except (AttributeError, OSError):  # not on this platform: the work still runs
        pass
    threading.Thread(target=_exit_with_parent, args=(parent_pid,), daemon=True, name="parent-watch").start()
    lock = threading.Lock()

    def post(*message: Any) -> None:
        with lock:
            send.send(message)

    progress = Progress(lambda done, total: post("report", done, total), lambda line: post("say", line))
    try:
        result = target(**kwargs, progress=progress)
    except BaseException as exc:  # sent back whole: the parent raises it
        post("error", type(exc).__name__, str(exc), isinstance(exc, ModelError))
        return
    post("done", result)


def _exit_with_parent(parent_pid: int) -> None:
    """A killed desk must not leave its preparation running: the next start resumes it instead."""
    while True:
        time.sleep(1)
        if os.getppid() != parent_pid:
            os._exit(1)


def _rebuilt(name: str, message: str, model_error: bool) -> BaseException:
    if name == "Cancelled":
        return Cancelled(message)
    if model_error:
        return ExportFailed(message)
    return ExportFailed(f"{name}: {message}")
