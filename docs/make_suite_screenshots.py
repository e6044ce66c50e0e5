"""Screenshots of the Suite tab and of a variant in Validate, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_suite_screenshots.py [scratch folder]

A lead's desk on the shipped default model (round 1's target). Its seeds: HateCheck dev's hateful cases
(read from ../shared/data) that the model gets wrong, written in by an author and decided valid by a
validator. The lead grows the suite (8 variants per seed at most, checked against the target), a validator
vets some of them (one corrected), and the tab scores the target on the validated variants. Then a second
validator's Validate tab shows a variant with the seed it was made from, read masked. A scratch folder
given keeps the prepared default model for the next run.
"""

import csv
import sys
import tempfile
from pathlib import Path

from screenshot_kit import OUT, ROOT, application, lead_desk, show_window, wait, wait_until

HATECHECK = ROOT.parent / "shared" / "data" / "hatecheck" / "test_suite_cases_dev.csv"
KINDS = {"derog": "derogation", "threat": "threatening language", "dehum": "dehumanization", "slur": "derogation"}
GROUPS = {"women", "trans people", "gay people", "black people", "disabled people", "Muslims", "immigrants"}


def fooling_cases(engine, per_group: int = 2) -> list[dict]:
    """HateCheck dev's hateful cases the model calls not hate, a few per target group."""
    with open(HATECHECK, encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["label_gold"] == "hateful" and r["target_ident"] in GROUPS]
    rows = rows[::3]
    labels = [p.label for p in engine.predict_batched([r["test_case"].strip() for r in rows])]
    chosen: dict[str, list[dict]] = {}
    for row, label in zip(rows, labels):
        if label != "hate" and len(chosen.setdefault(row["target_ident"], [])) < per_group:
            chosen[row["target_ident"]].append(row)
    return [r for rows in chosen.values() for r in rows]


def main(scratch: str) -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.services.target_models import ensure_default_model, load_engine_for, load_ensemble, to_model_output
    from app.core.tasks.content import Content
    from app.core.wellbeing.profile import WellbeingProfile

    desk = lead_desk(Path(scratch) / "desk")
    lead = desk.current_person_id
    record = ensure_default_model(desk)
    desk.rounds.adopt_first_models("hate_speech", [record.id])
    desk.set_task_settings(lead, "hate_speech", agreement_threshold=1)
    author = desk.people.create("Ana Author", "annotator")
    vetter = desk.people.create("Vic Validator", "annotator")
    reader = desk.people.create("Noor Validator", "annotator")
    engine = load_engine_for(record)
    try:
        for row in fooling_cases(engine):
            text = row["test_case"].strip()
            kind = KINDS.get(row["functionality"].split("_")[0], "animosity")
            content = Content({"text": text}, "hate", meta={"hate_type": kind, "target_groups": [row["target_ident"]],
                                                            "label_explanation": "HateCheck: " + row["functionality"]})
            example = desk.examples.create(author.id, "hate_speech", content,
                                           [to_model_output(engine.predict_one(text), record)])
            desk.validation.validate(example.id, vetter.id, "correct")
    finally:
        engine.close()
    models = load_ensemble([record])
    try:
        report = desk.adaptive_suite.grow("hate_speech", models, per_seed=8, generated_by=lead)
    finally:
        models.close()
    print(report.summary())
    variants = [v for t in desk.adaptive_suite.topics("hate_speech") for v in desk.adaptive_suite.variants_of(t.seed_id)]
    for i, variant in enumerate(variants[::2]):  # half vetted; one label corrected
        if i == 3:
            desk.validation.validate(variant.example_id, vetter.id, "incorrect", corrected_label="not hate",
                                     reason="The swap made it a statement about a practice, not a group.")
        else:
            desk.validation.validate(variant.example_id, vetter.id, "correct")

    desk.settings.last_task = "hate_speech"
    desk.settings.acknowledged_warnings = ["hate_speech"]
    desk.settings.wellbeing = {str(lead): WellbeingProfile(blur_validating=True, blur_browsing=True),
                               str(reader.id): WellbeingProfile(blur_validating=True, blur_browsing=True)}
    window = show_window(desk, 1366, 768)
    scored: list = []
    window.suite.scored.connect(lambda: scored.append(True))
    window.tabs.setCurrentWidget(window.suite_view)
    wait_until(lambda: bool(scored), seconds=300)
    view = window.suite_view
    view.tree.expandAll()
    model = view.model
    group = model.index(0, 0)
    seed = model.index(0, 0, model.index(0, 0, group))
    view.tree.setCurrentIndex(seed)
    wait_until(lambda: view.variants.rowCount() > 0)
    wait(500)
    window.grab().save(str(OUT / "suite-view.png"))

    window._profile_chosen(str(reader.id))  # as the profile dialog does
    window.tabs.setCurrentWidget(window.validate_view)
    wait_until(lambda: window.validate_view.example_id is not None and window.validate_view.variant_box.isVisible())
    wait(800)
    window.grab().save(str(OUT / "validate-variant.png"))
    window.close()
    desk.close()
    print("wrote suite-view.png, validate-variant.png")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as folder:
            main(folder)
