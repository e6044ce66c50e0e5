"""Screenshots of the Validate and Review tabs, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_validation_screenshots.py

A scratch data folder with the ANLI round-1 development set (read from ../shared/data),
validated by four simulated people whose verdicts partly disagree (tests/validation_sim.py),
one perturbation of an ANLI example, and the project's DynaHate-layout fixture for the
hate-speech content warning.
"""

import tempfile

from PySide6.QtCore import Qt
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication
from screenshot_kit import OUT, ROOT, anli_desk, application, show_window, wait


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.domain import ModelOutput
    from app.core.services.examples import Content
    from app.gui.example_fetch import for_validation

    with tempfile.TemporaryDirectory() as scratch:
        desk, sim = anli_desk(scratch)
        newcomer = desk.people.create("Noor Validator", "annotator")
        # a perturbation of an ANLI example, written by a fifth person
        writer = desk.people.create("Priya Perturber", "annotator")
        queue = desk.validation.queue(newcomer.id, task_code="nli", limit=200)
        original = desk.examples.get(next(e.id for e in reversed(queue) if e.true_label != "neutral"))
        model = desk.models.all()[0]
        edited = original.inputs["hypothesis"].replace(" is ", " is not ", 1)
        if edited == original.inputs["hypothesis"]:
            edited = "It is not true that " + edited[0].lower() + edited[1:]
        flipped = {"entailment": "contradiction", "contradiction": "entailment"}[original.true_label]
        pair = desk.examples.create(
            writer.id, "nli",
            Content({"context": original.inputs["context"], "hypothesis": edited}, flipped,
                    meta={"label_explanation": "Negating the claim flips the relation to the context.",
                          "model_explanation": "The model keys on overlapping words and ignores 'not'."}),
            # the model does not follow the flip: it keeps the original's true label, so it is fooled
            [ModelOutput(model.id, model.sha256, original.true_label)], perturbation_of=original.id)

        desk.switch_person(newcomer.id)
        window = show_window(desk, 1440, 860)
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.tabs.setCurrentWidget(window.validate_view)
        view = window.validate_view
        wait(1200)
        QTest.keyClick(view, Qt.Key.Key_2)  # incorrect: the corrected label and the explanation appear
        form = view.form
        form.label_choice.setCurrentIndex(1)
        form.reason.setText("The context gives the year, so the hypothesis is definitely true.")
        wait(300)
        window.grab().save(str(OUT / "validate-verdict-form.png"))
        QTest.keyClick(form.reason, Qt.Key.Key_Return)  # confirm as a validator does, then R where the focus is
        wait(800)
        QTest.keyClick(QApplication.focusWidget(), Qt.Key.Key_R)
        wait(300)
        window.grab().save(str(OUT / "validate-revealed.png"))

        # the perturbation pair (it waits behind ~980 ANLI examples in the queue, so it is shown
        # directly, with the same view-model the controller builds)
        view.show_example(for_validation(desk, pair.id))
        wait(300)
        window.grab().save(str(OUT / "validate-perturbation-pair.png"))

        # hate speech (the project's DynaHate-layout fixture): the task's content warning on top
        from app.core.io.importers import import_file

        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        wait(1200)
        window.grab().save(str(OUT / "validate-content-warning.png"))

        # the lead's review tab, filtered to disagreements that are not decided yet
        window._profile_chosen(str(sim.lead.id))  # as the profile dialog does
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.tabs.setCurrentWidget(window.review_view)
        wait(1200)
        review = window.review_view
        review.filters.min_disagreements.setValue(1)
        review.filters.validation.setCurrentIndex(review.filters.validation.findData("in_progress"))
        wait(1200)
        review.table.selectRow(0)
        review.table.setFocus()
        wait(800)
        QTest.keyClick(review.table, Qt.Key.Key_1)
        wait(300)
        window.grab().save(str(OUT / "review-disagreements.png"))
        window.close()
        desk.close()
    print("wrote", ", ".join(p.name for p in sorted(OUT.glob("validate-*.png")) + [OUT / "review-disagreements.png"]))


if __name__ == "__main__":
    main()
