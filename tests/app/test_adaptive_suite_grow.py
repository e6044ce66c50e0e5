"""Growing the adaptive suite with the assistant's generators, checked by a real (tiny) target."""

from __future__ import annotations

import uuid

import pytest

from app.core.adaptive_suite.growing import GrowError
from app.core.adaptive_suite.growth import (
    NoDrafts,
    composed,
    drafts_for,
    folds,
    identity_swaps,
    kept,
)
from app.core.adaptive_suite.variants import VARIANT_SOURCE, is_variant
from app.core.assist.lexicon import shipped_lexicon
from app.core.errors import DynadeskError
from app.core.quality.similarity import DEFAULT_NEAR_THRESHOLD
from app.core.services.target_models import load_ensemble, register_model, to_model_output
from tests.conftest import hate_content

HATE = "hate_speech"
LEXICON = shipped_lexicon(HATE)
GROUPS = len(LEXICON.pairs("protected_groups"))


@pytest.fixture
def grown(desk, tiny_classifier_dir):
    """A lead, a writer, the tiny target registered and loaded, and ``seed(text)``: a validated example that
    fooled it (its label is the one the target does not give)."""
    lead = desk.people.create("Lena Lead", "lead")
    writer = desk.people.create("Wim Writer", "annotator")
    record = register_model(desk, tiny_classifier_dir, name="tiny", task_code=HATE)
    ensemble = load_ensemble([record])

    def seed(text: str, **meta):
        prediction = ensemble.predict([text])[0]
        label = "not hate" if prediction.label == "hate" else "hate"
        example = desk.examples.create(writer.id, HATE, hate_content(text, label, **meta),
                                       [to_model_output(m, record) for m in prediction.members])
        desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        return example

    yield lead, writer, record, ensemble, seed
    ensemble.close()


def test_identity_swaps_cover_the_whole_group_list_keeping_number_and_case():
    swaps = identity_swaps("Women are worthless, and a woman like that is worse.", LEXICON)
    plural = [d for d in swaps if d.text.endswith("a woman like that is worse.")]
    singular = [d for d in swaps if d.text.startswith("Women are worthless")]
    assert len(plural) == len(singular) == GROUPS - 1
    assert "Muslims are worthless, and a woman like that is worse." in {d.text for d in plural}
    assert "Women are worthless, and a Muslim like that is worse." in {d.text for d in singular}
    assert "Trans people are worthless, and a woman like that is worse." in {d.text for d in plural}
    assert all(d.group and d.edit_type == "group_swap_protected" for d in swaps)
    # the longest listed form wins: "trans women" is one group, not "trans" + "women"
    assert all("trans Muslims" not in d.text for d in identity_swaps("trans women are vile", LEXICON))


def test_edits_compose_only_where_they_do_not_touch():
    seed = "I think women are worthless."
    (swap,) = [d for d in identity_swaps(seed, LEXICON) if d.group == "Muslims"]
    respelt = type(swap)("I think women are w0rthless.", "obfuscation", "leetspeak")
    both = composed(seed, swap, respelt)
    assert both is not None and both.text == "I think Muslims are w0rthless."
    assert both.edit_type == "group_swap_protected+leetspeak" and both.group == "Muslims"
    assert composed(seed, swap, type(swap)("I think wom3n are worthless.", "obfuscation", "leetspeak")) is None


def test_the_fold_keeps_one_test_per_group_and_edit():
    seed = "Women are worthless."
    against = [kept(seed, "women", None), kept("Honestly, Muslims are worthless.", "Muslims", "hedging")]
    near = DEFAULT_NEAR_THRESHOLD
    assert folds("Frankly, Muslims are worthless.", "Muslims", "hedging", against, near)  # same test again
    assert not folds("Frankly, Jewish people are worthless.", "Jewish people", "hedging", against, near)
    assert not folds("Muslims are worthless.", "Muslims", "group_swap_protected", against, near)
    assert not folds("Women are w0rthless.", "women", "leetspeak", against, near)  # meant to read as the seed
    assert folds("women are worthless!!", "women", "hedging", against, near)  # reads as the seed
    against.append(kept("Women are w0rthless.", "women", "leetspeak"))
    assert folds("Women are w0rthle$$.", "women", "leetspeak", against, near)  # reads as a kept one


@pytest.mark.parametrize("text, reason", [
    ("x" * 2001 + " women", "2,007 characters"),
    ("!!! ???  …", "no words"),
])
def test_a_seed_without_a_usable_generator_gets_a_reason(text, reason):
    with pytest.raises(NoDrafts, match=reason):
        drafts_for(text, "hate", ["hate", "not hate"], HATE, LEXICON)


@pytest.mark.parametrize("text", [
    "wo\u200bmen are worth\u200dless 🐍🐍",          # zero-width characters inside words, emoji
    "النساء لا قيمة لهن women",                   # mostly right-to-left
    "\u202eWomen are worthless\u202c",             # a bidi override around it
    "WOMEN ARE WORTHLESS!!!",
])
def test_odd_texts_draft_without_breaking(text):
    drafts = drafts_for(text, "hate", ["hate", "not hate"], HATE, LEXICON)
    assert drafts and all(d.text != text and d.text.strip() for d in drafts)
    assert len({d.text for d in drafts}) == len(drafts)


def test_grow_stores_checked_label_keeping_variants(desk, grown):
    lead, writer, record, ensemble, seed = grown
    first = seed("Women are worthless and should stay silent.")
    task_id = desk.tasks.task(HATE).id
    desk.near_duplicates.ensure_built(task_id, save=False)
    report = desk.adaptive_suite.grow(HATE, ensemble, per_seed=12, generated_by=lead.id)
    desk.near_duplicates.nearest(task_id, first.text)  # catches up with the change log
    assert desk.near_duplicates.size(task_id) == 1  # the quality guard never takes a variant in

    (growth,) = report.seeds
    assert growth.seed_id == first.id and growth.added == report.added == len(report.added_ids) == 12
    assert growth.drafted > 12 and growth.reason is None and report.skipped == {}
    assert report.round_number == 1 and "12 variant(s) added" in report.summary()
    states = desk.adaptive_suite.variants_of(first.id)
    assert {s.example_id for s in states} == set(report.added_ids)
    texts = [s.text for s in states]
    assert len(set(texts)) == 12 and first.text not in texts
    fooled = [s.model_fooled for s in states]
    assert sum(fooled) == growth.fooling
    for state in states:
        example = desk.examples.get(state.example_id)
        assert is_variant(example.origin) and example.source == VARIANT_SOURCE and example.author_id == lead.id
        assert example.true_label == first.true_label and example.round_id == first.round_id
        assert example.origin["seed_id"] == str(first.id) and example.origin["seed_text"] == first.text
        assert example.origin["generated_by"] == str(lead.id) and example.origin["seed_root"] == str(first.id)
        assert [o.model_id for o in example.outputs] == [record.id]  # the check, stored as for any example
        assert example.model_fooled == (example.outputs[0].label != example.true_label)
        if example.origin["rule"] == "identity_swap":
            assert example.meta["target_groups"] == [state.group] != ["women"]

    # the lead's limit is per seed: a second growth fills the seed up to it, and no further
    desk.set_task_settings(lead.id, HATE, variants_per_seed=15)
    again = desk.adaptive_suite.grow(HATE, ensemble, generated_by=lead.id)
    assert again.added == 3
    full = desk.adaptive_suite.grow(HATE, ensemble, generated_by=lead.id)
    assert full.added == 0 and "15 variant(s) already" in full.skipped[first.id]
    assert len({s.text for s in desk.adaptive_suite.variants_of(first.id)}) == 15


def test_grow_explains_what_it_cannot_do(desk, grown, tmp_path):
    lead, writer, record, ensemble, seed = grown
    marks = seed("!!! ???")
    emoji = seed("🐍🐍🔥")  # no group to swap, no word to respell: the hedges still keep its label
    stranger = uuid.uuid4()
    report = desk.adaptive_suite.grow(HATE, ensemble, seeds=[marks.id, stranger, marks.id, emoji.id],
                                      generated_by=lead.id)
    assert [s.seed_id for s in report.seeds] == [marks.id, stranger, emoji.id]
    assert "no words" in report.skipped[marks.id] and "not a seed" in report.skipped[stranger]
    assert report.seeds[2].added > 0 and all(s.text.endswith("🐍🐍🔥") for s in desk.adaptive_suite.variants_of(emoji.id))
    with pytest.raises(DynadeskError, match="lead"):
        desk.adaptive_suite.grow(HATE, ensemble, generated_by=writer.id)
    with pytest.raises(GrowError, match="at least one"):
        desk.adaptive_suite.grow(HATE, ensemble, per_seed=0, generated_by=lead.id)
    with pytest.raises(GrowError, match="not registered"):
        with desk.db.write() as session:
            from app.core.storage.models import ModelRecord

            session.get(ModelRecord, record.id).sha256 = "f" * 64
        desk.adaptive_suite.grow(HATE, ensemble, generated_by=lead.id)


def test_fooling_drafts_are_kept_first_then_the_furthest_moved(desk):
    from app.core.adaptive_suite.growing import _Seed, _take
    from app.core.adaptive_suite.growth import Draft
    from app.core.adaptive_suite.topics import Topic

    seed_id = uuid.uuid4()
    topic = Topic(seed_id, HATE, 1, "Women are worthless.", "hate", "women", "derogation", "written", 0, 0)
    seed = _Seed(topic, {"text": topic.text}, {"target_groups": ["women"], "hate_type": "derogation"},
                 {"seed_root": str(seed_id)}, [kept(topic.text, "women", None)], room=4)
    groups = ["Muslims", "refugees", "Hindus", "lesbians", "Mexicans", "Africans"]
    checked = [(Draft(f"{g} are worthless.", "identity_swap", "group_swap_protected", g), [], fooled, shift)
               for g, fooled, shift in zip(groups, (False, True, True, True, False, True),
                                           (0.4, 0.6, 0.8, 0.9, 0.1, 0.7))]
    checked.append((Draft("Hindus are worthless!", "identity_swap", "group_swap_protected", "Hindus"), [], True, 0.95))
    seed.drafts, seed.checked = [c[0] for c in checked], len(checked)
    _take(seed, checked, desk.tasks.definition_by_code(HATE), DEFAULT_NEAR_THRESHOLD, uuid.uuid4())
    growth, items = seed.growth(), seed.items
    # fooling first, the furthest moved first; "Hindus are worthless." reads as a kept one: folded
    assert [content.inputs["text"] for content, _, _ in items] == [
        "Hindus are worthless!", "lesbians are worthless.", "Africans are worthless.", "refugees are worthless."]
    assert (growth.added, growth.fooling, growth.folded, growth.over_limit) == (4, 4, 1, 2)
    assert items[0][0].meta["target_groups"] == ["Hindus"] and items[0][0].true_label == "hate"
    assert all(origin["kind"] == "variant" and origin["seed_id"] == str(seed_id) for _, _, origin in items)
