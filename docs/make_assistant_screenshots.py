"""Screenshots of the writing assistant's panel on the Create page, taken offscreen from the real
application with the shipped default model, at a laptop's 1366×768.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_assistant_screenshots.py

The text is a HateCheck case (read from ../shared/data at run time, never copied): the first
hateful dehumanisation case the default model gets right. The writer labels it hate and asks
for suggestions (Ctrl+Shift+G); a second shot has the first respelling applied (Alt+↓, Alt+Enter).
"""

import csv
import tempfile
from pathlib import Path

from PySide6.QtCore import Qt  # noqa: E402 (after screenshot_kit sets the platform)
from PySide6.QtTest import QTest  # noqa: E402
from screenshot_kit import OUT, application, assistant_window, wait, wait_until


def hatecheck_cases(functionality: str) -> list[str]:
    from bench.evidence_quality import HATECHECK

    with open(HATECHECK, newline="", encoding="utf-8") as handle:
        return [row["test_case"].strip() for row in csv.DictReader(handle) if row["functionality"] == functionality]


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    with tempfile.TemporaryDirectory() as scratch:
        window, ws, view = assistant_window(Path(scratch) / "desk")
        box = view.editor.fields["text"]
        for text in hatecheck_cases("derog_dehum_h"):
            box.setFocus()
            box.selectAll()
            QTest.keyClicks(box, text)
            wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
            if ws.last_prediction.prediction.label == "hate":
                break
        QTest.keyClick(box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # the writer's label: hate
        QTest.keyClick(box, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        panel = view.assist
        wait_until(lambda: panel.rows and panel.view.current and not panel.view.busy, seconds=120)
        wait(400)
        window.grab().save(str(OUT / "assistant_panel.png"))
        print(OUT / "assistant_panel.png", text, ws.assist.session.shown.timings_ms)
        for _ in range(next(i for i, row in enumerate(panel.rows) if row.row.generator == "obfuscation")):
            QTest.keyClick(box, Qt.Key.Key_Down, Qt.KeyboardModifier.AltModifier)  # a respelling keeps the meaning
        QTest.keyClick(box, Qt.Key.Key_Return, Qt.KeyboardModifier.AltModifier)
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        wait(400)
        window.grab().save(str(OUT / "assistant_panel_applied.png"))
        print(OUT / "assistant_panel_applied.png")
        window.close()
        window.desk.close()


if __name__ == "__main__":
    main()
