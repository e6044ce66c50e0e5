"""The desk's side of sync, in its own database: reading the outbox into wire records, settling
the outbox with the server's answers, storing pulled pages, and the local sync status.

Each function is one unit of work (``Database.write``) or one read; the network lives in
``sync.client``. Records go out in Dynadesk's record format (``app.io.records``) and come in
through a ``RecordWriter`` that maps rounds, contexts and models onto this desk's own rows.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Sequence

from sqlalchemy import bindparam, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload
from sqlalchemy.orm.attributes import set_committed_value

from app.domain import ReviewAction, SyncState
from app.errors import DynadeskError
from app.limits import record_problems
from app.io.records import RecordWriter, dump_example, dump_example_review, dump_person, dump_validation
from app.services.lead import review_order
from app.services.tasks import SETTING_KEY, agreement_threshold_in, store_threshold, task_setting_in
from app.storage import outbox
from app.storage.db import Database
from app.storage.models import (
    Context,
    Example,
    ExampleReview,
    Meta,
    ModelRecord,
    OutboxEntry,
    Person,
    Round,
    RoundModel,
    Task,
    Validation,
)
from app.tasks.definition import TaskDefinition
from sync.protocol import RecordError, RecordResult

log = logging.getLogger(__name__)

LAST_SUCCESS = "sync.last_success"
LAST_ERROR = "sync.last_error"
PERSON = "sync.person"


def cursor_key(server_url: str, person_id: uuid.UUID) -> str:
    digest = hashlib.sha1(f"{server_url.rstrip('/')}|{person_id}".encode()).hexdigest()[:20]
    return f"sync.cursor.{digest}"


def get_meta(session: Session, key: str) -> str | None:
    row = session.get(Meta, key)
    return row.value if row is not None else None


def set_meta(session: Session, key: str, value: str) -> None:
    row = session.get(Meta, key)
    if row is None:
        session.add(Meta(key=key, value=value))
    else:
        row.value = value


# --- going out ------------------------------------------------------------------------------


@dataclass
class Outgoing:
    """One batch read from the outbox: the entries and their records in wire form."""

    entries: list[OutboxEntry]
    records: list[dict]  # same order as the entries; person records (imported authors) come first
    people: int = 0  # how many leading records are person records
    missing: list[OutboxEntry] = field(default_factory=list)  # entries whose record is gone
    # Entries whose record no server would take (a free-form field nested too deep or too large), with why.
    unfit: list[tuple[OutboxEntry, str]] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return max((e.seq for e in [*self.entries, *self.missing, *(e for e, _ in self.unfit)]), default=0)


def unfit_published(task: Task, models: Iterable[ModelRecord], rounds: Iterable[Round], contexts: Iterable[Context],
                    round_numbers: dict[uuid.UUID, int]) -> list[str]:
    """What keeps each record of a publish from any server (a free-form field nested too deep or
    too large), naming the record and the field."""
    named = [(f"task {task.code}", "task", task), *((f"model {m.name}", "model", m) for m in models),
             *((f"round {r.number}", "round", r) for r in rounds),
             *((f"context {c.id} of round {round_numbers[c.round_id]}", "context", c) for c in contexts)]
    return [f"{what}: {problem}" for what, kind, record in named for problem in record_problems(kind, record)]


def pending_batch(db: Database, person_id: uuid.UUID, *, after: int, limit: int) -> Outgoing:
    """The next ``limit`` pending entries of ``person_id`` after outbox position ``after``."""
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
        hashes = dict(session.execute(select(Context.id, Context.content_hash).where(Context.id.in_(context_ids))).all())
        authors = {x.author_id for x in examples.values()} | {v.validator_id for v in validations.values()}
        others = [p for p in session.scalars(select(Person).where(Person.id.in_(authors - {person_id})))]

        batch = Outgoing(entries=[], records=[])
        # Imported data sets go out under their own (pseudonymous) authors, sent along first.
        batch.records = [dump_person(p) for p in others]
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
            batch.entries.append(entry)
            batch.records.append(record)
        return batch


def _queued_settings(session: Session, codes) -> dict[uuid.UUID, dict]:
    """The lead's task settings this desk holds, by id, in their wire form (a desk holds one per task)."""
    out = {}
    for code in codes:
        setting = task_setting_in(session, code)
        if setting is not None:
            out[uuid.UUID(setting["id"])] = {k: v for k, v in setting.items()
                                             if k not in ("received_at", "sync_state")}
    return out


# The records that go through the outbox, by kind: each has a revision and a sync_state.
SYNCED_TABLES = {"example": Example, "validation": Validation, "example_review": ExampleReview}


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

    entries = OutboxEntry.__table__
    with db.write() as session:
        if done_entries:
            # Only if it was not changed again meanwhile (a retraction raises the entry's revision).
            session.execute(entries.delete().where(entries.c.seq == bindparam("b_seq"),
                                                   entries.c.revision <= bindparam("b_rev")), done_entries)
        for kind, rows in done.items():
            table = SYNCED_TABLES[kind].__table__
            if rows:  # updated_at stays as it was: it is part of the record as the server stores it
                session.execute(table.update().where(table.c.id == bindparam("b_id"), table.c.revision == bindparam("b_rev"))
                                .values(sync_state=SyncState.SYNCED.value, updated_at=table.c.updated_at), rows)
        if judged:  # the server judges "fooled"; this desk shows its judgement
            table = Example.__table__
            session.execute(table.update().where(table.c.id == bindparam("b_id"))
                            .values(model_fooled=bindparam("b_fooled"), updated_at=table.c.updated_at), judged)
        _settle_settings(session, arrived["task_setting"])
        if arrived["example_review"]:
            table = ExampleReview.__table__
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
            if setting is not None and setting["id"] == str(item["b_id"]):
                row = session.get(Meta, SETTING_KEY.format(code=code))
                row.value = json.dumps({**setting, "sync_state": SyncState.SYNCED.value,
                                        "received_at": item["b_at"].isoformat()})


# --- coming in ------------------------------------------------------------------------------------


@dataclass
class PullReport:
    added: dict[str, int] = field(default_factory=dict)
    updated: int = 0
    already_present: int = 0
    skipped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def count(self, kind: str, n: int = 1) -> None:
        self.added[kind] = self.added.get(kind, 0) + n


class _SessionTasks:
    """Task definitions as this session sees them (a task added in this page included)."""

    def __init__(self, session: Session):
        self.session = session
        self.cache: dict[uuid.UUID, TaskDefinition] = {}

    def definition(self, task_id: uuid.UUID) -> TaskDefinition:
        if task_id not in self.cache:
            task = self.session.get(Task, task_id)
            if task is None:
                raise DynadeskError(f"task {task_id} is not on this desk")
            self.cache[task_id] = TaskDefinition.model_validate(task.definition)
        return self.cache[task_id]

    def agreement_threshold(self, task_id: uuid.UUID) -> int:
        return agreement_threshold_in(self.session, self.definition(task_id))


class _DeskView:
    def __init__(self, session: Session):
        self.tasks = _SessionTasks(session)


class PulledRecordWriter(RecordWriter):
    """``RecordWriter`` for pulled pages: pulled examples and validations are synced (never pushed
    back); records that changed on the server update the desk's copy where the rules allow
    (an example's status, a round's settings); references only fill in what is missing.

    ``careful=False`` stores the page in bulk (one flush); ``careful=True`` flushes record by
    record, so that a record this desk cannot take is skipped alone."""

    def __init__(self, session: Session, report: PullReport, referenced: set[uuid.UUID], *,
                 present: dict[str, set[uuid.UUID]], careful: bool):
        super().__init__(session, _DeskView(session), report, flush_each=careful)
        self.referenced = referenced
        self.present = present  # ids of examples, validations and reviews this desk has
        self.synced: dict[str, list[uuid.UUID]] = {kind: [] for kind in SYNCED_TABLES}
        self.validated: set[uuid.UUID] = set()
        self.reviewed: set[uuid.UUID] = set()  # examples whose latest review must be looked at again
        self.rethreshold: set[uuid.UUID] = set()  # tasks whose team threshold arrived in this page
        self._tasks: dict[str, Task] = {}

    def _changed(self, r: dict) -> bool:
        return uuid.UUID(r["id"]) not in self.referenced

    def _task(self, code: str) -> Task:
        # Cached: a query here would flush the page's pending rows once per record.
        if code not in self._tasks:
            self._tasks[code] = super()._task(code)
        return self._tasks[code]

    def _present(self, model, record_id: uuid.UUID) -> bool:
        kind = {model_: kind_ for kind_, model_ in SYNCED_TABLES.items()}.get(model)
        if kind is None:
            return super()._present(model, record_id)
        if record_id in self.present[kind]:
            self.report.already_present += 1
            return True
        return False

    def _write_person(self, r: dict) -> None:
        existing = self.session.get(Person, uuid.UUID(r["id"]))
        if existing is None:
            return super()._write_person(r)
        self.report.already_present += 1
        if self._changed(r) and (existing.display_name, existing.role) != (r["display_name"], r["role"]):
            existing.display_name, existing.role = r["display_name"][:200], r["role"]
            self.report.updated += 1

    def _write_task(self, r: dict) -> None:
        task = self.session.scalar(select(Task).where(Task.code == r["code"]))
        if task is None:
            definition = TaskDefinition.model_validate(r["definition"])
            task_id = uuid.UUID(r["id"])
            if self.session.get(Task, task_id) is not None:
                task_id = uuid.uuid4()
            self.session.add(Task(id=task_id, code=definition.code, name=r["name"],
                                  definition=definition.model_dump(mode="json"), fingerprint=definition.fingerprint()))
            self.session.flush()
            self._tasks.pop(definition.code, None)
            self.report.count("tasks")
        elif task.fingerprint != r["fingerprint"] and self._changed(r):
            # The desk's definition comes from its task files, which win at every start; say so.
            self.report.warnings.append(
                f"task '{r['code']}' is defined differently on the server; the server checks examples against its "
                "own definition. Update this desk's task file to match.")
            self.report.already_present += 1
        else:
            self.report.already_present += 1

    def _write_round(self, r: dict) -> None:
        task = self._task(r["task"])
        same = self.session.scalar(select(Round).where(Round.task_id == task.id, Round.number == int(r["number"])))
        if same is None:
            return super()._write_round(r)
        self.ids[uuid.UUID(r["id"])] = same.id
        self.report.already_present += 1
        if not self._changed(r):
            return
        # A published round changed on the server: the server's status, texts and models win.
        changed = False
        for key in ("description", "goal_message", "status", "fooled_rule", "settings"):
            value = r.get(key)
            if value is not None and getattr(same, key) != value:
                setattr(same, key, value)
                changed = True
        for key in ("opened_at", "closed_at"):
            value = datetime.fromisoformat(r[key]) if r.get(key) else None
            if getattr(same, key) != value:
                setattr(same, key, value)
                changed = True
        targets = [self.ref(m, "model id") for m in r.get("target_models") or []]
        current = list(self.session.scalars(select(RoundModel.model_id).where(RoundModel.round_id == same.id)
                                            .order_by(RoundModel.position)))
        if targets != current:
            self.session.execute(delete(RoundModel).where(RoundModel.round_id == same.id))
            self.session.add_all(RoundModel(round_id=same.id, model_id=m, position=i) for i, m in enumerate(targets))
            changed = True
        if changed:
            self.report.updated += 1

    def _write_example(self, r: dict) -> None:
        example_id = uuid.UUID(r["id"])
        if example_id in self.present["example"]:
            self.report.already_present += 1
            if self._changed(r):
                existing = self.session.get(Example, example_id)
                if int(r["revision"]) > existing.revision and r["status"] != existing.status:
                    existing.status, existing.status_reason = r["status"], r.get("status_reason")
                    existing.revision = int(r["revision"])
                    existing.updated_at = datetime.fromisoformat(r["updated_at"])
                    self.report.updated += 1
                if r.get("model_fooled") is not existing.model_fooled:  # the server judges "fooled"
                    existing.model_fooled = r.get("model_fooled")
                    for output, sent in zip(sorted(existing.outputs, key=lambda o: o.position), r.get("outputs") or []):
                        output.fooled = sent.get("fooled")
                    self.report.updated += 1
            return
        r = dict(r)
        r.pop("duplicate_of", None)
        parent = self.ref(r["perturbation_of"], "example id") if r.get("perturbation_of") else None
        if parent is not None and parent not in self.present["example"] and self.session.get(Example, parent) is None:
            # The original is not on this desk (it is not this person's to see); the origin keeps its id.
            r["perturbation_of"] = None
        super()._write_example(r)
        self.present["example"].add(example_id)
        self.synced["example"].append(example_id)

    def _write_validation(self, r: dict) -> None:
        validation_id = uuid.UUID(r["id"])
        if validation_id in self.present["validation"]:
            self.report.already_present += 1
            return
        super()._write_validation(r)
        self.present["validation"].add(validation_id)
        self.synced["validation"].append(validation_id)
        self.validated.add(self.ref(r["example"], "example id"))

    def _write_example_review(self, r: dict) -> None:
        review_id = uuid.UUID(r["id"])
        if review_id in self.present["example_review"]:
            self.report.already_present += 1
            return
        example_id = self.ref(r["example"], "example id")
        if example_id not in self.present["example"] and self.session.get(Example, example_id) is None:
            raise DynadeskError(f"it reviews example {example_id}, which is not on this desk")
        self.session.add(ExampleReview(id=review_id, example_id=example_id, lead_id=self.ref(r["lead"], "person id"),
                                       action=ReviewAction(r["action"]).value, comment=r.get("comment"),
                                       sync_state=SyncState.SYNCED.value, revision=int(r.get("revision") or 1),
                                       created_at=datetime.fromisoformat(r["created_at"]),
                                       updated_at=datetime.fromisoformat(r["updated_at"]),
                                       received_at=datetime.fromisoformat(r["received_at"])
                                       if r.get("received_at") else None))
        if self.flush_each:
            self.session.flush()
        self.present["example_review"].add(review_id)
        self.reviewed.add(example_id)
        self.report.count("reviews")

    def _write_task_setting(self, r: dict) -> None:
        """A lead of this team set the task's threshold: the latest to reach the server is in force here too."""
        task = self._task(r["task"])
        definition = self.desk.tasks.definition(task.id)
        held = task_setting_in(self.session, r["task"])
        if held is not None and held["id"] == r["id"]:
            self.report.already_present += 1
            return
        if held is not None and held.get("sync_state") == SyncState.PENDING.value:
            self.report.already_present += 1  # this desk's lead set it since: theirs reaches the server last
            return
        if held is not None and held.get("received_at") and r.get("received_at") and \
                datetime.fromisoformat(held["received_at"]) >= datetime.fromisoformat(r["received_at"]):
            self.report.already_present += 1  # a newer one is in force here already
            return
        threshold = int(r["agreement_threshold"])
        store_threshold(self.session, definition, threshold, {**r, "sync_state": SyncState.SYNCED.value})
        self.rethreshold.add(task.id)
        self.report.count("task settings")

    def finish(self) -> None:
        # Examples that arrived without verdicts already have an empty summary; only those that
        # got verdicts in this page need theirs recomputed.
        self.touched = set(self.validated)
        if self.rethreshold:  # the team's threshold changed: every validated example of the task again
            self.session.flush()
            self.touched |= set(self.session.scalars(select(Example.id).where(
                Example.task_id.in_(self.rethreshold), Example.validation_count > 0)))
        super().finish()
        self._apply_latest_reviews()

    def _apply_latest_reviews(self) -> None:
        """Each reviewed example shows its latest review in the server's arrival order (``review_order``),
        the same on every desk whatever order the reviews reached this one."""
        if not self.reviewed:
            return
        self.session.flush()
        latest: dict[uuid.UUID, ExampleReview] = {}
        ids = sorted(self.reviewed)
        for start in range(0, len(ids), 900):
            for review in self.session.scalars(select(ExampleReview).where(
                    ExampleReview.example_id.in_(ids[start:start + 900]))):
                best = latest.get(review.example_id)
                if best is None or review_order(review) > review_order(best):
                    latest[review.example_id] = review
        current = {row.id: row for start in range(0, len(ids), 900) for row in self.session.execute(
            select(Example.id, Example.review_state, Example.review_comment, Example.reviewed_at)
            .where(Example.id.in_(ids[start:start + 900])))}
        changes = []
        for example_id, review in latest.items():
            state = (review.action, review.comment, review.created_at)
            if example_id in current and tuple(current[example_id][1:]) != state:
                changes.append({"b_id": example_id, "b_state": review.action, "b_comment": review.comment,
                                "b_at": review.created_at})
        if not changes:
            return
        table = Example.__table__
        # updated_at stays as it was: it is part of the example as its author wrote it
        self.session.execute(table.update().where(table.c.id == bindparam("b_id"))
                             .values(review_state=bindparam("b_state"), review_comment=bindparam("b_comment"),
                                     reviewed_at=bindparam("b_at", type_=Example.reviewed_at.type),
                                     updated_at=table.c.updated_at), changes)
        for change in changes:
            row = self.session.identity_map.get(self.session.identity_key(Example, change["b_id"]))
            if row is not None:
                set_committed_value(row, "review_state", change["b_state"])
                set_committed_value(row, "review_comment", change["b_comment"])
                set_committed_value(row, "reviewed_at", change["b_at"])
        self.report.updated += len(changes)

    def mark_synced(self) -> None:
        self.session.flush()
        for kind, model in SYNCED_TABLES.items():
            ids = self.synced[kind]
            if not ids:
                continue
            table = model.__table__
            self.session.execute(table.update().where(table.c.id == bindparam("b_id"))
                                 .values(sync_state=SyncState.SYNCED.value, updated_at=table.c.updated_at),
                                 [{"b_id": i} for i in ids])
            for record_id in ids:
                row = self.session.identity_map.get(self.session.identity_key(model, record_id))
                if row is not None:
                    set_committed_value(row, "sync_state", SyncState.SYNCED.value)


def _present(session: Session, records: list[dict]) -> dict[str, set[uuid.UUID]]:
    out: dict[str, set[uuid.UUID]] = {}
    for kind, model in SYNCED_TABLES.items():
        ids = [uuid.UUID(r["id"]) for r in records if r.get("record") == kind]
        found: set[uuid.UUID] = set()
        for start in range(0, len(ids), 900):
            found.update(session.scalars(select(model.id).where(model.id.in_(ids[start:start + 900]))))
        out[kind] = found
    return out


def apply_page(db: Database, records: Iterable[Any], referenced: Iterable[uuid.UUID], *, key: str,
               cursor: int) -> PullReport:
    """Store one pulled page and move the cursor past it, in one unit of work: an interrupted pull
    resumes at the first page that was not stored. The page goes in bulk; if any record of it
    cannot be stored, the page is stored again record by record, skipping (and naming) those."""
    data = [record if isinstance(record, dict) else record.model_dump(mode="json") for record in records]
    referenced = set(referenced)
    try:
        return _apply(db, data, referenced, key=key, cursor=cursor, careful=False)
    except (DynadeskError, IntegrityError) as exc:
        log.info("a pulled page needs storing record by record (%s)", exc)
        return _apply(db, data, referenced, key=key, cursor=cursor, careful=True)


def _apply(db: Database, data: list[dict], referenced: set[uuid.UUID], *, key: str, cursor: int,
           careful: bool) -> PullReport:
    report = PullReport()
    with db.write() as session:
        writer = PulledRecordWriter(session, report, referenced, present=_present(session, data), careful=careful)
        for record in data:
            if not careful:
                writer.write(record)
                continue
            try:
                with session.begin_nested():  # a record this desk cannot take leaves nothing half-written
                    writer.write(record)
            except (DynadeskError, IntegrityError) as exc:
                message = str(exc.orig) if isinstance(exc, IntegrityError) else str(exc)
                report.skipped.append(f"{record.get('record')} {record.get('id')}: {message}")
                log.warning("pulled %s %s not stored: %s", record.get("record"), record.get("id"), message)
        writer.finish()
        writer.mark_synced()
        set_meta(session, key, str(cursor))
    return report


# --- status --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingReason:
    """One reason the server put records off, how many wait for it, and what fixes it."""

    reason: str  # the server's words, e.g. "task 'hate_speech' is not published on this server yet"
    count: int
    fix: str  # who must do what, e.g. "the owner must run `dynadesk sync publish hate_speech`"


# The server's "deferred" reasons (sync/server/store/push.py) and what fixes each; the first match wins.
_FIXES = (
    (re.compile(r"task '(?P<task>[^']+)' is not published"), "the owner must run `dynadesk sync publish {task}`"),
    (re.compile(r"publish task '(?P<task>[^']+)' first"), "the owner must run `dynadesk sync publish {task}`"),
    (re.compile(r"round (?P<round>\d+) of '(?P<task>[^']+)' is not published"),
     "the owner must publish round {round}: `dynadesk sync publish {task} --round {round}`"),
    (re.compile(r"its context is not published in round (?P<round>\d+)"),
     "the owner must publish round {round} again with its contexts: `dynadesk sync publish {task} --round {round}`"),
    (re.compile(r"model (?P<model>\S+) is not published"),
     "the owner must publish the round with its target model: `dynadesk sync publish {task}`"),
    (re.compile(r"example \S+ is not on the server yet"),
     "its example goes first; it waits for the example's own reason, or the example's author must sync"),
)


def fix_for(reason: str, task: str | None) -> str:
    """What fixes a deferred record, in words a person can act on."""
    for pattern, fix in _FIXES:
        found = pattern.search(reason)
        if found:
            return fix.format(**{"task": task or "TASK", **found.groupdict()})
    return "it goes out once the server has what it refers to; the owner may need to run `dynadesk sync publish TASK`"


def waiting_reasons(session: Session, person_id: uuid.UUID | None) -> tuple[WaitingReason, ...]:
    """This person's deferred outbox entries, grouped by the server's reason, most first."""
    query = (select(OutboxEntry.last_error, func.count(), func.min(Example.task_id))
             .outerjoin(Example, (OutboxEntry.kind == "example") & (Example.id == OutboxEntry.record_id))
             .where(OutboxEntry.state == outbox.PENDING, OutboxEntry.last_error.like("deferred:%"))
             .group_by(OutboxEntry.last_error))
    if person_id is not None:
        query = query.where(OutboxEntry.person_id == person_id)
    rows = session.execute(query).all()
    codes = dict(session.execute(select(Task.id, Task.code).where(Task.id.in_({r[2] for r in rows if r[2]}))).all())
    out = [WaitingReason(error.removeprefix("deferred:").strip(), n,
                         fix_for(error, codes.get(task_id))) for error, n, task_id in rows]
    return tuple(sorted(out, key=lambda w: (-w.count, w.reason)))


@dataclass(frozen=True)
class LocalStatus:
    pending: int  # this person's records waiting to go out
    deferred: int  # of those, records the server put off (they refer to something it does not have yet)
    held: int  # other profiles' records (they sync with their own token)
    rejected: int
    conflicts: int
    last_success: datetime | None
    last_error: str | None
    waiting: tuple[WaitingReason, ...] = ()  # why the deferred records wait, and what fixes it


def local_status(db: Database, person_id: uuid.UUID | None) -> LocalStatus:
    with db.read() as session:
        counts = outbox.counts(session, person_id)
        last = get_meta(session, LAST_SUCCESS)
        error = get_meta(session, LAST_ERROR)
        waiting = waiting_reasons(session, person_id) if counts["deferred"] else ()
    return LocalStatus(pending=counts[outbox.PENDING], deferred=counts["deferred"], held=counts["held"],
                       rejected=counts[outbox.REJECTED],
                       conflicts=counts[outbox.CONFLICT], last_success=datetime.fromisoformat(last) if last else None,
                       last_error=error or None, waiting=waiting)


def problems(db: Database, limit: int = 200) -> list[OutboxEntry]:
    """Outbox entries the server refused, newest first, with its reasons."""
    with db.read() as session:
        return list(session.scalars(select(OutboxEntry).where(OutboxEntry.state != outbox.PENDING)
                                    .order_by(OutboxEntry.updated_at.desc()).limit(limit)))


def retry_problems(db: Database) -> int:
    """Put refused entries back in line (after the cause was fixed, e.g. a round was published)."""
    with db.write() as session:
        result = session.execute(update(OutboxEntry).where(OutboxEntry.state != outbox.PENDING)
                                 .values(state=outbox.PENDING, last_error=None))
        return result.rowcount


def note(db: Database, *, success: datetime | None = None, error: str | None = None) -> None:
    with db.write() as session:
        if success is not None:
            set_meta(session, LAST_SUCCESS, success.isoformat())
            set_meta(session, LAST_ERROR, "")
        if error is not None:
            set_meta(session, LAST_ERROR, error[:2000])
