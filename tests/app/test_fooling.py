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
