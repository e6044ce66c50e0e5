"""Every door that counts a person's examples, on one desk holding a written example, a perturbation, an
imported example and a validated variant: a variant is no one's writing (the suite's decision 4). It is left
out of the figures (stats, the dashboard, the round summary), Review, the exposure of writing and round
training unless asked for; it is in the Validate queue, export and the held-out rule (on its seed's side).
The server's team figures are checked in tests/sync/test_adaptive_suite_sync.py."""

from __future__ import annotations

import json

import pytest

from app.core.adaptive_suite.variants import VARIANT_SOURCE
from app.core.desk import Desk
from app.core.services.dashboard_snapshot import DashboardFilter
from app.core.services.review import NOT_DRAFT, ExampleFilter
from app.core.services.stats import GROUPINGS
from app.core.tasks.content import Content
from tests.app.test_stats import csv_slice
from tests.conftest import hate_content, hate_output, shared_file

HATE = "hate_speech"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from app.core.io.importers import import_file

    tmp = tmp_path_factory.mktemp("doors")
    desk = Desk(tmp / "desk")
    writer = desk.people.create("Ana Author", "annotator")
    lead = desk.people.create("Lee Lead", "lead")
    vetter = desk.people.create("Vic Vetter", "lead")
    model = desk.models.register("target", "hf-torch", "ab" * 32, task_id=desk.tasks.task(HATE).id)
    seed = desk.examples.create(writer.id, HATE, hate_content("Women are worthless.", "hate"),
                                [hate_output(model, "not hate")], time_spent_ms=60_000)
    desk.examples.create(writer.id, HATE, hate_content("Women are priceless.", "not hate"),
                         [hate_output(model, "not hate")], perturbation_of=seed.id, time_spent_ms=30_000)
    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp / "hatecheck.csv", 1)
    import_file(desk, cases, "hatecheck", round_number=1)
    desk.validation.validate(seed.id, lead.id, "correct", mode="lead")
    origin = {"kind": "variant", "seed_id": str(seed.id), "rule": "identity_swap",
              "edit_type": "group_swap_protected", "generated_by": str(lead.id), "seed_text": seed.text,
              "family": "derogation", "topic_group": "women", "seed_root": str(seed.id)}
    (variant,) = desk.adaptive_suite.store_variants(HATE, lead.id, [(
        Content({"text": "Muslims are worthless."}, "hate", meta={"target_groups": ["Muslims"]}),
        [hate_output(model, "not hate")], origin)])
    queue_before = [e.id for e in desk.validation.queue(vetter.id, task_code=HATE, limit=100)]
    peer = desk.people.create("Pia Peer", "annotator")
    desk.validation.validate(variant, peer.id, "correct", time_spent_ms=15_000)  # a peer's verdict: their work
    desk.validation.validate(variant, vetter.id, "correct", mode="lead", time_spent_ms=20_000)
    desk.dashboard.refresh(thorough=True)
    yield desk, writer, lead, vetter, seed, variant, queue_before
    desk.close()


def test_the_variant_is_stored_as_a_fooling_validated_example(world):
    desk, writer, lead, _, seed, variant, _ = world
    stored = desk.examples.get(variant)
    assert (stored.source, stored.author_id, stored.model_fooled, stored.decided_label) == (
        VARIANT_SOURCE, lead.id, True, "hate")
    assert [c.example_id for c in desk.adaptive_suite.cases(HATE)] == [variant]


@pytest.mark.parametrize("by", GROUPINGS)
def test_stats_count_the_writing_and_the_import_never_the_variant(world, by):
    desk, writer, lead, _, _, _, _ = world
    figures = desk.stats.figures(by, task_id=desk.tasks.task(HATE).id)
    assert sum(f.submitted for f in figures) == 2  # the written example and its perturbation
    assert sum(f.fooled for f in figures) == 1 and sum(f.validated_fooling for f in figures) == 1
    assert sum(f.imported for f in figures) == (0 if by == "model" else 1)  # imported before any target ran
    if by == "annotator":
        assert lead.id.hex not in {f.key.replace("-", "") for f in figures}  # generating is not writing


def test_the_dashboard_leaves_the_variant_out(world):
    desk, writer, lead, _, _, _, _ = world
    view = desk.dashboard.view(DashboardFilter(task_id=desk.tasks.task(HATE).id))
    rows = {a.key: a for a in view.annotators if a.submitted + a.imported + a.retracted}
    assert lead.id.hex not in rows
    assert rows[writer.id.hex].submitted == 2 and rows[writer.id.hex].fooled == 1
    assert sum(a.imported for a in rows.values()) == 1
    assert view.total_examples == 3 and view.matching == 3  # written, perturbation, imported
    (group,) = view.breakdowns["round"]
    assert (group.submitted, group.fooled, group.imported) == (2, 1, 1)
    assert sum(bar.value for bar in view.labels) == 2
    peer = next(p for p in desk.people.all() if p.display_name == "Pia Peer")
    (vetting,) = [a for a in view.annotators if a.key == peer.id.hex]  # vetting a variant is a validator's work
    assert (vetting.validations, vetting.submitted) == (1, 0)


def test_the_round_summary_counts_writing_only(world):
    desk, *_ = world
    summary = desk.rounds.summary(HATE, 1)
    assert (summary.examples, summary.fooled) == (2, 1)


def test_review_shows_what_people_wrote_data_shows_all(world):
    desk, _, lead, _, _, variant, _ = world
    task_id = desk.tasks.task(HATE).id
    review = ExampleFilter(task_id=task_id, statuses=NOT_DRAFT, variants=False)
    assert desk.review.summary(review)["examples"] == 3
    assert variant not in {r.id for r in desk.review.rows(review, limit=100)}
    assert desk.review.count(ExampleFilter(task_id=task_id)) == 4  # the Data tab: every example
    assert [r.id for r in desk.review.rows(ExampleFilter(task_id=task_id, variants=True), limit=10)] == [variant]
    from app.gui.review_page import filter_from  # the Review tab's own filter leaves variants out
    from app.views.review import ReviewFilterValues

    assert filter_from(ReviewFilterValues(), task_id).variants is False


def test_the_validate_queue_takes_the_variant(world):
    _, _, _, _, _, variant, queue_before = world
    assert variant in queue_before


def test_round_training_takes_variants_only_when_asked(world):
    from app.core.next_round.inputs import round_counts
    from app.core.next_round.training_data import VARIANT, training_set

    desk, _, _, _, seed, variant, _ = world
    plain = training_set(desk, HATE, [1], include_undecided=True)
    taken = {e.id for e in plain.train + plain.held_out}
    assert str(variant) not in taken and str(seed.id) in taken
    assert plain.excluded.get("variant_not_asked") == 1 and plain.summary()["variants"] is False
    asked = training_set(desk, HATE, [1], include_undecided=True, variants=True)
    assert str(variant) not in {e.id for e in asked.train + asked.held_out}  # never a round example
    held_seed = str(seed.id) in {e.id for e in asked.held_out}
    if held_seed:  # a seed and its variants: one side; a held-out seed's variants are never trained on
        assert asked.variants == [] and asked.variants_left_out == {"seed_held_out": 1}
    else:
        (taken_variant,) = asked.variants
        assert (taken_variant.id, taken_variant.source, taken_variant.label) == (str(variant), VARIANT, "hate")
    (count,) = [c for c in round_counts(desk, HATE) if c.number == 1]
    assert (count.decided, count.undecided, count.left_out, count.variants) == (1, 1, 0, 1)


def test_writing_exposure_is_not_recorded_for_a_variant_reading_is(world):
    from app.core.wellbeing.exposure import Activity

    desk, _, lead, vetter, _, variant, _ = world
    assert desk.exposure.record(lead.id, Activity.WRITING, variant, 5_000) is None
    assert desk.exposure.record_stored(vetter.id, Activity.VALIDATING, variant) is not None


def test_export_carries_the_variant_with_its_origin(world, tmp_path):
    from app.core.io.exporters import export

    desk, _, _, _, seed, variant, _ = world
    out = tmp_path / "all.jsonl"
    export(desk, out, "jsonl", keep_identities=True)
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    (found,) = [r for r in records if r.get("id") == str(variant)]
    assert found["origin"]["kind"] == "variant" and found["origin"]["seed_id"] == str(seed.id)
    assert found["source"] == VARIANT_SOURCE


def test_the_quality_guard_leaves_the_variant_out(world):
    """A variant is near its seed by design: it is in no writer's duplicate rate, cluster or artifact table."""
    from app.core.quality.service import load_quality_data

    desk, writer, lead, _, seed, variant, _ = world
    task_id = desk.tasks.task(HATE).id
    desk.near_duplicates.ensure_built(task_id, save=False)
    assert desk.near_duplicates.size(task_id) == 3  # the written example, its perturbation and the import
    found = desk.near_duplicates.nearest(task_id, "Muslims are worthless.", limit=5)
    assert found.matches and variant not in {m.example_id for m in found.matches}  # the seed is found, not it
    assert lead.display_name not in {r.label for r in desk.near_duplicates.duplicate_rates(task_id)}
    data = load_quality_data(desk, HATE)
    assert str(variant) not in {str(i) for i in data.ids} and len(data.ids) == 3


def test_a_jsonl_round_trip_keeps_the_suite(world, tmp_path):
    """`dynadesk export --format jsonl` onto another desk: the variant stays a variant, validated, in the suite."""
    from app.core.io.exporters import export
    from app.core.io.importers import import_file

    desk, _, _, _, seed, variant, _ = world
    out = tmp_path / "all.jsonl"
    export(desk, out, "jsonl", keep_identities=True)
    with Desk(tmp_path / "second") as second:
        import_file(second, out, "jsonl")
        assert [c.example_id for c in second.adaptive_suite.cases(HATE)] == [variant]
        assert [t.seed_id for t in second.adaptive_suite.topics(HATE)] == [seed.id]
        figures = second.stats.figures("annotator", task_id=second.tasks.task(HATE).id)
        assert sum(f.submitted for f in figures) == 2
