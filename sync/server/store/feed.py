"""The change feed a desk pulls: what it may see, cut to a byte budget, with what the changes refer to."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from sqlalchemy import LargeBinary, Text, and_, cast, func, or_, select
from sqlalchemy.orm import Session

from app.core.domain import Role
from sync.protocol import MAX_PULL_BYTES, ChangesResponse
from sync.server.db import ServerDatabase
from sync.server.models import (
    Change,
    Context,
    Example,
    ExampleReview,
    ModelRecord,
    Person,
    Quarantined,
    Round,
    Task,
    TaskSetting,
    Validation,
)
from sync.server.store.quarantine import not_quarantined, quarantine
from sync.server.store.quarantine import wires as _wires
from sync.server.store.rules import KIND_MODELS, chunks, fetch
from sync.server.store.wire import (
    context_wire,
    example_review_wire,
    example_wire,
    hide_foreign,
    model_wire,
    other_teams,
    person_wire,
    round_wire,
    task_setting_wire,
    task_wire,
    validation_wire,
)


def _visible(me: Person):
    conditions = [or_(Change.owner_id.is_(None), Change.owner_id != me.id)]
    if me.role != Role.OWNER.value:
        conditions.append(or_(Change.team.is_(None), Change.team == me.team))
    else:  # a team's threshold decides its own desks' examples; an owner's desk goes by the owner's team's
        conditions.append(or_(Change.kind != "task_setting", Change.team == me.team))
    return and_(*conditions)


def _not_quarantined():
    return not_quarantined(Change.record_id)


def changes(db: ServerDatabase, me: Person, since: int, limit: int,
            max_bytes: int = MAX_PULL_BYTES) -> ChangesResponse:
    """Changes after ``since`` that ``me`` may see, with what they refer to: at most ``limit``
    changes, and no more than about ``max_bytes`` of records (at least one change, so a pull
    always moves on). A record that no longer fits the protocol is quarantined and left out."""
    broken: list[tuple[Any, str, str]] = []
    with db.read() as session:
        rows = list(session.execute(select(Change.record_id, Change.kind, Change.seq)
                                    .where(Change.seq > since, _visible(me), _not_quarantined())
                                    .order_by(Change.seq).limit(limit)))
        rows = rows[:_fitting(session, rows, max_bytes)]
        cursor = rows[-1].seq if rows else since
        remaining = session.scalar(select(func.count()).select_from(Change)
                                   .where(Change.seq > cursor, _visible(me), _not_quarantined())) or 0
        ids: dict[str, list[uuid.UUID]] = defaultdict(list)
        for record_id, kind, _seq in rows:
            ids[kind].append(record_id)
        records = _with_references(session, me, ids, broken)
        # Records quarantined before (a poisoned round its examples refer to) take no write per page.
        known = {q for chunk in chunks([row.id for row, _kind, _reason in broken])
                 for q in session.scalars(select(Quarantined.record_id).where(Quarantined.record_id.in_(chunk)))}
        broken = [entry for entry in broken if entry[0].id not in known]
    if broken:
        quarantine(db, broken)
    changed = {record_id for record_id, _kind, _seq in rows}
    referenced = [r.id for r in records if r.id not in changed]
    return ChangesResponse(records=records, referenced=referenced, cursor=cursor, more=remaining > 0,
                           remaining=remaining)


def remaining_after(db: ServerDatabase, me: Person, cursor: int) -> int:
    """How many changes ``me`` may see after ``cursor`` (a page's ``remaining``)."""
    with db.read() as session:
        return session.scalar(select(func.count()).select_from(Change)
                              .where(Change.seq > cursor, _visible(me), _not_quarantined())) or 0


# What a record weighs on the wire, estimated in the database from the bytes of its large columns
# (their stored JSON or text) plus a fixed allowance for the rest, so a page is cut before it is
# built. SQLite stores JSON with non-ASCII escaped, which overestimates such text (pages get smaller).
RECORD_OVERHEAD = 600

HEAVY_COLUMNS = {"example": ("inputs", "meta", "origin", "edit_ops", "outputs", "status_reason", "assistance"),
                 "validation": ("reason", "model_note"), "example_review": ("comment",), "context": ("text", "data"),
                 "round": ("description", "goal_message", "settings"), "task": ("definition",),
                 "model": ("label_map", "provenance", "files"), "person": (), "task_setting": ("settings",)}


def _weight(session: Session, kind: str) -> Any:
    model = KIND_MODELS[kind]
    total: Any = RECORD_OVERHEAD  # a SQL expression once a column is added
    for name in HEAVY_COLUMNS[kind]:
        text = cast(getattr(model, name), Text)
        size = func.octet_length(text) if session.get_bind().dialect.name == "postgresql" else \
            func.length(cast(text, LargeBinary))
        total = total + func.coalesce(size, 0)
    return total


def _weights(session: Session, kind: str, ids: Iterable[uuid.UUID], *extra) -> dict[uuid.UUID, tuple]:
    model = KIND_MODELS[kind]
    out: dict[uuid.UUID, tuple] = {}
    for chunk in chunks(list(dict.fromkeys(ids))):
        for row in session.execute(select(model.id, _weight(session, kind), *extra).where(model.id.in_(chunk))):
            out[row[0]] = tuple(row[1:])
    return out


def _fitting(session: Session, rows: list, max_bytes: int) -> int:
    """How many of ``rows`` (changes in order) fit in a page of about ``max_bytes``: each change
    weighs its record, and the first time they appear, the example a validation or review refers
    to and the context of an example. Always at least one."""
    if len(rows) <= 1:
        return len(rows)
    by_kind: dict[str, list[uuid.UUID]] = defaultdict(list)
    for record_id, kind, _seq in rows:
        by_kind[kind].append(record_id)
    weights: dict[uuid.UUID, tuple] = {}
    for kind, record_ids in by_kind.items():
        extra = {"example": (Example.context_id,), "validation": (Validation.example_id,),
                 "example_review": (ExampleReview.example_id,)}.get(kind, ())
        weights.update(_weights(session, kind, record_ids, *extra))
    examples = {w[1] for rid, kind, _ in rows if kind in ("validation", "example_review")
                for w in [weights.get(rid)] if w} - set(by_kind["example"])
    example_weights = _weights(session, "example", examples, Example.context_id)
    contexts = {w[1] for w in [*example_weights.values(), *(weights.get(r) for r in by_kind["example"])]
                if w and w[1] is not None}
    context_weights = _weights(session, "context", contexts)
    counted: set[uuid.UUID] = set()
    total = 0

    def once(record_id, table) -> int:
        if record_id is None or record_id in counted or record_id not in table:
            return 0
        counted.add(record_id)
        return table[record_id][0]

    for n, (record_id, kind, _seq) in enumerate(rows):
        weight = weights.get(record_id, (RECORD_OVERHEAD,))
        total += weight[0] if record_id not in counted else 0
        counted.add(record_id)
        if kind in ("validation", "example_review") and len(weight) > 1:
            total += once(weight[1], example_weights)
            parent = example_weights.get(weight[1])
            total += once(parent[1] if parent else None, context_weights)
        elif kind == "example" and len(weight) > 1:
            total += once(weight[1], context_weights)
        if total > max_bytes:
            return max(n, 1)
    return len(rows)


def _with_references(session: Session, me: Person, ids: dict[str, list[uuid.UUID]], broken: list) -> list:
    """The changed records plus every record they refer to, in an order a desk can store them.
    Records that cannot be sent are added to ``broken`` instead."""
    validations = fetch(session, Validation, ids["validation"])
    reviews = fetch(session, ExampleReview, ids["example_review"])
    settings = fetch(session, TaskSetting, ids["task_setting"])
    examples = fetch(session, Example, ids["example"])
    validated = [e for e in dict.fromkeys([*(v.example_id for v in validations.values()),
                                           *(r.example_id for r in reviews.values())]) if e not in examples]
    for example in fetch(session, Example, validated).values():
        if example.author_id != me.id:  # a person's own examples are already on their desk
            examples[example.id] = example
    contexts = fetch(session, Context, [*ids["context"], *(e.context_id for e in examples.values() if e.context_id)])
    rounds = fetch(session, Round, [*ids["round"], *(e.round_id for e in examples.values()),
                                     *(c.round_id for c in contexts.values())])
    model_ids = [*ids["model"], *(uuid.UUID(m) for r in rounds.values() for m in r.target_models),
                 *(uuid.UUID(o["model"]) for e in examples.values() for o in e.outputs)]
    models = fetch(session, ModelRecord, model_ids)
    tasks = fetch(session, Task, [*ids["task"], *(r.task_id for r in rounds.values()),
                                   *(s.task_id for s in settings.values()),
                                   *(e.task_id for e in examples.values())])
    codes = {m.task_code for m in models.values() if m.task_code} - {t.code for t in tasks.values()}
    if codes:
        tasks.update((t.id, t) for t in session.scalars(select(Task).where(Task.code.in_(codes))))
    people = fetch(session, Person, [*ids["person"], *(e.author_id for e in examples.values()),
                                      *(v.validator_id for v in validations.values()),
                                      *(r.lead_id for r in reviews.values()),
                                      *(s.lead_id for s in settings.values())])
    code_of = {t.id: t.code for t in tasks.values()}
    number_of = {r.id: r.number for r in rounds.values()}
    hash_of = {c.id: c.content_hash for c in contexts.values()}
    out: list = _wires(people.values(), "person", person_wire, broken)
    out += _wires(tasks.values(), "task", task_wire, broken)
    out += _wires(models.values(), "model", model_wire, broken)
    out += _wires(sorted(rounds.values(), key=lambda r: r.number), "round",
                  lambda r: round_wire(r, code_of[r.task_id]), broken)
    # Before the examples: a desk decides the examples of the page with the team's threshold.
    out += _wires(sorted(settings.values(), key=lambda s: (s.received_at, s.id)), "task_setting",
                  lambda s: task_setting_wire(s, code_of[s.task_id]), broken)
    out += _wires(contexts.values(), "context",
                  lambda c: context_wire(c, code_of[rounds[c.round_id].task_id], number_of[c.round_id]), broken)
    foreign = other_teams(session, me, [e.duplicate_of for e in examples.values()])
    out += _wires(sorted(examples.values(), key=lambda e: e.stored_seq), "example",
                  lambda e: hide_foreign(example_wire(e, code_of[e.task_id], number_of[e.round_id],
                                                       hash_of.get(e.context_id)), foreign),
                  broken)
    out += _wires(sorted(validations.values(), key=lambda v: v.created_at), "validation", validation_wire, broken)
    out += _wires(sorted(reviews.values(), key=lambda r: (r.received_at, r.id)), "example_review",
                  example_review_wire, broken)
    return out
