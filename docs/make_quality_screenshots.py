"""Screenshots of the Dashboard's data-quality view, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_quality_screenshots.py

HateCheck's dev suite (round 1) and a seeded sample of 2,000 Davidson tweets (round 2), imported with
the desk's importers (reads ../shared/data; writes only a temporary folder), at a laptop's 1366×768.
The bundled default model is round 1's target afterwards: the embedding spread is measured in it.
"""

import sys
import tempfile
from pathlib import Path

from screenshot_kit import OUT, application, lead_desk, show_window, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.io.importers import import_file
    from bench.evidence_quality import HATECHECK, davidson_sample

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(Path(scratch) / "desk")
        import_file(desk, HATECHECK, "hatecheck", task_code="hate_speech", round_number=1)
        sample = davidson_sample(Path(scratch) / "davidson.csv", 2000, round_number=2)
        import_file(desk, sample, "dynahate", task_code="hate_speech")
        from app.core.services.target_models import ensure_default_model

        desk.rounds.adopt_first_models("hate_speech", [ensure_default_model(desk).id])
        desk.settings.last_task = "hate_speech"
        window = show_window(desk, 1366, 768)
        view = window.dashboard_view
        quality = window.dashboard.quality
        shown, spread = [], []
        quality.updated.connect(lambda: shown.append(True))
        quality.spread_ready.connect(lambda: spread.append(True))
        window.tabs.setCurrentWidget(view)
        view.sections.setCurrentWidget(view.quality)
        wait_until(lambda: shown and spread, seconds=300)
        round_one = view.round_combo.findText("Round 1")
        shown.clear()
        view.round_combo.setCurrentIndex(round_one)
        wait_until(lambda: len(shown) >= 1)
        terms = []
        quality.term_shown.connect(terms.append)
        row = view.quality.term_row("trans")
        view.quality.artifact_table.selectRow(row)
        view.quality.term_clicked.emit("trans")
        wait_until(lambda: terms)
        wait(500)
        name = sys.argv[1] if len(sys.argv) > 1 else "dashboard-quality.png"
        window.grab().save(str(OUT / name))
        print(OUT / name)


if __name__ == "__main__":
    main()
