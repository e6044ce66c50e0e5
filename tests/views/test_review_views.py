"""The Review tab's (and the Data tab's detail) view-models, from hand-made examples: no Qt, no database."""

from __future__ import annotations

import uuid
from datetime import datetime
from types import SimpleNamespace

from app.core.domain import ReviewAction
from app.views.example import data_detail
from app.views.review import accept_text, review_choices, review_figures, review_item
from tests.views.test_validate_views import HATE, MODEL, example

ANA, VIC, LEA = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
NAMES = {ANA: "Ana Author", VIC: "Vic Validator", LEA: "Lea Lead"}


def verdict(who, verdict, mode="peer", corrected=None, reason=None, note=None):
    return SimpleNamespace(validator_id=who, verdict=verdict, mode=mode, corrected_label=corrected, reason=reason,
                           model_note=note)


def stored(**fields):
    values = dict(author_id=ANA, status="submitted", status_reason=None, validation_state="decided",
                  time_spent_ms=41_600, edit_distance=None, origin={"kind": "import", "format": "csv"},
                  decided_verdict="incorrect", decided_label="not hate", disagreement_count=1, flag_count=0,
                  validations=[verdict(VIC, "incorrect", corrected="not hate", reason="no group", note="negation"),
                               verdict(LEA, "correct", mode="lead")])
    return example(**{**values, **fields})


def test_a_lead_reads_every_verdict_first_and_the_figures_of_the_record():
    item = review_item(stored(review_state="returned", review_comment="fix it"), HATE, NAMES, {MODEL: "roberta"},
                       None, [SimpleNamespace(action="returned", lead="Lea Lead", at=datetime(2026, 2, 1, 9, 30),
                                              comment="fix it")])
    assert (item.author, item.author_id, item.label, item.labels) == ("Ana Author", ANA, "hate", ("hate", "not hate"))
    detail = item.detail
    assert detail.verdicts_first and detail.review_state is ReviewAction.RETURNED and detail.original is None
    assert detail.validations == ("incorrect → not hate — no group · model note: negation — Vic Validator",
                                  "correct — Lea Lead (LEAD, final)")
    assert detail.inputs == (("Statement", "they are all the same"),)
    assert detail.meta == (("Why?", "a generalisation"), ("Target groups", "women, immigrants"))
    assert [(o.model, o.label, o.probabilities) for o in detail.outputs] == [("roberta", "not hate",
                                                                             "hate 0.20, not hate 0.80")]
    facts = dict(detail.facts)
    assert facts["validation"] == "decided · decided: incorrect → not hate"
    assert facts["said incorrect or flagged"] == "1" and facts["peer verdicts against the majority"] == "1"
    assert facts["lead review"] == "returned by Lea Lead 2026-02-01 09:30: fix it" and facts["id"] == str(item.id)
    assert accept_text(item) == "Accept Ana Author's decided work…"


def test_a_perturbation_under_review_shows_both_texts():
    original = stored(text="they are all the same")
    edited = stored(text="they are not all the same", inputs={"text": "they are not all the same"},
                    perturbation_of=original.id, decided_verdict=None, validation_state="in_progress")
    item = review_item(edited, HATE, NAMES, {}, original, [])
    assert item.detail.inputs == (("Original", "they are all the same"), ("Perturbation", "they are not all the same"))
    assert dict(item.detail.facts)["validation"] == "in progress · decided: —"
    assert item.detail.outputs[0].model == "target model"


def test_the_data_tab_detail_names_its_facts():
    missing = stored(perturbation_of=uuid.uuid4(), edit_distance=3, status="flagged", status_reason="dup")
    detail = data_detail(missing, HATE, NAMES, {})
    assert detail.original is not None and detail.original.text is None  # it arrives with the next sync
    assert not detail.verdicts_first and detail.outputs[0].model == str(MODEL)  # a model not on this desk
    assert detail.validations[0] == "incorrect → not hate (no group) — Vic Validator, peer"
    assert dict(detail.facts) == {"id": str(missing.id), "author": "Ana Author", "status": "flagged (dup)",
                                  "validation": "decided", "time spent": "42 s", "edit distance (words)": "3",
                                  "origin": "import csv"}
    assert ("Target groups", "women, immigrants") in detail.meta and ("empty", "") in detail.meta
    assert data_detail(stored(), HATE, NAMES, {}).original is None


def test_filter_choices_and_figures():
    rounds = [SimpleNamespace(id=uuid.uuid4(), number=1, status="closed")]
    choices = review_choices(uuid.uuid4(), HATE, rounds, [SimpleNamespace(id=ANA, display_name="Ana Author")], 2)
    assert choices.rounds == (("Round 1 (closed)", str(rounds[0].id)),)
    assert choices.annotators == (("Ana Author", str(ANA)),) and choices.labels == ("hate", "not hate")
    assert [(f.name, f.question, f.choices) for f in choices.facets] == [("groups", "Target groups",
                                                                          ("women", "immigrants"))]
    assert (choices.threshold, choices.default_threshold) == (2, 3)
    figures = review_figures({"examples": 1204, "disagreements": 3, "flagged": 0, "decided": 7, "unvalidated": 9,
                              "fooled": 2, "returned": 1, "accepted": 0})
    assert figures.examples == "1,204" and figures.objected == "0" and figures.unvalidated == "9"
