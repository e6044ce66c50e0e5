"""The wire form of server rows, and what of it a person may see of another team's examples."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.domain import Role
from app.core.task_settings import TaskSettings
from sync.protocol import (
    ContextRecord,
    ExampleRecord,
    ExampleReviewRecord,
    ModelRecordWire,
    PersonRecord,
    PulledTaskSettingRecord,
    RoundRecord,
    TaskRecord,
    ValidationRecord,
    form_parents,
)
from sync.server.db import ServerDatabase
from sync.server.models import (
    Context,
    Example,
    ExampleReview,
    ModelRecord,
    Person,
    Round,
    Task,
    TaskSetting,
    Validation,
)
from sync.server.store.quarantine import not_quarantined, quarantine, wires
from sync.server.store.rules import MAPPED, chunks


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
        external_id=e.external_id, outputs=e.outputs, duplicate_of=e.duplicate_of, assistance=e.assistance,
        **_stamps(e))


def validation_wire(v: Validation) -> ValidationRecord:
    return ValidationRecord(record="validation", example=v.example_id, validator=v.validator_id, verdict=v.verdict,
                            corrected_label=v.corrected_label, reason=v.reason, model_note=v.model_note, mode=v.mode,
                            time_spent_ms=v.time_spent_ms, **_stamps(v))


def example_review_wire(r: ExampleReview) -> ExampleReviewRecord:
    return ExampleReviewRecord(record="example_review", example=r.example_id, lead=r.lead_id, action=r.action,
                               comment=r.comment, received_at=r.received_at, **_stamps(r))


def task_setting_wire(t: TaskSetting, task_code: str) -> PulledTaskSettingRecord:
    # In its normal form (a row from before migration 0013 holds values as the desk sent them): a resend
    # compares equal. A value today's rules refuse raises, and the feed quarantines the row, naming why.
    settings = TaskSettings.from_json(t.settings).to_json()
    return PulledTaskSettingRecord(record="task_setting", task=task_code, settings=settings, lead=t.lead_id,
                             received_at=t.received_at, **_stamps(t))


def comparable_example(record: dict) -> dict:
    """An example's wire form without what each side maps to its own ids (compared by natural key)."""
    out = {k: v for k, v in record.items() if k not in MAPPED}
    out["outputs"] = [{k: v for k, v in o.items() if k != "model"} for o in record.get("outputs") or []]
    return out


def other_teams(session: Session, me: Person, example_ids: Iterable[uuid.UUID | None]) -> set[uuid.UUID]:
    """Of these examples, those of a team other than ``me``'s (none for owners, who see every team)."""
    ids = sorted({i for i in example_ids if i is not None})
    if me.role == Role.OWNER.value or not ids:
        return set()
    out: set[uuid.UUID] = set()
    for chunk in chunks(ids):
        out.update(i for i, team in session.execute(select(Example.id, Example.team).where(Example.id.in_(chunk)))
                   if team != me.team)
    return out


def hide_foreign(record: ExampleRecord, foreign: set[uuid.UUID]) -> ExampleRecord:
    """An example as ``me`` may see it: an original in another team is not named by its id."""
    if record.duplicate_of in foreign:
        return record.model_copy(update={"duplicate_of": None})
    return record


def model_manifest(db: ServerDatabase, sha256: str) -> ModelRecordWire | None:
    with db.read() as session:
        model = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha256))
        return model_wire(model) if model is not None else None


def model_forms(db: ServerDatabase, sha256: str) -> list[ModelRecordWire]:
    """Published ONNX forms of the model with checksum ``sha256`` (their provenance names it as the
    model they were exported from), with their files; the int8 ones first."""
    with db.read() as session:
        models = session.scalars(select(ModelRecord).where(ModelRecord.format == "onnx",
                                                           not_quarantined(ModelRecord.id))).all()
        forms = [m for m in models if m.files and sha256 in form_parents(m.provenance or {})]
        forms.sort(key=lambda m: "int8" not in str(((m.provenance or {}).get("export") or {}).get("quantization")))
        broken: list = []
        served = wires(forms, "model", model_wire, broken)
    quarantine(db, broken)
    return served

