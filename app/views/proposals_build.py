"""Builds the Proposals dialog's view-models (``app.views.proposals``) from ``sync.proposals`` summaries:
pure functions, Qt-free, tested in tests/views/test_proposals.py."""

from __future__ import annotations

from app.core.domain import Role
from app.core.formatting import pct
from app.core.next_round.comparison import METRIC_NAMES, Difference, signed_points
from app.core.next_round.promotion_rule import BETTER, WORSE, difference_state, judge, may_promote
from app.views.proposals import FigureRow, ProposalDetail, ProposalRow, ProposalsView, RefusalView
from sync.proposals import ProposalListing, ProposalPromotion, ProposalSummary


def _tone(d: Difference) -> str:
    """"worse" or "better" where the promotion rule reads the difference so; "" otherwise (too few items, too)."""
    state = difference_state(d.low, d.high, d.items)
    return state if state in (WORSE, BETTER) else ""


def figure_row(d: Difference) -> FigureRow:
    empty = d.items == 0 or d.difference is None
    return FigureRow(split=d.split, metric=METRIC_NAMES.get(d.metric, d.metric),
                     current="-" if empty else pct(d.current), candidate="-" if empty else pct(d.candidate),
                     difference="-" if empty else signed_points(d.difference),
                     interval="-" if empty else f"[{signed_points(d.low)}, {signed_points(d.high)}]",
                     items=d.items, tone="" if empty else _tone(d))


def _headline(p: ProposalSummary) -> tuple[str, str]:
    accuracy = next((d for d in p.headline() if d.metric == "accuracy"), None)
    if accuracy is None or accuracy.difference is None:
        return "no comparison", ""
    where = "held-out" if accuracy.split == "held-out" else accuracy.split
    return (f"{signed_points(accuracy.difference)} [{signed_points(accuracy.low)}, {signed_points(accuracy.high)}] "
            f"({where}, n={accuracy.items})", _tone(accuracy))


def _state(p: ProposalSummary) -> str:
    if p.state == "promoted":
        return f"promoted (round {p.promoted_round})" + (", forced" if p.forced else "")
    return p.state


def _verdict(p: ProposalSummary) -> str:
    return "The proposer's comparison: " + _verdict_text(p)


def _verdict_text(p: ProposalSummary) -> str:
    """The promotion rule's verdict on the proposer's figures (the owner's desk compares again before promoting)."""
    if p.pooled is None:
        return "none was sent; the owner's desk compares the candidate before promoting."
    return p.sentence or judge(p.differences).sentence


def proposal_detail(p: ProposalSummary) -> ProposalDetail:
    facts = [f"Proposed by {p.proposer} (team {p.team}) on {p.created_at:%Y-%m-%d %H:%M} UTC",
             "Trained on rounds " + (", ".join(map(str, p.rounds_trained_on)) or "(not stated)")
             + (f"; compared with round {p.compared_with_round}'s target" if p.compared_with_round else ""),
             f"{p.files} files, {p.size / 1e6:.1f} MB"]
    if p.note:
        facts.append(f"Note: {p.note}")
    if p.decided_by:
        when = f" on {p.decided_at:%Y-%m-%d %H:%M} UTC" if p.decided_at else ""
        if p.state == "promoted":
            facts.append(f"Promoted to round {p.promoted_round} by {p.decided_by}{when}"
                         + (f", promoted anyway: {p.reason}" if p.forced and p.reason else
                            ", over the promotion rule's refusal (recorded)" if p.forced else ""))
        else:
            facts.append(f"{p.state.capitalize()} by {p.decided_by}{when}" + (f": {p.reason}" if p.reason else ""))
    elif p.state == "superseded" and p.reason:
        facts.append(f"Superseded: {p.reason}")
    scored = [d for d in p.differences if d.items] or list(p.differences)  # splits without items say nothing
    verdict = _verdict(p) + (" Splits without items are left out." if len(scored) < len(p.differences) else "")
    return ProposalDetail(id=str(p.id), title=p.name, facts=tuple(facts), verdict=verdict,
                          figures=tuple(figure_row(d) for d in scored), is_open=p.state == "open")


def proposals_view(listing: ProposalListing, role: Role, task_name: str) -> ProposalsView:
    rows, details = [], []
    for p in listing.proposals:
        headline, tone = _headline(p)
        rows.append(ProposalRow(id=str(p.id), who=p.proposer, when=f"{p.created_at:%Y-%m-%d %H:%M}",
                                rounds=", ".join(map(str, p.rounds_trained_on)) or "-", headline=headline,
                                state=_state(p), tone=tone, is_open=p.state == "open"))
        details.append(proposal_detail(p))
    may = may_promote(role, listing.leads_may_promote)
    if role == Role.OWNER:
        note = "You own this task: promote a proposal to open the next round with it, or decline it."
    elif may:
        note = "The owner lets leads promote this task's candidates."
    else:
        note = "Only the owner promotes this task's candidates; you can follow your team's proposals here."
    return ProposalsView(task=task_name, rows=tuple(rows), details=tuple(details), may_decide=may, policy_note=note)


def promoted_message(outcome: ProposalPromotion) -> str:
    first = (outcome.promotion.targets[0].name if outcome.promotion is not None and outcome.promotion.targets
             else outcome.proposal.name)
    forced = " (promoted anyway over the promotion rule's refusal; the reason is recorded)" if outcome.proposal.forced else ""
    return (f"Round {outcome.round_number} is open with {first} as its target{forced}, published to the team. "
            f"{outcome.comparison_note}")


def refusal_view(proposal_id: str, message: str, lines: list[str]) -> RefusalView:
    """The promotion rule's verdict (``lines[0]``, naming the worst split) and every split's figures, with
    the override named as the dialog offers it."""
    sentence = lines[0].strip() if lines else message.split("\n", 1)[0].strip()
    splits = tuple(line.strip() for line in lines[1:] if line.strip() and not line.strip().endswith("no items"))
    text = "\n".join([sentence, "Compared again on this desk:", *splits,
                      "“Promote anyway…” overrides it with a reason, recorded with these figures with the round's "
                      "target and on the server."])
    return RefusalView(proposal_id, text, sentence, splits)
