import random

import pytest
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.core.errors import ValidationRuleError
from app.core.storage.models import Example
from tests.conftest import hate_content, hate_output


def test_nobody_validates_their_own_example_or_the_same_one_twice(desk, people, submit):
    example = submit()
    with pytest.raises(ValidationRuleError, match="own example"):
        desk.validation.validate(example.id, people.author.id, "correct")
    desk.validation.validate(example.id, people.val1.id, "correct")
    with pytest.raises(ValidationRuleError, match="already validated"):
        desk.validation.validate(example.id, people.val1.id, "incorrect", corrected_label="not hate", reason="r")


def test_verdicts_need_what_they_claim(desk, people, submit):
    example = submit()
    with pytest.raises(ValidationRuleError, match="corrected label"):
        desk.validation.validate(example.id, people.val1.id, "incorrect", reason="wrong")
    with pytest.raises(ValidationRuleError, match="must be one of"):
        desk.validation.validate(example.id, people.val1.id, "incorrect", corrected_label="meh", reason="wrong")
    with pytest.raises(ValidationRuleError, match="same as the author's"):
        desk.validation.validate(example.id, people.val1.id, "incorrect", corrected_label="hate", reason="wrong")
    with pytest.raises(ValidationRuleError, match="needs an explanation"):
        desk.validation.validate(example.id, people.val1.id, "incorrect", corrected_label="not hate")
    with pytest.raises(ValidationRuleError, match="flag needs a reason"):
        desk.validation.validate(example.id, people.val1.id, "flagged", reason="  ")
    with pytest.raises(ValidationRuleError, match="Only team leads"):
        desk.validation.validate(example.id, people.val1.id, "correct", mode="lead")
    desk.examples.retract(example.id, people.author.id)
    with pytest.raises(ValidationRuleError, match="retracted example cannot be validated"):
        desk.validation.validate(example.id, people.val1.id, "correct")


def test_an_example_is_decided_when_one_verdict_reaches_the_threshold(desk, people, submit):
    example = submit()
    desk.validation.validate(example.id, people.val1.id, "correct")
    desk.validation.validate(example.id, people.val2.id, "incorrect", corrected_label="not hate", reason="mild")
    state = desk.examples.get(example.id)
    assert (state.validation_state, state.validation_count, state.disagreement_count) == ("in_progress", 2, 1)
    desk.validation.validate(example.id, people.val3.id, "correct")
    state = desk.examples.get(example.id)
    assert state.validation_state == "in_progress"  # 2 of 3 matching is not yet the threshold of 3
    extra = desk.people.create("Yu Validator", "annotator")
    desk.validation.validate(example.id, extra.id, "correct")
    state = desk.examples.get(example.id)
    assert (state.validation_state, state.decided_verdict, state.decided_label) == ("decided", "correct", "hate")
    late = desk.people.create("Zed Late", "annotator")
    with pytest.raises(ValidationRuleError, match="already decided"):
        desk.validation.validate(example.id, late.id, "correct")


def test_a_leads_verdict_is_final(desk, people, submit):
    example = submit()
    desk.validation.validate(example.id, people.val1.id, "correct")
    desk.validation.validate(example.id, people.val2.id, "flagged", reason="unclear target")
    desk.validation.validate(example.id, people.lead.id, "incorrect", corrected_label="not hate",
                             reason="it is criticism, not hate", mode="lead")
    state = desk.examples.get(example.id)
    assert (state.validation_state, state.decided_verdict, state.decided_label, state.flag_count) == (
        "decided", "incorrect", "not hate", 1)


def test_the_queue_serves_fooling_examples_first_then_the_least_validated(desk, people, submit):
    not_fooling = submit("obvious", label="hate", model_label="hate")
    fooling_twice = submit("fooled and seen twice")
    fooling_new = submit("fooled and new")
    for validator in (people.val2, people.val3):
        desk.validation.validate(fooling_twice.id, validator.id, "correct")
    queue = [e.id for e in desk.validation.queue(people.val1.id)]
    assert queue == [fooling_new.id, fooling_twice.id, not_fooling.id]
    assert desk.validation.queue(people.author.id) == []  # all are the author's own
    assert [e.id for e in desk.validation.queue(people.val2.id)] == [fooling_new.id, not_fooling.id]
    skipped = desk.validation.next_for(people.val1.id, skip=[fooling_new.id])
    assert skipped.id == fooling_twice.id


def test_non_fooling_examples_are_queued_only_when_the_task_says_so(desk, people):
    nli_model = desk.models.register("nli", "hf-torch", "12" * 32)
    from app.core.domain import ModelOutput
    from app.core.tasks.content import Content

    content = Content({"context": "A cat sat.", "hypothesis": "An animal sat."}, "entailment",
                      meta={"label_explanation": "cats are animals"})
    fooled = desk.examples.create(people.author.id, "nli", content, [ModelOutput(nli_model.id, nli_model.sha256, "neutral")])
    desk.examples.create(people.author.id, "nli", content, [ModelOutput(nli_model.id, nli_model.sha256, "entailment")])
    assert [e.id for e in desk.validation.queue(people.val1.id, task_code="nli")] == [fooled.id]


def test_the_queue_never_says_nothing_to_validate_while_work_remains(desk, people, target_model):
    """Dynabench once told validators there was nothing left while there was. Random sessions
    check the queue against a brute-force answer after every step."""
    rng = random.Random(7)
    everyone = [people.author, people.val1, people.val2, people.val3, people.lead]
    created = 0
    for step in range(120):
        actor = rng.choice(everyone)
        if rng.random() < 0.35 or not created:
            example = desk.examples.create(actor.id, "hate_speech", hate_content(f"text {step}", "hate"),
                                           [hate_output(target_model, rng.choice(["hate", "not hate"]))])
            created += 1
            if rng.random() < 0.1:
                desk.examples.retract(example.id, actor.id)
        else:
            candidate = desk.validation.next_for(actor.id)
            if candidate is not None:
                verdict = rng.choice(["correct", "correct", "incorrect", "flagged"])
                desk.validation.validate(candidate.id, actor.id, verdict, corrected_label="not hate",
                                         reason="simulated")
        with desk.db.read() as session:
            everything = session.scalars(select(Example).options(selectinload(Example.validations))).all()
        for person in everyone:
            remaining = {
                e.id for e in everything
                if e.status in ("submitted", "flagged") and e.author_id != person.id
                and e.validation_state != "decided"
                and person.id not in {v.validator_id for v in e.validations if v.mode == "peer"}
            }
            queue = {e.id for e in desk.validation.queue(person.id, limit=1000)}
            assert queue == remaining
            assert (desk.validation.next_for(person.id) is None) == (not remaining)
    # the session really exercised the rules: some examples got decided, some were retracted
    assert any(e.validation_state == "decided" for e in everything)
    assert any(e.status == "retracted" for e in everything)
