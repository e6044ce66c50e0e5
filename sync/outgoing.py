"""Sync going out, in the desk's database: reading the outbox into wire records, the checks of what a server takes, and settling the outbox with the server's answers."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from sqlalchemy import Table, bindparam, select
from sqlalchemy.orm import Session, selectinload

from app.core.domain import SyncState
from app.core.io.records import dump_example, dump_example_review, dump_person, dump_validation
from app.core.limits import record_problems
from app.core.services.tasks import SETTING_KEY, task_setting_in
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import (
    Context,
    Example,
    ExampleReview,
    Meta,
    ModelRecord,
    OutboxEntry,
    Person,
    Round,
    Task,
    Validation,
)
from sync.negotiation import shape_record
from sync.protocol import PROTOCOL_VERSION, RecordError, RecordResult


@dataclass
class Outgoing:
    """One batch read from the outbox: the entries and their records in wire form."""

    entries: list[OutboxEntry]
    records: list[dict]  # same order as the entries; person records (imported authors) come first
    people: int = 0  # how many leading records are person records
    missing: list[OutboxEntry] = field(default_factory=list)  # entries whose record is gone
    # Entries whose record no server would take (a free-form field nested too deep or too large), with why.
    unfit: list[tuple[OutboxEntry, str]] = field(default_factory=list)
    # Entries an older server would not take (a newer record kind, or a newer field set): they stay pending
    # until the server speaks the protocol they need (sync.negotiation).
    waiting: list[OutboxEntry] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return max((e.seq for e in [*self.entries, *self.missing, *(e for e, _ in self.unfit), *self.waiting]),
                   default=0)


def unfit_published(task: Task, models: Iterable[ModelRecord], rounds: Iterable[Round], contexts: Iterable[Context],
                    round_numbers: dict[uuid.UUID, int]) -> list[str]:
    """What keeps each record of a publish from any server (a free-form field nested too deep or
    too large), naming the record and the field."""
    named = [(f"task {task.code}", "task", task), *((f"model {m.name}", "model", m) for m in models),
             *((f"round {r.number}", "round", r) for r in rounds),
             *((f"context {c.id} of round {round_numbers[c.round_id]}", "context", c) for c in contexts)]
    return [f"{what}: {problem}" for what, kind, record in named for problem in record_problems(kind, record)]


def pending_batch(db: Database, person_id: uuid.UUID, *, after: int, limit: int,
                  protocol: int = PROTOCOL_VERSION) -> Outgoing:
    """The next ``limit`` pending entries of ``person_id`` after outbox position ``after``, in the shape of
    ``protocol`` (the server's, when older than this desk's): what it cannot take waits (``waiting``)."""
    with db.read() as session:
        entries = list(session.scalars(
            select(OutboxEntry).where(OutboxEntry.state == outbox.PENDING, OutboxEntry.person_id == person_id,
                                      OutboxEntry.seq > after).order_by(OutboxEntry.seq).limit(limit)))
        example_ids = [e.record_id for e in entries if e.kind == "example"]
        validation_ids = [e.record_id for e in entries if e.kind == "validation"]
        review_ids = [e.record_id for e in entries if e.kind == "example_review"]
        examples = {x.id: x for x in session.scalars(
            select(Example).where(Example.id.in_(example_ids)).options(selectinload(Example.outputs)))}
        validations = {v.id: v for v in session.scalars(select(Validation).where(Validation.id.in_(validation_ids)))}
        reviews = {r.id: r for r in session.scalars(select(ExampleReview).where(ExampleReview.id.in_(review_ids)))}
        codes = dict(session.execute(select(Task.id, Task.code)).all())
        settings = _queued_settings(session, codes.values()) if any(e.kind == "task_setting" for e in entries) else {}
        round_ids = {x.round_id for x in examples.values()}
        numbers = dict(session.execute(select(Round.id, Round.number).where(Round.id.in_(round_ids))).all())
        context_ids = {x.context_id for x in examples.values() if x.context_id}
        hashes: dict[uuid.UUID | None, str] = dict(session.execute(
            select(Context.id, Context.content_hash).where(Context.id.in_(context_ids))).all())
        authors = {x.author_id for x in examples.values()} | {v.validator_id for v in validations.values()}
        others = [p for p in session.scalars(select(Person).where(Person.id.in_(authors - {person_id})))]

        batch = Outgoing(entries=[], records=[])
        # Imported data sets go out under their own (pseudonymous) authors, sent along first.
        people = (shape_record(dump_person(p), protocol).record for p in others)
        batch.records = [p for p in people if p is not None]
        batch.people = len(batch.records)
        for entry in entries:
            if entry.kind == "example" and entry.record_id in examples:
                example = examples[entry.record_id]
                record = dump_example(example, codes[example.task_id])
                record["round_number"] = numbers[example.round_id]
                record["context_hash"] = hashes.get(example.context_id)
            elif entry.kind == "validation" and entry.record_id in validations:
                record = dump_validation(validations[entry.record_id])
            elif entry.kind == "example_review" and entry.record_id in reviews:
                record = dump_example_review(reviews[entry.record_id])
            elif entry.kind == "task_setting" and entry.record_id in settings:
                record = settings[entry.record_id]
            else:
                batch.missing.append(entry)
                continue
            problems = record_problems(entry.kind, record)
            if problems:  # it would only be refused; it stays here, named, and the rest goes on
                batch.unfit.append((entry, "; ".join(problems)))
                continue
            shaped = shape_record(record, protocol)
            if shaped.record is None or shaped.lost:
                batch.waiting.append(entry)
                continue
            batch.entries.append(entry)
            batch.records.append(shaped.record)
        return batch


def _queued_settings(session: Session, codes) -> dict[uuid.UUID, dict]:
    """The lead's task settings this desk holds, by id, in their wire form (a desk holds one per task)."""
    out = {}
    for code in codes:
        setting = task_setting_in(session, code)
        if setting is not None and setting.get("id"):
            out[uuid.UUID(setting["id"])] = {k: v for k, v in setting.items()
                                             if k not in ("received_at", "sync_state")}
    return out


# The records that go through the outbox, by kind: each has a revision and a sync_state.
SYNCED_TABLES: dict[str, type[Example] | type[Validation] | type[ExampleReview]] = {
    "example": Example, "validation": Validation, "example_review": ExampleReview}


@dataclass
class Settled:
    stored: int = 0
    already: int = 0
    conflicts: int = 0
    rejected: int = 0
    deferred: int = 0
    problems: list[str] = field(default_factory=list)


def settle(db: Database, batch: Outgoing, results: Sequence[RecordResult], *,
           refused: Sequence[RecordError] = (), refused_as: str = "rejected",
           received_at: datetime | None = None) -> Settled:
    """Apply the server's answers to the outbox in one unit of work.

    A stored record leaves the outbox (unless it changed again since it was read) and is marked
    synced. Conflicts and rejections stay, with the reason, for the user; deferred records stay
    pending for the next sync. ``refused`` are records the server named in a 403 or 422 answer.
    ``received_at`` (the answer's ``server_time``) is when the server received the stored reviews:
    where they stand among other leads' reviews. A review it already had (sent again after a lost
    answer) keeps the time it first arrived, which the answer names.
    """
    out = Settled()
    sent = {str(e.record_id): (e, record) for e, record in zip(batch.entries, batch.records[batch.people:])}
    done: dict[str, list[dict]] = {kind: [] for kind in SYNCED_TABLES}
    done_entries, marks, judged = [], [], []
    arrived: dict[str, list[dict]] = {"example_review": [], "task_setting": []}
    for result in results:
        if result.record == "person":
            continue
        entry, record = sent[str(result.id)]
        revision = int(record["revision"])
        if result.status in ("stored", "already_stored") and (result.revision or revision) >= revision:
            out.stored += result.status == "stored"
            out.already += result.status == "already_stored"
            done_entries.append({"b_seq": entry.seq, "b_rev": revision})
            if entry.kind in done:  # a task setting has no table of its own
                done[entry.kind].append({"b_id": entry.record_id, "b_rev": revision})
            if entry.kind == "example" and result.server and "model_fooled" in result.server:
                judged.append({"b_id": entry.record_id, "b_fooled": result.server["model_fooled"]})
            if entry.kind in arrived and received_at is not None:  # a resend: when it first arrived
                first = (result.server or {}).get("received_at")
                arrived[entry.kind].append({"b_id": entry.record_id,
                                            "b_at": datetime.fromisoformat(first) if first else received_at})
        else:
            state = {"conflict": outbox.CONFLICT, "rejected": outbox.REJECTED}.get(result.status, outbox.PENDING)
            if result.status == "conflict":
                out.conflicts += 1
            elif result.status == "rejected":
                out.rejected += 1
            else:
                out.deferred += 1
            marks.append({"b_seq": entry.seq, "b_rev": revision, "b_state": state,
                          "b_error": f"{result.status}: {result.reason or ''}".strip()})
            if result.status != "deferred":
                out.problems.append(f"{entry.kind} {entry.record_id}: {result.status}: {result.reason}")
    for error in refused:
        index = (error.index or 0) - batch.people
        if error.index is None or not 0 <= index < len(batch.entries):
            continue
        entry, record = batch.entries[index], batch.records[error.index]
        out.rejected += 1
        marks.append({"b_seq": entry.seq, "b_rev": int(record["revision"]), "b_state": outbox.REJECTED,
                      "b_error": f"{refused_as}: {error.reason}"})
        out.problems.append(f"{entry.kind} {entry.record_id}: {refused_as}: {error.reason}")
    for entry in batch.missing:
        marks.append({"b_seq": entry.seq, "b_rev": entry.revision, "b_state": outbox.REJECTED,
                      "b_error": "rejected: the record is no longer on this desk"})
    for entry, reason in batch.unfit:
        out.rejected += 1
        marks.append({"b_seq": entry.seq, "b_rev": entry.revision, "b_state": outbox.REJECTED,
                      "b_error": f"rejected: {reason}"})
        out.problems.append(f"{entry.kind} {entry.record_id}: rejected: {reason}")

    entries = cast(Table, OutboxEntry.__table__)
    with db.write() as session:
        if done_entries:
            # Only if it was not changed again meanwhile (a retraction raises the entry's revision).
            session.execute(entries.delete().where(entries.c.seq == bindparam("b_seq"),
                                                   entries.c.revision <= bindparam("b_rev")), done_entries)
        for kind, rows in done.items():
            table = cast(Table, SYNCED_TABLES[kind].__table__)
            if rows:  # updated_at stays as it was: it is part of the record as the server stores it
                session.execute(table.update().where(table.c.id == bindparam("b_id"), table.c.revision == bindparam("b_rev"))
                                .values(sync_state=SyncState.SYNCED.value, updated_at=table.c.updated_at), rows)
        if judged:  # the server judges "fooled"; this desk shows its judgement
            table = cast(Table, Example.__table__)
            session.execute(table.update().where(table.c.id == bindparam("b_id"))
                            .values(model_fooled=bindparam("b_fooled"), updated_at=table.c.updated_at), judged)
        _settle_settings(session, arrived["task_setting"])
        if arrived["example_review"]:
            table = cast(Table, ExampleReview.__table__)
            session.execute(table.update().where(table.c.id == bindparam("b_id"), table.c.received_at.is_(None))
                            .values(received_at=bindparam("b_at"), updated_at=table.c.updated_at),
                            arrived["example_review"])
        if marks:
            session.execute(entries.update().where(entries.c.seq == bindparam("b_seq"),
                                                   entries.c.revision == bindparam("b_rev"))
                            .values(state=bindparam("b_state"), last_error=bindparam("b_error"),
                                    attempts=entries.c.attempts + 1), marks)
    return out


def _settle_settings(session: Session, arrived: list[dict]) -> None:
    """The lead's task settings the server stored: synced, with when they arrived there (their order
    among the team's other leads' settings)."""
    for item in arrived:
        for code in session.scalars(select(Task.code)):
            setting = task_setting_in(session, code)
            if setting is not None and setting.get("id") == str(item["b_id"]):
                row = session.get(Meta, SETTING_KEY.format(code=code))
                assert row is not None  # task_setting_in just read it
                row.value = json.dumps({**setting, "sync_state": SyncState.SYNCED.value,
                                        "received_at": item["b_at"].isoformat()})
