"""Screenshots of the review dashboard, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_dashboard_screenshots.py

ANLI's round-1 development set (read from ../shared/data) shared among six simulated writers,
and five simulated validators of differing care (tests/simulation.py, seeded).
"""

import os
import sys
import tempfile
import time
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


def wait_for(controller, action) -> None:
    """Run ``action`` and wait until the dashboard shows figures for it."""
    done = []
    controller.updated.connect(lambda: done.append(True))
    action()
    deadline = time.monotonic() + 60
    while not done and time.monotonic() < deadline:
        wait(50)
    wait(300)


def main() -> None:
    app = QApplication.instance() or QApplication(sys.argv[:1])  # noqa: F841 (must stay alive)
    from app.desk import Desk
    from app.gui.main_window import MainWindow
    from tests.simulation import import_anli_team, simulate_validators

    with tempfile.TemporaryDirectory() as scratch:
        desk = Desk(scratch)
        lead = desk.people.create("Ada Lovelace", "lead")
        desk.switch_person(lead.id)
        team = import_anli_team(desk, ROOT.parent / "shared" / "data" / "anli" / "ANLI_analysis_r1_dev.csv")
        simulate_validators(desk, team, share=0.8)
        desk.settings.last_task = "nli"
        window = MainWindow(desk)
        window.resize(1680, 1120)
        window.show()
        view, controller = window.dashboard_view, window.dashboard
        wait_for(controller, lambda: window.tabs.setCurrentWidget(view))
        wait(300)
        window.grab().save(str(OUT / "dashboard.png"))

        # A lead looks into one label and two writers, with the agreement panel in view.
        wait_for(controller, lambda: view.set_filter(label="neutral"))
        rows = [i for i, r in enumerate(view.annotator_model.rows) if r["name"] in ("Amara Okafor", "Emil Sørensen")]
        selection = view.annotator_table.selectionModel()
        for row in rows:
            wait_for(controller, lambda row=row: selection.select(
                view.annotator_model.index(row, 0), selection.SelectionFlag.Select | selection.SelectionFlag.Rows))
        wait_for(controller, lambda: view.breakdown_combo.setCurrentIndex(view.breakdown_combo.findData("label")))
        window.grab().save(str(OUT / "dashboard-filtered.png"))
        view.mer_chart.grab().save(str(OUT / "dashboard-chart-mer.png"))
        window.close()
        desk.close()


if __name__ == "__main__":
    main()
