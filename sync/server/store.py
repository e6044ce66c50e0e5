"""What the server does with records: push, publish, pull, team figures. No HTTP here.

Rules (issue #6):
- Push is idempotent by record id and revision. The same revision with the same content is
  ``already_stored``; anything else that disagrees with what the server holds is a
  ``conflict``, reported with the server's version and never overwritten.
- Submitted examples are immutable except for their status (submitted → flagged → retracted,
  by a higher revision). Validations and lead reviews (accept/return) are append-only; only
  leads and owners of the example's team review.
- Nobody writes as someone else: an example's author and a validation's validator must be the
  token's holder. The one exception: owners publishing an imported data set write it under the
  data set's own (pseudonymous, token-less) authors.
- "Fooled" is judged here (``judge``), never taken from a desk, for every example by someone with
  an account: the figures that rate annotators must not be forgeable by them (docs/sync.md).
- A request with a forbidden record stores nothing (403, every such record named); a record
  that breaks a content rule is ``rejected`` on its own, with the rule in its words.
- Every stored change gets the next number of one counter, taken at the very end of the
  transaction. The counter row lock orders commits, so changes become visible in number order
  and "changes since N" never skips one that commits late. Duplicate texts are looked for
  under the same lock, so two desks sending the same text at once still get one marked.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Any, Iterable, Sequence

from pydantic import ValidationError
from sqlalchemy import LargeBinary, Text, and_, bindparam, case, cast, delete, exists, func, insert, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.domain import ExampleStatus, FooledRule, ModelOutput, ReviewAction, Role, Span, ValidationMode, Verdict, utcnow
from app.errors import DynadeskError, InvalidExample
from app.services.examples import Content, check_content, written_text
from app.services.stats import Figures
from app.services.validation import summarise
from app.tasks.definition import TaskDefinition
from app.tasks.fooling import is_fooled
from app.text import content_hash, control_characters
from sync.protocol import (
    MAX_PULL_BYTES,
    TOKEN_PREFIX,
    ChangesResponse,
    ContextRecord,
    Duplicate,
    ExampleRecord,
    ExampleReviewRecord,
    FigureRow,
    ModelRecordWire,
    PersonRecord,
    RecordError,
    RecordResult,
    RoundRecord,
    TaskRecord,
    TaskSettingRecord,
    ValidationRecord,
    manifest_sha256,
    text_sha256,
)
from sync.server.db import ServerDatabase
from sync.server.models import (
    CHANGE_SEQ,
    Change,
    Context,
    Counter,
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

log = logging.getLogger(__name__)

LEADS = (Role.LEAD.value, Role.OWNER.value)
COUNTED = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value)
TRANSITIONS = {("submitted", "flagged"), ("submitted", "retracted"), ("flagged", "retracted")}
# Ids that each desk maps to its own rows (compared through round_number, context_hash, model_sha256).
MAPPED = {"round", "context", "duplicate_of"}
# How far ahead of the server's clock a record's times may be (a desk's clock a little fast, time zones
# set wrong); beyond that they are forged or broken, and would sort ahead of everything written later.
CLOCK_SLACK = timedelta(days=1)


class Forbidden(DynadeskError):
    """The request asks for something this person may not do; nothing of it was stored."""

    def __init__(self, detail: str, errors: Sequence[RecordError] = ()):
        super().__init__(detail)
        self.errors = list(errors)


# --- tokens ----------------------------------------------------------------------------------


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)  # 256 random bits


def hash_token(token: str) -> str:
    # Tokens carry 256 random bits, so a fast hash is enough: nobody can search that space, and
    # an exact-match index on the hash finds the person in one lookup. Slow password hashes
    # (argon2, bcrypt) protect guessable passwords, and would cost ~50 ms on every request.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def authenticate(db: ServerDatabase, token: str | None) -> Person | None:
    if not token or len(token) > 200 or not token.startswith(TOKEN_PREFIX):
        return None
    digest = hash_token(token)
    with db.read() as session:
        person = session.scalar(select(Person).where(Person.token_hash == digest))
    if person is None or not person.active or not hmac.compare_digest(person.token_hash or "", digest):
        return None
    return person


def add_person(db: ServerDatabase, name: str, role: Role | str, team: str = "default",
               person_id: uuid.UUID | None = None) -> tuple[Person, str]:
    """A person with a new token. The token is returned once and only its hash is kept."""
    name = " ".join(name.split())
    if not name or len(name) > 200:
        raise DynadeskError("A person needs a display name of 1 to 200 characters.")
    problem = _name_problem(name)
    if problem:
        raise DynadeskError(f"The display name {problem}.")
    role = Role(role)
    token = new_token()

    def work(session: Session) -> Person:
        if person_id is not None and session.get(Person, person_id) is not None:
            raise DynadeskError(f"There is already a person with id {person_id} on this server.")
        person = Person(display_name=name, role=role.value, team=team, token_hash=hash_token(token))
        if person_id is not None:
            person.id = person_id
        session.add(person)
        session.flush()
        _record_changes(session, [(person.id, "person", person.team, None)])
        return person

    return db.write_retrying(work), token


def _name_problem(name: str) -> str | None:
    found = control_characters(name)
    if found:
        return (f"holds control characters ({', '.join(found)}), which could rewrite what a terminal shows; "
                "use letters, digits, spaces and punctuation")
    return None


def new_token_for(db: ServerDatabase, who: str) -> tuple[Person, str]:
    """Replace a person's token (the old one stops working at once)."""
    token = new_token()

    def work(session: Session) -> Person:
        person = _find_person(session, who)
        person.token_hash = hash_token(token)
        person.active = True
        return person

    return db.write_retrying(work), token


def set_active(db: ServerDatabase, who: str, active: bool) -> Person:
    def work(session: Session) -> Person:
        person = _find_person(session, who)
        person.active = active
        return person

    return db.write_retrying(work)


def _find_person(session: Session, who: str) -> Person:
    try:
        person = session.get(Person, uuid.UUID(who))
    except ValueError:
        matches = list(session.scalars(select(Person).where(Person.display_name == who, Person.token_hash.is_not(None))))
        if len(matches) > 1:
            raise DynadeskError(f"{len(matches)} people are called '{who}'; give the id instead.") from None
        person = matches[0] if matches else None
    if person is None or person.token_hash is None:
        raise DynadeskError(f"There is no person '{who}' with an account on this server.")
    return person


def people(db: ServerDatabase) -> list[Person]:
    with db.read() as session:
        return list(session.scalars(select(Person).where(Person.token_hash.is_not(None))
                                    .order_by(Person.team, Person.display_name)))


# --- the wire form of server rows ----------------------------------------------------------------


def _stamps(row) -> dict:
    return {"id": row.id, "created_at": row.created_at, "updated_at": row.updated_at, "revision": row.revision}


def person_wire(p: Person) -> PersonRecord:
    return PersonRecord(record="person", display_name=p.display_name, role=p.role, team=p.team, **_stamps(p))


def task_wire(t: Task) -> TaskRecord:
    return TaskRecord(record="task", code=t.code, name=t.name, definition=t.definition, fingerprint=t.fingerprint,
                      **_stamps(t))


def model_wire(m: ModelRecord) -> ModelRecordWire:
    return ModelRecordWire(record="model", name=m.name, format=m.format, sha256=m.sha256, label_map=m.label_map,
                           task=m.task_code, provenance=m.provenance, files=m.files, **_stamps(m))


def round_wire(r: Round, task_code: str) -> RoundRecord:
    return RoundRecord(record="round", task=task_code, number=r.number, description=r.description,
                       goal_message=r.goal_message, status=r.status, fooled_rule=r.fooled_rule, opened_at=r.opened_at,
                       closed_at=r.closed_at, settings=r.settings, target_models=r.target_models, **_stamps(r))


def context_wire(c: Context, task_code: str, round_number: int) -> ContextRecord:
    return ContextRecord(record="context", round=c.round_id, task=task_code, round_number=round_number, text=c.text,
                         data=c.data, tag=c.tag, source=c.source, times_used=c.times_used, **_stamps(c))


def example_wire(e: Example, task_code: str, round_number: int, context_hash: str | None) -> ExampleRecord:
    return ExampleRecord(
        record="example", task=task_code, round=e.round_id, round_number=round_number, context=e.context_id,
        context_hash=context_hash, author=e.author_id, inputs=e.inputs, true_label=e.true_label, answer=e.answer,
        model_fooled=e.model_fooled, fooled_rule=e.fooled_rule, meta=e.meta, origin=e.origin,
        perturbation_of=e.perturbation_of, edit_ops=e.edit_ops, edit_distance=e.edit_distance, status=e.status,
        status_reason=e.status_reason, time_spent_ms=e.time_spent_ms, submitted_at=e.submitted_at, source=e.source,
        external_id=e.external_id, outputs=e.outputs, duplicate_of=e.duplicate_of, **_stamps(e))


def validation_wire(v: Validation) -> ValidationRecord:
    return ValidationRecord(record="validation", example=v.example_id, validator=v.validator_id, verdict=v.verdict,
                            corrected_label=v.corrected_label, reason=v.reason, model_note=v.model_note, mode=v.mode,
                            time_spent_ms=v.time_spent_ms, **_stamps(v))


def example_review_wire(r: ExampleReview) -> ExampleReviewRecord:
    return ExampleReviewRecord(record="example_review", example=r.example_id, lead=r.lead_id, action=r.action,
                               comment=r.comment, received_at=r.received_at, **_stamps(r))


def task_setting_wire(t: TaskSetting, task_code: str) -> TaskSettingRecord:
    return TaskSettingRecord(record="task_setting", task=task_code, agreement_threshold=t.agreement_threshold,
                             lead=t.lead_id, received_at=t.received_at, **_stamps(t))


def team_threshold(session: Session, team: str, task_id: uuid.UUID) -> int | None:
    """The agreement threshold a lead set for ``team``'s examples of a task (the latest to arrive), if any."""
    return session.scalar(select(TaskSetting.agreement_threshold)
                          .where(TaskSetting.team == team, TaskSetting.task_id == task_id)
                          .order_by(TaskSetting.received_at.desc(), TaskSetting.id.desc()).limit(1))


def comparable_example(record: dict) -> dict:
    """An example's wire form without what each side maps to its own ids (compared by natural key)."""
    out = {k: v for k, v in record.items() if k not in MAPPED}
    out["outputs"] = [{k: v for k, v in o.items() if k != "model"} for o in record.get("outputs") or []]
    return out


# --- writing ---------------------------------------------------------------------------------------


def _take_numbers(session: Session, n: int) -> list[int]:
    """The next ``n`` change numbers. The counter row stays locked until commit, so whatever
    follows in this transaction happens after every earlier writer committed."""
    top = session.execute(update(Counter).where(Counter.name == CHANGE_SEQ).values(value=Counter.value + n)
                          .returning(Counter.value)).scalar_one()
    return list(range(top - n + 1, top + 1))


def _write_changes(session: Session, changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]],
                   seqs: list[int], updated: set[uuid.UUID]) -> None:
    fresh = [{"record_id": rid, "kind": kind, "seq": seq, "team": team, "owner_id": owner}
             for (rid, kind, team, owner), seq in zip(changes, seqs) if rid not in updated]
    if fresh:
        session.execute(insert(Change), fresh)
    moved = [{"b_id": rid, "b_seq": seq} for (rid, *_), seq in zip(changes, seqs) if rid in updated]
    if moved:
        table = Change.__table__
        session.execute(table.update().where(table.c.record_id == bindparam("b_id")).values(seq=bindparam("b_seq")),
                        moved)
        # A changed record gets another chance in the feed (a round published again with fixed settings).
        for chunk in _chunks([m["b_id"] for m in moved]):
            session.execute(delete(Quarantined).where(Quarantined.record_id.in_(chunk)))


def _record_changes(session: Session, changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]],
                    updated: set[uuid.UUID] = frozenset()) -> list[int]:
    """Give each change the next number (in order) and point its record's change row at it.
    Must be the last thing a write does."""
    seqs = _take_numbers(session, len(changes))
    _write_changes(session, changes, seqs, updated)
    return seqs


@dataclass
class _Batch:
    """Shared look-ups and bookkeeping for one push or publish transaction."""

    session: Session
    me: Person
    results: list[RecordResult | None]
    changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]] = field(default_factory=list)
    updated: set[uuid.UUID] = field(default_factory=set)
    forbidden: list[RecordError] = field(default_factory=list)
    _tasks: dict[str, Task | None] = field(default_factory=dict)
    _definitions: dict[uuid.UUID, TaskDefinition] = field(default_factory=dict)
    _rounds: dict[tuple[uuid.UUID, int], Round | None] = field(default_factory=dict)
    _models: dict[str, ModelRecord | None] = field(default_factory=dict)
    now: datetime = field(default_factory=utcnow)  # when this request arrived: received_at, server_time

    def in_time(self, records: Sequence) -> list[tuple[int, Any]]:
        """The records whose times are not ahead of the server's clock (beyond the slack); the
        others are rejected, naming the time."""
        limit = self.now + CLOCK_SLACK
        kept = []
        for i, r in enumerate(records):
            late = next(((name, value) for name in _time_fields(type(r))
                         if (value := getattr(r, name)) is not None and value > limit), None)
            if late is None:
                kept.append((i, r))
                continue
            name, value = late
            self.result(i, r, "rejected", reason=(
                f"its {name} ({value.astimezone(timezone.utc):%Y-%m-%d %H:%M} UTC) is more than a day ahead of the "
                f"server's clock ({self.now:%Y-%m-%d %H:%M} UTC); check the date and time of the computer "
                "that wrote it"))
        return kept

    def result(self, index: int, record, status: str, *, revision: int | None = None, reason: str | None = None,
               server: dict | None = None) -> None:
        self.results[index] = RecordResult(index=index, id=record.id, record=record.record, status=status,
                                           revision=revision, reason=reason, server=server)

    def changed(self, row, kind: str, team: str | None, owner: uuid.UUID | None, *, is_new: bool) -> None:
        self.changes.append((row.id, kind, team, owner))
        if not is_new:
            self.updated.add(row.id)

    def task(self, code: str) -> Task | None:
        if code not in self._tasks:
            self._tasks[code] = self.session.scalar(select(Task).where(Task.code == code))
        return self._tasks[code]

    def definition(self, task: Task) -> TaskDefinition:
        if task.id not in self._definitions:
            self._definitions[task.id] = TaskDefinition.model_validate(task.definition)
        return self._definitions[task.id]

    def round(self, task: Task, number: int) -> Round | None:
        key = (task.id, number)
        if key not in self._rounds:
            self._rounds[key] = self.session.scalar(select(Round).where(Round.task_id == task.id, Round.number == number))
        return self._rounds[key]

    def model(self, sha256: str) -> ModelRecord | None:
        if sha256 not in self._models:
            self._models[sha256] = self.session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha256))
        return self._models[sha256]

    def target_shas(self, round_: Round) -> list[str]:
        """The sha256 of each of the round's target models, in the round's order."""
        models = [self.session.get(ModelRecord, uuid.UUID(str(m))) for m in round_.target_models]
        return [m.sha256 for m in models if m is not None]

    def finish(self) -> list[int]:
        if self.forbidden:
            raise Forbidden(f"{len(self.forbidden)} record(s) in this request are not yours to write; "
                            "nothing was stored.", self.forbidden)
        if not self.changes:
            return []
        self.session.flush()
        return _record_changes(self.session, self.changes, self.updated)


_TIME_FIELDS: dict[type, tuple[str, ...]] = {}


def _time_fields(kind: type) -> tuple[str, ...]:
    """The fields of a record kind that hold a time the sender chose (created_at, submitted_at, ...)."""
    if kind not in _TIME_FIELDS:
        _TIME_FIELDS[kind] = tuple(name for name, f in kind.model_fields.items()
                                   if "Datetime" in str(f.annotation) and name != "received_at")  # set by the server
    return _TIME_FIELDS[kind]


class _Row:
    """A row about to be inserted, with attribute access (for ``summarise``) over its values."""

    __slots__ = ("values",)

    def __init__(self, values: dict):
        object.__setattr__(self, "values", values)

    def __getattr__(self, name: str):
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name: str, value) -> None:
        self.values[name] = value


class _Push(_Batch):
    """One push. New examples, validations and reviews are inserted (as plain rows, in bulk) only after
    the change counter is taken, which also gives them their arrival order for duplicates."""

    def run(self, records: Sequence) -> list[RecordResult]:
        session = self.session
        timely = self.in_time(records)
        people = [(i, r) for i, r in timely if r.record == "person"]
        examples = [(i, r) for i, r in timely if r.record == "example"]
        validations = [(i, r) for i, r in timely if r.record == "validation"]
        reviews = [(i, r) for i, r in timely if r.record == "example_review"]
        settings = [(i, r) for i, r in timely if r.record == "task_setting"]
        # Lock, in one sorted pass, every stored example this request may change, before the
        # counter: concurrent pushes touching the same examples queue instead of deadlocking.
        # FOR NO KEY UPDATE leaves other writers' foreign-key checks on these rows unblocked.
        wanted = sorted({r.id for _, r in examples} | {r.example for _, r in validations}
                        | {r.example for _, r in reviews})
        self.examples: dict[uuid.UUID, Example | _Row] = {}
        for chunk in _chunks(wanted):
            self.examples.update((e.id, e) for e in session.scalars(
                select(Example).where(Example.id.in_(chunk)).order_by(Example.id).with_for_update(key_share=True)))
        self.existing_validations = {v.id: v for v in _fetch(session, Validation, [r.id for _, r in validations]).values()}
        self.validations_of: dict[uuid.UUID, list] = defaultdict(list)
        for chunk in _chunks(wanted):
            for v in session.scalars(select(Validation).where(Validation.example_id.in_(chunk))):
                self.validations_of[v.example_id].append(v)
        self.authors: dict[uuid.UUID, Person] = {self.me.id: self.me}
        self.new_examples: list[_Row] = []
        self.new_validations: list[_Row] = []
        self.existing_reviews = _fetch(session, ExampleReview, [r.id for _, r in reviews])
        self.new_reviews: dict[uuid.UUID, _Row] = {}
        self.thresholds: dict[tuple[str, uuid.UUID], int] = {}

        for i, r in settings:
            self._task_setting(i, r)
        for i, r in people:
            self._person(i, r)
        for i, r in examples:
            self._example(i, r)
        touched: dict[uuid.UUID, Example | _Row] = {}
        for i, r in validations:
            example = self._validation(i, r)
            if example is not None:
                touched[example.id] = example
        for example in touched.values():
            summarise(example, self.validations_of[example.id], self._threshold(example.team, example.task_id))
        for i, r in reviews:
            self._review(i, r)
        self.finish()
        return self.results

    def finish(self) -> list[int]:
        if self.forbidden:
            raise Forbidden(f"{len(self.forbidden)} record(s) in this request are not yours to write; "
                            "nothing was stored.", self.forbidden)
        if not self.changes:
            return []
        self.session.flush()  # people and status changes; their rows are locked already
        seqs = _take_numbers(self.session, len(self.changes))
        seq_of = {rid: seq for (rid, *_), seq in zip(self.changes, seqs)}
        if self.new_examples:
            for row in self.new_examples:
                row.stored_seq = seq_of[row.id]
            self._mark_duplicates()
            self.session.execute(insert(Example), [row.values for row in self.new_examples])
        if self.new_validations:
            self.session.execute(insert(Validation), [row.values for row in self.new_validations])
        if self.new_reviews:
            self.session.execute(insert(ExampleReview), [row.values for row in self.new_reviews.values()])
        _write_changes(self.session, self.changes, seqs, self.updated)
        return seqs

    def _definition_of(self, task_id: uuid.UUID) -> TaskDefinition:
        task = self.session.get(Task, task_id)
        return self.definition(task)

    def _threshold(self, team: str, task_id: uuid.UUID) -> int:
        """Matching peer verdicts that decide a team's example: its lead's setting, else the task definition's."""
        key = (team, task_id)
        if key not in self.thresholds:
            chosen = team_threshold(self.session, team, task_id)
            self.thresholds[key] = chosen if chosen is not None else self._definition_of(task_id).agreement_threshold
        return self.thresholds[key]

    # --- a lead's agreement threshold for the team ---------------------------------------------

    def _task_setting(self, i: int, r: TaskSettingRecord) -> None:
        lead = self._author(i, r, r.lead, "lead", imported=False)
        if lead is None:
            return
        if lead.role not in LEADS:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason=(
                f"{lead.display_name} is an {lead.role} on this server: only team leads and owners set how many "
                "matching verdicts decide an example")))
            return
        existing = self.session.get(TaskSetting, r.id)
        if existing is not None:
            task = self.session.get(Task, existing.task_id)
            server = task_setting_wire(existing, task.code).model_dump(mode="json", exclude={"received_at"})
            if server == r.model_dump(mode="json", exclude={"received_at"}):
                return self.result(i, r, "already_stored", revision=existing.revision,
                                   server={"received_at": existing.received_at.isoformat()})
            return self.result(i, r, "conflict", revision=existing.revision, server=server,
                               reason="task settings cannot be changed once stored; send a new one")
        task = self.task(r.task)
        if task is None:
            return self.result(i, r, "deferred", reason=f"task '{r.task}' is not published on this server yet")
        setting = TaskSetting(id=r.id, task_id=task.id, team=self.me.team, lead_id=lead.id,
                              agreement_threshold=r.agreement_threshold, created_at=r.created_at,
                              updated_at=r.updated_at, revision=r.revision, received_at=self.now)
        self.session.add(setting)
        self.thresholds[(self.me.team, task.id)] = r.agreement_threshold
        self.changed(setting, "task_setting", self.me.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)
        self._decide_again(task.id, r.agreement_threshold)

    def _decide_again(self, task_id: uuid.UUID, threshold: int) -> None:
        """Decide the team's validated examples of the task again under a new threshold; those whose
        decision changes go out on the change feed again."""
        session, team = self.session, self.me.team
        examples = list(session.scalars(select(Example).where(Example.team == team, Example.task_id == task_id,
                                                               Example.validation_count > 0)
                                        .order_by(Example.id).with_for_update(key_share=True)))
        verdicts: dict[uuid.UUID, list] = defaultdict(list)
        for chunk in _chunks([e.id for e in examples]):
            for v in session.scalars(select(Validation).where(Validation.example_id.in_(chunk))):
                verdicts[v.example_id].append(v)
        for example in examples:
            before = (example.validation_state, example.decided_verdict, example.decided_label)
            summarise(example, verdicts[example.id], threshold)
            if (example.validation_state, example.decided_verdict, example.decided_label) != before:
                self.examples.setdefault(example.id, example)
                self.changed(example, "example", example.team, example.author_id, is_new=False)

    # --- people (owners publishing an imported data set's pseudonymous authors) -----------

    def _person(self, i: int, r: PersonRecord) -> None:
        if self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="only owners send person records "
                                                                               "(the authors of an imported data set)"))
            return
        existing = self.session.get(Person, r.id)
        if existing is not None:
            if existing.token_hash is not None and existing.id != self.me.id:
                self.forbidden.append(RecordError(index=i, id=str(r.id),
                                                  reason=f"{existing.display_name} has an account; only they write as themselves"))
                return
            self.authors[existing.id] = existing
            self.result(i, r, "already_stored", revision=existing.revision)
            return
        problem = _name_problem(r.display_name)
        if problem:
            return self.result(i, r, "rejected", reason=f"its display_name {problem}")
        person = Person(id=r.id, display_name=r.display_name, role=Role.ANNOTATOR.value, team=self.me.team,
                        token_hash=None, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision)
        self.session.add(person)
        self.authors[person.id] = person
        self.changed(person, "person", person.team, None, is_new=True)
        self.result(i, r, "stored", revision=person.revision)

    def _author(self, i: int, r, person_id: uuid.UUID, what: str, imported: bool) -> Person | None:
        """The person a record is written as, if this token may write as them."""
        if person_id == self.me.id:
            return self.me
        person = self.authors.get(person_id) or self.session.get(Person, person_id)
        if imported and self.me.role == Role.OWNER.value and person is not None and person.token_hash is None:
            self.authors[person_id] = person
            return person
        if imported and self.me.role == Role.OWNER.value and person is None:
            self.result(i, r, "rejected", reason=f"its {what} {person_id} is not on the server; send their person "
                                                 "record in the same request")
            return None
        self.forbidden.append(RecordError(index=i, id=str(r.id), reason=f"its {what} is {person_id}, not you; "
                                                                          "nobody can write as someone else"))
        return None

    # --- examples -----------------------------------------------------------------------------

    def _example(self, i: int, r: ExampleRecord) -> None:
        author = self._author(i, r, r.author, "author", imported=r.source is not None)
        if author is None:
            return
        existing = self.examples.get(r.id)
        if isinstance(existing, _Row):  # the same record twice in one request
            return self.result(i, r, "already_stored", revision=existing.revision)
        if existing is not None:
            self._update_example(i, r, existing, author)
        else:
            self._insert_example(i, r, author)

    def _resolve(self, i: int, r: ExampleRecord, *, judge: bool) -> dict | None:
        """What the server stores for ``r``: its rows' ids, and the content as the task's rules
        keep it; with ``judge``, "fooled" as the server judges it (``_judge``). None when the
        record is deferred or rejected (its result is set)."""
        task = self.task(r.task)
        if task is None:
            return self.result(i, r, "deferred", reason=f"task '{r.task}' is not published on this server yet")
        definition = self.definition(task)
        round_ = self.round(task, r.round_number)
        if round_ is None:
            return self.result(i, r, "deferred", reason=f"round {r.round_number} of '{r.task}' is not published yet")
        try:
            answer = Span(r.answer.start, r.answer.end, r.answer.text) if r.answer else None
            checked = check_content(definition, Content(dict(r.inputs), r.true_label, answer, dict(r.meta)),
                                    require_metadata=r.source is None)
        except InvalidExample as exc:
            return self.result(i, r, "rejected", reason=str(exc))
        context_id = None
        if r.context is not None or r.context_hash is not None:
            context = self._context(round_, r.context, r.context_hash)
            if context is None:
                return self.result(i, r, "deferred", reason=f"its context is not published in round {round_.number} yet")
            context_id = context.id
        outputs = []
        for output in r.outputs:
            model = self.model(output.model_sha256)
            if model is None:
                return self.result(i, r, "deferred", reason=f"model {output.model_sha256[:12]}… is not published yet")
            outputs.append({**output.model_dump(mode="json"), "model": str(model.id)})
        model_fooled, fooled_rule, note = r.model_fooled, r.fooled_rule.value, None
        if judge:
            judged = self._judge(i, r, definition, round_, checked, outputs)
            if judged is None:
                return None
            model_fooled, note = judged
            fooled_rule = round_.fooled_rule
        text = written_text(definition, checked.inputs)
        return dict(
            task_id=task.id, round_id=round_.id, context_id=context_id, inputs=checked.inputs, text=text,
            true_label=checked.true_label, answer=checked.answer.to_json() if checked.answer else None,
            model_fooled=model_fooled, fooled_rule=fooled_rule, meta=checked.meta, origin=r.origin,
            perturbation_of=r.perturbation_of, edit_ops=r.edit_ops, edit_distance=r.edit_distance,
            time_spent_ms=r.time_spent_ms, submitted_at=r.submitted_at, source=r.source, external_id=r.external_id,
            outputs=outputs, created_at=r.created_at, _round=round_, _note=note)

    def _judge(self, i: int, r: ExampleRecord, definition: TaskDefinition, round_: Round, checked: Content,
               outputs: list[dict]) -> tuple[bool | None, str | None] | None:
        """Whether the round's target models were fooled, judged here from the outputs, the true label
        (or answer) and the round's rule, with the desk's one definition (``is_fooled``); the client's
        ``model_fooled`` and per-output ``fooled`` are replaced. Returns (fooled, a note for the author
        when that is not what their desk said), or None when the record is refused (result set).

        Outputs of any model but the round's targets (by sha256) are refused: an honest desk sends
        only its round's targets, and the server stores no output it does not judge by. An example
        without an output of every target is stored, but not as fooling: nothing here can judge it."""
        verdict = judge(definition, self.target_shas(round_), round_.fooled_rule, checked.true_label, checked.answer,
                        outputs)
        if verdict.foreign:
            named = ", ".join(f"{sha[:12]}…" for sha in verdict.targets) or "none"
            return self.result(i, r, "rejected", reason=(
                f"its output of model {verdict.foreign[0][:12]}… is not from a target model of round {round_.number} "
                f"(its targets: {named}); examples are judged against the round's target models only"))
        if verdict.repeated:
            return self.result(i, r, "rejected", reason="it has more than one output of the same target model")
        outputs[:] = verdict.outputs
        if verdict.fooled is None:
            lacks = (f"round {round_.number} has no target model" if not verdict.targets
                     else f"it carries no output of round {round_.number}'s target model(s)" if not outputs
                     else f"it lacks the output of target model(s) {', '.join(s[:12] + '…' for s in verdict.missing)} "
                          f"of round {round_.number}")
            return None, f"stored, but not counted as fooling the model: {lacks}"
        if verdict.fooled is r.model_fooled:
            return verdict.fooled, None
        return verdict.fooled, (f"the server judges it {'fooled' if verdict.fooled else 'not fooled'} by round "
                                f"{round_.number}'s target model(s) ({round_.fooled_rule} rule), and counts it so")

    def _insert_example(self, i: int, r: ExampleRecord, author: Person) -> None:
        # Imported data sets' own (token-less) authors are rated by nobody: their flag is labelled data.
        values = self._resolve(i, r, judge=author.token_hash is not None)
        if values is None:
            return
        round_, note = values.pop("_round"), values.pop("_note")
        problem = self._perturbation_problem(r, author)
        if problem:
            return self.result(i, r, "rejected", reason=problem)
        if round_.status == "closed" and round_.closed_at is not None and (
                r.submitted_at is None or r.submitted_at > round_.closed_at):
            return self.result(i, r, "rejected", reason=f"round {round_.number} of '{r.task}' closed at "
                                                        f"{round_.closed_at:%Y-%m-%d %H:%M} UTC, before this was submitted")
        row = _Row(dict(
            id=r.id, author_id=author.id, team=author.team, text_hash=text_sha256(values["text"]),
            status=r.status, status_reason=r.status_reason, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now, stored_seq=0, duplicate_of=None, validation_state="unvalidated",
            validation_count=0, flag_count=0, disagreement_count=0, decided_verdict=None, decided_label=None,
            **values))
        self.examples[r.id] = row
        self.new_examples.append(row)
        self.changed(row, "example", author.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision, reason=note, server=_judgement(row, r))

    def _perturbation_problem(self, r: ExampleRecord, author: Person) -> str | None:
        """A perturbation stays in its original's team (an original the server lacks is not checked:
        it may stay on its desk)."""
        if r.perturbation_of is None:
            return None
        original = self.examples.get(r.perturbation_of) or self.session.get(Example, r.perturbation_of)
        if original is not None and original.team != author.team:
            return (f"it is a perturbation of example {r.perturbation_of}, which belongs to another team; "
                    "perturb examples of your own team")
        return None

    def _context(self, round_: Round, context_id: uuid.UUID | None, digest: str | None) -> Context | None:
        if context_id is not None:
            context = self.session.get(Context, context_id)
            if context is not None and context.round_id == round_.id:
                return context
        if digest is not None:
            return self.session.scalar(select(Context).where(Context.round_id == round_.id,
                                                             Context.content_hash == digest))
        return None

    def _server_form(self, e: Example) -> dict:
        task = self.session.get(Task, e.task_id)
        round_ = self.session.get(Round, e.round_id)
        context = self.session.get(Context, e.context_id) if e.context_id else None
        record = example_wire(e, task.code, round_.number, context.content_hash if context else None)
        return _hide_foreign(record, _other_teams(self.session, self.me, [e.duplicate_of])).model_dump(mode="json")

    def _update_example(self, i: int, r: ExampleRecord, e: Example, author: Person) -> None:
        if e.author_id != r.author:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="this example belongs to someone else"))
            return
        values = self._resolve(i, r, judge=False)
        if values is None:
            return  # deferred or rejected: its content no longer fits what the server has
        for key in ("_round", "_note", "text"):
            values.pop(key)
        stored = {k: getattr(e, k) for k in values}
        if author.token_hash is not None:  # the server's judgement, made once when stored, is not the client's
            for side in (values, stored):
                side.pop("model_fooled"), side.pop("fooled_rule")
                side["outputs"] = [{k: v for k, v in o.items() if k != "fooled"} for o in side["outputs"]]
        different = sorted(k for k, v in values.items() if stored[k] != v)
        if different:
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"a submitted example cannot be edited (differs in {', '.join(different)}); "
                                      f"the server keeps revision {e.revision}")
        if r.revision == e.revision:
            if (r.status, r.status_reason) == (e.status, e.status_reason):
                return self.result(i, r, "already_stored", revision=e.revision,
                                   server=_judgement(e, r) if author.token_hash is not None else None)
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"revision {e.revision} on the server is {e.status}, here it is {r.status}")
        if r.revision < e.revision:
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"the server has a newer revision ({e.revision}, {e.status})")
        if r.status != e.status and (e.status, r.status) not in TRANSITIONS:
            return self.result(i, r, "rejected", revision=e.revision,
                               reason=f"a {e.status} example cannot become {r.status}")
        e.status, e.status_reason, e.updated_at, e.revision = r.status, r.status_reason, r.updated_at, r.revision
        self.changed(e, "example", e.team, self.me.id, is_new=False)
        self.result(i, r, "stored", revision=e.revision)

    # --- validations --------------------------------------------------------------------------

    def _validation(self, i: int, r: ValidationRecord):
        example = self.examples.get(r.example)
        imported = example is not None and example.source is not None
        validator = self._author(i, r, r.validator, "validator", imported=imported)
        if validator is None:
            return None
        if r.mode == ValidationMode.LEAD and validator.role not in LEADS and validator.token_hash is not None:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="only leads and owners adjudicate"))
            return None
        existing = self.existing_validations.get(r.id)
        if existing is not None:
            server = validation_wire(existing).model_dump(mode="json")
            if server == r.model_dump(mode="json"):
                self.result(i, r, "already_stored", revision=existing.revision)
            else:
                self.result(i, r, "conflict", revision=existing.revision, server=server,
                            reason="validations cannot be changed once stored")
            return None
        if example is None:
            self.result(i, r, "deferred", reason=f"example {r.example} is not on the server yet")
            return None
        if example.team != self.me.team and self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="the example belongs to another team"))
            return None
        if example.author_id == r.validator:
            self.result(i, r, "rejected", reason="Nobody validates their own example.")
            return None
        for other in self.validations_of[example.id]:
            if other.validator_id == r.validator and other.mode == r.mode.value:
                if other.id == r.id:  # the same validation twice in one request
                    self.result(i, r, "already_stored", revision=other.revision)
                else:
                    self.result(i, r, "conflict", revision=other.revision,
                                server=validation_wire(other).model_dump(mode="json") if isinstance(other, Validation)
                                else None,
                                reason=f"this person already validated this example (validation {other.id})")
                return None
        problem = _verdict_problem(self._definition_of(example.task_id), example, r)
        if problem:
            self.result(i, r, "rejected", reason=problem)
            return None
        row = _Row(dict(
            id=r.id, example_id=example.id, validator_id=r.validator, team=example.team, verdict=r.verdict.value,
            corrected_label=r.corrected_label, reason=r.reason, model_note=r.model_note, mode=r.mode.value,
            time_spent_ms=r.time_spent_ms, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now))
        self.new_validations.append(row)
        self.validations_of[example.id].append(row)
        self.changed(row, "validation", example.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)
        return example

    # --- lead reviews (accept / return) -------------------------------------------------------

    def _review(self, i: int, r: ExampleReviewRecord) -> None:
        lead = self._author(i, r, r.lead, "lead", imported=False)
        if lead is None:
            return
        if lead.role not in LEADS:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason=(
                f"{lead.display_name} is an {lead.role} on this server: only team leads and owners accept or "
                "return work")))
            return
        existing = self.existing_reviews.get(r.id)
        if existing is not None:
            server = example_review_wire(existing).model_dump(mode="json", exclude={"received_at"})
            if server == r.model_dump(mode="json", exclude={"received_at"}):  # a resend: when it first came
                return self.result(i, r, "already_stored", revision=existing.revision,
                                   server={"received_at": existing.received_at.isoformat()})
            return self.result(i, r, "conflict", revision=existing.revision, server=server,
                               reason="reviews cannot be changed once stored")
        if r.id in self.new_reviews:  # the same review twice in one request
            return self.result(i, r, "already_stored", revision=self.new_reviews[r.id].revision)
        example = self.examples.get(r.example)
        if example is None:
            return self.result(i, r, "deferred", reason=f"example {r.example} is not on the server yet")
        if example.team != self.me.team and self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="the example belongs to another team"))
            return
        if example.author_id == r.lead:
            return self.result(i, r, "rejected", reason="Nobody accepts or returns their own example.")
        if r.action == ReviewAction.RETURNED and not (r.comment or "").strip():
            return self.result(i, r, "rejected", reason="Returning work needs a comment for the annotator.")
        row = _Row(dict(
            id=r.id, example_id=example.id, lead_id=r.lead, team=example.team, action=r.action.value,
            comment=r.comment, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now))
        self.new_reviews[r.id] = row
        self.changed(row, "example_review", example.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)

    # --- duplicates ---------------------------------------------------------------------------

    def _mark_duplicates(self) -> None:
        """Each new example whose text an earlier example of its round already has points at the
        earliest. Runs while the counter is taken, so every earlier example is visible."""
        rounds = sorted({row.round_id for row in self.new_examples})
        hashes = sorted({row.text_hash for row in self.new_examples})
        first: dict[tuple[uuid.UUID, str], tuple[int, uuid.UUID]] = {}
        for chunk in _chunks(hashes):
            rows = self.session.execute(
                select(Example.id, Example.round_id, Example.text_hash, Example.stored_seq)
                .where(Example.round_id.in_(rounds), Example.text_hash.in_(chunk)))
            for example_id, round_id, digest, seq in rows:
                key = (round_id, digest)
                if key not in first or seq < first[key][0]:
                    first[key] = (seq, example_id)
        for row in self.new_examples:  # in arrival order
            key = (row.round_id, row.text_hash)
            if key in first:
                row.duplicate_of = first[key][1]
            else:
                first[key] = (row.stored_seq, row.id)


@dataclass(frozen=True)
class Judgement:
    """Whether a round's target models were fooled by an example, as the server judges it.
    ``fooled`` is None (not counted as fooling) unless there is exactly one output of each target
    and nothing else; ``outputs`` are the example's outputs, each with its own ``fooled``."""

    fooled: bool | None
    outputs: list[dict]
    targets: list[str]
    foreign: list[str]  # sha256 of outputs whose model is not a target
    repeated: bool  # a target answered twice
    missing: list[str]  # targets without an output


def judge(definition: TaskDefinition, targets: Sequence[str], rule: str, true_label: str | None, answer: Span | None,
          outputs: Sequence[dict]) -> Judgement:
    """The server's judgement, with the desk's one definition of "fooled" (``is_fooled``), from the
    outputs in wire form (model sha256, label, probabilities, answer), never from their ``fooled``."""
    targets = list(targets)
    shas = [o["model_sha256"] for o in outputs]
    models = [ModelOutput(uuid.UUID(str(o["model"])), o["model_sha256"], o["label"], dict(o.get("probabilities") or {}),
                          o.get("latency_ms"), Span.from_json(o.get("answer"))) for o in outputs]
    judged = [{**wire, "fooled": is_fooled(definition, [model], true_label, answer)}  # each on its own, as desks do
              for wire, model in zip(outputs, models)]
    foreign = [sha for sha in shas if sha not in targets]
    repeated = len(set(shas)) != len(shas)
    missing = [sha for sha in targets if sha not in shas]
    fooled = None
    if targets and not (foreign or repeated or missing):
        fooled = is_fooled(definition, models, true_label, answer, FooledRule(rule))
    return Judgement(fooled, judged, targets, foreign, repeated, missing)


def _judgement(e: Example | _Row, r: ExampleRecord) -> dict | None:
    """The server's "fooled", for a push result, when it is not what the author's desk sent."""
    return None if e.model_fooled is r.model_fooled else {"model_fooled": e.model_fooled}


def _chunks(items: list, size: int = 1000):
    for start in range(0, len(items), size):
        yield items[start:start + size]


def _verdict_problem(definition: TaskDefinition, example: Example, r: ValidationRecord) -> str | None:
    """The verdict rules of ``ValidationService`` that do not depend on what else arrived first."""
    if r.verdict == Verdict.INCORRECT:
        if not r.corrected_label:
            return "An 'incorrect' verdict needs the corrected label."
        if definition.labels and r.corrected_label not in definition.labels:
            return f"The corrected label must be one of: {', '.join(definition.labels)}."
        if r.corrected_label == (example.true_label if definition.labels else (example.answer or {}).get("text")):
            return "The corrected label is the same as the author's; choose 'correct' instead."
        if not (r.reason or "").strip():
            return "An 'incorrect' verdict needs an explanation."
    elif r.corrected_label:
        return f"A '{r.verdict.value}' verdict has no corrected label."
    if r.verdict == Verdict.FLAGGED and not (r.reason or "").strip():
        return "A flag needs a reason."
    return None


def push(db: ServerDatabase, me: Person, records: Sequence, now: datetime | None = None) -> list[RecordResult]:
    """``now``: the request's arrival time, stored as each new record's ``received_at``."""
    now = now or utcnow()
    return db.write_retrying(lambda session: _Push(session, me, [None] * len(records), now=now).run(records))


# --- publishing (owners) ------------------------------------------------------------------------------

KIND_ORDER = {"task": 0, "model": 1, "round": 2, "context": 3}


class _Publish(_Batch):
    def run(self, records: Sequence, blob_exists) -> list[RecordResult]:
        self.blob_exists = blob_exists
        self.model_ids: dict[uuid.UUID, ModelRecord] = {}  # publisher's id -> server row
        for i, r in sorted(self.in_time(records), key=lambda pair: KIND_ORDER[pair[1].record]):
            getattr(self, f"_{r.record}")(i, r)
        self.finish()
        return self.results

    def _bump(self, row, kind: str, i: int, r) -> None:
        row.revision += 1
        row.updated_at = utcnow()
        self.changed(row, kind, None, self.me.id, is_new=False)
        self.result(i, r, "stored", revision=row.revision)

    def _task(self, i: int, r: TaskRecord) -> None:
        try:
            definition = TaskDefinition.model_validate(r.definition)
        except Exception as exc:  # pydantic's message names the field
            return self.result(i, r, "rejected", reason=f"the task definition is invalid: {exc}")
        if definition.code != r.code:
            return self.result(i, r, "rejected", reason=f"the definition's code is '{definition.code}', not '{r.code}'")
        data, fingerprint = definition.model_dump(mode="json"), definition.fingerprint()
        task = self.task(r.code)
        if task is None:
            taken = self.session.get(Task, r.id) is not None
            task = Task(id=uuid.uuid4() if taken else r.id, code=r.code, name=r.name, definition=data,
                        fingerprint=fingerprint, created_at=r.created_at, updated_at=r.updated_at, revision=1)
            self.session.add(task)
            self._tasks[r.code] = task
            self.changed(task, "task", None, self.me.id, is_new=True)
            return self.result(i, r, "stored", revision=1)
        if (task.name, task.fingerprint) == (r.name, fingerprint):
            return self.result(i, r, "already_stored", revision=task.revision)
        task.name, task.definition, task.fingerprint = r.name, data, fingerprint
        self._definitions.pop(task.id, None)
        self._bump(task, "task", i, r)

    def _model(self, i: int, r: ModelRecordWire) -> None:
        if r.files is not None:
            if manifest_sha256((f.name, f.sha256) for f in r.files) != r.sha256:
                return self.result(i, r, "rejected", reason="its files do not add up to its sha256; "
                                                            "they are not the files of this model")
            missing = [f.name for f in r.files if not self.blob_exists(f.sha256, f.size)]
            if missing:
                return self.result(i, r, "deferred", reason=f"upload its files first ({', '.join(missing[:5])})")
        files = [f.model_dump() for f in r.files] if r.files is not None else None
        model = self.model(r.sha256)
        if model is None:
            taken = self.session.get(ModelRecord, r.id) is not None
            model = ModelRecord(id=uuid.uuid4() if taken else r.id, name=r.name, format=r.format.value, sha256=r.sha256,
                                label_map=r.label_map, task_code=r.task, provenance=_portable(r.provenance), files=files,
                                created_at=r.created_at, updated_at=r.updated_at, revision=1)
            self.session.add(model)
            self._models[r.sha256] = model
            self.model_ids[r.id] = model
            self.changed(model, "model", None, self.me.id, is_new=True)
            return self.result(i, r, "stored", revision=1)
        self.model_ids[r.id] = model
        if files is None or files == model.files:
            return self.result(i, r, "already_stored", revision=model.revision)
        model.files = files
        self._bump(model, "model", i, r)

    def _round(self, i: int, r: RoundRecord) -> None:
        task = self.task(r.task)
        if task is None:
            return self.result(i, r, "deferred", reason=f"publish task '{r.task}' first")
        targets = []
        for model_id in r.target_models:
            model = self.model_ids.get(model_id) or self.session.get(ModelRecord, model_id)
            if model is None:
                return self.result(i, r, "deferred", reason=f"publish its target model {model_id} with it")
            targets.append(str(model.id))
        values = dict(description=r.description, goal_message=r.goal_message, status=r.status.value,
                      fooled_rule=r.fooled_rule.value, opened_at=r.opened_at, closed_at=r.closed_at,
                      settings=r.settings, target_models=targets)
        round_ = self.round(task, r.number)
        if round_ is None:
            taken = self.session.get(Round, r.id) is not None
            round_ = Round(id=uuid.uuid4() if taken else r.id, task_id=task.id, number=r.number, created_at=r.created_at,
                           updated_at=r.updated_at, revision=1, **values)
            self.session.add(round_)
            self._rounds[(task.id, r.number)] = round_
            self.changed(round_, "round", None, self.me.id, is_new=True)
            return self.result(i, r, "stored", revision=1)
        if all(getattr(round_, k) == v for k, v in values.items()):
            return self.result(i, r, "already_stored", revision=round_.revision)
        for k, v in values.items():
            setattr(round_, k, v)
        self._bump(round_, "round", i, r)

    def _context(self, i: int, r: ContextRecord) -> None:
        task = self.task(r.task)
        round_ = self.round(task, r.round_number) if task is not None else None
        if round_ is None:
            return self.result(i, r, "deferred", reason=f"publish round {r.round_number} of '{r.task}' first")
        digest = content_hash(r.text)
        same = self.session.scalar(select(Context).where(Context.round_id == round_.id, Context.content_hash == digest))
        if same is not None:
            return self.result(i, r, "already_stored", revision=same.revision)
        self.session.flush()
        taken = self.session.get(Context, r.id) is not None
        context = Context(id=uuid.uuid4() if taken else r.id, round_id=round_.id, text=r.text, data=r.data, tag=r.tag,
                          source=r.source, content_hash=digest, times_used=0, created_at=r.created_at,
                          updated_at=r.updated_at, revision=1)
        self.session.add(context)
        self.changed(context, "context", None, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=1)


def _portable(provenance: dict[str, Any]) -> dict[str, Any]:
    """Provenance without paths that only mean something on the publisher's machine."""
    out = dict(provenance)
    runtime = dict(out.get("runtime") or {})
    if "tokenizer_dir" in runtime:
        runtime["tokenizer_dir"] = None
        out["runtime"] = runtime
    return out


def publish(db: ServerDatabase, me: Person, records: Sequence, blob_exists,
            now: datetime | None = None) -> list[RecordResult]:
    if me.role != Role.OWNER.value:
        raise Forbidden("Only owners publish tasks, rounds, contexts and target models.")
    now = now or utcnow()
    return db.write_retrying(
        lambda session: _Publish(session, me, [None] * len(records), now=now).run(records, blob_exists))


# --- pulling --------------------------------------------------------------------------------------


def _visible(me: Person):
    conditions = [or_(Change.owner_id.is_(None), Change.owner_id != me.id)]
    if me.role != Role.OWNER.value:
        conditions.append(or_(Change.team.is_(None), Change.team == me.team))
    else:  # a team's threshold decides its own desks' examples; an owner's desk goes by the owner's team's
        conditions.append(or_(Change.kind != "task_setting", Change.team == me.team))
    return and_(*conditions)


def _not_quarantined():
    return ~exists().where(Quarantined.record_id == Change.record_id)


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
                                   .where(Change.seq > cursor, _visible(me), _not_quarantined()))
        ids: dict[str, list[uuid.UUID]] = defaultdict(list)
        for record_id, kind, _seq in rows:
            ids[kind].append(record_id)
        records = _with_references(session, me, ids, broken)
        # Records quarantined before (a poisoned round its examples refer to) take no write per page.
        known = {q for chunk in _chunks([row.id for row, _kind, _reason in broken])
                 for q in session.scalars(select(Quarantined.record_id).where(Quarantined.record_id.in_(chunk)))}
        broken = [entry for entry in broken if entry[0].id not in known]
    if broken:
        _quarantine(db, broken)
    changed = {record_id for record_id, _kind, _seq in rows}
    referenced = [r.id for r in records if r.id not in changed]
    return ChangesResponse(records=records, referenced=referenced, cursor=cursor, more=remaining > 0,
                           remaining=remaining)


# What a record weighs on the wire, estimated in the database from the bytes of its large columns
# (their stored JSON or text) plus a fixed allowance for the rest, so a page is cut before it is
# built. SQLite stores JSON with non-ASCII escaped, which overestimates such text (pages get smaller).
RECORD_OVERHEAD = 600
KIND_MODELS = {"person": Person, "task": Task, "model": ModelRecord, "round": Round, "context": Context,
               "example": Example, "validation": Validation, "example_review": ExampleReview,
               "task_setting": TaskSetting}
HEAVY_COLUMNS = {"example": ("inputs", "meta", "origin", "edit_ops", "outputs", "status_reason"),
                 "validation": ("reason", "model_note"), "example_review": ("comment",), "context": ("text", "data"),
                 "round": ("description", "goal_message", "settings"), "task": ("definition",),
                 "model": ("label_map", "provenance", "files"), "person": (), "task_setting": ()}


def _weight(session: Session, kind: str) -> Any:
    model = KIND_MODELS[kind]
    total = RECORD_OVERHEAD
    for name in HEAVY_COLUMNS[kind]:
        text = cast(getattr(model, name), Text)
        size = func.octet_length(text) if session.get_bind().dialect.name == "postgresql" else \
            func.length(cast(text, LargeBinary))
        total = total + func.coalesce(size, 0)
    return total


def _weights(session: Session, kind: str, ids: Iterable[uuid.UUID], *extra) -> dict[uuid.UUID, tuple]:
    model = KIND_MODELS[kind]
    out: dict[uuid.UUID, tuple] = {}
    for chunk in _chunks(list(dict.fromkeys(ids))):
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


def _reason(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'record'}: {e['msg']}" for e in exc.errors()[:5])
    return str(exc) or "it could not be sent"


def _wires(rows: Iterable, kind: str, build, broken: list) -> list:
    """``build(row)`` for each row; a row that does not fit the protocol is noted in ``broken`` and left out."""
    out = []
    for row in rows:
        try:
            out.append(build(row))
        except Exception as exc:  # one bad record must not fail the page; it is quarantined and named
            broken.append((row, kind, _reason(exc)))
    return out


def _quarantine(db: ServerDatabase, broken: list[tuple[Any, str, str]]) -> None:
    def work(session: Session) -> None:
        for row, kind, reason in broken:
            if session.get(Quarantined, row.id) is not None:
                continue
            change = session.get(Change, row.id)
            session.add(Quarantined(record_id=row.id, kind=kind, team=change.team if change else None,
                                    owner_id=change.owner_id if change else None, reason=reason))
            log.warning("quarantined %s %s: it cannot be sent (%s); see 'dynadesk serve quarantine list'",
                        kind, row.id, reason)

    try:
        db.write_retrying(work)
    except IntegrityError:  # another worker quarantined it at the same moment
        pass


@dataclass(frozen=True)
class QuarantineEntry:
    record_id: uuid.UUID
    kind: str
    team: str | None
    sender: str | None
    reason: str
    quarantined_at: Any


def quarantined(db: ServerDatabase) -> list[QuarantineEntry]:
    """The records the change feed leaves out, oldest first, with who sent them and why."""
    with db.read() as session:
        rows = list(session.scalars(select(Quarantined).order_by(Quarantined.quarantined_at)))
        names = dict(session.execute(select(Person.id, Person.display_name)
                                     .where(Person.id.in_({r.owner_id for r in rows if r.owner_id}))).all())
    return [QuarantineEntry(r.record_id, r.kind, r.team, names.get(r.owner_id), r.reason, r.quarantined_at)
            for r in rows]


def drop_quarantined(db: ServerDatabase, record_id: uuid.UUID) -> str:
    """Delete a quarantined record from the server for good (an example with its validations and
    reviews). Returns what was deleted, in words."""

    def work(session: Session) -> str:
        entry = session.get(Quarantined, record_id)
        if entry is None:
            raise DynadeskError(f"{record_id} is not in quarantine; 'dynadesk serve quarantine list' shows what is.")
        model = KIND_MODELS[entry.kind]
        gone = [record_id]
        said = f"{entry.kind} {record_id}"
        if model is Example:
            dependants = [*session.scalars(select(Validation.id).where(Validation.example_id == record_id)),
                          *session.scalars(select(ExampleReview.id).where(ExampleReview.example_id == record_id))]
            session.execute(delete(Validation).where(Validation.example_id == record_id))
            session.execute(delete(ExampleReview).where(ExampleReview.example_id == record_id))
            session.execute(update(Example).where(Example.duplicate_of == record_id).values(duplicate_of=None))
            gone += dependants
            if dependants:
                said += f" with its {len(dependants)} validation(s) and review(s)"
        elif model is Context:
            if session.scalar(select(func.count()).select_from(Example).where(Example.context_id == record_id)):
                raise DynadeskError(f"examples were written on context {record_id}; it cannot be dropped. "
                                    "Publish it again in a form that fits instead.")
        elif model not in (Validation, ExampleReview, TaskSetting):
            raise DynadeskError(f"a {entry.kind} cannot be dropped (others refer to it); publish it again in a form "
                                "that fits, and it leaves quarantine.")
        session.execute(delete(model).where(model.id == record_id))
        for chunk in _chunks(gone):
            session.execute(delete(Change).where(Change.record_id.in_(chunk)))
        session.delete(entry)
        return said

    return db.write_retrying(work)


def _fetch(session: Session, model, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Any]:
    ids = list(dict.fromkeys(ids))
    out = {}
    for start in range(0, len(ids), 1000):
        out.update((row.id, row) for row in session.scalars(select(model).where(model.id.in_(ids[start:start + 1000]))))
    return out


def _with_references(session: Session, me: Person, ids: dict[str, list[uuid.UUID]], broken: list) -> list:
    """The changed records plus every record they refer to, in an order a desk can store them.
    Records that cannot be sent are added to ``broken`` instead."""
    validations = _fetch(session, Validation, ids["validation"])
    reviews = _fetch(session, ExampleReview, ids["example_review"])
    settings = _fetch(session, TaskSetting, ids["task_setting"])
    examples = _fetch(session, Example, ids["example"])
    validated = [e for e in dict.fromkeys([*(v.example_id for v in validations.values()),
                                           *(r.example_id for r in reviews.values())]) if e not in examples]
    for example in _fetch(session, Example, validated).values():
        if example.author_id != me.id:  # a person's own examples are already on their desk
            examples[example.id] = example
    contexts = _fetch(session, Context, [*ids["context"], *(e.context_id for e in examples.values() if e.context_id)])
    rounds = _fetch(session, Round, [*ids["round"], *(e.round_id for e in examples.values()),
                                     *(c.round_id for c in contexts.values())])
    model_ids = [*ids["model"], *(uuid.UUID(m) for r in rounds.values() for m in r.target_models),
                 *(uuid.UUID(o["model"]) for e in examples.values() for o in e.outputs)]
    models = _fetch(session, ModelRecord, model_ids)
    tasks = _fetch(session, Task, [*ids["task"], *(r.task_id for r in rounds.values()),
                                   *(s.task_id for s in settings.values()),
                                   *(e.task_id for e in examples.values())])
    codes = {m.task_code for m in models.values() if m.task_code} - {t.code for t in tasks.values()}
    if codes:
        tasks.update((t.id, t) for t in session.scalars(select(Task).where(Task.code.in_(codes))))
    people = _fetch(session, Person, [*ids["person"], *(e.author_id for e in examples.values()),
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
    foreign = _other_teams(session, me, [e.duplicate_of for e in examples.values()])
    out += _wires(sorted(examples.values(), key=lambda e: e.stored_seq), "example",
                  lambda e: _hide_foreign(example_wire(e, code_of[e.task_id], number_of[e.round_id],
                                                       hash_of.get(e.context_id)), foreign),
                  broken)
    out += _wires(sorted(validations.values(), key=lambda v: v.created_at), "validation", validation_wire, broken)
    out += _wires(sorted(reviews.values(), key=lambda r: (r.received_at, r.id)), "example_review",
                  example_review_wire, broken)
    return out


def _other_teams(session: Session, me: Person, example_ids: Iterable[uuid.UUID | None]) -> set[uuid.UUID]:
    """Of these examples, those of a team other than ``me``'s (none for owners, who see every team)."""
    ids = sorted({i for i in example_ids if i is not None})
    if me.role == Role.OWNER.value or not ids:
        return set()
    out: set[uuid.UUID] = set()
    for chunk in _chunks(ids):
        out.update(i for i, team in session.execute(select(Example.id, Example.team).where(Example.id.in_(chunk)))
                   if team != me.team)
    return out


def _hide_foreign(record: ExampleRecord, foreign: set[uuid.UUID]) -> ExampleRecord:
    """An example as ``me`` may see it: an original in another team is not named by its id."""
    if record.duplicate_of in foreign:
        return record.model_copy(update={"duplicate_of": None})
    return record


def model_manifest(db: ServerDatabase, sha256: str) -> ModelRecordWire | None:
    with db.read() as session:
        model = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha256))
        return model_wire(model) if model is not None else None


# --- team figures (leads and owners) ----------------------------------------------------------------


def _team_scope(me: Person, team: str | None) -> str | None:
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
    fooled = Example.model_fooled.is_(True)

    def total(condition):
        return func.coalesce(func.sum(case((condition, 1), else_=0)), 0)

    with db.read() as session:
        rows = session.execute(
            select(key, func.count(), total(fooled), total(and_(fooled, Example.decided_verdict == Verdict.CORRECT.value)),
                   total(Example.duplicate_of.is_not(None)))
            .where(Example.team == team, Example.status.in_(COUNTED)).group_by(key)).all()
        ids = [row[0] for row in rows]
        if by == "round":
            names = {rid: f"{name} · round {number}" for rid, name, number in session.execute(
                select(Round.id, Task.name, Round.number).join(Task, Task.id == Round.task_id).where(Round.id.in_(ids)))}
        else:
            names = dict(session.execute(select(Person.id, Person.display_name).where(Person.id.in_(ids))).all())
    # MER and vMER as the desk defines them (``Figures``), over "fooled" as the server judged it at push.
    figures = []
    for k, s, f, v, d in rows:
        counts = Figures(str(k), names.get(k, str(k)), int(s), int(f), int(v))
        figures.append(FigureRow(key=counts.key, name=counts.name, submitted=counts.submitted, fooled=counts.fooled,
                                 validated_fooling=counts.validated_fooling, duplicates=int(d), mer=counts.mer,
                                 vmer=counts.vmer))
    return team, sorted(figures, key=lambda f: f.name)


def duplicates(db: ServerDatabase, me: Person, team: str | None = None, limit: int = 1000) -> list[Duplicate]:
    team = _team_scope(me, team)
    with db.read() as session:
        rows = list(session.scalars(select(Example).where(Example.team == team, Example.duplicate_of.is_not(None))
                                    .order_by(Example.stored_seq).limit(limit)))
        originals = _fetch(session, Example, [e.duplicate_of for e in rows])
        names = dict(session.execute(select(Person.id, Person.display_name).where(
            Person.id.in_({e.author_id for e in rows} | {o.author_id for o in originals.values()}))).all())
        rounds = _fetch(session, Round, [e.round_id for e in rows])
        tasks = _fetch(session, Task, [r.task_id for r in rounds.values()])
    out = []
    for e in rows:
        original = originals.get(e.duplicate_of)
        other_team = original is not None and original.team != e.team
        hidden = other_team and me.role != Role.OWNER.value  # a lead may not learn who wrote another team's work
        out.append(Duplicate(
            example=e.id, duplicate_of=None if hidden else e.duplicate_of, task=tasks[rounds[e.round_id].task_id].code,
            round_number=rounds[e.round_id].number, text=e.text, author=names.get(e.author_id, "?"),
            original_author=None if hidden else names.get(original.author_id, "?") if original is not None else "?",
            other_team=other_team))
    return out
