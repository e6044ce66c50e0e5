"""Screenshots of the Evaluate tab, taken offscreen from the real application and the real
default model (ONNX and PyTorch) on the shared HateCheck cases and two rounds of examples.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_evaluation_screenshots.py [PREPARED_MODELS_DIR]

PREPARED_MODELS_DIR (optional) is a data folder's ``models`` folder with the default model
already prepared, to skip the first-use assembly and export.
"""

import shutil
import sys
import tempfile
from pathlib import Path

from screenshot_kit import OUT, ROOT, application, show_window, snap, wait, wait_until

SUITE = ROOT.parent / "shared" / "data" / "hatecheck" / "test_suite_cases_dev.csv"
TRAINING = ROOT.parent / "shared" / "data" / "davidson2017" / "labeled_data.csv"
# Examples for two rounds: (text, label, target group); rounds get harder as the desk goes on.
ROUND_1 = [
    ("Immigrants are a plague on this country", "hate", "immigrants"),
    ("Women should not be allowed to vote", "hate", "women"),
    ("Gay people are disgusting and should hide", "hate", "gay people"),
    ("I had lunch with my immigrant neighbours today", "not hate", None),
    ("Women engineers built half of this bridge", "not hate", None),
    ("Black people deserve respect like everyone", "not hate", None),
    ("All Muslims are terrorists", "hate", "Muslims"),
    ("My trans friend is the best cook I know", "not hate", None),
]
ROUND_2 = [
    ("Immigrants? More like parasites, if you ask me", "hate", "immigrants"),
    ("I'd never say women are stupid, they just can't think", "hate", "women"),
    ("Saying 'gay people are vermin' is hateful and wrong", "not hate", None),
    ("Trans people are just confused, bless them", "hate", "trans people"),
    ("Muslims in my street organised the food bank", "not hate", None),
    ("Disabled people are a burden we should not carry", "hate", "disabled people"),
]


def add_round(desk, lead, author, rows, number):
    from app.core.services.examples import Content

    for text, label, target in rows:
        meta = {"label_explanation": "Written for the screenshots."}
        if label == "hate":
            meta.update(hate_type="derogation", target_groups=[target])
        example = desk.examples.create(author.id, "hate_speech", Content({"text": text}, label, meta=meta),
                                       round_number=number)
        desk.validation.validate(example.id, lead.id, "correct", mode="lead")


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core import paths
    from app.core.desk import Desk
    from app.core.services.target_models import adopt_default_model, ensure_default_model

    with tempfile.TemporaryDirectory() as scratch:
        if len(sys.argv) > 1:
            shutil.copytree(sys.argv[1], paths.models_cache_dir(Path(scratch)))
        desk = Desk(scratch)
        lead = desk.people.create("Ada Lovelace", "lead")
        author = desk.people.create("Grace Hopper", "annotator")
        desk.switch_person(lead.id)
        onnx = adopt_default_model(desk) or ensure_default_model(desk)
        torch_record = ensure_default_model(desk, variant="torch")
        add_round(desk, lead, author, ROUND_1, 1)
        desk.rounds.open_next("hate_speech", lead.id, [onnx.id])
        add_round(desk, lead, author, ROUND_2, 2)
        settings = desk.settings
        settings.acknowledged_warnings = [*settings.acknowledged_warnings, "hate_speech"]
        desk.save_settings()

        window = show_window(desk, 1366, 768)
        ws = window.workspace
        wait_until(lambda: ws.loaded is not None, 300)
        window.tabs.setCurrentWidget(window.evaluation_view)
        view = window.evaluation_view
        wait_until(lambda: len(view.model_keys()) >= 3)
        for key in view.model_keys():  # the default model's ONNX and PyTorch formats, under one entry
            view.check_model(key, key in (str(onnx.id), str(torch_record.id)))
        view.suite.setText(str(SUITE))
        view.training.setText(str(TRAINING))  # the default model's record names the file, not where it is
        done = []
        window.evaluation.finished.connect(done.append)
        view.run_button.click()
        wait_until(lambda: view.progress.value() > view.progress.maximum() * 0.3, 300)
        window.grab().save(str(OUT / "evaluation-running.png"))
        wait_until(lambda: bool(done) and view.run_button.isEnabled(), 600)
        wait(500)
        window.grab().save(str(OUT / "evaluation-summary.png"))
        view.result_tabs.setCurrentIndex(2)
        wait(300)
        window.grab().save(str(OUT / "evaluation-matrix.png"))
        view.result_tabs.setCurrentIndex(3)
        wait(500)
        window.grab().save(str(OUT / "evaluation-functionalities.png"))
        view.result_tabs.setCurrentIndex(4)
        view.failing.selectRow(0)
        wait(300)
        window.grab().save(str(OUT / "evaluation-failing.png"))
        row = next(i for i in range(view.failing.rowCount()) if view.failing.item(i, 1).text() == "derog_dehum_h")
        view.failing.selectRow(row)
        view.failing.itemActivated.emit(view.failing.item(row, 3))
        snap(window, "evaluation-case-in-workspace.png",
             ready=lambda: bool(ws.view.attribution.text.words) and ws.last_prediction is not None, settle_ms=500)
        window.close()
        desk.close()
    print(f"Screenshots written to {OUT}")


if __name__ == "__main__":
    main()
