"""Screenshots for the README, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_screenshots.py

Uses a scratch data folder with the ANLI development set (read from ../shared/data) and
the project's own DynaHate-layout test fixture.
"""

import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from PySide6.QtCore import QEventLoop, QTimer  # noqa: E402
from PySide6.QtWidgets import QApplication  # noqa: E402

OUT = ROOT / "docs" / "screenshots"


def wait(ms: int) -> None:
    loop = QEventLoop()
    QTimer.singleShot(ms, loop.quit)
    loop.exec()


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841 (must stay alive)
    from app.desk import Desk
    from app.gui.main_window import MainWindow
    from app.io.importers import import_file

    with tempfile.TemporaryDirectory() as scratch:
        desk = Desk(scratch)
        lead = desk.people.create("Ada Lovelace", "lead")
        desk.switch_person(lead.id)
        import_file(desk, ROOT.parent / "shared" / "data" / "anli" / "ANLI_analysis_r1_dev.csv", "anli")
        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        window = MainWindow(desk)
        window.resize(1440, 820)
        window.show()
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        wait(800)
        window.filter_bar.search.setText("Poland")
        wait(800)
        window.table.selectRow(0)
        wait(600)
        window.grab().save(str(OUT / "data-browser.png"))
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        window.filter_bar.search.clear()
        wait(800)
        window.table.selectRow(1)
        wait(600)
        window.grab().save(str(OUT / "data-browser-hate-speech.png"))
        window.close()
        desk.close()
    print(f"Screenshots written to {OUT}")


if __name__ == "__main__":
    main()
