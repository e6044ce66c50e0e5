import uuid

import pytest

from app.core.domain import FooledRule, ModelOutput, Span
from app.core.tasks.definition import builtin_tasks_dir, load_catalog
from app.core.tasks.fooling import is_fooled, normalize_answer, span_f1

CATALOG = load_catalog(builtin_tasks_dir())


def out(label, probabilities=None, answer=None):
    return ModelOutput(uuid.uuid4(), "0" * 64, label, probabilities or {}, 1.0, answer)


def test_squad_normalisation_drops_case_punctuation_and_articles():
    assert normalize_answer("The  Eiffel Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"


@pytest.mark.parametrize("pred, truth, expected", [
    ("the Eiffel Tower", "Eiffel Tower", 1.0),
    ("Paris", "Eiffel Tower", 0.0),
    ("tower in Paris", "the Eiffel Tower", 2 * (1 / 3) * (1 / 2) / (1 / 3 + 1 / 2)),
    ("", "", 1.0),
    ("", "Paris", 0.0),
])
def test_span_f1_matches_hand_computed_values(pred, truth, expected):
    assert span_f1(pred, truth) == pytest.approx(expected)


def test_qa_is_fooled_below_an_f1_of_0_4():
    qa = CATALOG["extractive_qa"]
    truth = Span(0, 20, "the big red barn door")
    assert is_fooled(qa, [out("x", answer=Span(0, 3, "red barn door"))], answer=truth) is False  # F1 0.75
    assert is_fooled(qa, [out("x", answer=Span(0, 3, "barn"))], answer=truth) is False  # F1 exactly 0.4 is not below
    assert is_fooled(qa, [out("x", answer=Span(0, 3, "a farmhouse"))], answer=truth) is True


def test_classification_rules_for_ensembles():
    hate = CATALOG["hate_speech"]
    members = [
        out("not hate", {"hate": 0.45, "not hate": 0.55}),
        out("hate", {"hate": 0.95, "not hate": 0.05}),
    ]
    # mean is 0.70 hate: the ensemble says hate, so a 'hate' example did not fool it
    assert is_fooled(hate, members, "hate", rule=FooledRule.MEAN) is False
    assert is_fooled(hate, members, "hate", rule=FooledRule.ANY) is True
    assert is_fooled(hate, members, "hate", rule=FooledRule.ALL) is False
    assert is_fooled(hate, members, "not hate", rule=FooledRule.ALL) is False
    assert is_fooled(hate, members, "not hate", rule=FooledRule.ANY) is True
    assert is_fooled(hate, [], "hate") is None


@pytest.mark.parametrize("output, message", [
    (out("hate", {"hate": 0.6, "not hate": -0.4}), "probability of 'not hate' is -0.4"),
    (out("hate", {"hate": float("nan"), "not hate": 0.5}), "probability of 'hate' is nan"),
    (out("kittens", {"hate": 0.2, "not hate": 0.8}), "label 'kittens' is not one of the task's labels"),
    (out("hate", {"hate": 0.9, "kittens": 0.1}), "probability for 'kittens'"),
    (out("hate", {"hate": 0.9, "not hate": 0.9}), "add up to 1.800"),
])
def test_an_output_no_model_gives_is_judged_neither_fooled_nor_not(output, message):
    from app.core.tasks.fooling import InvalidOutput

    hate = CATALOG["hate_speech"]
    for rule in FooledRule:
        with pytest.raises(InvalidOutput, match=message):
            is_fooled(hate, [out("hate", {"hate": 0.9, "not hate": 0.1}), output], "hate", rule=rule)
    with pytest.raises(ValueError, match="cannot be judged"):  # what the live view treats as "nothing to judge"
        is_fooled(hate, [output], "not hate")


def test_a_models_answer_longer_than_its_context_may_be_is_not_judged():
    from app.core.tasks.fooling import InvalidOutput

    qa = CATALOG["extractive_qa"]
    long_answer = "word " * 10_001  # the context holds at most 50,000 characters
    with pytest.raises(InvalidOutput, match="more than the 50,000 its context may hold"):
        is_fooled(qa, [out("x", answer=Span(0, len(long_answer), long_answer))], answer=Span(0, 4, "word"))


def test_the_desk_refuses_to_submit_an_impossible_output_and_keeps_the_draft(desk, people, target_model):
    from app.core.errors import InvalidExample
    from tests.conftest import hate_content

    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "kept as typed"})
    negative = ModelOutput(target_model.id, target_model.sha256, "not hate", {"hate": -0.5, "not hate": 1.5})
    with pytest.raises(InvalidExample, match="probability of 'hate' is -0.5"):
        desk.examples.submit(draft.id, [negative], hate_content("kept as typed", "hate"))
    (kept,) = desk.examples.drafts(people.author.id)
    assert kept.status == "draft" and kept.model_fooled is None
