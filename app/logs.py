"""Logging to a rotating file in the data folder; the terminal and the GUI show messages, not tracebacks."""

from __future__ import annotations

import logging
import logging.handlers
from pathlib import Path

_handler: logging.handlers.RotatingFileHandler | None = None
# The ONNX exporter's graph passes log ~140 INFO lines per export: noise in the user's log.
CHATTY_LIBRARIES = ("onnx_ir", "onnxscript")


def setup_logging(root: Path, level: int = logging.INFO) -> Path:
    global _handler
    path = root / "logs" / "dynadesk.log"
    if _handler is not None and Path(_handler.baseFilename) == path:
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    logger = logging.getLogger()
    if _handler is not None:
        logger.removeHandler(_handler)
        _handler.close()
    _handler = logging.handlers.RotatingFileHandler(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
    _handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(threadName)s] %(message)s"))
    logger.addHandler(_handler)
    logger.setLevel(level)
    for name in CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(max(level, logging.WARNING))
    return path


def log_file() -> str:
    return _handler.baseFilename if _handler is not None else "the log (logging was not set up)"
