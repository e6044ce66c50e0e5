"""The last tier of error handling: log anything unexpected and tell the user, without
closing the window (drafts are in the database, so nothing unsaved is lost)."""

from __future__ import annotations

import logging
import sys
import threading

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QApplication, QMessageBox

from app.core.logs import log_file

log = logging.getLogger("dynadesk.crash")


class _Reporter(QObject):
    report = Signal(str)  # queued to the GUI thread, whatever thread raised

    def show(self, text: str) -> None:
        QMessageBox.critical(QApplication.activeWindow(), "Unexpected error",
                             f"{text}\n\nDynadesk keeps running and your drafts are saved.\nDetails: {log_file()}")


_reporter: _Reporter | None = None


def install() -> None:
    global _reporter
    _reporter = _Reporter()
    _reporter.report.connect(_reporter.show)

    def hook(kind, value, traceback) -> None:
        if issubclass(kind, KeyboardInterrupt):
            sys.__excepthook__(kind, value, traceback)
            return
        log.error("unhandled exception", exc_info=(kind, value, traceback))
        _reporter.report.emit(f"{kind.__name__}: {value}")

    sys.excepthook = hook
    threading.excepthook = lambda args: hook(args.exc_type, args.exc_value, args.exc_traceback)
