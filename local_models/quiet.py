"""Library chatter kept out of the desk's log during exports, and an error's first line for its messages."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def quiet(*names: str, level: int = logging.ERROR) -> Iterator[None]:
    """Raise the named loggers (``root`` for the root logger) to ``level`` while the block runs."""
    loggers = [logging.getLogger(None if n == "root" else n) for n in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, old in zip(loggers, before):
            lg.setLevel(old)


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:300]
