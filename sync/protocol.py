"""The sync protocol: request and response schemas shared by the server and the client.

Records on the wire are Dynadesk's own record format (``app.core.io.records``: ``dump_example``,
``dump_validation``, ``dump_example_review``, ...), tagged by ``record``, with three additions
that let a server map what a desk refers to onto its own rows: a ``task`` record kind, and ``round_number`` and
``context_hash`` on examples (``task``/``round_number`` on contexts). Incoming records forbid
unknown fields, so a typo is a 422 with the field named, never a silently dropped value.

Limits: a request body is at most ``MAX_BODY_BYTES``; one push carries at most
``MAX_PUSH_RECORDS`` records; one input text at most ``MAX_TEXT_CHARS`` characters (a task's
own ``max_chars`` is checked on top of that when the record is stored); free-form JSON fields
(``origin``, ``meta``, ``settings``, ...) as deep and as large as ``app.core.limits`` allows. Every text and
free JSON field carries its ``Bound`` from ``app.core.limits`` in its type (``tests/sync/test_wire_bounds.py``
finds any that does not). A page of
changes stops adding records once it holds about ``MAX_PULL_BYTES`` (always at least one change).
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    field_validator,
    model_validator,
)

from app.core.domain import (
    ExampleStatus,
    FooledRule,
    ModelFormat,
    ReviewAction,
    Role,
    RoundStatus,
    ValidationMode,
    Verdict,
)
from app.core.limits import Bound
from app.core.task_settings import MAX_SETTINGS_BYTES, InvalidTaskSettings, TaskSettings
from sync.wire_versions import LOWEST_PROTOCOL as LOWEST_PROTOCOL  # the versions this release speaks
from sync.wire_versions import PROTOCOL_VERSION as PROTOCOL_VERSION

API = "/v1"
MAX_BODY_BYTES = 16 * 1024 * 1024
MAX_PUSH_RECORDS = 2000
MAX_PULL_RECORDS = 2000
MAX_PULL_BYTES = 4 * 1024 * 1024
MAX_TEXT_CHARS = 200_000  # the largest max_chars a task definition may set
MAX_BLOB_BYTES = 8 * 1024**3
TOKEN_PREFIX = "ddk_"

Hex64 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$"), Bound.line(64)]
Code = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]*$"), Bound.line(64)]
Name = Annotated[str, StringConstraints(min_length=1), Bound.line(200)]
Label = Annotated[str, Bound.line(200)]
Short = Annotated[str, Bound.text(500)]
Text = Annotated[str, Bound.text(MAX_TEXT_CHARS)]
Team = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9 ._-]{0,63}$"), Bound.line(64)]
Count = Annotated[int, Field(ge=0, le=10**12)]
Revision = Annotated[int, Field(ge=1, le=2**31 - 1)]
FileName = Annotated[str, StringConstraints(pattern=r"^(model|tokenizer)/[A-Za-z0-9][A-Za-z0-9._-]{0,199}$"),
                     Bound.line(210)]
# Free JSON: as deep, as large, with such characters and numbers as app.core.limits allows (its size
# limit by the field's name: a task's definition and a model's provenance may be larger).
FreeJson = Annotated[dict[str, Any], Bound.json()]
FreeList = Annotated[list[Any], Bound.json()]
FreeValue = Annotated[Any, Bound.json()]
# What the server writes for a reader (a refusal's reason, a person's name in figures): control
# characters escaped and cut to length, never refused.
Shown = Annotated[str, Bound.shown(64 * 1024)]
ShownName = Annotated[str, Bound.shown(200)]

SUBMITTED_STATES = Literal["submitted", "flagged", "retracted"]  # drafts never leave the desk


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Stamped(Strict):
    id: uuid.UUID
    created_at: AwareDatetime
    updated_at: AwareDatetime
    revision: Revision = 1


class PersonRecord(Stamped):
    record: Literal["person"]
    display_name: Name
    role: Role
    team: Team | None = None  # set by the server


class TaskRecord(Stamped):
    record: Literal["task"]
    code: Code
    name: Name
    definition: FreeJson
    fingerprint: Hex64


class ModelFile(Strict):
    """One file of a model, named as its checksum names it (``model/...`` or ``tokenizer/...``)."""

    name: FileName
    sha256: Hex64
    size: Annotated[int, Field(ge=0, le=MAX_BLOB_BYTES)]


class ModelRecordWire(Stamped):
    record: Literal["model"]
    name: Name
    format: ModelFormat
    sha256: Hex64
    label_map: FreeJson = Field(default_factory=dict)
    task: Code | None = None
    provenance: FreeJson = Field(default_factory=dict)
    files: list[ModelFile] | None = Field(default=None, max_length=1000)  # None: no files on the server


def form_parents(provenance: dict[str, Any]) -> set[str]:
    """The checksums of the model a record's model was exported from (its ONNX form names its
    PyTorch form twice: in its export description and as its parent model)."""
    export, parent = provenance.get("export") or {}, provenance.get("parent_model") or {}
    return {v for v in (export.get("parent_sha256"), parent.get("sha256")) if isinstance(v, str)}


class ModelForms(Strict):
    """Faster forms of one model published with it (its ONNX exports, with their files), so that
    a desk fetches them instead of preparing them."""

    forms: list[ModelRecordWire] = Field(default_factory=list, max_length=100)


class RoundRecord(Stamped):
    record: Literal["round"]
    task: Code
    number: Annotated[int, Field(ge=1, le=10**6)]
    description: Text = ""
    goal_message: Text = ""
    status: RoundStatus = RoundStatus.OPEN
    fooled_rule: FooledRule = FooledRule.MEAN
    opened_at: AwareDatetime | None = None
    closed_at: AwareDatetime | None = None
    settings: FreeJson = Field(default_factory=dict)
    target_models: list[uuid.UUID] = Field(default_factory=list, max_length=16)


class ContextRecord(Stamped):
    record: Literal["context"]
    round: uuid.UUID
    task: Code
    round_number: Annotated[int, Field(ge=1)]
    text: Text
    data: FreeValue = None
    tag: Label = ""
    source: Short = ""
    times_used: Count = 0


class SpanWire(Strict):
    start: Annotated[int, Field(ge=0)]
    end: Annotated[int, Field(ge=0)]
    text: Text


class OutputWire(Strict):
    model: uuid.UUID
    model_sha256: Hex64
    label: Label
    probabilities: dict[Label, float] = Field(default_factory=dict, max_length=1000)
    latency_ms: float | None = None
    answer: SpanWire | None = None
    fooled: bool | None = None


class AssistanceWire(Strict):
    """The writing assistant's part in an example (``app.core.assist.provenance``). The server
    checks it and measures ``edit_distance`` itself from ``applied_text`` and the example's text."""

    arm: Literal["on", "off"] | None = None
    session: Annotated[int, Field(ge=1, le=1_000_000)] | None = None
    applied: bool = False
    generator: Annotated[str, Bound.line(32)] | None = None
    edit_type: Annotated[str, Bound.line(64)] | None = None
    applied_text: Text | None = None
    edit_distance: Count | None = None  # ignored when pushed: the server measures it


class ExampleRecord(Stamped):
    record: Literal["example"]
    task: Code
    round: uuid.UUID
    round_number: Annotated[int, Field(ge=1)]
    context: uuid.UUID | None = None
    context_hash: Hex64 | None = None
    author: uuid.UUID
    inputs: dict[Code, Text] = Field(max_length=20)
    true_label: Label | None = None
    answer: SpanWire | None = None
    model_fooled: bool | None = None
    fooled_rule: FooledRule = FooledRule.MEAN
    meta: FreeJson = Field(default_factory=dict)
    origin: FreeJson = Field(default_factory=dict)
    perturbation_of: uuid.UUID | None = None
    edit_ops: FreeList | None = None
    edit_distance: Count | None = None
    status: SUBMITTED_STATES
    status_reason: Text | None = None
    time_spent_ms: Count = 0
    submitted_at: AwareDatetime | None = None
    source: Label | None = None
    external_id: Label | None = None
    outputs: list[OutputWire] = Field(default_factory=list, max_length=16)
    duplicate_of: uuid.UUID | None = None  # set by the server; ignored when pushed
    assistance: AssistanceWire | None = None  # None: written without the assistant, or by an older desk


class ValidationRecord(Stamped):
    record: Literal["validation"]
    example: uuid.UUID
    validator: uuid.UUID
    verdict: Verdict
    corrected_label: Label | None = None
    reason: Text | None = None
    model_note: Text | None = None
    mode: ValidationMode = ValidationMode.PEER
    time_spent_ms: Count = 0


class ExampleReviewRecord(Stamped):
    """A lead accepted an example or returned it to its author with a comment. Append-only;
    only leads and owners of the example's team push them."""

    record: Literal["example_review"]
    example: uuid.UUID
    lead: uuid.UUID
    action: ReviewAction
    comment: Text | None = None
    # Set by the server (ignored when pushed): when it arrived there. Desks take an example's latest
    # review by this, not by created_at, which the writing desk's clock (or a forger) chose.
    received_at: AwareDatetime | None = None


# The lead settings a desk from before ``settings`` sends as fields of their own (this shape is frozen:
# a new setting is a field of ``TaskSettings``, never of the record).
LEGACY_SETTING_FIELDS = ("agreement_threshold", "quality", "assist_words", "blur_words")


class TaskSettingRecord(Stamped):
    """A lead's settings for a task, for their whole team (``app.core.task_settings.TaskSettings``:
    the agreement threshold, the data-quality settings, the assistant's and the blur word lists).
    Append-only; only leads and owners push them. The latest by server arrival per team and task is
    in force: the server and the team's desks decide examples with its threshold.

    ``settings`` is ``TaskSettings.to_json()``, checked by ``TaskSettings`` and kept in its normal
    form. A desk from before it sends the settings as fields of the record (``LEGACY_SETTING_FIELDS``);
    they are taken into ``settings``."""

    record: Literal["task_setting"]
    task: Code
    settings: Annotated[dict[str, Any], Bound.json(MAX_SETTINGS_BYTES)]
    lead: uuid.UUID
    received_at: AwareDatetime | None = None  # set by the server (ignored when pushed)

    @model_validator(mode="before")
    @classmethod
    def _settings_sent_as_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict) or "settings" in data:
            return data
        legacy = {name: data[name] for name in LEGACY_SETTING_FIELDS if data.get(name) is not None}
        return {**{k: v for k, v in data.items() if k not in LEGACY_SETTING_FIELDS}, "settings": legacy}

    @field_validator("settings", mode="before")
    @classmethod
    def _checked_settings(cls, value: Any) -> dict[str, Any]:
        """The desks' rules, so a record every desk would refuse is refused here, each problem named.
        They run before the field's bound, so the lead reads the desk's sentences about every bad value."""
        try:
            return TaskSettings.from_json(value).to_json()
        except InvalidTaskSettings as exc:
            raise ValueError(str(exc)) from None


class PulledTaskSettingRecord(TaskSettingRecord):
    """A ``task_setting`` in a page of changes. The server checked it when it was pushed; a desk older
    than one of its settings (or than a rule of one) still takes the page, and takes the settings it
    can (``TaskSettings.from_json`` with the settings in force as the fallback), instead of stopping
    its pulls until it is updated."""

    @field_validator("settings", mode="before")
    @classmethod
    def _checked_settings(cls, value: Any) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise ValueError(f"settings must be an object; got {type(value).__name__}")
        return value


PushItem = Annotated[ExampleRecord | ValidationRecord | ExampleReviewRecord | TaskSettingRecord | PersonRecord,
                     Field(discriminator="record")]
PublishItem = Annotated[TaskRecord | ModelRecordWire | RoundRecord | ContextRecord, Field(discriminator="record")]
AnyRecord = Annotated[
    PersonRecord | TaskRecord | ModelRecordWire | RoundRecord | ContextRecord | ExampleRecord | ValidationRecord | ExampleReviewRecord | PulledTaskSettingRecord,
    Field(discriminator="record"),
]
RECORD_ADAPTER: TypeAdapter[Any] = TypeAdapter(AnyRecord)


class PushRequest(Strict):
    """Examples, validations and lead reviews written at a desk (and, for owners pushing an imported data set,
    the records' pseudonymous authors)."""

    records: list[PushItem] = Field(min_length=1, max_length=MAX_PUSH_RECORDS)


class PublishRequest(Strict):
    """What owners publish: task definitions, rounds, contexts and target model records."""

    records: list[PublishItem] = Field(min_length=1, max_length=MAX_PUSH_RECORDS)


ResultStatus = Literal["stored", "already_stored", "conflict", "rejected", "deferred"]


class RecordResult(Strict):
    """What became of one record. ``stored``: written now. ``already_stored``: this revision was
    already there (a resent batch). ``conflict``: the server holds a different version, which it
    keeps; ``server`` shows it. ``rejected``: it breaks a rule, named in ``reason``. ``deferred``: it
    refers to something the server does not have yet (send it again later)."""

    index: int
    id: uuid.UUID
    record: Code
    status: ResultStatus
    revision: int | None = None  # the server's revision of the record after this request
    reason: Shown | None = None
    # The server's version, for conflicts; for a stored example, {"model_fooled": ...} when the
    # server judged it otherwise than the desk (the server's judgement counts); for a review already
    # stored, {"received_at": ...}: when it first arrived (a resend after a lost answer keeps that time).
    server: Annotated[dict[str, Any], Bound.json(MAX_BODY_BYTES)] | None = None


class PushResponse(Strict):
    results: list[RecordResult]
    server_time: datetime  # when the request arrived: the received_at of the records it stored

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)


class ChangesResponse(Strict):
    """One page of changes after ``since``, with every record they refer to (people, task, round,
    models, context, the validated or reviewed example), so that a page can be applied on its own."""

    records: list[AnyRecord]
    referenced: list[uuid.UUID] = Field(default_factory=list)  # records sent only because others refer to them
    cursor: int  # pass as ``since`` for the next page
    more: bool
    remaining: int  # changes after ``cursor`` (for progress)
    # Changes this person's desk was not sent because they need a newer protocol than it speaks (a
    # newer server's count, for the desk to show; sync.negotiation). Protocol 2.
    held_back: Count = 0


class Me(Strict):
    id: uuid.UUID
    display_name: ShownName
    role: Role
    team: Team
    protocol: int = PROTOCOL_VERSION  # the version this answer is in: the highest both sides speak
    server_version: Label


class RecordError(Strict):
    index: int | None = None
    id: Annotated[str, Bound.shown(64)] | None = None
    reason: Shown


class ErrorBody(Strict):
    """Every 4xx and 5xx answer: ``detail`` says what went wrong; ``errors`` names the records."""

    detail: Shown
    errors: list[RecordError] = Field(default_factory=list)


class FigureRow(Strict):
    key: ShownName
    name: ShownName
    submitted: int
    fooled: int
    validated_fooling: int
    duplicates: int
    mer: float | None
    vmer: float | None


class TeamStats(Strict):
    team: Team | None  # None: every team (owners)
    by: Literal["round", "annotator"]
    rows: list[FigureRow]


class ArmFigureRow(Strict):
    """One side of the writing assistant's split for a round or an annotator
    (``app.core.tasks.figures.arm_split``, computed by the server from its stored records)."""

    key: ShownName
    name: ShownName
    arm: Literal["assisted", "unassisted"]
    submitted: int
    applied: int  # with a suggestion applied
    fooled: int
    validated_fooling: int
    decided: int
    rejected: int
    mer: float | None
    vmer: float | None
    rejection_rate: float | None
    median_seconds: float | None


class TeamAssistantSplit(Strict):
    team: Team | None
    by: Literal["round", "annotator"]
    rows: list[ArmFigureRow]
    outside: int  # submitted examples without an arm (the assistant off, or written before it)


class Duplicate(Strict):
    """An example whose text an earlier one of the round already had. When the earlier one belongs
    to another team, a lead learns only that (``other_team``); who wrote it and its id stay hidden
    (``None``). Owners see everything."""

    example: uuid.UUID
    duplicate_of: uuid.UUID | None
    task: Code
    round_number: int
    text: Text
    author: ShownName
    original_author: ShownName | None
    other_team: bool = False


class Duplicates(Strict):
    duplicates: list[Duplicate]


class BlobStored(Strict):
    sha256: Hex64
    size: int
    created: bool


class StorageUse(Strict):
    """The model files a person keeps on the server (``GET /v1/storage``): what their quota counts."""

    used: int = Field(ge=0, le=2**63 - 1)  # bytes of the files they uploaded that the server still keeps
    files: int = Field(ge=0, le=2**63 - 1)
    quota: int | None = Field(default=None, ge=0, le=2**63 - 1)  # None: no limit


def manifest_sha256(files: Iterable[tuple[str, str]]) -> str:
    """A model's checksum from its (name, file sha256) pairs: the same manifest hash as
    ``local_models.files.files_sha256``, computed without reading the files."""
    lines = sorted(f"{name}\0{sha}\n" for name, sha in files)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


SUBMITTED = ExampleStatus.SUBMITTED.value
