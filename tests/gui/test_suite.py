"""The Suite tab, driven as a lead and an annotator drive it: Ctrl+7 opens the adaptive suite's tree
(group → edit type → seed); a lead selects a seed that fooled the round's target (the tiny trigger
model) and generates variants with it; an annotator validates one in Validate, where it says what it
is a variant of; the tree then counts it, and the model's wrong answers on it. Blur applies throughout."""

from __future__ import annotations

import uuid

import pytest
from PySide6.QtCore import Qt
from sqlalchemy import select

from app.core.storage.models import Example
from app.core.wellbeing.profile import WellbeingProfile
from app.gui.suite import NOT_A_LEAD
from tests.conftest import hate_content, hate_output
from tests.gui.test_blur_walk import unmasked
from tests.gui.test_validate import open_validate, wait_for_example

WAIT = 60_000  # loading the model and generating run on a shared 2-core machine
SEED_TEXT = "Those vermin women should be silenced for good"


def _variants(desk) -> list[Example]:
    with desk.db.read() as session:
        rows = session.scalars(select(Example))
        return [e for e in rows if (e.origin or {}).get("kind") == "variant"]


@pytest.fixture
def team(window, hate_model):
    """An author's example that fooled the round's target (the trigger model says "not hate" without its
    trigger word), decided valid by one verdict: the suite's one seed."""
    from types import SimpleNamespace

    desk = window.desk
    lead = desk.people.create("Lee Lead", "lead")
    people = SimpleNamespace(author=desk.people.create("Ana Author", "annotator"),
                             validator=desk.people.create("Vic Validator", "annotator"), lead=lead)
    desk.set_task_settings(lead.id, "hate_speech", agreement_threshold=1)
    seed = desk.examples.create(people.author.id, "hate_speech", hate_content(SEED_TEXT, "hate"),
                                [hate_output(hate_model, "not hate")])
    assert seed.model_fooled
    desk.validation.validate(seed.id, people.validator.id, "correct")
    people.seed = seed
    return people


def open_suite(qtbot, window):
    with qtbot.waitSignal(window.suite.tree_shown, timeout=WAIT):
        qtbot.keyClick(window, Qt.Key.Key_7, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.suite_view
    return window.suite_view


def row_texts(view, parent=None) -> list[list[str]]:
    """The tree's rows under ``parent`` (the top level when None), as shown."""
    from PySide6.QtCore import QModelIndex

    model, parent = view.model, parent or QModelIndex()
    return [[model.index(r, c, parent).data() for c in range(model.columnCount())] for r in range(model.rowCount(parent))]


def seed_index(view):
    model = view.model
    group = model.index(0, 0)
    kind = model.index(0, 0, group)
    return model.index(0, 0, kind)


def select_seed(qtbot, window, view):
    """The first seed, by keyboard: its group, its edit type, the seed (the tree is open)."""
    view.tree.setFocus()
    with qtbot.waitSignal(window.suite.seed_shown, timeout=WAIT):
        for key in (Qt.Key.Key_Home, Qt.Key.Key_Down, Qt.Key.Key_Down):
            qtbot.keyClick(view.tree, key)
    assert view.tree.currentIndex() == seed_index(view)


def test_a_lead_grows_variants_an_annotator_validates_one_and_the_tree_counts_it(qtbot, window, team, hate_model):
    desk = window.desk
    desk.switch_person(team.lead.id)
    view = open_suite(qtbot, window)
    assert row_texts(view)[0][:3] == ["women", "0", "0"]  # the seed's group: no variant yet
    assert view.model.headerData(3, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole).startswith("Trigger model")
    view.tree.expandAll()
    assert row_texts(view, view.model.index(0, 0))[0][0] == "derogation"  # the seed's hate type
    select_seed(qtbot, window, view)
    assert SEED_TEXT in view.seed_text.toPlainText() and view.variants.rowCount() == 0
    assert view.generate_button.isEnabled()

    # the lead's limit: 4 per seed, stored as the task's setting for the team
    view.per_seed.setFocus()
    view.per_seed.selectAll()
    qtbot.keyClicks(view.per_seed, "4")
    with qtbot.waitSignal(window.suite.grown, timeout=WAIT) as grown:
        qtbot.mouseClick(view.generate_button, Qt.MouseButton.LeftButton)
    report = grown.args[0]
    stored = _variants(desk)
    assert 1 <= len(stored) <= 4 and report.added == len(stored)
    assert desk.tasks.settings("hate_speech").variants_per_seed == 4
    assert f"Added {len(stored)} variant" in view.status.text() and "near-duplicates" in view.status.text()
    for variant in stored:  # the lead's generation, not the seed author's writing
        assert variant.author_id == team.lead.id and variant.origin["seed_id"] == str(team.seed.id)
        assert variant.origin["generated_by"] == str(team.lead.id) and variant.model_fooled is not None  # checked
    qtbot.waitUntil(lambda: view.variants.rowCount() == len(stored), timeout=WAIT)
    assert {view.variants.item(r, 2).text() for r in range(len(stored))} == {"unvalidated"}
    assert row_texts(view)[0][1:3] == [str(len(stored)), "0"]

    # an annotator validates one in Validate: it says what it is a variant of
    desk.switch_person(team.validator.id)
    open_validate(qtbot, window)
    validate = window.validate_view
    wait_for_example(qtbot, validate)
    served = desk.examples.get(validate.example_id)
    assert served.origin["kind"] == "variant"
    assert validate.variant_box.isVisible() and "Variant of" in validate.variant_title.text()
    assert "should be silenced for good" in validate.variant_seed.toPlainText()
    assert f"rule {served.origin['edit_type']}" in validate.variant_rule.text()  # what changed: a homoglyph
    assert served.origin["rule"] in validate.variant_rule.text()  # looks like the seed, its name says it
    assert "generated by Lee Lead" in validate.variant_rule.text()
    assert validate.variant_seed.masked_texts()  # the seed reads masked, as the example does (V shows it)
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=WAIT):
        qtbot.keyClick(validate, Qt.Key.Key_1)  # correct
        qtbot.keyClick(validate, Qt.Key.Key_Return)
    assert desk.examples.get(served.id).decided_verdict == "correct"

    # the lead's tree counts it, and the target's wrong answer on it (no trigger word: "not hate")
    desk.switch_person(team.lead.id)
    with qtbot.waitSignal(window.suite.scored, timeout=WAIT):
        window.tabs.setCurrentWidget(view)
    qtbot.waitUntil(lambda: row_texts(view)[0][2] == "1", timeout=WAIT)
    assert row_texts(view)[0][3] == "1 / 1"
    assert view.current_seed == team.seed.id  # still read: its variants again, one now valid
    states = lambda: [view.variants.item(r, 2).text() for r in range(view.variants.rowCount())]  # noqa: E731
    qtbot.waitUntil(lambda: "valid" in states(), timeout=WAIT)
    assert states().count("valid") == 1 and states().count("unvalidated") == len(stored) - 1


def test_a_lead_cancels_a_growth_and_nothing_is_stored(qtbot, window, team):
    desk = window.desk
    desk.switch_person(team.lead.id)
    view = open_suite(qtbot, window)
    view.tree.expandAll()
    select_seed(qtbot, window, view)
    qtbot.mouseClick(view.generate_button, Qt.MouseButton.LeftButton)
    assert view.cancel_button.isVisible() and not view.generate_button.isEnabled()
    qtbot.mouseClick(view.cancel_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: view.status.text() == "Cancelled; nothing was generated.", timeout=WAIT)
    assert not view.cancel_button.isVisible() and view.generate_button.isEnabled()
    qtbot.wait(300)
    assert _variants(desk) == []


def test_a_model_the_lead_picks_is_scored_beside_the_target_whose_answers_are_kept(
        qtbot, window, team, hate_model, tiny_classifier_dir):
    from app.core.services.target_models import load_engine_for, register_model

    desk = window.desk
    desk.switch_person(team.lead.id)
    text = "Those vermin men should be silenced for good"
    origin = {"kind": "variant", "seed_id": str(team.seed.id), "rule": "identity_swap",
              "edit_type": "group_swap_protected", "generated_by": str(team.lead.id), "seed_text": SEED_TEXT}
    [variant] = desk.adaptive_suite.store_variants("hate_speech", team.lead.id, [
        (hate_content(text, "hate", target_groups=["men"]), [hate_output(hate_model, "not hate")], origin)])
    desk.validation.validate(variant, team.validator.id, "correct")
    view = open_suite(qtbot, window)
    qtbot.waitUntil(lambda: row_texts(view)[0][3] == "1 / 1", timeout=WAIT)  # the target: no trigger word
    assert view.status.text() == "Scored 1 model(s) on 1 validated variants."

    other = register_model(desk, tiny_classifier_dir, task_code="hate_speech", name="Random tiny")
    qtbot.waitUntil(lambda: len(view.models_menu.actions()) == 1, timeout=WAIT)  # offered once registered
    [action] = view.models_menu.actions()
    assert action.text().startswith("Random tiny") and view.model.columnCount() == 4
    with qtbot.waitSignal(window.suite.scored, timeout=WAIT):
        action.trigger()  # ticked in Models…
    engine = load_engine_for(other)
    try:
        said = engine.predict_one(text).label
    finally:
        engine.close()
    assert view.model.headerData(4, Qt.Orientation.Horizontal, Qt.ItemDataRole.ToolTipRole).startswith("Random tiny")
    assert row_texts(view)[0][3:] == ["1 / 1", "1 / 1" if said != "hate" else "0 / 1"]
    assert view.status.text() == "Scored 1 model(s) on 1 validated variants (the other answers were kept)."


def test_an_annotator_reads_the_suite_but_cannot_generate(qtbot, window, team):
    desk = window.desk
    desk.switch_person(team.validator.id)
    view = open_suite(qtbot, window)
    assert row_texts(view)[0][0] == "women"
    assert not view.generate_button.isEnabled() and not view.per_seed.isEnabled()
    assert view.generate_button.toolTip() == NOT_A_LEAD
    view.tree.expandAll()
    select_seed(qtbot, window, view)
    view.generate_requested.emit([team.seed.id], 5)  # asked anyway (a stale button): refused, nothing stored
    assert view.status.text() == NOT_A_LEAD
    qtbot.wait(200)
    assert _variants(desk) == []


def test_the_suite_reads_masked_with_blur_on(qtbot, window, team):
    desk = window.desk
    desk.switch_person(team.lead.id)
    desk.settings.wellbeing = {str(team.lead.id): WellbeingProfile(blur_validating=True, blur_browsing=True)}
    seed = team.seed.id
    origin = {"kind": "variant", "seed_id": str(seed), "rule": "identity_swap", "edit_type": "group_swap_protected",
              "generated_by": str(team.lead.id), "seed_text": SEED_TEXT}
    content = hate_content("Those vermin men should be silenced for good", "hate", target_groups=["men"])
    desk.adaptive_suite.store_variants("hate_speech", team.lead.id, [(content, [], origin)])
    view = open_suite(qtbot, window)
    view.tree.expandAll()
    select_seed(qtbot, window, view)
    qtbot.waitUntil(lambda: view.variants.rowCount() == 1, timeout=WAIT)
    assert view.seed_text.masked_texts() == ["vermin"]
    assert "•" in view.variants.item(0, 0).text() and "•" in seed_index(view).data()
    assert not unmasked(view)


def test_the_tree_of_many_seeds_opens_lazily(qtbot):
    """A tree of 2,000 seeds: the model makes rows on demand, and a seed is found again after a reset."""
    from app.core.adaptive_suite.topics import Topic
    from app.views.suite import ModelColumn, ModelScore, suite_tree
    from widgets.suite_view import SuiteView

    topics = [Topic(uuid.uuid4(), "hate_speech", 1, f"seed text {i}", "hate", f"group {i % 7}", f"type {i % 5}",
                    "written", 5, i % 3) for i in range(2000)]
    column = ModelColumn("m", "M", target=True)
    score = ModelScore({topics[0].seed_id: (1, 2)})
    tree = suite_tree("hate_speech", topics, [column], [score])
    view = SuiteView()
    qtbot.addWidget(view)
    view.show_tree(tree)
    model = view.model
    assert model.rowCount() == 7 and sum(model.rowCount(model.index(g, 0)) for g in range(7)) == 35
    assert sum(int(model.index(g, 1).data().replace(",", "")) for g in range(7)) == 10_000
    found = model.find_seed(topics[0].seed_id)
    assert found.isValid() and model.index(found.row(), 3, found.parent()).data() == "1 / 2"
    assert model.parent(found).parent().isValid() and not model.parent(found).parent().parent().isValid()
    assert model.seeds_under(model.parent(found)) and topics[0].seed_id in model.seeds_under(model.parent(found).parent())
