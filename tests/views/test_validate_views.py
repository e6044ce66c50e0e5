"""The Validate tab's view-models, built from hand-made examples: no Qt, no database."""

from __future__ import annotations

import uuid
from datetime import datetime
from types import SimpleNamespace

from app.core.domain import ExampleStatus, ReviewAction, Verdict
from app.core.tasks.definition import TaskDefinition
from app.views.example import VerdictChoice, row_view, verdict_problem, verdict_text
from app.views.validate import queue_view, stored_text, validation_item

HATE = TaskDefinition(code="hate", name="Hate speech", inputs=[{"name": "text", "label": "Statement"}],
                      labels=["hate", "not hate"], content_warning="Offensive text",
                      metadata=[{"name": "why", "label": "Why?", "kind": "text"},
                                {"name": "groups", "label": "Target groups", "kind": "multi_choice",
                                 "choices": ["women", "immigrants"]}])
MODEL = uuid.uuid4()


def example(text: str = "they are all the same", **fields) -> SimpleNamespace:
    values = dict(id=uuid.uuid4(), text=text, inputs={"text": text}, true_label="hate", answer=None,
                  meta={"why": "a generalisation", "groups": ["women", "immigrants"], "empty": ""},
                  perturbation_of=None, model_fooled=True, review_state=None, review_comment=None, origin={},
                  outputs=[SimpleNamespace(model_id=MODEL, label="not hate",
                                           probabilities={"hate": 0.2, "not hate": 0.8})])
    return SimpleNamespace(**{**values, **fields})


def test_a_generated_variant_says_what_it_is_a_variant_of_masked_as_the_reader_reads():
    lead = uuid.uuid4()
    origin = {"kind": "variant", "seed_id": str(uuid.uuid4()), "rule": "identity_swap",
              "edit_type": "group_swap_protected", "generated_by": str(lead), "seed_text": "those vermin women again"}
    shown = validation_item(example("those vermin men again", origin=origin), HATE, {MODEL: "roberta"},
                            blur_words=("vermin",), masked=True, names={lead: "Lee Lead"})
    note = shown.variant
    assert note is not None and (note.seed_text, note.rule, note.generated_by) == (
        "those vermin women again", "group_swap_protected (identity_swap)", "Lee Lead")  # what changed, first
    assert note.seed.masked and note.seed.texts[0].spans == ((6, 12),)  # "vermin", as in the example itself
    unmasked = validation_item(example(origin=origin), HATE, {MODEL: "roberta"}, blur_words=("vermin",))
    assert unmasked.variant is not None and unmasked.variant.seed.count == 0
    assert unmasked.variant.generated_by == "a lead"  # a name not given (not yet synced): said plainly
    assert validation_item(example(), HATE, {MODEL: "roberta"}).variant is None  # written: no note


def test_an_example_as_the_validator_sees_it():
    shown = validation_item(example(), HATE, {MODEL: "roberta"})
    assert shown.written == (("Statement", "they are all the same"),) and shown.context == ()
    assert (shown.label, shown.label_name, shown.labels) == ("hate", "label", ("hate", "not hate"))
    assert shown.explanations == (("Why?", "a generalisation"), ("Target groups", "women, immigrants"))
    assert shown.pair is None and shown.hide_output and shown.content_warning == "Offensive text"
    answer = shown.output.models[0]
    assert (answer.model, answer.label, dict(answer.probabilities)) == ("roberta", "not hate",
                                                                         {"hate": 0.2, "not hate": 0.8})
    assert shown.output.fooled is True and shown.review_state is None


def test_a_perturbation_shows_both_halves_and_the_diff():
    original = example("they are all the same", true_label="hate")
    edited = example("they are not all the same", true_label="not hate", perturbation_of=original.id,
                     review_state="returned", outputs=[SimpleNamespace(model_id=uuid.uuid4(), label="hate",
                                                                       probabilities={})])
    shown = validation_item(edited, HATE, {}, original)
    assert (shown.pair.original.text, shown.pair.original.label) == ("they are all the same", "hate")
    assert (shown.pair.edited.text, shown.pair.edited.label) == ("they are not all the same", "not hate")
    assert [(p.kind, p.text) for p in shown.pair.diff] == [("equal", "they are "), ("insert", "not"),
                                                                 ("equal", " all the same")]
    assert shown.output.models[0].model == "target model"  # a model not on this desk
    assert shown.review_state is ReviewAction.RETURNED


def test_the_queue_says_who_validates_and_what_is_left():
    shown = validation_item(example(), HATE, {})
    queue = queue_view(shown, 4, "Vic", "Hate speech", skipped=[])
    assert queue.example is shown and "<b>4</b> left for you" in queue.status and "come round" not in queue.status
    assert "come round again" in queue_view(shown, 4, "Vic", "Hate speech", skipped=[shown.id]).status
    empty = queue_view(None, 0, "Vic", "Hate speech", skipped=[])
    assert empty.example is None and empty.status == "Validating as <b>Vic</b> · Hate speech"
    assert empty.empty.startswith("Nothing left for you to validate in Hate speech.")


def test_the_verdict_is_checked_and_said_back():
    assert verdict_problem(VerdictChoice(None), True).startswith("Choose a verdict")
    assert verdict_problem(VerdictChoice(Verdict.INCORRECT), True) == "Choose the corrected label."
    assert verdict_problem(VerdictChoice(Verdict.INCORRECT), False) == "Type the corrected answer."
    assert verdict_problem(VerdictChoice(Verdict.INCORRECT, "not hate"), True) == "Explain why the label is wrong."
    assert verdict_problem(VerdictChoice(Verdict.FLAGGED), True) == "Give a reason for the flag."
    assert verdict_problem(VerdictChoice(Verdict.CORRECT), True) is None
    incorrect = VerdictChoice(Verdict.INCORRECT, "not hate", "no group")
    assert verdict_text(incorrect) == "incorrect → not hate"
    assert stored_text(incorrect, "decided") == ("✓ Stored your verdict: <b>incorrect → not hate</b>. "
                                                 "The example is now decided.")
    assert stored_text(VerdictChoice(Verdict.CORRECT), "in_progress") == "✓ Stored your verdict: <b>correct</b>."


def test_a_table_row_carries_enums_and_written_out_states():
    row = SimpleNamespace(id=uuid.uuid4(), task_code="hate", round_number=2, author="Ana", text="x", true_label="hate",
                          model_fooled=None, status="retracted", validation_state="in_progress", validation_count=2,
                          disagreement_count=1, flag_count=0, decided_verdict="incorrect",
                          submitted_at=datetime(2026, 1, 31, 14, 5), perturbation_of=None, edit_distance=None,
                          meta={}, review_state="accepted", review_comment="fine", decided_label="not hate",
                          objections=1)
    shown = row_view(row)
    assert shown.status is ExampleStatus.RETRACTED and shown.decided is Verdict.INCORRECT
    assert shown.review_state is ReviewAction.ACCEPTED and shown.validation == "in progress"
    assert shown.submitted_at == "2026-01-31 14:05" and shown.round == 2
