"""Screenshots of the writing assistant's two asks beyond "fool the model", on the Create page of the
real application with the shipped default model, at a laptop's 1366×768:

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_assistant_modes_screenshots.py

assistant_offer_slurs.png: the writer ticked "Offer slurs" (off unless asked): description → slur
edits are listed, masked as every reading view masks them while the blur is on.
assistant_contrast_pair.png: Contrast pair mode: minimal edits meant to make the chosen new label
true, which the writer confirms before submitting the pair.
"""

import tempfile
from pathlib import Path

from PySide6.QtCore import Qt  # noqa: E402 (after screenshot_kit sets the platform)
from PySide6.QtTest import QTest  # noqa: E402
from screenshot_kit import OUT, application, assistant_window, wait, wait_until

TEXT = "Women belong in the kitchen, not in parliament"


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.assist.types import Goal

    with tempfile.TemporaryDirectory() as scratch:
        window, ws, view = assistant_window(Path(scratch) / "desk")
        panel = view.assist
        box = view.editor.fields["text"]
        box.setFocus()
        QTest.keyClicks(box, TEXT)
        QTest.keyClick(box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # the writer's label: hate
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())

        def suggest() -> None:
            QTest.keyClick(box, Qt.Key.Key_G, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
            wait_until(lambda: panel.rows and panel.view.current and not panel.view.busy, seconds=120)
            wait(400)

        panel.slurs.click()
        suggest()
        window.grab().save(str(OUT / "assistant_offer_slurs.png"))
        print(OUT / "assistant_offer_slurs.png", [row.row.generator for row in panel.rows])

        panel.slurs.click()  # off again: it is the writer's choice, not the mode's
        panel.goal_buttons[Goal.CONTRAST].click()
        wait_until(lambda: panel.contrast.isVisible())
        suggest()
        window.grab().save(str(OUT / "assistant_contrast_pair.png"))
        print(OUT / "assistant_contrast_pair.png", panel.contrast.currentText())
        window.close()
        window.desk.close()


if __name__ == "__main__":
    main()
