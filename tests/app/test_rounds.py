import collections
import json
import random

import pytest

from app.core.errors import DynadeskError, NotFound
from app.core.services.rounds import RoundSettings
from tests.conftest import hate_content, hate_output, shared_file


@pytest.fixture
def models(desk):
    task = desk.tasks.task("hate_speech")
    return [desk.models.register(f"model {i}", "onnx", f"{i}{i}" * 32, task_id=task.id) for i in range(3)]


def round1(desk):
    return desk.tasks.round("hate_speech", 1)


def test_only_leads_and_owners_change_rounds(desk, people, models):
    with pytest.raises(DynadeskError, match="Only leads and owners can change rounds; Ana Author is an annotator"):
        desk.rounds.set_models(round1(desk).id, people.author.id, [models[0].id])
    with pytest.raises(DynadeskError, match="Only leads and owners"):
        desk.rounds.open_next("hate_speech", people.author.id, [models[0].id])
    desk.rounds.set_models(round1(desk).id, people.lead.id, [models[0].id])
    assert [m.id for m in desk.models.round_models(round1(desk).id)] == [models[0].id]


def test_opening_the_next_round_copies_settings_and_leaves_earlier_data_alone(desk, people, models):
    first = round1(desk)
    desk.rounds.set_models(first.id, people.lead.id, [models[0].id])
    desk.rounds.update(first.id, people.lead.id, goal_message="Find hate the model misses", fooled_rule="any",
                       settings=RoundSettings(label_start="random", context_policy="least_fooled"))
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("round one text", "hate"),
                                   [hate_output(models[0], "not hate")])
    second = desk.rounds.open_next("hate_speech", people.lead.id, [models[1].id, models[2].id],
                                   description="Stronger ensemble")
    assert second.number == 2 and second.status == "open"
    assert (second.goal_message, second.fooled_rule) == ("Find hate the model misses", "any")
    assert desk.rounds.settings(second) == RoundSettings(label_start="random", context_policy="least_fooled")
    summary = desk.rounds.summary("hate_speech", 1)
    assert summary.status == "closed" and summary.closed_at is not None and summary.examples == 1
    assert [name for _, name, _ in desk.rounds.summary("hate_speech", 2).models] == ["model 1", "model 2"]
    assert desk.examples.get(example.id).round_id == first.id
    assert desk.tasks.round("hate_speech").number == 2  # new work goes to the open round
    with pytest.raises(DynadeskError, match="closed; its target models are part of its record"):
        desk.rounds.set_models(first.id, people.lead.id, [models[2].id])
    with pytest.raises(DynadeskError, match="already closed"):
        desk.rounds.close(first.id, people.lead.id)
    with pytest.raises(DynadeskError, match="at least one target model"):
        desk.rounds.open_next("hate_speech", people.lead.id, [])
    with pytest.raises(DynadeskError, match="only once"):
        desk.rounds.set_models(second.id, people.lead.id, [models[1].id, models[1].id])


@pytest.mark.parametrize("rule, expected", [("mean", False), ("any", True), ("all", False)])
def test_an_ensemble_decides_fooled_by_the_rounds_rule_and_stores_the_rule(desk, people, models, rule, expected):
    round_ = round1(desk)
    desk.rounds.set_models(round_.id, people.lead.id, [models[0].id, models[1].id])
    desk.rounds.update(round_.id, people.lead.id, fooled_rule=rule)
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("text", "hate"),
                                   [hate_output(models[0], "not hate", 0.4), hate_output(models[1], "hate", 0.9)])
    stored = desk.examples.get(example.id)
    assert stored.model_fooled is expected and stored.fooled_rule == rule
    assert [o.fooled for o in stored.outputs] == [True, False]  # each member's own outcome, for recomputing


def test_round_settings_are_checked(desk, people):
    with pytest.raises(ValueError, match="fixed goal label needs"):
        RoundSettings(label_start="fixed")
    with pytest.raises(DynadeskError, match="'maybe' is not a label"):
        desk.rounds.update(round1(desk).id, people.lead.id, settings=RoundSettings(label_start="fixed", fixed_label="maybe"))
    qa_round = desk.tasks.round("extractive_qa", 1)
    with pytest.raises(DynadeskError, match="no goal label"):
        desk.rounds.update(qa_round.id, people.lead.id, settings=RoundSettings(label_start="random"))


def test_importing_contexts_from_text_csv_and_jsonl(desk, people, tmp_path):
    round_ = round1(desk)
    text = tmp_path / "prompts.txt"
    text.write_text("First prompt\n\n  First   prompt  \nSecond prompt 😀\nمرحبا بالعالم\n", encoding="utf-8")
    report = desk.rounds.import_contexts(round_.id, people.lead.id, text, tag="seed")
    assert (report.added, report.duplicates, [p.line for p in report.problems]) == (3, 1, [2])
    jsonl = tmp_path / "more.jsonl"
    jsonl.write_text(json.dumps({"text": "From JSON", "tag": "news", "url": "x"}) + "\n" + json.dumps("Bare string") + "\n")
    assert desk.rounds.import_contexts(round_.id, people.lead.id, jsonl).added == 2
    stats = {c.text: c for c in desk.rounds.context_stats(round_.id)}
    assert stats["From JSON"].tag == "news" and stats["First prompt"].tag == "seed"
    assert stats["Second prompt 😀"].source == "prompts.txt:4"
    csv_path = tmp_path / "c.csv"
    csv_path.write_text("id,sentence\n1,From CSV\n", encoding="utf-8")
    with pytest.raises(DynadeskError, match="--column \\(one of: id, sentence\\)"):
        desk.rounds.import_contexts(round_.id, people.lead.id, csv_path)
    assert desk.rounds.import_contexts(round_.id, people.lead.id, csv_path, column="sentence").added == 1
    with pytest.raises(DynadeskError, match="Only leads"):
        desk.rounds.import_contexts(round_.id, people.author.id, csv_path, column="sentence")


def test_anli_premises_import_as_nli_contexts(desk, people):
    round_ = desk.tasks.round("nli", 1)
    report = desk.rounds.import_contexts(round_.id, people.lead.id, shared_file("anli", "ANLI_analysis_r1_dev.csv"),
                                         column="context", tag="anli-r1")
    assert report.added == 844 and report.duplicates == 156  # two premises differ only in spacing
    context = desk.rounds.next_context(round_.id, people.author.id)
    draft = desk.examples.start_draft(people.author.id, "nli", context_id=context.id)
    assert draft.inputs["context"] == context.text and draft.context_id == context.id


def fill_pool(desk, people, n, tag=None):
    round_ = round1(desk)
    path = desk.root / "pool.txt"
    path.write_text("\n".join(f"context number {i}" for i in range(n)), encoding="utf-8")
    desk.rounds.import_contexts(round_.id, people.lead.id, path, tag=tag or "")
    return round_


@pytest.mark.parametrize("policy", ["least_used", "random"])
def test_a_long_session_sees_the_whole_pool_evenly(desk, people, policy):
    """Dynabench's least-used policy showed QA annotators the same ~5 contexts over and over."""
    round_ = fill_pool(desk, people, 60)
    rng = random.Random(3)
    served = collections.Counter(desk.rounds.next_context(round_.id, people.author.id, policy=policy, rng=rng).text
                                 for _ in range(300))  # the annotator skips every one
    assert len(served) == 60 and set(served.values()) == {5}
    assert {c.times_used for c in desk.rounds.context_stats(round_.id)} == {5}


def test_least_fooled_prefers_contexts_where_the_model_held_up(desk, people, models):
    round_ = fill_pool(desk, people, 3)
    desk.rounds.set_models(round_.id, people.lead.id, [models[0].id])
    contexts = {c.text: c.id for c in desk.rounds.context_stats(round_.id)}
    for text, fooled in (("context number 0", True), ("context number 1", False)):
        draft = desk.examples.start_draft(people.author.id, "hate_speech", context_id=contexts[text])
        desk.examples.submit(draft.id, [hate_output(models[0], "not hate" if fooled else "hate")],
                             hate_content(text + " edited", "hate"))
    stats = {c.text: c for c in desk.rounds.context_stats(round_.id)}
    assert stats["context number 0"].fooling_rate == 1.0 and stats["context number 1"].fooling_rate == 0.0
    assert stats["context number 2"].fooling_rate is None
    picks = [desk.rounds.next_context(round_.id, people.author.id, policy="least_fooled").text for _ in range(4)]
    assert "context number 0" not in picks[:2] and set(picks[:2]) == {"context number 1", "context number 2"}


def test_the_tag_filter_serves_only_matching_contexts(desk, people):
    round_ = fill_pool(desk, people, 5, tag="easy")
    (desk.root / "hard.txt").write_text("hard one\nhard two\n", encoding="utf-8")
    desk.rounds.import_contexts(round_.id, people.lead.id, desk.root / "hard.txt", tag="hard")
    picks = {desk.rounds.next_context(round_.id, people.author.id, tag="hard").text for _ in range(6)}
    assert picks == {"hard one", "hard two"}
    assert desk.rounds.next_context(round_.id, people.author.id, tag="absent") is None


def test_a_prompt_starts_the_draft_and_is_recorded(desk, people):
    round_ = fill_pool(desk, people, 1)
    context = desk.rounds.next_context(round_.id, people.author.id)
    draft = desk.examples.start_draft(people.author.id, "hate_speech", context_id=context.id)
    assert draft.inputs == {"text": "context number 0"}
    assert draft.origin == {"kind": "prompt", "context_id": str(context.id), "text": "context number 0"}
    other_round = desk.tasks.get_or_create_round("nli", 1)
    with pytest.raises(NotFound, match="in round 1"):
        desk.examples.start_draft(people.author.id, "nli", context_id=context.id)
    assert other_round.number == 1


def test_goal_labels_start_blank_fixed_or_balanced(desk, people, models):
    round_ = round1(desk)
    assert desk.rounds.starting_label(round_.id, people.author.id) is None
    desk.rounds.update(round_.id, people.lead.id, settings=RoundSettings(label_start="fixed", fixed_label="hate"))
    assert desk.rounds.starting_label(round_.id, people.author.id) == "hate"
    desk.rounds.update(round_.id, people.lead.id, settings=RoundSettings(label_start="random"))
    for _ in range(3):
        desk.examples.create(people.author.id, "hate_speech", hate_content("x", "hate"))
    rng = random.Random(0)
    assert {desk.rounds.starting_label(round_.id, people.author.id, rng=rng) for _ in range(10)} == {"not hate"}
    assert desk.rounds.starting_label(round_.id, people.author.id, previous="hate", after_submit=True) == "hate"
    desk.rounds.update(round_.id, people.lead.id,
                       settings=RoundSettings(label_start="random", keep_label_after_submit=False))
    assert desk.rounds.starting_label(round_.id, people.author.id, previous="hate", after_submit=True) == "not hate"


def test_imported_contexts_whose_data_no_server_takes_are_named_by_line(desk, people, tmp_path):
    deep: object = "bottom"
    for _ in range(40):
        deep = {"a": deep}
    jsonl = tmp_path / "contexts.jsonl"
    jsonl.write_text("\n".join(json.dumps(item) for item in [
        {"text": "Fine passage", "url": "x"}, {"text": "Deep passage", "extra": deep},
        {"text": "Large passage", "note": "x" * 70_000}]) + "\n")
    report = desk.rounds.import_contexts(round1(desk).id, people.lead.id, jsonl)
    assert report.added == 1
    assert [(p.line, p.reason) for p in report.problems] == [
        (2, "data is nested 41 levels deep; at most 32 allowed"),
        (3, "data takes 68 KiB as JSON; at most 64 KiB allowed")]
