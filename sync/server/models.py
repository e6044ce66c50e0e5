"""The server's tables: its own metadata, separate from a desk's (``app.core.storage.models``).

The server keeps what desks pushed (examples, validations, lead reviews), what owners published (tasks,
rounds, contexts, model records) and who may do what (people, with hashed tokens). ``changes``
holds one row per record with the sequence number of its latest change: pulling "changes
since N" is one indexed range scan. Works on SQLite and PostgreSQL; schema changes go through
Alembic (``sync/server/migrations``).
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    UniqueConstraint,
    Uuid,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from app.core.domain import new_id, utcnow
from app.core.storage.models import (
    NAMING,
    ContextColumns,
    ModelColumns,
    PersonColumns,
    RoundColumns,
    TaskColumns,
    UTCDateTime,
)

CHANGE_SEQ = "change_seq"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSON, list[Any]: JSON, uuid.UUID: Uuid()}


class Stamped:
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
    revision: Mapped[int] = mapped_column(Integer, default=1)


class Counter(Base):
    """Named counters. Taking the next change numbers updates the ``change_seq`` row, which
    serialises the end of concurrent writes: changes commit in the order of their numbers, so a
    reader that has seen number N has seen everything before it."""

    __tablename__ = "counters"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[int] = mapped_column(BigInteger, default=0)


class Person(PersonColumns, Stamped, Base):
    __tablename__ = "people"
    team: Mapped[str] = mapped_column(String(64), index=True)
    # sha256 of the API token; None for people who only appear as authors of imported data sets.
    token_hash: Mapped[str | None] = mapped_column(String(64), unique=True)
    active: Mapped[bool] = mapped_column(Boolean, default=True)
    # bytes of model files this person may keep on the server; None: their role's default (store.storage)
    blob_quota: Mapped[int | None] = mapped_column(BigInteger)


class Task(TaskColumns, Stamped, Base):
    __tablename__ = "tasks"


class ModelRecord(ModelColumns, Stamped, Base):
    __tablename__ = "models"
    task_code: Mapped[str | None] = mapped_column(String(64))
    files: Mapped[list[Any] | None]  # [{"name", "sha256", "size"}]; None until an owner uploads them


class Round(RoundColumns, Stamped, Base):
    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("task_id", "number"),)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"))
    opened_at: Mapped[datetime | None]
    closed_at: Mapped[datetime | None]
    settings: Mapped[dict[str, Any]] = mapped_column(default=dict)
    target_models: Mapped[list[Any]] = mapped_column(default=list)  # server model ids, in order


class Context(ContextColumns, Stamped, Base):
    __tablename__ = "contexts"
    __table_args__ = (UniqueConstraint("round_id", "content_hash"),)
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id"))


class Example(Stamped, Base):
    __tablename__ = "examples"
    __table_args__ = (
        Index(None, "round_id", "text_hash"),  # duplicates
        Index(None, "team", "round_id", "status"),  # team figures
        Index(None, "author_id", "status"),
    )
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"))
    round_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("rounds.id"))
    context_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("contexts.id"))
    author_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    team: Mapped[str] = mapped_column(String(64))
    inputs: Mapped[dict[str, Any]]
    text: Mapped[str] = mapped_column(Text)
    text_hash: Mapped[str] = mapped_column(String(64))
    true_label: Mapped[str | None] = mapped_column(String(200))
    answer: Mapped[dict[str, Any] | None]
    model_fooled: Mapped[bool | None] = mapped_column(Boolean)
    fooled_rule: Mapped[str] = mapped_column(String(16))
    meta: Mapped[dict[str, Any]]
    origin: Mapped[dict[str, Any]]
    perturbation_of: Mapped[uuid.UUID | None]  # no foreign key: the original may stay on its desk
    edit_ops: Mapped[list[Any] | None]
    edit_distance: Mapped[int | None] = mapped_column(Integer)
    assistance: Mapped[dict[str, Any] | None]  # checked, its edit distance measured here (store/push.py)
    status: Mapped[str] = mapped_column(String(16))
    status_reason: Mapped[str | None] = mapped_column(Text)
    time_spent_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    submitted_at: Mapped[datetime | None]
    source: Mapped[str | None] = mapped_column(String(200))
    external_id: Mapped[str | None] = mapped_column(String(200))
    outputs: Mapped[list[Any]]  # as on the wire, model ids mapped to the server's
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    stored_seq: Mapped[int] = mapped_column(BigInteger)  # change number when first stored: arrival order
    duplicate_of: Mapped[uuid.UUID | None]  # the first example with the same text in the same round
    validation_state: Mapped[str] = mapped_column(String(16), default="unvalidated")
    validation_count: Mapped[int] = mapped_column(Integer, default=0)
    flag_count: Mapped[int] = mapped_column(Integer, default=0)
    disagreement_count: Mapped[int] = mapped_column(Integer, default=0)
    decided_verdict: Mapped[str | None] = mapped_column(String(16))
    decided_label: Mapped[str | None] = mapped_column(String(200))


class Validation(Stamped, Base):
    __tablename__ = "validations"
    __table_args__ = (UniqueConstraint("example_id", "validator_id", "mode"),)
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id"), index=True)
    validator_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    team: Mapped[str] = mapped_column(String(64))  # the example's team
    verdict: Mapped[str] = mapped_column(String(16))
    corrected_label: Mapped[str | None] = mapped_column(String(200))
    reason: Mapped[str | None] = mapped_column(Text)
    model_note: Mapped[str | None] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(16))
    time_spent_ms: Mapped[int] = mapped_column(BigInteger, default=0)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class ExampleReview(Stamped, Base):
    """A lead's accept or return of an example, as pushed from the lead's desk (append-only)."""

    __tablename__ = "example_reviews"
    example_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("examples.id"), index=True)
    lead_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    team: Mapped[str] = mapped_column(String(64))  # the example's team
    action: Mapped[str] = mapped_column(String(16))
    comment: Mapped[str | None] = mapped_column(Text)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class TaskSetting(Stamped, Base):
    """A lead's settings for their team's examples of a task (append-only); the latest by
    ``received_at`` per team and task is in force."""

    __tablename__ = "task_settings"
    __table_args__ = (Index(None, "team", "task_id", "received_at"),)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"))
    team: Mapped[str] = mapped_column(String(64))  # the lead's team
    lead_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    # ``TaskSettings.to_json()`` (migration 0013 folded the columns of one setting each into it)
    settings: Mapped[dict[str, Any]] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class Change(Base):
    """The latest change of each record. ``team`` None: everyone sees it (published records);
    ``owner_id``: who sent it (its author, validator or publisher), who has it already and is not
    sent it back."""

    __tablename__ = "changes"
    record_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)
    team: Mapped[str | None] = mapped_column(String(64))
    owner_id: Mapped[uuid.UUID | None]


class Quarantined(Base):
    """A stored record the change feed could not send (it no longer fits the protocol, e.g. one stored
    before free-form fields were bounded). The feed leaves it out, so nobody's sync stops on it, until
    an owner drops it (``dynadesk serve quarantine drop``) or it is published again in a form that fits."""

    __tablename__ = "quarantine"
    record_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))
    team: Mapped[str | None] = mapped_column(String(64))
    owner_id: Mapped[uuid.UUID | None]
    reason: Mapped[str] = mapped_column(Text)
    quarantined_at: Mapped[datetime] = mapped_column(default=utcnow)


class TaskPolicy(Stamped, Base):
    """An owner's choices for a task that bind every team: whether leads may promote a candidate to
    the next round (and publish that round) themselves. One row per task; absent means no."""

    __tablename__ = "task_policies"
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"), unique=True)
    leads_may_promote: Mapped[bool] = mapped_column(Boolean, default=False)
    set_by_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))


class Proposal(Stamped, Base):
    """A lead's trained candidate for a task's next round, offered to the owner: its files are blobs
    (by sha256), its comparison report one more blob, its key figures kept here for listing."""

    __tablename__ = "proposals"
    __table_args__ = (Index(None, "task_id", "created_at"),)
    task_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("tasks.id"))
    team: Mapped[str] = mapped_column(String(64))  # the proposer's team
    proposer_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    name: Mapped[str] = mapped_column(String(200))
    rounds_trained_on: Mapped[list[Any]]
    compared_with_round: Mapped[int | None] = mapped_column(Integer)
    files: Mapped[list[Any]]  # [{"name", "sha256", "size"}]
    files_sha256: Mapped[str] = mapped_column(String(64))
    comparison: Mapped[dict[str, Any] | None]  # {"name", "sha256", "size"} of the report
    figures: Mapped[dict[str, Any]]
    note: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(String(16), default="open")
    decided_by_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("people.id"))
    decided_at: Mapped[datetime | None]
    reason: Mapped[str | None] = mapped_column(Text)
    promoted_round: Mapped[int | None] = mapped_column(Integer)
    forced: Mapped[bool] = mapped_column(Boolean, default=False)


class StoredBlob(Base):
    """Who uploaded a stored file (``sync.server.blobs``) and when: their quota counts it, and the sweep
    keeps it through a grace period before it may go unreferenced. Files from before this table have no row."""

    __tablename__ = "blobs"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    size: Mapped[int] = mapped_column(BigInteger)
    uploaded_by: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("people.id"), index=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


WELLBEING_SEQ = "wellbeing_seq"


class WellbeingRecord(Base):
    """A person's exposure span or answered break prompt, as their desk pushed it. Served only
    to the person and to the leads of the team they were in when it arrived (``team``); never in the
    change feed, never in exports but as team aggregates. ``seq`` is taken from the ``wellbeing_seq``
    counter at the end of the push, so a reader that has seen N has seen every record before it."""

    __tablename__ = "wellbeing_records"
    __table_args__ = (Index(None, "team", "seq"), Index(None, "person_id", "seq"))
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    seq: Mapped[int] = mapped_column(BigInteger, unique=True)
    kind: Mapped[str] = mapped_column(String(16))  # "exposure" or "break"
    person_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    team: Mapped[str] = mapped_column(String(64))
    body: Mapped[dict[str, Any]]
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class WellbeingLimits(Stamped, Base):
    """A lead's exposure alert lines for their team (append-only; the latest to arrive is in force)."""

    __tablename__ = "wellbeing_limits"
    __table_args__ = (Index(None, "team", "received_at"),)
    team: Mapped[str] = mapped_column(String(64))
    lead_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"))
    daily_min: Mapped[int] = mapped_column(Integer)
    continuous_min: Mapped[int] = mapped_column(Integer)
    received_at: Mapped[datetime] = mapped_column(default=utcnow)


class BlobUpload(Base):
    """One upload of a blob into the database (``sync.server.blob_store``): its chunks are written as they
    arrive, and the blob is served only once a ``BlobContent`` row names this upload, which happens after
    the whole content hashed to its name. An upload no content names is in progress or was cut off (a
    killed server, a dropped connection): never served, swept after the grace period."""

    __tablename__ = "blob_uploads"
    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=new_id)
    sha256: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)


class BlobChunk(Base):
    """Part ``seq`` (from 0) of an upload's content."""

    __tablename__ = "blob_chunks"
    upload_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("blob_uploads.id"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    data: Mapped[bytes] = mapped_column(LargeBinary)


class BlobContent(Base):
    """A complete, verified blob in the database: the upload whose chunks are its content."""

    __tablename__ = "blob_contents"
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    upload_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("blob_uploads.id"), unique=True)
    size: Mapped[int] = mapped_column(BigInteger)
    chunks: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class RequestCount(Base):
    """Requests counted against a limit (``sync.server.shared_limits``) by key and window: every server
    process on the database shares them."""

    __tablename__ = "request_counts"
    key: Mapped[str] = mapped_column(String(80), primary_key=True)
    window_start: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # seconds since the epoch
    hits: Mapped[int] = mapped_column(Integer)


class HeldBack(Base):
    """Changes a person's desk was not sent (or sent without some fields) because they need a newer sync
    protocol than it speaks (``sync.negotiation``): how many, and the range of change numbers to send
    again once the desk speaks the newer one. One row per person: a protocol-1 desk says nothing that tells
    two desks of one person apart."""

    __tablename__ = "held_back"
    person_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("people.id"), primary_key=True)
    protocol: Mapped[int] = mapped_column(Integer)  # what the desk spoke when they were held back
    first_seq: Mapped[int] = mapped_column(BigInteger)
    last_seq: Mapped[int] = mapped_column(BigInteger)
    changes: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)
