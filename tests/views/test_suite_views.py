"""The Suite tab's view-models, from hand-made topics and variants: no Qt, no database."""

from __future__ import annotations

import uuid
from types import SimpleNamespace

from app.core.adaptive_suite.topics import Topic
from app.views.suite import ModelColumn, ModelScore, grow_message, model_columns, seed_detail, suite_tree


def topic(text: str, group: str, kind: str, variants: int, validated: int) -> Topic:
    return Topic(uuid.uuid4(), "hate_speech", 1, text, "hate", group, kind, "written", variants, validated)


def test_the_tree_groups_seeds_and_sums_each_models_wrong_answers():
    a, b = topic("women are vermin", "women", "derogation", 6, 4), topic("women should go", "women", "threat", 2, 2)
    c = topic("no group here", "(no group)", "written", 9, 0)
    score = ModelScore({a.seed_id: (3, 4), b.seed_id: (0, 2)})
    tree = suite_tree("hate_speech", [c, b, a], [ModelColumn("m1", "M1", True), ModelColumn("m2", "M2")],
                      [score, None], blur_words=("vermin",))
    assert tree.headers == ("Topic", "Variants", "Validated", "M1 wrong", "M2 wrong")
    women, nobody = tree.groups  # "(no group)" last, whatever its size
    assert (women.name, women.variants, women.validated, women.wrong) == ("women", 8, 6, ("3 / 6", "–"))
    assert [k.name for k in women.children] == ["derogation", "threat"]  # the most variants first
    seed = women.children[0].topics[0]
    assert seed.text == "women are ••••••" and "vermin" not in seed.tooltip  # masked as the reader chose
    assert nobody.wrong == ("0", "–") and tree.summary.startswith("3 topics · 17 variants · 6 validated")
    stale = suite_tree("hate_speech", [a], [ModelColumn("m1", "M1")], [ModelScore({a.seed_id: (1, 2)}, stale=True)])
    assert stale.groups[0].wrong == ("1 / 2 …",)  # being brought up to date
    assert "No topic yet" in suite_tree("hate_speech", [], [], []).empty


def test_a_seeds_variants_with_their_state_and_what_the_target_said():
    seed = topic("those vermin women", "women", "derogation", 3, 2)
    made = dict(rule="identity_swap", edit_type="group_swap_protected", label="hate", decided_label=None,
                decided_verdict=None, model_fooled=True)
    variants = [SimpleNamespace(**{**made, "example_id": uuid.uuid4(), "text": "those vermin men"}),
                SimpleNamespace(**{**made, "example_id": uuid.uuid4(), "text": "those men", "decided_verdict": "correct",
                                   "decided_label": "hate", "model_fooled": False}),
                SimpleNamespace(**{**made, "example_id": uuid.uuid4(), "text": "those men?",
                                   "decided_verdict": "incorrect", "decided_label": "not hate"})]
    detail = seed_detail(seed, variants, blur_words=("vermin",), masked=True, labels=("hate", "not hate"))
    rows = [(r.text, r.state, r.label, r.prediction) for r in detail.variants]
    assert rows == [("those •••••• men", "unvalidated", "hate", "not hate (wrong)"),
                    ("those men", "valid", "hate", "hate (right)"),
                    ("those men?", "corrected", "not hate", "not hate (right)")]  # right for the corrected label
    assert {(r.rule, r.rule_detail) for r in detail.variants} == {("group_swap_protected",
                                                                 "identity_swap: group_swap_protected")}
    assert detail.blur.texts[0].spans and "1 corrected, 1 unvalidated, 1 valid" in detail.summary
    assert "gets 1 of them wrong" in detail.summary
    plain = seed_detail(seed, variants, blur_words=("vermin",), masked=False, labels=("hate", "not hate"))
    assert plain.variants[0].text == "those vermin men" and not plain.blur.texts[0].spans


def test_what_a_lead_is_told_after_growing():
    grew = SimpleNamespace(seeds=(SimpleNamespace(over_limit=3, refused=0), SimpleNamespace(over_limit=0, refused=1)),
                           added=12, fooling=9, folded=4, skipped={uuid.uuid4(): "no rule applies to this text"})
    said = grow_message(grew)
    assert said.startswith("Added 12 variants for 2 seeds (9 of them fool the target); folded 4 near-duplicates")
    assert "3 over the per-seed limit" in said and "1 refused" in said and "1 seed gave none (no rule applies" in said
    assert said.endswith("They wait in the Validate queue.")
    assert model_columns([("t", "Target")], [("o", "Other"), ("p", "Picked")], {"p"}) == (
        ModelColumn("t", "Target", True), ModelColumn("p", "Picked"))
