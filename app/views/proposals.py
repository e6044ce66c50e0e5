"""What the Proposals dialog shows: a task's proposals (who, when, rounds trained on, the comparison's key
figure with its 95 % interval, state) and, for the one selected, every difference with its interval.

Plain frozen data, so the dialog imports nothing else; ``app.views.proposals_build`` builds them from
``sync.proposals.ProposalSummary`` with pure functions. Qt-free, tested in tests/views.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FigureRow:
    split: str
    metric: str
    current: str
    candidate: str
    difference: str
    interval: str
    items: int
    tone: str  # "worse" (interval below zero), "better" (above), "" (no clear difference)


@dataclass(frozen=True)
class ProposalRow:
    id: str
    who: str
    when: str
    rounds: str
    headline: str  # accuracy difference [interval] where it was compared
    state: str
    tone: str
    is_open: bool


@dataclass(frozen=True)
class ProposalDetail:
    id: str
    title: str
    facts: tuple[str, ...]  # who, when, team, files, note, decision
    verdict: str
    figures: tuple[FigureRow, ...]
    is_open: bool


@dataclass(frozen=True)
class ProposalsView:
    task: str
    rows: tuple[ProposalRow, ...]
    details: tuple[ProposalDetail, ...]  # in the order of ``rows``
    may_decide: bool
    policy_note: str


@dataclass(frozen=True)
class RefusalView:
    """A promotion refused by the promotion rule: the figures, and the override on offer (with a reason)."""

    proposal_id: str
    message: str
    sentence: str = ""  # the rule's verdict, naming the worst split
    splits: tuple[str, ...] = ()  # every split with its state and figures
