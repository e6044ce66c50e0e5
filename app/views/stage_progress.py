"""What a long job's progress reads as, stage by stage: which stage runs, how far it is in its own
units, and the time left at the rate measured in that stage (Qt-free; the next-round dialog and
the CLI show it).

    clock = StageClock()                    # time.monotonic, or a fake clock in tests
    clock.say("1 of 4: frozen layers (texts)")
    clock.report(12_416, 27_067)
    clock.view()   # StepProgress(0.459, "1 of 4: frozen layers — 12,416 of 27,067 texts", "about 3 min 10 s left")

A stage's time left comes from its own measured rate, from its first report on: the rate of an
earlier stage (the frozen pass's texts, the epochs' steps, the int8 search's texts) says nothing
about it. "estimating…" shows only for the first seconds of a stage (``SETTLE_S``), or while it
has not moved at all. Within a stage, a count that starts again (the int8 search's next attempt)
starts its rate again, under the words of its own attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from app.views.next_round import ESTIMATING, StepProgress, duration
from local_models.progress import Stage, parse_stage

SETTLE_S = 5.0  # a stage's first seconds: too short for a rate (imports, first batches)


@dataclass
class _Measured:
    since: float  # when this count began
    done_then: int


class StageClock:
    def __init__(self, clock: Callable[[], float] = time.monotonic, settle_s: float = SETTLE_S):
        self._clock = clock
        self.settle_s = settle_s
        self.stage: Stage | None = None
        self.detail = ""  # the stage's latest line ("attempt 2 of 6: ...", "Epoch 1: ...")
        self.text = ""  # a line of work that is not in stages
        self.done = self.total = 0
        self._measured: _Measured | None = None

    def say(self, line: str) -> bool:
        """Take a line of the work; True when it begins a new stage."""
        stage = parse_stage(line)
        current = self.stage
        if stage is not None and current is not None and (stage.number, stage.count) == (current.number,
                                                                                         current.count):
            if " — " in stage.name:  # "2 of 4: training — epoch 1 of 3: ..."
                self.detail = stage.name.split(" — ", 1)[1]
            elif stage.name != current.name:  # the older form: "Step 2 of 3: Exporting to ONNX ..."
                self.detail = stage.name
            return False
        if stage is None:
            if current is None:
                self.text = line.strip()
            else:
                self.detail = line.strip()
            return False
        self.stage, self.detail, self.done, self.total = stage, "", 0, 0
        self._measured = _Measured(self._clock(), 0)
        return True

    def report(self, done: int, total: int) -> None:
        if self._measured is None or (self.total and (total != self.total or done < self.done)):
            self._measured = _Measured(self._clock(), done)  # a new count (the next attempt): its own rate
        self.done, self.total = done, total

    def headline(self) -> str:
        """The stage's words ("2 of 4: training — Epoch 1: ..."), without the counts."""
        if self.stage is None:
            return self.text
        words = f"{self.stage.number} of {self.stage.count}: {self.stage.name}"
        return f"{words} — {self.detail}" if self.detail else words

    def eta(self) -> str:
        measured = self._measured
        if measured is None or self.total <= 0:
            return ESTIMATING
        if self.done >= self.total:
            return "finishing…"
        elapsed = self._clock() - measured.since
        moved = self.done - measured.done_then
        if elapsed < self.settle_s or moved <= 0:
            return ESTIMATING
        return f"about {duration(elapsed * (self.total - self.done) / moved)} left"

    def view(self) -> StepProgress:
        fraction = None if self.total <= 0 else min(max(self.done / self.total, 0.0), 1.0)
        text = self.headline()
        if self.total > 0:
            unit = self.stage.unit if self.stage is not None and self.stage.unit else ""
            counts = (f"{self.done:,} of {self.total:,} {unit}".rstrip() if unit
                      else f"{round(100 * (fraction or 0))} %")
            text = f"{text} — {counts}" if text else counts
        return StepProgress(fraction, text, self.eta())

    def line(self) -> str:
        """One line for a terminal: the view's words and the time left."""
        view = self.view()
        return f"{view.text} · {view.eta}"
