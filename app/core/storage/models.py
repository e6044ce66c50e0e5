"""SQLAlchemy models of the data model in DESIGN.md §3.

Identifiers are UUIDs born where the record is born. Every row has ``created_at`` and
``updated_at``; rows that sync also carry a ``revision`` that grows with every change.
Schema changes go through Alembic (``app/core/storage/migrations``); a test checks that these
models and the migrated schema agree.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    Uuid,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from app.core.domain import (
    ExampleStatus,
    FooledRule,
    RoundStatus,
    SyncState,
    ValidationMode,
    ValidationState,
    new_id,
    utcnow,
)

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


# Tables that live outside the ORM (full-text search) and SQLite's own bookkeeping.
FTS_PREFIX = "example_fts"
UNMANAGED_PREFIXES = (FTS_PREFIX, "sqlite_")


# Alembic cannot reflect a partial index with DESC terms faithfully; tests check it by its query plan.
UNREFLECTABLE_INDEXES = {"ix_examples_queue"}


def include_name(name, type_, parent_names) -> bool:
    """For Alembic: compare only what these models own and what Alembic can read back."""
    if type_ == "table":
        return not (name or "").startswith(UNMANAGED_PREFIXES)
    return not (type_ == "index" and name in UNREFLECTABLE_INDEXES)


class UTCDateTime(TypeDecorator):
    """Stores naive UTC, returns aware UTC; SQLite has no time zones of its own."""

    impl = DateTime
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
        return value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect) -> datetime | None:
        return None if value is None else value.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON, uuid.UUID: Uuid()}


class Stamped:
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Synced(Stamped):
    """Rows that travel between desks and the server."""

    revision: Mapped[int] = mapped_column(Integer, default=1)

    def bump(self) -> None:
        self.revision = (self.revision or 0) + 1



class PersonColumns:
    display_name: Mapped[str] = mapped_column(String(200))
    role: Mapped[str] = mapped_column(String(20))


class TaskColumns:
    code: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(200))
    definition: Mapped[dict[str, Any]]
    fingerprint: Mapped[str] = mapped_column(String(64))


class RoundColumns:
    """A round's columns but its task and opening time (the desk stamps ``opened_at`` itself)."""

    number: Mapped[int] = mapped_column(Integer)
    description: Mapped[str] = mapped_column(Text, default="")
    goal_message: Mapped[str] = mapped_column(Text, default="")
    status: Mapped[str] = mapped_column(String(16), default=RoundStatus.OPEN.value)
    fooled_rule: Mapped[str] = mapped_column(String(16), default=FooledRule.MEAN.value)


class ContextColumns:
    """A context's columns but its round (indexed on desks only)."""

    text: Mapped[str] = mapped_column(Text)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    tag: Mapped[str] = mapped_column(String(200), default="")
    source: Mapped[str] = mapped_column(String(500), default="")
    content_hash: Mapped[str] = mapped_column(String(64))
    times_used: Mapped[int] = mapped_column(Integer, default=0)


class ModelColumns:
    """A model record's columns that desks and the server share (the desk adds its file path and
    task id; the server the task code and the uploaded files)."""

    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(32))
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    label_map: Mapped[dict[str, Any]] = mapped_column(default=dict)
    provenance: Mapped[dict[str, Any]] = mapped_column(default=dict)


class Meta(Base):
    """Database-wide values, such as the secret salt behind export pseudonyms."""

    __tablename__ = "meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class Person(PersonColumns, Synced, Base):
    __tablename__ = "people"
    __table_args__ = (Index(None, "display_name", "id"),)  # sorting review rows by author


class Task(TaskColumns, Synced, Base):
    __tablename__ = "tasks"

    rounds: Mapped[list[Round]] = relationship(back_populates="task", order_by="Round.number")


class RoundModel(Base):
    """The target models of a round, in order; more than one makes an ensemble."""

    __tablename__ = "round_models"
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"), primary_key=True)
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("model_records.id"), primary_key=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class Round(RoundColumns, Synced, Base):
    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("task_id", "number"),)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"), index=True)
    opened_at: Mapped[datetime | None] = mapped_column(default=utcnow)
    closed_at: Mapped[datetime | None]
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)

    task: Mapped[Task] = relationship(back_populates="rounds")
    target_models: Mapped[list[ModelRecord]] = relationship(
        secondary="round_models", order_by="RoundModel.position", viewonly=True
    )


class Context(ContextColumns, Synced, Base):
    __tablename__ = "contexts"
    __table_args__ = (UniqueConstraint("round_id", "content_hash"),)
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id"), index=True)


class ModelRecord(ModelColumns, Synced, Base):
    __tablename__ = "model_records"
    path: Mapped[str] = mapped_column(Text, default="")
    task_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("tasks.id"), index=True)


# Literal (not bound) so that SQLite can prove a query is covered by the partial queue index.
QUEUE_CONDITION = "status IN ('submitted', 'flagged') AND validation_state != 'decided'"


class Example(Synced, Base):
    __tablename__ = "examples"
    __table_args__ = (
        Index(None, "task_id", "round_id", "status"),
        Index(None, "source", "external_id"),
        # Covering indexes: MER/vMER per annotator and per round read no table rows, and the
        # per-model figures join outputs to examples through an index alone (DESIGN.md §5).
        Index("ix_examples_author_figures", "author_id", "status", "task_id", "round_id", "model_fooled", "decided_verdict"),
        Index("ix_examples_round_figures", "round_id", "status", "task_id", "author_id", "model_fooled", "decided_verdict"),
        Index("ix_examples_id_summary", "id", "status", "task_id", "round_id", "decided_verdict"),
        # The validation queue, in its own order, over undecided examples only.
        Index("ix_examples_queue", text("model_fooled DESC"), "validation_count", "submitted_at",
              sqlite_where=text(QUEUE_CONDITION)),
        Index(None, "author_id", "review_state"),  # an annotator's returned examples
        # Covers the review tab's figures and the validation queue's count for a whole task.
        Index("ix_examples_review_summary", "task_id", "status", "validation_state", "model_fooled", "review_state",
              "disagreement_count", "flag_count"),
        # The review's count of examples a validator objected to, within a task, from the index alone.
        Index("ix_examples_task_objections", "task_id", "objection_count", "status"),
    )
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"))
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id"))
    context_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("contexts.id"), index=True)
    author_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    inputs: Mapped[dict[str, Any]] = mapped_column(default=dict)
    # The annotator's own words (the written inputs joined), for display, search and duplicates.
    text: Mapped[str] = mapped_column(Text, default="", index=True)
    true_label: Mapped[str | None] = mapped_column(String(200), index=True)
    answer: Mapped[dict[str, Any] | None]  # extractive QA: {"start", "end", "text"}
    model_fooled: Mapped[bool | None] = mapped_column(Boolean, index=True)
    fooled_rule: Mapped[str] = mapped_column(String(16), default=FooledRule.MEAN.value)
    meta: Mapped[dict[str, Any]] = mapped_column(default=dict)
    origin: Mapped[dict[str, Any]] = mapped_column(default=dict)  # scratch, prompt (with its text), import, ...
    perturbation_of: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("examples.id"), index=True)
    edit_ops: Mapped[list[Any] | None]
    edit_distance: Mapped[int | None] = mapped_column(Integer)
    # The writing assistant's part (app.core.assist.provenance.assistance_record); None: no assistant.
    assistance: Mapped[dict[str, Any] | None]
    status: Mapped[str] = mapped_column(String(16), default=ExampleStatus.DRAFT.value, index=True)
    status_reason: Mapped[str | None] = mapped_column(Text)
    time_spent_ms: Mapped[int] = mapped_column(Integer, default=0)
    submitted_at: Mapped[datetime | None] = mapped_column(index=True)
    source: Mapped[str | None] = mapped_column(String(200))
    external_id: Mapped[str | None] = mapped_column(String(200))
    sync_state: Mapped[str] = mapped_column(String(16), default=SyncState.LOCAL.value)
    # Validation summary, kept in step by the validation service for fast review queries.
    validation_state: Mapped[str] = mapped_column(String(16), default=ValidationState.UNVALIDATED.value, index=True)
    validation_count: Mapped[int] = mapped_column(Integer, default=0, index=True)
    flag_count: Mapped[int] = mapped_column(Integer, default=0, index=True)
    disagreement_count: Mapped[int] = mapped_column(Integer, default=0, index=True)
    # verdicts against the author: incorrect or flagged (migration 0011)
    objection_count: Mapped[int] = mapped_column(Integer, default=0, server_default="0", index=True)
    decided_verdict: Mapped[str | None] = mapped_column(String(16), index=True)
    decided_label: Mapped[str | None] = mapped_column(String(200))
    # A lead's latest review (accepted or returned); the records are in example_reviews.
    review_state: Mapped[str | None] = mapped_column(String(16), index=True)
    review_comment: Mapped[str | None] = mapped_column(Text)
    reviewed_at: Mapped[datetime | None]

    outputs: Mapped[list[ModelOutputRow]] = relationship(
        back_populates="example", order_by="ModelOutputRow.position", cascade="all, delete-orphan"
    )
    validations: Mapped[list[Validation]] = relationship(back_populates="example", order_by="Validation.created_at")


class ModelOutputRow(Base):
    """One target model's output for one example (part of the example; it syncs with it)."""

    __tablename__ = "model_outputs"
    __table_args__ = (UniqueConstraint("example_id", "model_id"), Index("ix_model_outputs_figures", "example_id", "model_id", "fooled"))
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"))
    model_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("model_records.id"), index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)
    model_sha256: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(200))
    probabilities: Mapped[dict[str, Any]] = mapped_column(default=dict)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    answer: Mapped[dict[str, Any] | None]
    fooled: Mapped[bool | None] = mapped_column(Boolean)  # this member alone, by the task's metric
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)

    example: Mapped[Example] = relationship(back_populates="outputs")


FACET_VALUE_CHARS = 200


class ExampleFacet(Base):
    """(field, value) pairs of an example's choice metadata, indexed for filters and breakdowns."""

    __tablename__ = "example_facets"
    __table_args__ = (Index("ix_example_facets_field_value", "field", "value", "example_id"),)
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    field: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(FACET_VALUE_CHARS), primary_key=True)

    @classmethod
    def rows_for(cls, example_id: uuid.UUID, pairs: Iterable[tuple[str, str]]) -> list[ExampleFacet]:
        """One row per (field, value) pair (``tasks.content.facet_values``), values cut to the column's length."""
        kept = dict.fromkeys((name, value[:FACET_VALUE_CHARS]) for name, value in pairs)
        return [cls(example_id=example_id, field=name, value=value) for name, value in kept]


class Validation(Synced, Base):
    __tablename__ = "validations"
    __table_args__ = (UniqueConstraint("example_id", "validator_id", "mode"),)
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id"), index=True)
    validator_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"), index=True)
    verdict: Mapped[str] = mapped_column(String(16))
    corrected_label: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    model_note: Mapped[str | None] = mapped_column(Text)  # the validator's note on why the model was fooled
    mode: Mapped[str] = mapped_column(String(16), default=ValidationMode.PEER.value)
    time_spent_ms: Mapped[int] = mapped_column(Integer, default=0)
    sync_state: Mapped[str] = mapped_column(String(16), default=SyncState.PENDING.value)

    example: Mapped[Example] = relationship(back_populates="validations")


class ExampleReview(Synced, Base):
    """A lead accepted an example (as part of an annotator's work) or returned it with a comment.

    Append-only; it syncs like a validation, so a return reaches the author's own desk."""

    __tablename__ = "example_reviews"
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id"), index=True)
    lead_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"), index=True)
    action: Mapped[str] = mapped_column(String(16))  # ReviewAction
    comment: Mapped[str | None] = mapped_column(Text)
    sync_state: Mapped[str] = mapped_column(String(16), default=SyncState.PENDING.value)
    # When the server received it (None until then): the order in which reviews count, the same on every desk.
    received_at: Mapped[datetime | None]


class Suite(Stamped, Base):
    """A functional test suite, such as HateCheck, imported for evaluation."""

    __tablename__ = "suites"
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(32))
    task_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("tasks.id"))
    source: Mapped[str] = mapped_column(Text, default="")
    sha256: Mapped[str] = mapped_column(String(64), unique=True)

    cases: Mapped[list[SuiteCase]] = relationship(order_by="SuiteCase.position", cascade="all, delete-orphan")


class SuiteCase(Base):
    __tablename__ = "suite_cases"
    __table_args__ = (UniqueConstraint("suite_id", "case_id"),)
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    suite_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("suites.id", ondelete="CASCADE"))
    position: Mapped[int] = mapped_column(Integer)
    case_id: Mapped[str] = mapped_column(String(64))
    functionality: Mapped[str] = mapped_column(String(200), index=True)
    text: Mapped[str] = mapped_column(Text)
    gold_label: Mapped[str] = mapped_column(String(200))
    target: Mapped[str | None] = mapped_column(String(200))
    extra: Mapped[dict[str, Any]] = mapped_column(default=dict)


class LeaderboardCell(Stamped, Base):
    """One cell of the model leaderboard (app/core/next_round/leaderboard.py): a model (or a round's
    ensemble) scored on one round's held-out split. Kept per desk, never synced: each desk scores
    with its own files. ``fingerprint`` hashes the split's ids, inputs, gold labels and fooling marks
    as scored; a split that has changed since makes the cell stale."""

    __tablename__ = "leaderboard_cells"
    __table_args__ = (UniqueConstraint("round_id", "model_key"),)
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id", ondelete="CASCADE"), index=True)
    model_key: Mapped[str] = mapped_column(String(64))  # the model's sha256, or its ensemble's key
    model_name: Mapped[str] = mapped_column(String(200))
    fingerprint: Mapped[str] = mapped_column(String(64))
    n: Mapped[int] = mapped_column(Integer, default=0)
    accuracy: Mapped[float | None] = mapped_column(Float)
    macro_f1: Mapped[float | None] = mapped_column(Float)
    accuracy_low: Mapped[float | None] = mapped_column(Float)
    accuracy_high: Mapped[float | None] = mapped_column(Float)
    fooling_n: Mapped[int] = mapped_column(Integer, default=0)
    fooling_right: Mapped[float | None] = mapped_column(Float)
    problem: Mapped[str | None] = mapped_column(Text)  # why the model could not be scored
    details: Mapped[dict[str, Any]] = mapped_column(default=dict)  # predictions, overlap, interval options


class OutboxEntry(Base):
    """A record waiting to be pushed to the sync server.

    Written in the same unit of work as the record itself (``app.core.storage.outbox.enqueue``), so a
    submitted example is never committed without its way out. One entry per record: a later
    change (a retraction) raises the entry's revision instead of adding a second entry.
    """

    __tablename__ = "sync_outbox"
    __table_args__ = (Index(None, "state", "person_id", "seq"), {"sqlite_autoincrement": True})
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)  # push order
    kind: Mapped[str] = mapped_column(String(16))  # "example", "validation" or "example_review"
    record_id: Mapped[uuid.UUID] = mapped_column(unique=True)
    person_id: Mapped[uuid.UUID]  # whose token sends it: the author or validator
    revision: Mapped[int] = mapped_column(Integer)  # the record's revision when last enqueued
    state: Mapped[str] = mapped_column(String(16), default="pending")  # pending, rejected, conflict
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class ExampleSignature(Base):
    """An example's near-duplicate signature (app/core/quality): its normalised text and MinHash
    signature under ``scheme``; recomputed when the scheme or the text (``text_hash``) changed.
    Kept per desk, never synced: every desk computes the same from the same text."""

    __tablename__ = "example_signatures"
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id", ondelete="CASCADE"), primary_key=True)
    scheme: Mapped[str] = mapped_column(String(64))
    text_hash: Mapped[str] = mapped_column(String(32))
    normalised: Mapped[str] = mapped_column(Text)
    minhash: Mapped[bytes] = mapped_column(LargeBinary)


class ExampleChange(Base):
    """One stored, changed or removed example, logged by SQLite triggers (migration 0013) whatever
    wrote it, so the open near-duplicate index applies what changed since it last looked."""

    __tablename__ = "example_changes"
    __table_args__ = {"sqlite_autoincrement": True}
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    example_id: Mapped[uuid.UUID]


class ExposureSpan(Synced, Base):
    """A span of one person's work with hateful content (app/core/wellbeing): writing,
    validating or reviewing one example, recorded when the work ended. No text: only who, what kind
    of work, when, and in which time zone. Pushed to the server for the person's team leads
    (``sync.wellbeing``); a lead's desk keeps the team's spans it pulled (``team`` set)."""

    __tablename__ = "exposure_spans"
    __table_args__ = (Index(None, "person_id", "ended_at"), Index(None, "sync_state"))
    person_id: Mapped[uuid.UUID]  # no foreign key: a pulled span's person may not be on this desk
    activity: Mapped[str] = mapped_column(String(16))
    task_code: Mapped[str] = mapped_column(String(64))
    example_id: Mapped[uuid.UUID | None]
    started_at: Mapped[datetime]
    ended_at: Mapped[datetime]
    zone: Mapped[str] = mapped_column(String(64))
    team: Mapped[str | None] = mapped_column(String(64))
    sync_state: Mapped[str] = mapped_column(String(16), default=SyncState.PENDING.value)


class WellbeingBreak(Synced, Base):
    """A break prompt answered: taken or snoozed. Synced like an exposure span."""

    __tablename__ = "wellbeing_breaks"
    __table_args__ = (Index(None, "person_id", "at"), Index(None, "sync_state"))
    person_id: Mapped[uuid.UUID]
    kind: Mapped[str] = mapped_column(String(16))  # BreakKind
    action: Mapped[str] = mapped_column(String(16))  # BreakAction
    at: Mapped[datetime]
    break_min: Mapped[int] = mapped_column(Integer)  # the break suggested
    continuous_min: Mapped[int] = mapped_column(Integer)
    daily_min: Mapped[int] = mapped_column(Integer)
    zone: Mapped[str] = mapped_column(String(64))
    team: Mapped[str | None] = mapped_column(String(64))
    sync_state: Mapped[str] = mapped_column(String(16), default=SyncState.PENDING.value)
