import uuid

import pytest
from sqlalchemy import select

from app.core.domain import ModelOutput, Span
from app.core.errors import InvalidExample, NotFound
from app.core.storage.models import ExampleFacet
from app.core.tasks.content import Content
from tests.conftest import hate_content, hate_output


def test_submit_stores_every_model_output_and_the_fooled_flag(desk, people, target_model):
    second = desk.models.register("second", "onnx", "cd" * 32)
    example = desk.examples.create(
        people.author.id, "hate_speech", hate_content("They are all vermin", "hate", target_groups=["women", "Sikhs"]),
        [hate_output(target_model, "not hate", 0.3), hate_output(second, "hate", 0.8)], time_spent_ms=61_000,
    )
    stored = desk.examples.get(example.id)
    assert stored.status == "submitted" and stored.sync_state == "pending" and stored.submitted_at is not None
    assert stored.model_fooled is False  # the ensemble mean is 0.55 hate
    assert [(o.label, o.fooled, o.model_sha256) for o in stored.outputs] == [
        ("not hate", True, target_model.sha256), ("hate", False, second.sha256)]
    assert stored.outputs[0].probabilities == pytest.approx({"hate": 0.3, "not hate": 0.7})
    assert stored.outputs[0].latency_ms == 4.2
    assert stored.time_spent_ms == 61_000
    assert stored.meta["target_groups"] == ["women", "Sikhs"]
    with desk.db.read() as session:
        facets = {(f.field, f.value) for f in session.scalars(select(ExampleFacet).where(ExampleFacet.example_id == example.id))}
    assert facets == {("hate_type", "derogation"), ("target_groups", "women"), ("target_groups", "Sikhs")}


def test_a_long_named_target_group_is_kept_whole_and_faceted_by_its_first_200_characters(desk, people, target_model):
    """Two groups named alike for longer than a facet holds are one facet (the facet's key), not a failed submit."""
    long_a, long_b = "people of " + "x" * 200 + " a", "people of " + "x" * 200 + " b"
    example = desk.examples.create(people.author.id, "hate_speech",
                                   hate_content("They are all vermin", "hate", target_groups=[long_a, long_b, "women"]),
                                   [hate_output(target_model, "hate")])
    assert desk.examples.get(example.id).meta["target_groups"] == [long_a, long_b, "women"]
    with desk.db.read() as session:
        facets = sorted(f.value for f in session.scalars(select(ExampleFacet).where(
            ExampleFacet.example_id == example.id, ExampleFacet.field == "target_groups")))
    assert facets == sorted([long_a[:200], "women"])


def test_hate_type_and_targets_apply_only_when_the_label_is_hate(desk, people, target_model):
    with pytest.raises(InvalidExample, match="Fill in 'Type of hate' \\(required when the label is hate\\)"):
        desk.examples.create(people.author.id, "hate_speech",
                             Content({"text": "x y"}, "hate", meta={"label_explanation": "e"}))
    example = desk.examples.create(
        people.author.id, "hate_speech",
        Content({"text": "what a day"}, "not hate",
                meta={"hate_type": "derogation", "target_groups": ["women"], "label_explanation": "harmless"}),
        [hate_output(target_model, "hate")],
    )
    assert example.meta == {"label_explanation": "harmless"}
    assert example.model_fooled is True


@pytest.mark.parametrize("content, message", [
    (Content({"text": "   "}, "hate"), "'Statement' is empty"),
    (Content({"text": "\u200b\u200d\ufeff"}, "not hate"), "'Statement' is empty"),
    (Content({"text": "x" * 5001}, "not hate", meta={"label_explanation": "e"}), "5,001 characters; this task allows 5,000"),
    (Content({"text": "fine"}, "maybe", meta={"label_explanation": "e"}), "Choose a label: one of hate, not hate"),
    (Content({"text": "fine"}, "not hate", meta={"label_explanation": "e", "mood": "x"}), "no metadata field"),
    (Content({"text": "fine", "extra": "x"}, "not hate", meta={"label_explanation": "e"}), "no input"),
    (Content({"text": "fine"}, "hate", meta={"label_explanation": "e", "hate_type": "rudeness",
                                             "target_groups": ["women"]}), "must be one of"),
])
def test_bad_content_gets_a_clear_message_and_stores_nothing(desk, people, content, message):
    with pytest.raises(InvalidExample, match=message):
        desk.examples.create(people.author.id, "hate_speech", content)
    assert desk.review.count(desk_filter()) == 0


def desk_filter():
    from app.core.services.review import ExampleFilter

    return ExampleFilter()


def test_emoji_rtl_and_zero_width_text_is_stored_exactly(desk, people, target_model):
    text = "أنا أحب 👩🏽‍💻 and zw\u200bsp"
    example = desk.examples.create(people.author.id, "hate_speech", hate_content(text, "not hate"),
                                   [hate_output(target_model, "not hate")])
    assert desk.examples.get(example.id).text == text


def test_drafts_autosave_exactly_and_submit_keeps_the_id_and_time(desk, people, target_model):
    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "Half a thought 🌧"}, time_spent_ms=5_000)
    desk.examples.save_draft(draft.id, true_label="hate", meta={"hate_type": "animosity"}, time_spent_ms=9_000)
    [offered] = desk.examples.drafts(people.author.id)
    assert (offered.id, offered.inputs, offered.true_label, offered.meta, offered.time_spent_ms) == (
        draft.id, {"text": "Half a thought 🌧"}, "hate", {"hate_type": "animosity"}, 9_000)
    submitted = desk.examples.submit(draft.id, [hate_output(target_model, "not hate")],
                                     hate_content("Half a thought 🌧", "hate", hate_type="animosity"), time_spent_ms=12_500)
    assert submitted.id == draft.id and submitted.status == "submitted" and submitted.time_spent_ms == 12_500
    assert desk.examples.drafts(people.author.id) == []
    with pytest.raises(InvalidExample, match="already submitted"):
        desk.examples.save_draft(draft.id, inputs={"text": "late edit"})


def test_a_draft_refuses_a_runaway_paste(desk, people):
    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    with pytest.raises(InvalidExample, match="at most 1,000,000"):
        desk.examples.save_draft(draft.id, inputs={"text": "a" * 1_000_001})


def test_only_the_author_retracts_or_flags(desk, people, target_model):
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("plain", "not hate"),
                                   [hate_output(target_model, "not hate")])
    with pytest.raises(InvalidExample, match="Only the author"):
        desk.examples.retract(example.id, people.val1.id)
    with pytest.raises(InvalidExample, match="Say why"):
        desk.examples.flag(example.id, people.author.id, " ")
    flagged = desk.examples.flag(example.id, people.author.id, "I mislabelled it")
    assert (flagged.status, flagged.status_reason, flagged.revision) == ("flagged", "I mislabelled it", 2)
    retracted = desk.examples.retract(example.id, people.author.id, "withdrawn")
    assert retracted.status == "retracted" and retracted.revision == 3
    with pytest.raises(InvalidExample, match="A retracted example cannot be retracted"):
        desk.examples.retract(example.id, people.author.id)


def test_a_perturbation_is_linked_with_its_word_edits(desk, people, target_model):
    original = desk.examples.create(people.author.id, "hate_speech",
                                    hate_content("Women can't be trusted to lead", "hate"),
                                    [hate_output(target_model, "not hate")])
    draft = desk.examples.start_draft(people.author.id, "hate_speech", perturbation_of=original.id)
    assert draft.inputs == {"text": "Women can't be trusted to lead"} and draft.true_label == "hate"
    assert draft.origin == {"kind": "perturbation", "of": str(original.id)}
    with pytest.raises(InvalidExample, match="identical to its original"):
        desk.examples.submit(draft.id, [hate_output(target_model, "hate")],
                             hate_content("Women can't be trusted to lead", "hate"))
    pair = desk.examples.submit(draft.id, [hate_output(target_model, "hate")],
                                hate_content("Women can be trusted to lead", "not hate"))
    assert pair.perturbation_of == original.id
    assert pair.edit_distance == 1
    assert pair.edit_ops == [{"op": "replace", "a_start": 1, "a_end": 2, "b_start": 1, "b_end": 2,
                              "old": "can't", "new": "can"}]
    assert [p.id for p in desk.examples.perturbations(original.id)] == [pair.id]


def test_a_closed_round_takes_no_more_examples(desk, people):
    from app.core.storage.models import Round

    round_ = desk.tasks.round("hate_speech")
    with desk.db.write() as session:
        session.get(Round, round_.id).status = "closed"
    with pytest.raises(NotFound, match="no open round"):
        desk.examples.create(people.author.id, "hate_speech", hate_content("x", "not hate"))
    with pytest.raises(InvalidExample, match="Round 1 is closed"):
        desk.examples.create(people.author.id, "hate_speech", hate_content("x", "not hate"), round_number=1)


def test_unknown_models_and_people_are_refused(desk, people):
    ghost = ModelOutput(uuid.uuid4(), "0" * 64, "hate", {}, 1.0)
    with pytest.raises(NotFound, match="not registered"):
        desk.examples.create(people.author.id, "hate_speech", hate_content("x", "not hate"), [ghost])
    with pytest.raises(NotFound, match="no profile"):
        desk.examples.create(uuid.uuid4(), "hate_speech", hate_content("x", "not hate"))


def test_extractive_answers_must_be_spans_of_the_passage(desk, people):
    qa_model = desk.models.register("qa", "hf-torch", "ef" * 32)
    passage = "The Eiffel Tower was finished in 1889 in Paris."
    base = {"context": passage, "question": "When was it finished?"}
    with pytest.raises(InvalidExample, match="Select the answer"):
        desk.examples.create(people.author.id, "extractive_qa", Content(base))
    with pytest.raises(InvalidExample, match="span of the passage"):
        desk.examples.create(people.author.id, "extractive_qa", Content(base, answer=Span(0, 4, "1889")))
    start = passage.index("1889")
    truth = Span(start, start + 4, "1889")
    example = desk.examples.create(
        people.author.id, "extractive_qa", Content(base, answer=truth),
        [ModelOutput(qa_model.id, qa_model.sha256, "Paris", {}, 2.0, Span(41, 46, "Paris"))])
    assert example.model_fooled is True and example.answer == truth.to_json() and example.true_label is None
    assert example.text == "When was it finished?"
