"""The adaptive suite on a real desk: which examples are seeds, variants stored as examples, the suite of
validated variants, its score, its HateCheck export and the held-out rule."""

from __future__ import annotations

import csv
import uuid

import pytest

from app.core.adaptive_suite.scoring import score_suite
from app.core.adaptive_suite.topics import NO_GROUP
from app.core.adaptive_suite.variants import VARIANT_SOURCE, is_variant, not_variant_clause, variant_clause
from app.core.errors import DynadeskError, NotFound
from app.core.tasks.content import Content
from tests.conftest import hate_content, hate_output

HATE = "hate_speech"


@pytest.fixture
def team(desk):
    lead = desk.people.create("Lena Lead", "lead")
    writer = desk.people.create("Wim Writer", "annotator")
    model = desk.models.register("target", "hf-torch", "a" * 64, task_id=desk.tasks.task(HATE).id)
    return lead, writer, model


@pytest.fixture
def second_lead(desk):
    return desk.people.create("Vera Vetter", "lead")  # nobody validates what they generated


def written(desk, writer, model, text, label, model_label, **meta):
    return desk.examples.create(writer.id, HATE, hate_content(text, label, **meta), [hate_output(model, model_label)])


def origin(seed, **extra):
    return {"kind": "variant", "seed_id": str(seed.id), "rule": "rules", "edit_type": "hedging",
            "generated_by": "", "seed_text": seed.text, "family": "derogation", "seed_root": str(seed.id), **extra}


def variant(desk, lead, model, seed, text, label="hate", model_label="not hate", groups=("women",)):
    content = Content({"text": text}, label, meta={"target_groups": list(groups), "hate_type": "derogation"})
    (made,) = desk.adaptive_suite.store_variants(HATE, lead.id, [(content, [hate_output(model, model_label)],
                                                                  origin(seed, generated_by=str(lead.id)))])
    return made


def test_seeds_are_validated_examples_that_fooled_and_perturbations_that_flipped(desk, team):
    lead, writer, model = team
    fooled = written(desk, writer, model, "Women are worthless.", "hate", "not hate", target_groups=["women"])
    caught = written(desk, writer, model, "Women are scum.", "hate", "hate")
    undecided = written(desk, writer, model, "Muslims are scum, honestly.", "hate", "not hate")
    corrected = written(desk, writer, model, "I love immigrants.", "hate", "hate", target_groups=["immigrants"])
    rejected = written(desk, writer, model, "Trans people are vile.", "hate", "not hate")
    for example, verdict, label in ((fooled, "correct", None), (caught, "correct", None),
                                    (corrected, "incorrect", "not hate"), (rejected, "flagged", None)):
        desk.validation.validate(example.id, lead.id, verdict, corrected_label=label, mode="lead",
                                 reason=None if verdict == "correct" else "no")
    flipped = desk.examples.create(writer.id, HATE, hate_content("Women are not scum.", "not hate"),
                                   [hate_output(model, "not hate")], perturbation_of=caught.id)
    same = desk.examples.create(writer.id, HATE, hate_content("Women are total scum.", "hate"),
                                [hate_output(model, "hate")], perturbation_of=caught.id)

    topics = {t.seed_id: t for t in desk.adaptive_suite.topics(HATE)}

    assert set(topics) == {fooled.id, corrected.id, flipped.id}
    assert undecided.id not in topics and same.id not in topics and rejected.id not in topics
    assert topics[fooled.id].label == "hate" and topics[fooled.id].group == "women"
    assert topics[fooled.id].edit_type == "derogation" and topics[fooled.id].seed_kind == "written"
    assert topics[corrected.id].label == "not hate" and topics[corrected.id].group == "immigrants"
    assert topics[corrected.id].edit_type == "written"  # no hate type for a harmless text
    assert topics[flipped.id].seed_kind == "perturbation" and topics[flipped.id].edit_type == "perturbation"
    assert topics[flipped.id].label == "not hate" and topics[flipped.id].group == NO_GROUP
    assert desk.adaptive_suite.topic(fooled.id).round_number == 1
    with pytest.raises(NotFound, match="no seed"):
        desk.adaptive_suite.topic(caught.id)


def test_a_variant_is_an_example_only_validated_ones_are_cases(desk, team, second_lead, tmp_path):
    lead, writer, model = team
    vetter = second_lead
    seed = written(desk, writer, model, "Women are worthless.", "hate", "not hate")
    desk.validation.validate(seed.id, lead.id, "correct", mode="lead")
    first = variant(desk, lead, model, seed, "Honestly, women are worthless.")
    second = variant(desk, lead, model, seed, "Muslims are worthless.", model_label="hate", groups=("Muslims",))
    third = variant(desk, lead, model, seed, "Gay people are worthless.", groups=("gay people",))

    stored = desk.examples.get(first)
    assert is_variant(stored.origin) and stored.source == VARIANT_SOURCE and stored.author_id == lead.id
    assert stored.model_fooled is True and stored.status == "submitted" and stored.perturbation_of is None
    assert desk.examples.get(second).model_fooled is False
    (topic,) = desk.adaptive_suite.topics(HATE)  # a variant is never a seed, even when it fooled
    assert (topic.variants, topic.validated) == (3, 0)
    assert desk.adaptive_suite.cases(HATE) == []

    with pytest.raises(Exception, match="Nobody validates their own"):
        desk.validation.validate(first, lead.id, "correct", mode="lead")
    desk.validation.validate(first, vetter.id, "correct", mode="lead")
    desk.validation.validate(second, vetter.id, "incorrect", corrected_label="not hate", reason="reads as a fact",
                             mode="lead")
    desk.validation.validate(third, vetter.id, "flagged", reason="nonsense", mode="lead")

    cases = desk.adaptive_suite.cases(HATE)
    assert {(c.example_id, c.label, c.group) for c in cases} == {(first, "hate", "women"),
                                                                 (second, "not hate", "Muslims")}
    assert all(c.seed_id == seed.id and c.family == "derogation" and c.rule == "hedging" for c in cases)
    assert desk.adaptive_suite.topics(HATE)[0].validated == 2

    states = {s.example_id: s for s in desk.adaptive_suite.variants_of(seed.id)}
    assert set(states) == {first, second, third}
    assert states[first].validated and not states[third].validated
    assert states[first].provenance("S") == "generated from seed S by rule rules:hedging, validated by Vera Vetter"
    assert states[first].generated_by == lead.id

    out = tmp_path / "suite.csv"
    assert desk.adaptive_suite.export_csv(HATE, out) == 2
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert {(r["case_id"], r["label_gold"], r["templ_id"], r["functionality"], r["target_ident"]) for r in rows} == {
        (str(first), "hateful", str(seed.id), "derogation", "women"),
        (str(second), "non-hateful", str(seed.id), "derogation", "Muslims")}
    assert list(rows[0])[1:5] == ["functionality", "case_id", "test_case", "label_gold"]

    # the export reads back as a HateCheck suite, as `dynadesk eval --suite` takes it
    from app.core.services.evaluation_data import read_hatecheck_suite

    assert len(read_hatecheck_suite(out).cases) == 2
    (tmp_path / "taken").mkdir()  # a folder where the file should go: said, and nothing half-written is left
    with pytest.raises(DynadeskError, match="could not be written"):
        desk.adaptive_suite.export_csv(HATE, tmp_path / "taken")
    assert not (tmp_path / "taken.partial").exists() and out.read_text(encoding="utf-8").count("\n") == 3

    score = score_suite(cases, ["hate" for _ in cases])
    assert (score.n, score.wrong) == (2, 1) and score.per_topic == {seed.id: (1, 2)}
    assert score.per_family == {"derogation": (1, 2)} and score.error_rate == 0.5
    with pytest.raises(ValueError):
        score_suite(cases, ["hate"])


def test_clauses_tell_variants_apart(desk, team):
    from sqlalchemy import select

    from app.core.storage.models import Example

    lead, writer, model = team
    seed = written(desk, writer, model, "Women are worthless.", "hate", "not hate")
    made = variant(desk, lead, model, seed, "Honestly, women are worthless.")
    with desk.db.read() as session:
        assert set(session.scalars(select(Example.id).where(variant_clause()))) == {made}
        assert set(session.scalars(select(Example.id).where(not_variant_clause()))) == {seed.id}


def test_a_seed_and_its_variants_fall_on_one_side_of_the_held_out_split(desk, team):
    from app.core.tasks.splits import held_out_example

    lead, writer, model = team
    sides = set()
    for i in range(200):  # fixed seeds, among which both sides occur; each variant follows its own seed
        seed_id = uuid.uuid5(uuid.NAMESPACE_URL, f"seed-{i}")
        seed_side = held_out_example(seed_id, None, {"kind": "scratch"})
        variant_origin = {"kind": "variant", "seed_id": str(seed_id), "seed_root": str(seed_id)}
        assert held_out_example(uuid.uuid4(), None, variant_origin) == seed_side
        sides.add(seed_side)
        grouped = {"kind": "variant", "seed_id": str(seed_id), "seed_root": str(seed_id), "group": f"t{i}"}
        assert held_out_example(uuid.uuid4(), None, grouped) == held_out_example(seed_id, None, {"group": f"t{i}"})
    assert sides == {True, False}


def test_variants_per_seed_is_a_checked_lead_setting(desk, team):
    from app.core.task_settings import InvalidTaskSettings, TaskSettings

    lead, _, _ = team
    assert desk.tasks.settings(HATE).variants_per_seed == 20
    assert desk.set_task_settings(lead.id, HATE, variants_per_seed=50).settings.variants_per_seed == 50
    assert desk.tasks.settings(HATE).variants_per_seed == 50
    for bad in (0, 201, True, "9", 2.5):
        with pytest.raises(InvalidTaskSettings, match="between 1 and 200"):
            TaskSettings(variants_per_seed=bad)
    assert TaskSettings.from_json({"variants_per_seed": 7}).variants_per_seed == 7
