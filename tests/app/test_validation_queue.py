"""The validation queue against a brute-force answer, over many seeded random sessions.

The rules (DESIGN.md §1.4 and the task definitions): never one's own examples, never twice,
model-fooling first, then the fewest validations, nothing decided, and non-fooling examples
only where the task validates them. The property that matters most: the queue never says
"nothing to validate" while something remains that this person may validate, skips included.
"""

import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.core.domain import ModelOutput
from app.core.storage.models import Example
from app.core.tasks.content import Content
from tests.conftest import hate_content, hate_output


def eligible(everything, person, definitions):
    """What ``person`` may validate, in queue order, computed without the queue's SQL."""
    rows = [
        e for e in everything
        if e.status in ("submitted", "flagged") and e.author_id != person.id and e.validation_state != "decided"
        and person.id not in {v.validator_id for v in e.validations if v.mode == "peer"}
        and (definitions[e.task_id].validate_non_fooling or e.model_fooled is not False)
    ]
    # fooled first (NULL after False in SQLite's DESC), then fewest validations, then oldest
    rows.sort(key=lambda e: (-(e.model_fooled is True), -(e.model_fooled is False), e.validation_count,
                             e.submitted_at))
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_queue_matches_brute_force_and_is_never_falsely_empty(desk, people, target_model, seed):
    rng = random.Random(seed)
    nli_model = desk.models.register("nli", "hf-torch", f"{seed:02d}" * 32)
    everyone = [people.author, people.val1, people.val2, people.val3, people.lead]
    definitions = {t.id: desk.tasks.definition(t.id) for t in desk.tasks.tasks()}
    skips = {p.id: [] for p in everyone}

    def check():
        with desk.db.read() as session:
            everything = session.scalars(select(Example).options(selectinload(Example.validations))).all()
        for person in everyone:
            expected = eligible(everything, person, definitions)
            queue = desk.validation.queue(person.id, limit=1000)
            assert [e.id for e in queue] == [e.id for e in expected]
            assert desk.validation.remaining(person.id) == len(expected)
            nxt = desk.validation.next_for(person.id, skip=skips[person.id])
            assert (nxt is None) == (not expected), "falsely empty (or falsely full)"
            if nxt is not None:
                fresh = [e.id for e in expected if e.id not in skips[person.id]]
                assert nxt.id == (fresh[0] if fresh else expected[0].id)
            for code in ("hate_speech", "nli"):
                in_task = [e for e in expected if definitions[e.task_id].code == code]
                assert (desk.validation.next_for(person.id, task_code=code) is None) == (not in_task)
        return everything

    for step in range(80):
        actor = rng.choice(everyone)
        roll = rng.random()
        if roll < 0.3 or step < 3:
            if rng.random() < 0.6:
                example = desk.examples.create(actor.id, "hate_speech", hate_content(f"text {step}", "hate"),
                                               [hate_output(target_model, rng.choice(["hate", "not hate"]))])
            else:  # NLI does not validate non-fooling examples
                content = Content({"context": f"Context {step}.", "hypothesis": f"Claim {step}."}, "entailment",
                                  meta={"label_explanation": "stated"})
                example = desk.examples.create(actor.id, "nli", content, [
                    ModelOutput(nli_model.id, nli_model.sha256, rng.choice(["entailment", "neutral"]))])
            if rng.random() < 0.1:
                desk.examples.retract(example.id, actor.id)
            elif rng.random() < 0.1:
                desk.examples.flag(example.id, actor.id, "unsure myself")
        elif roll < 0.45:  # skip whatever comes next
            candidate = desk.validation.next_for(actor.id, skip=skips[actor.id])
            if candidate is not None:
                skips[actor.id].append(candidate.id)
        elif roll < 0.65 and actor is people.lead:
            candidate = desk.validation.next_for(actor.id)
            if candidate is not None:
                desk.lead.adjudicate(candidate.id, actor.id, "correct")
        else:
            candidate = desk.validation.next_for(actor.id, skip=skips[actor.id])
            if candidate is not None:
                verdict = rng.choice(["correct", "correct", "incorrect", "flagged"])
                desk.validation.validate(candidate.id, actor.id, verdict, corrected_label="not hate"
                                         if candidate.task_id == target_model.task_id else "neutral", reason="sim")
        check()
    # a lead settles one more, then everything still holds
    last = desk.validation.next_for(people.lead.id)
    if last is not None:
        desk.lead.adjudicate(last.id, people.lead.id, "correct")
    everything = check()
    # the session exercised the rules it checks
    assert any(e.validation_state == "decided" for e in everything)
    assert any(e.validation_state == "in_progress" for e in everything)
    assert any(e.model_fooled is False and definitions[e.task_id].code == "nli" for e in everything)
    assert any(skipped for skipped in skips.values())


def test_skipping_everything_brings_the_skipped_back(desk, people, target_model):
    examples = [desk.examples.create(people.author.id, "hate_speech", hate_content(f"t{i}", "hate"),
                                     [hate_output(target_model, "not hate")]) for i in range(3)]
    skipped = []
    for _ in range(3):
        nxt = desk.validation.next_for(people.val1.id, skip=skipped)
        skipped.append(nxt.id)
    assert sorted(skipped) == sorted(e.id for e in examples)
    assert desk.validation.next_for(people.val1.id, skip=skipped).id == skipped[0]


def test_queue_order_by_hand(desk, people, target_model):
    """Hand-computed order: fooled-and-new, fooled-with-one-verdict, then not fooled."""
    def make(text, model_label):
        return desk.examples.create(people.author.id, "hate_speech", hate_content(text, "hate"),
                                    [hate_output(target_model, model_label)])
    a_not_fooled = make("a", "hate")
    b_fooled_once = make("b", "not hate")
    c_fooled_new = make("c", "not hate")
    desk.validation.validate(b_fooled_once.id, people.val2.id, "correct")
    assert [e.id for e in desk.validation.queue(people.val1.id)] == [c_fooled_new.id, b_fooled_once.id, a_not_fooled.id]
    assert [e.id for e in desk.validation.queue(people.val2.id)] == [c_fooled_new.id, a_not_fooled.id]
    desk.lead.adjudicate(c_fooled_new.id, people.lead.id, "correct")
    assert [e.id for e in desk.validation.queue(people.val1.id)] == [b_fooled_once.id, a_not_fooled.id]
