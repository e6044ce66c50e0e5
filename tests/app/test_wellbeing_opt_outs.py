"""Opt-outs by target group: a validator is not served examples targeting a group they opted out of
(checked against a brute-force answer over random examples and opt-outs), the queue says plainly
when only such examples are left, and the queue still runs off its partial index."""

import random

import pytest
from sqlalchemy import delete, select
from sqlalchemy.orm import selectinload

from app.core.storage.models import Example, ExampleFacet
from app.core.tasks.content import facet_values
from app.core.wellbeing.opt_outs import example_targets
from tests.app.test_validation_queue import eligible
from tests.conftest import hate_content, hate_output

GROUPS = ["women", "Muslims", "Jewish people", "immigrants", "gay people", "Roma"]


@pytest.mark.parametrize("seed", [5, 6])
def test_opt_outs_match_brute_force(desk, people, target_model, seed):
    rng = random.Random(seed)
    everyone = [people.author, people.val1, people.val2, people.lead]
    definitions = {t.id: desk.tasks.definition(t.id) for t in desk.tasks.tasks()}
    for i in range(60):
        label = rng.choice(["hate", "hate", "not hate"])
        meta = {"target_groups": rng.sample(GROUPS, rng.randint(1, 3))} if label == "hate" else {}
        author = rng.choice([people.author, people.val2])
        example = desk.examples.create(author.id, "hate_speech", hate_content(f"text {i}", label, **meta),
                                       [hate_output(target_model, rng.choice(["hate", "not hate"]))])
        if label == "hate" and rng.random() < 0.15:
            with desk.db.write() as session:  # an imported or older record may hold one group, not a list
                row = session.get(Example, example.id)
                row.meta = {**row.meta, "target_groups": rng.choice(GROUPS)}
                session.execute(delete(ExampleFacet).where(ExampleFacet.example_id == row.id,
                                                           ExampleFacet.field == "target_groups"))
                session.add_all(ExampleFacet.rows_for(row.id, facet_values(desk.tasks.definition(row.task_id),
                                                                           {"target_groups": row.meta["target_groups"]})))
        if rng.random() < 0.3:
            desk.validation.validate(example.id, rng.choice([people.val1, people.lead]).id, "correct") \
                if example.author_id != people.val1.id else None
    with desk.db.read() as session:
        everything = session.scalars(select(Example).options(selectinload(Example.validations))).all()
    for _ in range(12):
        person = rng.choice(everyone)
        opted = {"hate_speech": rng.sample(GROUPS, rng.randint(0, 3)), "no_such_task": ["women"]}
        served = [e for e in eligible(everything, person, definitions)
                  if not example_targets(e.meta) & set(opted["hate_speech"])]
        held = [e for e in eligible(everything, person, definitions)
                if example_targets(e.meta) & set(opted["hate_speech"])]
        queue = desk.validation.queue(person.id, limit=1000, opted_out=opted)
        assert [e.id for e in queue] == [e.id for e in served]
        assert desk.validation.remaining(person.id, opted_out=opted) == len(served)
        assert desk.validation.held_back(person.id, opted, task_code="hate_speech") == len(held)
        nxt = desk.validation.next_for(person.id, task_code="hate_speech", opted_out=opted)
        assert (nxt.id if nxt else None) == (served[0].id if served else None)
    assert any(example_targets(e.meta) for e in everything) and any(not e.meta.get("target_groups")
                                                                    for e in everything)


def test_only_opted_out_work_left_is_said_plainly(desk, people, target_model):
    for groups in (["Muslims"], ["Muslims", "women"]):
        desk.examples.create(people.author.id, "hate_speech", hate_content("x", "hate", target_groups=groups),
                             [hate_output(target_model, "not hate")])
    opted = {"hate_speech": ["Muslims"]}
    assert desk.validation.next_for(people.val1.id, task_code="hate_speech", opted_out=opted) is None
    assert desk.validation.held_back(people.val1.id, opted, task_code="hate_speech") == 2
    from app.views.validate import queue_view
    view = queue_view(None, 0, "Vic", "Hate speech", [], held_back=2, opted_out=("Muslims",))
    assert "2 examples" in view.empty and "Muslims" in view.empty and "Profile" in view.empty
    assert "Nothing left" not in view.empty
    # nothing held back: the usual message
    assert "Nothing left for you to validate" in queue_view(None, 0, "Vic", "Hate speech", []).empty


def test_the_queue_still_runs_off_its_partial_index(desk, people):
    """As tests/app/test_storage.py guards the plain queue: opt-outs only add a per-row test."""
    from tests.app.test_storage import _plan

    for i in range(30):
        desk.examples.create(people.author.id, "hate_speech", hate_content(f"text {i}", "hate"))
    desk.db.refresh_statistics(force=True)
    plan = _plan(desk.db, desk.validation.queue_query(people.val1.id, opted_out={"hate_speech": ["Muslims"]}).limit(1))
    assert "USING INDEX ix_examples_queue" in plan and "TEMP B-TREE" not in plan, plan
