"""The first start at 1366×768 on a fresh data folder with the real default model: PyTorch answers
while the ONNX form is prepared in the background (status bar), then the switch (status bar).

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_first_start_screenshots.py
"""

import tempfile

from screenshot_kit import OUT, application, lead_desk, show_window, wait, wait_until

WIDTH, HEIGHT = 1366, 768


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from PySide6.QtWidgets import QProgressBar

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        desk.settings.acknowledged_warnings = ["hate_speech"]
        desk.save_settings()
        window = show_window(desk, WIDTH, HEIGHT)
        window.prepare_first_start()
        ws, view = window.workspace, window.workspace.view
        bar = window.statusBar().findChild

        def preparing() -> bool:
            progress = bar(QProgressBar, "first-start-progress")
            return progress is not None and progress.isVisible() and "Step 2 of 3" in window.statusBar().currentMessage()

        wait_until(lambda: ws.loaded is not None and ws.loaded.formats == ("hf-torch",), 300)
        view.editor.fields["text"].setPlainText("Immigrants like you are a plague on this country")
        view.editor.choose_label("not hate")
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        wait_until(preparing, 300)
        wait(500)
        window.grab().save(str(OUT / "first-start-pytorch-answering.png"))
        wait_until(lambda: window.statusBar().currentMessage().startswith("Switched to the faster form"), 600)
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        wait(500)
        window.grab().save(str(OUT / "first-start-switched.png"))
        window.close()
        desk.close()
    print(f"Screenshots written to {OUT}")


if __name__ == "__main__":
    main()
