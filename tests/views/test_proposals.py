"""The Proposals dialog's view-models, from proposals as the server describes them (no Qt, no server)."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import UTC, datetime

from app.core.domain import Role
from app.core.next_round.comparison import Difference
from app.views.proposals_build import proposals_view, refusal_view
from sync.proposal_wire import ProposalWire
from sync.proposals import ProposalListing, ProposalSummary

WHEN = datetime(2026, 11, 24, 8, 0, tzinfo=UTC)


def wire(state: str = "open", pooled_items: int = 40, high: float = 0.12, **extra) -> ProposalWire:
    pooled = Difference("held-out", "accuracy", 0.7, 0.78, 0.08, 0.02 if high > 0.02 else -0.2, high, pooled_items)
    differences = [pooled, Difference("held-out", "macro_f1", 0.6, 0.7, 0.1, 0.01, 0.2, pooled_items),
                   Difference("held-out-1", "accuracy", None, None, None, None, None, 0),
                   Difference("base-test", "accuracy", 0.8, 0.81, 0.01, -0.01, 0.03, 900)]
    figures = {"worse": high < 0, "pooled": asdict(pooled), "differences": [asdict(d) for d in differences]}
    return ProposalWire(id=uuid.uuid4(), task="hate_speech", team="A", proposer_id=uuid.uuid4(), proposer="Lee Lead",
                        created_at=WHEN, name="round 2 candidate", rounds_trained_on=[1, 2], compared_with_round=2,
                        files=[{"name": "trained_part.safetensors", "sha256": "ab" * 32, "size": 2_000_000}],
                        files_sha256="cd" * 32, comparison=None, figures=figures, note=None, state=state,
                        size=2_000_000, **extra)


def test_rows_show_who_when_rounds_and_the_held_out_difference_with_its_interval():
    listing = ProposalListing("hate_speech", (ProposalSummary.from_wire(wire()),
                                              ProposalSummary.from_wire(wire("promoted", promoted_round=3, forced=True,
                                                                             decided_by="Olga Owner",
                                                                             decided_at=WHEN))), False)
    view = proposals_view(listing, Role.OWNER, "Hate speech")
    first, second = view.rows
    assert (first.who, first.when, first.rounds, first.state, first.is_open) == (
        "Lee Lead", "2026-11-24 08:00", "1, 2", "open", True)
    # 40 items are too few for the promotion rule to judge: no colour, as in the Next round dialog
    assert first.headline == "+8.0 pt [+2.0 pt, +12.0 pt] (held-out, n=40)" and first.tone == ""
    for high, tone in ((0.12, "better"), (-0.01, "worse")):
        judged = proposals_view(ProposalListing("hate_speech", (ProposalSummary.from_wire(wire(pooled_items=200,
                                                                                                high=high)),), False),
                                Role.OWNER, "x")
        assert judged.rows[0].tone == tone and judged.details[0].figures[0].tone == tone
    assert second.state == "promoted (round 3), forced" and not second.is_open
    detail = view.details[0]
    assert [f.split for f in detail.figures] == ["held-out", "held-out", "base-test"]  # the empty split left out
    assert detail.figures[0].interval == "[+2.0 pt, +12.0 pt]" and detail.figures[0].current == "70.0%"
    # the promotion rule on the proposer's figures: the base test split (900 items) is the only one it judges
    assert detail.verdict.startswith("The proposer's comparison: No split with enough examples finds the candidate "
                                     "worse; the weakest is base-test (accuracy 80.0% → 81.0%")
    assert "left out" in detail.verdict
    assert ("Promoted to round 3 by Olga Owner on 2026-11-24 08:00 UTC, over the promotion rule's refusal (recorded)"
            in view.details[1].facts)
    assert view.may_decide


def test_who_may_decide_follows_the_role_and_the_task_policy():
    summary = ProposalSummary.from_wire(wire(pooled_items=0, high=-0.01))
    for role, allowed, may in ((Role.LEAD, False, False), (Role.LEAD, True, True), (Role.ANNOTATOR, True, False),
                               (Role.OWNER, False, True)):
        assert proposals_view(ProposalListing("hate_speech", (summary,), allowed), role, "x").may_decide is may
    row = proposals_view(ProposalListing("hate_speech", (summary,), False), Role.OWNER, "x").rows[0]
    assert row.headline.endswith("(base-test, n=900)")  # no held-out example: where it was compared instead


def test_a_refusal_keeps_its_figures_and_names_the_override_as_the_dialog_offers_it():
    view = refusal_view("p1", "The candidate is worse than the current target …, so round 4 was not opened:\n  "
                              "x\nPromote it anyway with --force (the override is recorded).",
                        ["The candidate is worse.", "  held-out accuracy: 80.0% -> 60.0%, difference -20.0 pt "
                         "[-27.0 pt, -11.0 pt] (n=40)", "  held-out-1 accuracy: no items"])
    assert "--force" not in view.message and "Promote anyway" in view.message
    assert "[-27.0 pt, -11.0 pt]" in view.message and "no items" not in view.message
    assert view.sentence == "The candidate is worse." and len(view.splits) == 1  # what the reason dialog shows
