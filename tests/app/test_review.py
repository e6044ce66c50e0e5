import pytest

from app.core.errors import DynadeskError
from app.core.services.review import ExampleFilter, fts_terms
from tests.conftest import hate_content, hate_output

TEXTS = [
    ("Immigrants are vermin", "hate", "dehumanization", ["immigrants"], "not hate"),
    ("Women should stay silent", "hate", "derogation", ["women"], "hate"),
    ("Les femmes méritent mieux", "not hate", None, None, "not hate"),
    ("اللاجئون مرحب بهم هنا", "not hate", None, None, "hate"),
    ("I ❤️ my 🐈 so much", "not hate", None, None, "not hate"),
    ("Refugees and women out!", "hate", "threatening language", ["refugees", "women", "Sikhs"], "not hate"),
]


@pytest.fixture
def filled(desk, people, target_model):
    ids = []
    for i, (text, label, hate_type, groups, model_label) in enumerate(TEXTS):
        author = people.author if i % 2 == 0 else people.val1
        meta = {"hate_type": hate_type, "target_groups": groups} if label == "hate" else {}
        example = desk.examples.create(author.id, "hate_speech", hate_content(text, label, **meta),
                                       [hate_output(target_model, model_label)])
        ids.append(example.id)
    desk.examples.start_draft(people.author.id, "hate_speech")  # drafts never show in review
    desk.examples.retract(ids[4], people.author.id)
    for validator in (people.val2, people.val3, people.lead):
        desk.validation.validate(ids[0], validator.id, "correct")
    desk.validation.validate(ids[1], people.val2.id, "flagged", reason="unsure")
    desk.validation.validate(ids[1], people.val3.id, "correct")
    return ids


def texts(desk, flt, **kwargs):
    return [row.text for row in desk.review.rows(flt, **kwargs)]


def test_filters_combine(desk, people, filled):
    assert desk.review.count(ExampleFilter()) == 6
    assert desk.review.count(ExampleFilter(statuses=["submitted"])) == 5
    assert texts(desk, ExampleFilter(labels=["hate"], fooled=True), sort="text", descending=False) == [
        "Immigrants are vermin", "Refugees and women out!"]
    assert desk.review.count(ExampleFilter(author_ids=[people.val1.id])) == 3
    assert desk.review.count(ExampleFilter(facets={"target_groups": ["women"]})) == 2
    assert texts(desk, ExampleFilter(facets={"target_groups": ["women"], "hate_type": ["derogation"]})) == [
        "Women should stay silent"]
    assert desk.review.count(ExampleFilter(validation_states=["decided"])) == 1
    assert texts(desk, ExampleFilter(min_disagreements=1)) == ["Women should stay silent"]
    assert desk.review.count(ExampleFilter(min_flags=1)) == 1
    assert desk.review.count(ExampleFilter(task_id=desk.tasks.task("nli").id)) == 0


@pytest.mark.parametrize("query, expected", [
    ("vermin", ["Immigrants are vermin"]),
    ("WOMEN", ["Refugees and women out!", "Women should stay silent"]),
    ("femmes", ["Les femmes méritent mieux"]),
    ("مرحب", ["اللاجئون مرحب بهم هنا"]),
    ("🐈", ["I ❤️ my 🐈 so much"]),
    ("women out", ["Refugees and women out!"]),
    ('"stay silent"', ["Women should stay silent"]),
    ("fem*", []),  # search syntax is taken literally, never as a query language
    ('"unbalanced', []),
    ("100%", []),
])
def test_full_text_search_handles_any_script_and_hostile_input(desk, filled, query, expected):
    assert sorted(texts(desk, ExampleFilter(text=query))) == sorted(expected)


def test_fts_terms_split_short_terms_out():
    assert fts_terms('ab "long phrase" emoji🐈 x') == (["long phrase", "emoji🐈"], ["ab", "x"])


def test_sorting_and_paging(desk, filled):
    all_rows = texts(desk, ExampleFilter(), sort="text", descending=False)
    assert all_rows == sorted(all_rows)
    pages = [texts(desk, ExampleFilter(), sort="text", descending=False, offset=o, limit=2) for o in (0, 2, 4)]
    assert sum(pages, []) == all_rows
    by_author = desk.review.rows(ExampleFilter(), sort="author")
    assert [r.author for r in by_author] == sorted((r.author for r in by_author), reverse=True)
    with pytest.raises(DynadeskError, match="Cannot sort by 'colour'"):
        desk.review.rows(ExampleFilter(), sort="colour")


def test_counts_by_column_and_facet(desk, filled):
    assert desk.review.counts_by(ExampleFilter(), "label") == {"hate": 3, "not hate": 3}
    assert desk.review.counts_by(ExampleFilter(), "target_groups") == {"immigrants": 1, "women": 2, "refugees": 1,
                                                                        "Sikhs": 1}
    assert desk.review.counts_by(ExampleFilter(labels=["hate"]), "hate_type") == {
        "dehumanization": 1, "derogation": 1, "threatening language": 1}
    assert desk.review.counts_by(ExampleFilter(), "status") == {"submitted": 5, "retracted": 1}
