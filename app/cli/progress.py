"""Progress on the terminal (stderr), stage by stage: each stage's words as it begins, its details as
they come, and every ``every_s`` seconds (and at its end) how far it is with the time left at its
own measured rate (app.views.stage_progress)."""

from __future__ import annotations

import time
from collections.abc import Callable

import click

from app.views.stage_progress import StageClock
from local_models.progress import Progress

EVERY_S = 15.0


def staged_progress(*, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic,
                    echo: Callable[[str], None] | None = None) -> Progress:
    out = echo or (lambda line: click.echo(line, err=True))
    stages = StageClock(clock)
    last = [float("-inf")]

    def message(text: str) -> None:
        stages.say(text)
        out(stages.headline() if stages.stage is not None else text)

    def report(done: int, total: int) -> None:
        stages.report(done, total)
        now = clock()
        if now - last[0] >= every_s or done >= total:
            last[0] = now
            out(f"  {stages.line()}")

    return Progress(report, message)
