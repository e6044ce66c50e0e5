"""The assistant's split of MER, vMER, rejection rate and time per example, against figures
worked out by hand; the desk's split and the dashboard's rejection rate use the one definition."""

import uuid

import pytest
from sqlalchemy import update

from app.core.assist.types import Assistance
from app.core.services.assistant_split import assistant_split
from app.core.storage.models import Example
from app.core.tasks import figures as rule
from tests.conftest import hate_content, hate_output

ON = {"arm": "on", "session": 1, "applied": False}
APPLIED = {"arm": "on", "session": 1, "applied": True, "generator": "rules", "edit_type": "negation",
           "applied_text": "x", "edit_distance": 0}
OFF = {"arm": "off", "session": 2, "applied": False}

# (status, fooled, decided verdict, writing ms, assistance) of one writer's examples
HAND = [
    ("submitted", True, "correct", 30_000, APPLIED),
    ("submitted", True, "incorrect", 60_000, APPLIED),
    ("flagged", False, None, 90_000, ON),
    ("submitted", True, None, 0, ON),  # no recorded time: not in the median
    ("retracted", True, "correct", 10_000, APPLIED),  # not submitted: counts nowhere
    ("submitted", False, "correct", 40_000, OFF),
    ("submitted", True, "correct", 20_000, OFF),
    ("submitted", True, "correct", 5_000, None),  # no arm: outside the split
    ("submitted", True, None, 5_000, {"arm": None, "session": 3, "applied": False}),  # the assistant was off
]


def test_the_split_matches_the_hand_computed_figures():
    figures, outside = rule.arm_split(rule.ArmRow("ann", *row) for row in HAND)
    assisted, unassisted = figures
    assert outside == 2
    assert (assisted.arm, assisted.submitted, assisted.applied, assisted.fooled, assisted.validated_fooling,
            assisted.decided, assisted.rejected) == ("assisted", 4, 2, 3, 1, 2, 1)
    assert (assisted.mer, assisted.vmer, assisted.rejection_rate, assisted.applied_share) == (0.75, 0.25, 0.5, 0.5)
    assert assisted.median_seconds == 60.0  # median of 30, 60 and 90 s
    assert (unassisted.arm, unassisted.submitted, unassisted.applied, unassisted.mer, unassisted.vmer,
            unassisted.rejection_rate, unassisted.median_seconds) == ("unassisted", 2, 0, 0.5, 0.5, 0.0, 30.0)


def test_empty_sides_and_groups_have_no_rates():
    figures, outside = rule.arm_split([rule.ArmRow("r", "submitted", None, None, None, ON)])
    (only,) = figures
    assert (only.submitted, only.fooled, only.mer, only.vmer, only.rejection_rate, only.median_seconds) == (
        1, 0, 0.0, 0.0, None, None)
    assert rule.arm_split([]) == ([], 0)
    assert rule.arm_group({"arm": "maybe"}) is None and rule.arm_group(None) is None
    assert rule.median_seconds([None, 0, 2000, 4000]) == 3.0 and rule.median_seconds([]) is None


def test_the_desk_split_per_annotator_and_per_round(desk, people, target_model):
    round1 = desk.tasks.round("hate_speech")
    ids = []
    for status, fooled, verdict, ms, assistance in HAND:
        model_label = "not hate" if fooled else "hate"
        example = desk.examples.create(
            people.author.id, "hate_speech", hate_content(f"text {len(ids)}", "hate"),
            [hate_output(target_model, model_label)], time_spent_ms=ms,
            assistance=None if assistance is None else Assistance(**assistance))
        ids.append(example.id)
        with desk.db.write() as session:  # decisions and retractions as validation and authors would leave them
            session.execute(update(Example).where(Example.id == example.id).values(status=status,
                                                                                    decided_verdict=verdict))
    # another writer, unassisted only, so that the per-round row mixes two writers
    other = desk.examples.create(people.val1.id, "hate_speech", hate_content("someone else", "hate"),
                                 [hate_output(target_model, "hate")], time_spent_ms=50_000,
                                 assistance=Assistance(arm="off", session=1))
    split = assistant_split(desk.db, "annotator", task_id=round1.task_id)
    assert split.outside == 2
    ana = next(g for g in split.groups if g.key == people.author.id.hex)
    assert ana.name == people.author.display_name
    assert (ana.assisted.submitted, ana.assisted.applied, ana.assisted.mer, ana.assisted.vmer,
            ana.assisted.rejection_rate, ana.assisted.median_seconds) == (4, 2, 0.75, 0.25, 0.5, 60.0)
    assert (ana.unassisted.submitted, ana.unassisted.mer, ana.unassisted.median_seconds) == (2, 0.5, 30.0)
    val1 = next(g for g in split.groups if g.key == people.val1.id.hex)
    assert val1.assisted is None and val1.unassisted.submitted == 1 and val1.unassisted.mer == 0.0

    (by_round,) = assistant_split(desk.db, "round", task_id=round1.task_id).groups
    assert by_round.name == "Hate speech · round 1"
    assert (by_round.assisted.submitted, by_round.unassisted.submitted) == (4, 3)
    assert by_round.unassisted.mer == pytest.approx(1 / 3) and by_round.unassisted.median_seconds == 40.0
    only_val1 = assistant_split(desk.db, "annotator", author_ids=[people.val1.id])
    assert [g.key for g in only_val1.groups] == [people.val1.id.hex] and only_val1.outside == 0
    assert only_val1.all_unassisted.submitted == 1 and only_val1.all_assisted is None
    assert other.id not in ids


def test_the_dashboard_rejection_rate_is_the_one_definition(desk, people, target_model):
    desk.dashboard.refresh()
    for verdict in ("incorrect", "correct", "correct", None):
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(f"t {verdict} {uuid.uuid4()}",
                                                                                     "hate"),
                                       [hate_output(target_model, "not hate")])
        with desk.db.write() as session:
            session.execute(update(Example).where(Example.id == example.id).values(decided_verdict=verdict))
    desk.dashboard.refresh(thorough=True)
    from app.core.services.dashboard_snapshot import DashboardFilter

    (row,) = [g for g in desk.dashboard.annotators(DashboardFilter()) if g.submitted]
    assert row.rejection_rate == rule.rejection_rate(1, 3) == pytest.approx(1 / 3)
