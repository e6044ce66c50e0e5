"""Logging to a rotating file in the data folder; the terminal and the GUI show messages, not tracebacks.

When the log file cannot be created (a read-only data folder), warnings go to the terminal as
plain sentences instead, and nothing else changes.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
from pathlib import Path

_handler: logging.Handler | None = None
_fallback_reason: str | None = None  # why the log goes to the terminal, when it does
# The ONNX exporter's graph passes log ~140 INFO lines per export: noise in the user's log.
CHATTY_LIBRARIES = ("onnx_ir", "onnxscript")


class SentenceFormatter(logging.Formatter):
    """The message alone: no traceback, no stack, for a terminal that a person reads."""

    def format(self, record: logging.LogRecord) -> str:
        return f"Warning: {record.getMessage()}" if record.levelno == logging.WARNING else record.getMessage()


class TerminalHandler(logging.Handler):
    """Writes to whatever ``sys.stderr`` is at the time (tests and tools replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
        except Exception:
            self.handleError(record)


def setup_logging(root: Path, level: int = logging.INFO) -> Path | None:
    """Log to ``root``/logs/dynadesk.log; returns its path, or ``None`` when it cannot be written."""
    global _handler, _fallback_reason
    path = root / "logs" / "dynadesk.log"
    if isinstance(_handler, logging.handlers.RotatingFileHandler) and Path(_handler.baseFilename) == path:
        return path
    logger = logging.getLogger()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3,
                                                                        encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
        _fallback_reason = None
    except OSError as exc:
        # the folder in which a file or folder could not be made: logs/, or the data folder itself
        folder = Path(exc.filename).parent if exc.filename else path.parent
        _fallback_reason = f"the folder {folder} is read-only ({exc.strerror})"
        handler = TerminalHandler()
        handler.setLevel(logging.WARNING)
        handler.setFormatter(SentenceFormatter())
    if _handler is not None:
        logger.removeHandler(_handler)
        _handler.close()
    _handler = handler
    logger.addHandler(handler)
    logger.setLevel(level)
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    if _fallback_reason is not None:
        logging.getLogger("dynadesk").warning("Dynadesk cannot write its log: %s; warnings go to the terminal "
                                              "instead.", _fallback_reason)
        return None
    return path


def log_file() -> str:
    if isinstance(_handler, logging.handlers.RotatingFileHandler):
        return _handler.baseFilename
    if _fallback_reason is not None:
        return f"no log file ({_fallback_reason})"
    return "the log (logging was not set up)"

