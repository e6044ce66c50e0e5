"""Screenshots for the README, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_screenshots.py

Uses a scratch data folder with the ANLI development set (read from ../shared/data) and
the project's own DynaHate-layout test fixture.
"""

import tempfile
from pathlib import Path

from screenshot_kit import OUT, ROOT, application, lead_desk, show_window, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.io.importers import import_file

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        import_file(desk, ROOT.parent / "shared" / "data" / "anli" / "ANLI_analysis_r1_dev.csv", "anli")
        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        window = show_window(desk, 1440, 820)
        window.tabs.setCurrentWidget(window.data_page)
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
    with tempfile.TemporaryDirectory() as scratch:
        workspace_screenshots(Path(scratch))
    print(f"Screenshots written to {OUT}")


def workspace_screenshots(scratch: Path) -> None:
    """First start, live prediction, heatmap, metadata form and a perturbation, on the real default model."""
    from app.core.desk import Desk

    desk = Desk(scratch)
    window = show_window(desk, 1440, 860)
    window.prepare_first_start()
    ws, view = window.workspace, window.workspace.view
    wait(1500)
    window.grab().save(str(OUT / "first-start.png"))  # content warning, model being prepared
    wait_until(lambda: ws.loaded is not None, 300)
    view.warning.primary.click()
    box = view.editor.fields["text"]

    def write(text: str, label: str) -> None:
        box.setPlainText(text)
        view.editor.choose_label(label)
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        wait(300)

    write("Immigrants like you are a plague on this country and everyone knows it", "hate")
    ws.explain("predicted")
    wait_until(lambda: bool(view.attribution.text.words))
    wait(300)
    window.grab().save(str(OUT / "workspace-create.png"))
    ws.submit()
    wait(300)
    form = view.form
    form.set_values({"hate_type": "dehumanization", "target_groups": ["immigrants"],
                     "label_explanation": "Calls a protected group a plague.",
                     "model_explanation": "No slurs, and 'plague' is not an insult on its own."})
    wait(300)
    window.grab().save(str(OUT / "workspace-metadata.png"))
    form.confirm()
    wait_until(lambda: not view.form_shown())
    wait(500)
    window.tabs.setCurrentWidget(window.data_page)
    wait_until(lambda: window.table_model.rowCount() == 1)
    window.table.selectRow(0)
    window.start_perturbation()
    wait_until(lambda: ws.original is not None)
    box.setPlainText("Immigrants like you are a blessing to this country and everyone knows it")
    view.editor.choose_label("not hate")
    wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
    ws.explain("predicted")
    wait_until(lambda: view.perturbation.changes.rowCount() > 0)
    view.side.setCurrentWidget(view.perturbation)
    wait(300)
    window.grab().save(str(OUT / "workspace-perturbation.png"))
    window.close()
    desk.close()


if __name__ == "__main__":
    main()
