"""Starting the desktop application."""

from __future__ import annotations

import sys

from PySide6.QtWidgets import QApplication, QMessageBox

from app import __version__
from app.core.errors import DynadeskError


def run_gui(data_dir: str | None = None) -> int:
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("Dynadesk")
    app.setApplicationVersion(__version__)
    from app.core.desk import Desk
    from app.gui import excepthook
    from app.gui.main_window import MainWindow

    excepthook.install()
    try:
        desk = Desk(data_dir)
    except DynadeskError as exc:
        QMessageBox.critical(None, "Dynadesk cannot start", str(exc))
        return 1
    window = MainWindow(desk)
    window.show()
    window.prepare_first_start()
    try:
        return app.exec()
    finally:
        desk.close()
