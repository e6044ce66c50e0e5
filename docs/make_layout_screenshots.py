"""Every tab at 1366×768 (a common laptop screen), and the first start's progress, taken offscreen
from the real application on a fresh data folder with the real default model.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_layout_screenshots.py
"""

import tempfile

from screenshot_kit import OUT, ROOT, application, lead_desk, show_window, wait, wait_until

WIDTH, HEIGHT = 1366, 768


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from PySide6.QtWidgets import QProgressBar

    from app.core.io.importers import import_file

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        window = show_window(desk, WIDTH, HEIGHT)
        window.prepare_first_start()
        bar = window.statusBar().findChild(QProgressBar, "first-start-progress")
        wait_until(lambda: bar.isVisible() and bar.value() >= 20, 300)  # step 2: the ONNX export
        wait(300)
        window.grab().save(str(OUT / "layout-first-start-progress.png"))
        ws, view = window.workspace, window.workspace.view
        wait_until(lambda: ws.loaded is not None, 300)
        view.warning.primary.click()
        view.editor.fields["text"].setPlainText("Immigrants like you are a plague on this country")
        view.editor.choose_label("not hate")  # the model says "hate": fooled, the writer's success
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        wait(400)
        window.grab().save(str(OUT / "layout-create.png"))

        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        window.tabs.setCurrentWidget(window.data_page)
        window.refresh()
        wait_until(lambda: window.table_model.rowCount() == 10)
        rows = [window.table_model.row_data(r) for r in range(window.table_model.rowCount())]
        window.table.selectRow(next(i for i, r in enumerate(rows) if r.perturbation_of))
        wait(800)
        window.grab().save(str(OUT / "layout-data.png"))
        for name, page in (("validate", window.validate_view), ("review", window.review_view),
                           ("dashboard", window.dashboard_view), ("evaluate", window.evaluation_view)):
            window.tabs.setCurrentWidget(page)
            wait(1500)
            window.grab().save(str(OUT / f"layout-{name}.png"))
        window.close()
        desk.close()
    print(f"Screenshots written to {OUT}")


if __name__ == "__main__":
    main()
