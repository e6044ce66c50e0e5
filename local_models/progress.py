"""The progress and cancel handle that long work takes (DESIGN.md §4.3).

The work calls ``report`` as it goes and ``check`` between steps; whoever started it may call
``cancel`` from any thread. The GUI turns ``report`` into a progress bar through a signal.

Work of several stages names each one as it begins (``step``): the line "2 of 4: training (steps)"
says which stage runs, how many there are and what its reports count; the reports that follow are
the stage's own (done of its total). ``parse_stage`` reads such a line back, so that whoever shows
progress (app.views.stage_progress) can time each stage on its own rate.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass

from local_models.errors import Cancelled

_STAGE = re.compile(r"^(?:Step )?(\d+) of (\d+): (.+?)(?: \(([a-z][a-z ]*)\))?$", re.DOTALL)


@dataclass(frozen=True)
class Stage:
    number: int
    count: int
    name: str
    unit: str = ""  # what its reports count ("texts", "steps"); "" for percent


def stage_line(number: int, count: int, name: str, unit: str = "") -> str:
    """The line that begins a stage: "1 of 4: frozen layers (texts)"."""
    return f"{number} of {count}: {name}" + (f" ({unit})" if unit else "")


def parse_stage(line: str) -> Stage | None:
    """The stage a line begins (or, with its number, goes on with), or None for any other line."""
    match = _STAGE.match(line.strip())
    if match is None:
        return None
    return Stage(int(match[1]), int(match[2]), match[3], match[4] or "")


class Progress:
    def __init__(self, on_report: Callable[[int, int], None] | None = None,
                 on_message: Callable[[str], None] | None = None):
        self._on_report = on_report
        self._on_message = on_message
        self._cancelled = threading.Event()
        self.done = 0
        self.total = 0

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        """Stop here (raise ``Cancelled``) when cancellation was asked for."""
        if self._cancelled.is_set():
            raise Cancelled(f"Cancelled after {self.done} of {self.total}.")

    def report(self, done: int, total: int) -> None:
        self.done, self.total = done, total
        if self._on_report is not None:
            self._on_report(done, total)

    def say(self, text: str) -> None:
        """A line about what the work is doing now ("Encoding 24,783 texts")."""
        if self._on_message is not None:
            self._on_message(text)

    def part(self, offset: int, grand_total: int) -> Progress:
        """A handle for one part of this work: its reports count from ``offset`` towards
        ``grand_total`` here, and cancelling either handle stops both."""
        child = Progress(lambda done, _total: self.report(offset + done, grand_total), self._on_message)
        child._cancelled = self._cancelled
        return child

    def step(self, number: int, count: int, name: str, unit: str = "") -> Progress:
        """Begin stage ``number`` of ``count`` ("2 of 4: training (steps)"). The returned handle is
        the stage's: its reports (done of its own total, in ``unit``) pass through as they are, and its
        lines become the stage's details ("2 of 4: training — Epoch 1: ..."); cancelling either
        handle stops both."""
        self.say(stage_line(number, count, name, unit))
        child = Progress(self.report, lambda line: self.say(f"{number} of {count}: {name} — {line.strip()}"))
        child._cancelled = self._cancelled
        return child

    def lines_only(self) -> Progress:
        """A handle for work whose reports would count other units than this stage's: its lines and its
        cancelling pass through, its reports do not."""
        child = Progress(None, self._on_message)
        child._cancelled = self._cancelled
        return child

    def stage(self, number: int, count: int, text: str, start: int, end: int, total: int = 100) -> Progress:
        """Begin step ``number`` of ``count``, which runs from ``start`` to ``end`` of ``total``: say
        "Step n of m: text" and report ``start``. The returned handle is for the step's own work: its
        lines keep the step's prefix, and its reports (done of its own total) land between ``start``
        and ``end``; cancelling either handle stops both."""
        prefix = f"Step {number} of {count}: "
        self.say(prefix + text)
        self.report(start, total)
        child = Progress(lambda done, of: self.report(start + (end - start) * min(done, of) // max(of, 1), total),
                         lambda line: self.say(prefix + line))
        child._cancelled = self._cancelled
        return child
