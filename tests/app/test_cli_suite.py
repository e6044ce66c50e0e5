"""`dynadesk suite` (the adaptive suite as HateCheck CSV) and `dynadesk suite grow`, as a lead runs them."""

from __future__ import annotations

import csv

from app.core.desk import Desk
from app.core.services.target_models import load_ensemble, register_model, to_model_output
from tests.app.test_cli import assert_clean_failure, dynadesk
from tests.conftest import hate_content

HATE = "hate_speech"


def seeded_desk(data_dir, tiny_classifier_dir):
    """A lead's desk whose round 1 targets the tiny model, with one seed (a validated example that fooled it)."""
    assert dynadesk("init", "--name", "Lee Lead", "--role", "lead", "--without-default-model",
                    data_dir=data_dir).returncode == 0
    with Desk(data_dir) as desk:
        lead = desk.current_person()
        writer = desk.people.create("Ana Author", "annotator")
        record = register_model(desk, tiny_classifier_dir, name="tiny", task_code=HATE)
        desk.rounds.set_models(desk.tasks.round(HATE, 1).id, lead.id, [record.id])
        models = load_ensemble([record])
        text = "Women are worthless and should stay silent."
        prediction = models.predict([text])[0]
        models.close()
        label = "not hate" if prediction.label == "hate" else "hate"
        seed = desk.examples.create(writer.id, HATE, hate_content(text, label),
                                    [to_model_output(m, record) for m in prediction.members])
        desk.validation.validate(seed.id, lead.id, "correct", mode="lead")
        return seed.id, label


def test_a_lead_grows_and_exports_the_suite(data_dir, tmp_path, tiny_classifier_dir):
    seed_id, label = seeded_desk(data_dir, tiny_classifier_dir)
    out = tmp_path / "suite.csv"
    empty = dynadesk("suite", "--task", HATE, "--out", out, data_dir=data_dir)
    assert empty.returncode == 0 and "Wrote 0 validated variant(s)" in empty.stdout
    assert "dynadesk suite grow --task hate_speech" in empty.stderr

    grown = dynadesk("suite", "grow", "--task", HATE, "--per-seed", "5", "--seed", str(seed_id), data_dir=data_dir)
    assert grown.returncode == 0, grown.stderr
    assert "5 variant(s) added to round 1" in grown.stdout and str(seed_id)[:8] in grown.stdout
    again = dynadesk("suite", "grow", "--task", HATE, "--per-seed", "5", data_dir=data_dir)
    assert "0 variant(s) added" in again.stdout and "5 variant(s) already" in again.stdout

    with Desk(data_dir) as desk:
        vetter = desk.people.create("Vic Vetter", "lead")
        variants = desk.adaptive_suite.variants_of(seed_id)
        assert len(variants) == 5
        for state in variants[:3]:
            desk.validation.validate(state.example_id, vetter.id, "correct", mode="lead")
        kept = {str(s.example_id) for s in variants[:3]}
    exported = dynadesk("suite", "--task", HATE, "--out", out, data_dir=data_dir)
    assert exported.returncode == 0 and "Wrote 3 validated variant(s) of 1 seed(s)" in exported.stdout
    with out.open(encoding="utf-8", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert {r["case_id"] for r in rows} == kept and {r["templ_id"] for r in rows} == {str(seed_id)}
    assert {r["label_gold"] for r in rows} == {"hateful" if label == "hate" else "non-hateful"}
    assert all(r["direction"] == "" and r["focus_words"] == "" and r["functionality"] for r in rows)


def test_suite_commands_fail_clearly(data_dir, tmp_path, tiny_classifier_dir):
    for command in (["suite"], ["suite", "grow"]):
        shown = dynadesk(*command, "--help", data_dir=data_dir)
        assert shown.returncode == 0 and "Usage:" in shown.stdout
    assert dynadesk("init", "--name", "Ana", "--role", "annotator", "--without-default-model",
                    data_dir=data_dir).returncode == 0
    assert_clean_failure(dynadesk("suite", data_dir=data_dir), "Name the task and the file")
    assert_clean_failure(dynadesk("suite", "--task", HATE, "--out", tmp_path / "no" / "such" / "x.csv",
                                  data_dir=data_dir), "does not exist")
    assert_clean_failure(dynadesk("suite", "--task", "nope", "--out", tmp_path / "x.csv", data_dir=data_dir),
                         "There is no task 'nope'")
    (tmp_path / "taken").mkdir()
    assert_clean_failure(dynadesk("suite", "--task", HATE, "--out", tmp_path / "taken", data_dir=data_dir),
                         "is a directory")
    assert_clean_failure(dynadesk("suite", "grow", "--task", HATE, "--seed", "abc", data_dir=data_dir),
                         "not an example id")
    assert_clean_failure(dynadesk("suite", "grow", "--task", HATE, data_dir=data_dir), "lead")
    with Desk(data_dir) as desk:  # the desk now works as a lead
        desk.switch_person(desk.people.create("Lee Lead", "lead").id)
    assert_clean_failure(dynadesk("suite", "grow", "--task", HATE, data_dir=data_dir),
                         "Round 1 of hate_speech has no target model to check variants against")
    assert_clean_failure(dynadesk("suite", "grow", "--task", HATE, "--per-seed", "0", data_dir=data_dir),
                         "0 is not in the range")
