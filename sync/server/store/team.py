"""Team figures and duplicates, for leads and owners."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from app.core.domain import Role
from app.core.services.stats import Figures
from app.core.tasks import figures as rule
from app.core.tasks.variants import sql_not_variant
from sync.protocol import ArmFigureRow, Duplicate, FigureRow
from sync.server.db import ServerDatabase
from sync.server.models import Example, Person, Round, Task
from sync.server.store.quarantine import not_quarantined, quarantine, wires
from sync.server.store.rules import LEADS, Forbidden, fetch


def _team_scope(me: Person, team: str | None) -> str:
    if me.role not in LEADS:
        raise Forbidden("Only leads and owners read team figures.")
    if team is None:
        return me.team
    if team != me.team and me.role != Role.OWNER.value:
        raise Forbidden(f"You lead team '{me.team}'; the figures of team '{team}' are not yours to read.")
    return team


def team_figures(db: ServerDatabase, me: Person, by: str, team: str | None = None) -> tuple[str, list[FigureRow]]:
    team = _team_scope(me, team)
    key = {"round": Example.round_id, "annotator": Example.author_id}[by]
    with db.read() as session:
        rows = session.execute(
            select(key, *rule.sql_counts(Example.model_fooled, Example.decided_verdict, Example.source),
                   rule.sql_total(Example.duplicate_of.is_not(None)))
            .where(Example.team == team, rule.sql_in_figures(Example.status), sql_not_variant(Example.source))
            .group_by(key)).all()
        ids = [row[0] for row in rows]
        if by == "round":
            names = {rid: f"{name} · round {number}" for rid, name, number in session.execute(
                select(Round.id, Task.name, Round.number).join(Task, Task.id == Round.task_id).where(Round.id.in_(ids)))}
        else:
            names = dict(session.execute(select(Person.id, Person.display_name).where(Person.id.in_(ids))).all())
    # MER and vMER as the desk defines them (``app.core.tasks.figures``, through ``Figures``), over "fooled" as the server judged it at push.
    figures = []
    for k, s, f, v, i, d in rows:
        counts = Figures(str(k), names.get(k, str(k)), int(s), int(f), int(v), int(i))
        figures.append(FigureRow(key=counts.key, name=counts.name, submitted=counts.submitted, fooled=counts.fooled,
                                 validated_fooling=counts.validated_fooling, duplicates=int(d), mer=counts.mer,
                                 vmer=counts.vmer))
    return team, sorted(figures, key=lambda f: f.name)


def team_assistant_split(db: ServerDatabase, me: Person, by: str,
                         team: str | None = None) -> tuple[str, list[ArmFigureRow], int]:
    """The writing assistant's split of the team's figures, computed here from the stored records
    (the arm each example's record carries, "fooled" as the server judged it, decisions as the
    server summarised them) with the desk's one definition (``figures.arm_split``)."""
    team = _team_scope(me, team)
    key = {"round": Example.round_id, "annotator": Example.author_id}[by]
    with db.read() as session:
        rows = [rule.ArmRow(str(k), *rest) for k, *rest in session.execute(
            select(key, Example.status, Example.model_fooled, Example.decided_verdict, Example.time_spent_ms,
                   *rule.sql_arm_fields(Example.assistance))
            .where(Example.team == team, rule.sql_submitted(Example.status, Example.source)))]
        figures, outside = rule.arm_split(rows)
        ids = list({f.key for f in figures})
        if by == "round":
            names = {str(rid): f"{name} · round {number}" for rid, name, number in session.execute(
                select(Round.id, Task.name, Round.number).join(Task, Task.id == Round.task_id)
                .where(Round.id.in_([uuid.UUID(i) for i in ids])))}
        else:
            names = {str(pid): name for pid, name in session.execute(
                select(Person.id, Person.display_name).where(Person.id.in_([uuid.UUID(i) for i in ids])))}
    out = [ArmFigureRow(key=f.key, name=names.get(f.key, f.key), arm=f.arm, submitted=f.submitted, applied=f.applied,
                        fooled=f.fooled, validated_fooling=f.validated_fooling, decided=f.decided, rejected=f.rejected,
                        mer=f.mer, vmer=f.vmer, rejection_rate=f.rejection_rate, median_seconds=f.median_seconds)
           for f in figures]
    return team, sorted(out, key=lambda r: (r.name, r.arm)), outside


def duplicates(db: ServerDatabase, me: Person, team: str | None = None, limit: int = 1000) -> list[Duplicate]:
    team = _team_scope(me, team)
    with db.read() as session:
        rows = list(session.scalars(select(Example).where(Example.team == team, Example.duplicate_of.is_not(None),
                                                          not_quarantined(Example.id))
                                    .order_by(Example.stored_seq).limit(limit)))
        originals = fetch(session, Example, [e.duplicate_of for e in rows])
        names = dict(session.execute(select(Person.id, Person.display_name).where(
            Person.id.in_({e.author_id for e in rows} | {o.author_id for o in originals.values()}))).all())
        rounds = fetch(session, Round, [e.round_id for e in rows])
        tasks = fetch(session, Task, [r.task_id for r in rounds.values()])

    def build(e: Example) -> Duplicate:
        original = originals.get(e.duplicate_of)
        other_team = original is not None and original.team != e.team
        hidden = other_team and me.role != Role.OWNER.value  # a lead may not learn who wrote another team's work
        return Duplicate(
            example=e.id, duplicate_of=None if hidden else e.duplicate_of, task=tasks[rounds[e.round_id].task_id].code,
            round_number=rounds[e.round_id].number, text=e.text, author=names.get(e.author_id, "?"),
            original_author=None if hidden else names.get(original.author_id, "?") if original is not None else "?",
            other_team=other_team)

    broken: list = []
    out = wires(rows, "example", build, broken)
    quarantine(db, broken)
    return out
