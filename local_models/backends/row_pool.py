"""Runs the texts of a row-by-row batch on a few threads at once, answers in the batch's order.

A dynamically quantized model runs a batch one text at a time (``OnnxRuntime.row_by_row``); each
run is small (one intra-op thread, ~1 ms) and onnxruntime's ``session.run`` is thread-safe and
releases the GIL, so a second thread takes every other text. Each text still runs alone on the
same session with the same inputs, so every answer is the one the single thread gives, bit for bit.

The calling thread works too; the pool adds ``threads - 1`` helpers that live as long as the
runtime. Texts are claimed one at a time from a shared counter, so a long text does not leave
one thread idle. Helpers run at the caller's niceness: the assistant's check comes from a niced
lane (app/gui/inference.py) and must not take a core from keystroke predictions, while a batch
evaluation runs at normal priority. Linux threads inherit the niceness of the thread that starts
them, so one executor per niceness, started by a caller of that niceness, keeps them apart.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import TypeVar

T = TypeVar("T")


class RowPool:
    """``map(run_row, count)`` -> ``[run_row(0), ..., run_row(count - 1)]`` on up to ``threads`` threads."""

    def __init__(self, threads: int, name: str = "rows"):
        self.threads = max(1, int(threads))
        self.name = name
        self._executors: dict[int, ThreadPoolExecutor] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def map(self, run_row: Callable[[int], T], count: int) -> list[T]:
        helpers = min(self.threads, count) - 1
        if helpers <= 0 or self._closed:
            return [run_row(i) for i in range(count)]
        results: list[T | None] = [None] * count
        claim_lock = threading.Lock()
        claimed = [0]
        failed = threading.Event()

        def work() -> None:
            while not failed.is_set():
                with claim_lock:
                    i = claimed[0]
                    claimed[0] += 1
                if i >= count:
                    return
                try:
                    results[i] = run_row(i)
                except BaseException:
                    failed.set()  # the others stop claiming; the error is raised below
                    raise

        executor = self._executor()
        futures: list[Future[None]] = []
        if executor is not None:
            try:
                futures = [executor.submit(work) for _ in range(helpers)]
            except RuntimeError:  # closed on another thread meanwhile: this thread does it all
                futures = []
        try:
            work()
        finally:
            wait(futures)  # no helper still uses the caller's inputs after this returns
        for future in futures:
            error = None if future.cancelled() else future.exception()  # cancelled: closed before it began
            if error is not None:
                raise error
        return results  # type: ignore[return-value]

    def _executor(self) -> ThreadPoolExecutor | None:
        niceness = thread_niceness()
        with self._lock:
            if self._closed:
                return None
            executor = self._executors.get(niceness)
            if executor is None:
                executor = ThreadPoolExecutor(max_workers=self.threads - 1,
                                              thread_name_prefix=f"{self.name}-nice{niceness}",
                                              initializer=_set_niceness, initargs=(niceness,))
                self._executors[niceness] = executor
            return executor

    def close(self) -> None:
        """Stop the helper threads (after the row each may be running); later maps run on the caller."""
        with self._lock:
            self._closed = True
            executors, self._executors = list(self._executors.values()), {}
        for executor in executors:
            executor.shutdown(wait=True, cancel_futures=True)

    def helper_threads(self) -> list[threading.Thread]:
        """The helper threads alive now (for tests and diagnostics)."""
        with self._lock:
            executors = list(self._executors.values())
        return [t for e in executors for t in list(getattr(e, "_threads", ())) if t.is_alive()]


def thread_niceness() -> int:
    """This thread's niceness (Linux keeps one per thread); 0 where threads have none of their own."""
    if not sys.platform.startswith("linux"):
        return 0
    import os

    try:
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    except (AttributeError, OSError):
        return 0


def _set_niceness(niceness: int) -> None:
    """Inherited already from the starting thread; set again in case the platform did not."""
    if not sys.platform.startswith("linux") or thread_niceness() == niceness:
        return
    import os

    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), niceness)
    except (AttributeError, OSError):  # lowering it needs a privilege: it stays as inherited
        pass
