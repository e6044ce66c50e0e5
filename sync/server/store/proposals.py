"""Proposals and task policies on the server. The server decides who may do what, from the token's
person and the task's policy; nothing a desk says about its own role counts.

- A lead (for their team) or an owner proposes a candidate; its files must already be stored as blobs.
- Leads see their team's proposals of a task, owners every team's; annotators none.
- An owner promotes or declines a proposal; a lead may promote (or decline) only when the task's
  policy lets leads promote. Promoting one proposal supersedes the task's other open proposals (they
  were compared with a target that is no longer current); a lead's new proposal supersedes their
  own earlier open ones for the task.
- Publishing a round (``store.publish``) follows the same rule (``promotion_rule.may_promote``), and a
  lead publishes only the round their own promotion opened (``claimed_round``): the task's next round,
  which no other promotion claimed. A lead changes no round, model or context that exists, and a lead's
  promotion supersedes only their own team's open proposals: every team works in a task's rounds, and
  what one team's lead does must not change what another team sees (docs/sync.md).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from app.core.domain import Role, utcnow
from app.core.errors import DynadeskError
from app.core.next_round import promotion_rule
from sync.proposal_wire import (
    ProposalCreate,
    ProposalDecision,
    ProposalFile,
    ProposalList,
    ProposalWire,
    TaskPolicyWire,
)
from sync.protocol import manifest_sha256
from sync.server.db import ServerDatabase
from sync.server.models import Person, Proposal, Round, Task, TaskPolicy
from sync.server.store.quarantine import not_quarantined, quarantine, wires
from sync.server.store.rules import LEADS, Forbidden


class NotFound(DynadeskError):
    """No such task or proposal (404)."""


class Conflict(DynadeskError):
    """The request does not fit the record's state (409), e.g. promoting a declined proposal."""


class MissingFiles(DynadeskError):
    """The proposal names files the server does not have (409): upload them first."""


def _task(session: Session, code: str) -> Task:
    task = session.scalar(select(Task).where(Task.code == code))
    if task is None:
        raise NotFound(f"There is no task '{code}' on this server; an owner publishes it first.")
    return task


def leads_may_promote(session: Session, task_id: uuid.UUID) -> bool:
    return bool(session.scalar(select(TaskPolicy.leads_may_promote).where(TaskPolicy.task_id == task_id)))


def may_promote(session: Session, me: Person, task: Task | None) -> bool:
    """``promotion_rule.may_promote`` with the task's policy as the server holds it (no task: no policy)."""
    return promotion_rule.may_promote(me.role, task is not None and leads_may_promote(session, task.id))


def may_not_publish(session: Session, me: Person, codes: Iterable[str]) -> list[str]:
    """Of ``codes``, the tasks whose rounds ``me`` may not publish (the promotion rule)."""
    tasks = {t.code: t for t in session.scalars(select(Task).where(Task.code.in_(set(codes))))}
    return sorted(code for code in set(codes) if not may_promote(session, me, tasks.get(code)))


def claimed_round(session: Session, me: Person, task_id: uuid.UUID, number: int) -> bool:
    """Whether ``me`` promoted a proposal of the task to round ``number``: the one round a lead may open."""
    return session.scalar(select(Proposal.id).where(
        Proposal.task_id == task_id, Proposal.state == "promoted", Proposal.promoted_round == number,
        Proposal.decided_by_id == me.id).limit(1)) is not None


def _check_lead_round(session: Session, me: Person, task: Task, proposal: Proposal, number: int) -> None:
    """A lead opens only the task's next round, and only one lead's promotion claims it: every team works
    in a task's rounds, so a lead never changes or claims a round another promotion opened."""
    latest = session.scalar(select(func.max(Round.number)).where(Round.task_id == task.id)) or 0
    if number != latest + 1:
        raise Conflict(f"Round {number} is not the next round of '{task.code}' on the server (that is round "
                       f"{latest + 1}); sync, then promote again. A lead opens only the next round; changes to "
                       "rounds that exist are the owner's.")
    taken = session.scalar(select(Proposal.id).where(
        Proposal.task_id == task.id, Proposal.state == "promoted", Proposal.promoted_round == number,
        Proposal.id != proposal.id).limit(1))
    if taken is not None:
        raise Conflict(f"Another promotion opened round {number} of '{task.code}' already; sync, then propose "
                       "against it.")


def _names(session: Session, ids: Iterable[uuid.UUID | None]) -> dict[uuid.UUID, str]:
    wanted = {i for i in ids if i is not None}
    if not wanted:
        return {}
    return dict(session.execute(select(Person.id, Person.display_name).where(Person.id.in_(wanted))).all())


def _wire(p: Proposal, task_code: str, names: dict[uuid.UUID, str]) -> ProposalWire:
    files = [ProposalFile.model_validate(f) for f in p.files]
    return ProposalWire(
        id=p.id, task=task_code, team=p.team, proposer_id=p.proposer_id, proposer=names.get(p.proposer_id, "?"),
        created_at=p.created_at, name=p.name, rounds_trained_on=list(p.rounds_trained_on),
        compared_with_round=p.compared_with_round, files=files, files_sha256=p.files_sha256,
        comparison=ProposalFile.model_validate(p.comparison) if p.comparison else None, figures=dict(p.figures),
        note=p.note, state=p.state,
        decided_by=names.get(p.decided_by_id) if p.decided_by_id else None, decided_at=p.decided_at,
        reason=p.reason, promoted_round=p.promoted_round, forced=p.forced,
        size=sum(f.size for f in files) + (p.comparison or {}).get("size", 0))


def create_proposal(db: ServerDatabase, me: Person, task_code: str, request: ProposalCreate,
                    blob_exists: Callable[[str, int | None], bool]) -> ProposalWire:
    if me.role not in LEADS:
        raise Forbidden(f"Only leads and owners propose a candidate; {me.display_name} is an {me.role}.")
    if manifest_sha256((f.name, f.sha256) for f in request.files) != request.files_sha256:
        raise DynadeskError("The proposal's file list does not add up to its files_sha256; it was changed on the "
                            "way. Propose it again.")
    if len({f.name for f in request.files}) != len(request.files):
        raise DynadeskError("The proposal names a file twice.")
    wanted = list(request.files) + ([request.comparison] if request.comparison else [])
    missing = [f.name for f in wanted if not blob_exists(f.sha256, f.size)]
    if missing:
        raise MissingFiles(f"Upload the proposal's files first; the server lacks {', '.join(missing[:5])}.")

    def write(session: Session) -> ProposalWire:
        task = _task(session, task_code)
        existing = session.get(Proposal, request.id)
        if existing is not None:
            if existing.proposer_id != me.id or existing.task_id != task.id:
                raise Forbidden("A proposal with this id exists already, by someone else or for another task.")
            return _wire(existing, task.code, _names(session, [existing.proposer_id, existing.decided_by_id]))
        now = utcnow()
        session.execute(update(Proposal).where(Proposal.task_id == task.id, Proposal.proposer_id == me.id,
                                               Proposal.state == "open")
                        .values(state="superseded", updated_at=now, reason="a newer proposal by the same lead"))
        proposal = Proposal(
            id=request.id, task_id=task.id, team=me.team, proposer_id=me.id, name=request.name,
            rounds_trained_on=sorted(set(request.rounds_trained_on)), compared_with_round=request.compared_with_round,
            files=[f.model_dump() for f in request.files], files_sha256=request.files_sha256,
            comparison=request.comparison.model_dump() if request.comparison else None, figures=request.figures,
            note=request.note, state="open", forced=False, created_at=now, updated_at=now, revision=1)
        session.add(proposal)
        session.flush()
        return _wire(proposal, task.code, {me.id: me.display_name})

    return db.write_retrying(write)


def _visible(me: Person, proposal: Proposal) -> bool:
    return me.role == Role.OWNER.value or (me.role == Role.LEAD.value and proposal.team == me.team)


def list_proposals(db: ServerDatabase, me: Person, task_code: str) -> ProposalList:
    if me.role not in LEADS:
        raise Forbidden("Only leads and owners see proposals.")
    broken: list = []
    with db.read() as session:
        task = _task(session, task_code)
        query = select(Proposal).where(Proposal.task_id == task.id, not_quarantined(Proposal.id)) \
            .order_by(Proposal.created_at.desc())
        if me.role != Role.OWNER.value:
            query = query.where(Proposal.team == me.team)
        rows = list(session.scalars(query))
        names = _names(session, [i for p in rows for i in (p.proposer_id, p.decided_by_id)])
        # Each on its own: one that cannot be served is set aside, not a failure of the whole list.
        served = ProposalList(task=task.code, proposals=wires(rows, "proposal", lambda p: _wire(p, task.code, names),
                                                              broken),
                              leads_may_promote=leads_may_promote(session, task.id))
    quarantine(db, broken)
    return served


def get_proposal(db: ServerDatabase, me: Person, proposal_id: uuid.UUID) -> ProposalWire:
    broken: list = []
    with db.read() as session:
        proposal = session.get(Proposal, proposal_id)
        if proposal is None or not _visible(me, proposal):
            # the same answer whether it exists or not: a lead learns nothing of other teams' proposals
            raise NotFound(f"There is no proposal {proposal_id} that you may see.")
        task = session.get(Task, proposal.task_id)
        assert task is not None  # a foreign key
        names = _names(session, [proposal.proposer_id, proposal.decided_by_id])
        served = wires([proposal], "proposal", lambda p: _wire(p, task.code, names), broken)
    quarantine(db, broken)
    if not served:
        raise NotFound(f"Proposal {proposal_id} cannot be served (it does not fit the protocol); it is in "
                       "quarantine, where an owner sees it with `dynadesk serve quarantine list`.")
    return served[0]


def check_promotion_rule(db: ServerDatabase, me: Person, proposal_id: uuid.UUID, decision: ProposalDecision) -> None:
    """The desk's promotion rule (``promotion_rule``), applied again here to the figures the promotion was
    judged on (the decision's, else the proposal's own): a refused candidate is promoted only "anyway",
    with a reason. Outside the write transaction; its cost is bounded by the figures' bound (a few hundred
    rows at most)."""
    if decision.state != "promoted":
        return
    with db.read() as session:  # who may decide is the write's to say (NotFound, Forbidden, Conflict): first
        proposal = session.get(Proposal, proposal_id)
        if proposal is None or not _visible(me, proposal) or proposal.state != "open":
            return
        task = session.get(Task, proposal.task_id)
        if task is None or not may_promote(session, me, task):
            return
        stored = dict(proposal.figures or {})
    if decision.forced:
        if not (decision.reason or "").strip():
            raise DynadeskError("Promoting anyway needs the reason; it is recorded with the proposal.")
        return
    verdict = promotion_rule.figures_verdict(decision.figures or stored)
    if verdict.refused:
        raise Conflict(f"{verdict.sentence} The promotion rule refuses this candidate; promote it anyway with a "
                       "reason (forced), which is recorded.")


def decide_proposal(db: ServerDatabase, me: Person, proposal_id: uuid.UUID, decision: ProposalDecision,
                    now: datetime | None = None) -> ProposalWire:
    check_promotion_rule(db, me, proposal_id, decision)

    def write(session: Session) -> ProposalWire:
        proposal = session.get(Proposal, proposal_id)
        if proposal is None or not _visible(me, proposal):
            raise NotFound(f"There is no proposal {proposal_id} that you may see.")
        # the task's row lock orders promotions of one task, so two leads never claim the same round
        task = session.scalar(select(Task).where(Task.id == proposal.task_id).with_for_update())
        assert task is not None
        if not may_promote(session, me, task):
            raise Forbidden(f"Only the owner decides proposals for '{task.code}'"
                            + ("; the task does not let leads promote (the owner can allow it with "
                               f"`dynadesk rounds policy --task {task.code} --leads-may-promote yes`)."
                               if me.role == Role.LEAD.value else "."))
        if proposal.state == decision.state and (decision.state == "declined"
                                                 or proposal.promoted_round == decision.round_number):
            return _wire(proposal, task.code, _names(session, [proposal.proposer_id, proposal.decided_by_id]))
        if proposal.state != "open":
            raise Conflict(f"The proposal is {proposal.state} already; only an open proposal can be "
                           f"{decision.state}.")
        if decision.state == "promoted" and decision.round_number is None:
            raise DynadeskError("Say which round the promoted candidate is the target of (round_number).")
        owner = me.role == Role.OWNER.value
        if decision.state == "promoted" and not owner and decision.round_number is not None:
            _check_lead_round(session, me, task, proposal, decision.round_number)
        when = now or utcnow()
        proposal.state, proposal.decided_by_id, proposal.decided_at = decision.state, me.id, when
        proposal.reason, proposal.forced = decision.reason, decision.forced if decision.state == "promoted" else False
        proposal.promoted_round = decision.round_number if decision.state == "promoted" else None
        proposal.updated_at, proposal.revision = when, proposal.revision + 1
        if decision.state == "promoted":
            # a lead's promotion leaves other teams' proposals as they are: they are theirs, and the owner's
            others = [] if owner else [Proposal.team == me.team]
            session.execute(update(Proposal).where(Proposal.task_id == task.id, Proposal.state == "open",
                                                   Proposal.id != proposal.id, *others)
                            .values(state="superseded", updated_at=when,
                                    reason=f"proposal {proposal.id} became the target of round {decision.round_number}"))
        session.flush()
        return _wire(proposal, task.code, _names(session, [proposal.proposer_id, proposal.decided_by_id]))

    return db.write_retrying(write)


def _policy_wire(session: Session, task: Task, policy: TaskPolicy | None) -> TaskPolicyWire:
    if policy is None:
        return TaskPolicyWire(task=task.code, leads_may_promote=False)
    return TaskPolicyWire(task=task.code, leads_may_promote=policy.leads_may_promote,
                          set_by=_names(session, [policy.set_by_id]).get(policy.set_by_id), set_at=policy.updated_at)


def set_policy(db: ServerDatabase, me: Person, task_code: str, leads_may_promote: bool) -> TaskPolicyWire:
    if me.role != Role.OWNER.value:
        raise Forbidden(f"Only owners set who may promote; {me.display_name} is a {me.role}.")

    def write(session: Session) -> TaskPolicyWire:
        task = _task(session, task_code)
        policy = session.scalar(select(TaskPolicy).where(TaskPolicy.task_id == task.id))
        now = utcnow()
        if policy is None:
            policy = TaskPolicy(task_id=task.id, leads_may_promote=leads_may_promote, set_by_id=me.id, created_at=now,
                                updated_at=now, revision=1)
            session.add(policy)
        elif policy.leads_may_promote != leads_may_promote:
            policy.leads_may_promote, policy.set_by_id = leads_may_promote, me.id
            policy.updated_at, policy.revision = now, policy.revision + 1
        session.flush()
        return _policy_wire(session, task, policy)

    return db.write_retrying(write)


def policies(db: ServerDatabase) -> list[TaskPolicyWire]:
    """Every task's policy (tasks without one: leads may not promote)."""
    with db.read() as session:
        held = {p.task_id: p for p in session.scalars(select(TaskPolicy))}
        return [_policy_wire(session, task, held.get(task.id))
                for task in session.scalars(select(Task).order_by(Task.code))]
