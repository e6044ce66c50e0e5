"""Dynadesk's own record format: one JSON object per record, tagged by ``record``.

:func:`dump_*` turn rows into records; :class:`RecordWriter` stores records, mapping
references onto what this desk already has (a round by task and number, a model by
checksum, a context by content), so that records from many desks merge cleanly.
"""

from __future__ import annotations

import json
import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.assist.provenance import distance_bound, received_assistance
from app.core.domain import MAX_ROUND_NUMBER, ExampleStatus, ModelFormat, Role, Span, SyncState, ValidationMode, Verdict
from app.core.errors import DynadeskError, InvalidExample
from app.core.io.rows import whole_number
from app.core.limits import record_problems
from app.core.storage.models import (
    Context,
    Example,
    ExampleFacet,
    ExampleReview,
    ModelOutputRow,
    ModelRecord,
    Person,
    Round,
    RoundModel,
    Task,
    Validation,
)
from app.core.tasks.content import Content, check_content, facet_values, written_text
from app.core.tasks.verdicts import summarise_on_desk
from app.core.text import content_hash, printable

FORMAT_VERSION = 1
KINDS = ("person", "model", "round", "context", "example", "validation")


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value else None


def _parse_time(value: str | None) -> datetime | None:
    if value is None:
        return None
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        raise ValueError(f"time '{value}' has no time zone")
    return parsed


def _stamps(row) -> dict:
    out = {"created_at": _time(row.created_at), "updated_at": _time(row.updated_at)}
    if hasattr(row, "revision"):
        out["revision"] = row.revision
    return out


def dump_person(person: Person, *, person_id: uuid.UUID | None = None, name: str | None = None) -> dict:
    return {"record": "person", "id": str(person_id or person.id), "display_name": name or person.display_name,
            "role": person.role, **_stamps(person)}


def dump_model(model: ModelRecord, task_code: str | None) -> dict:
    return {"record": "model", "id": str(model.id), "name": model.name, "format": model.format, "sha256": model.sha256,
            "label_map": model.label_map, "task": task_code, "provenance": model.provenance, **_stamps(model)}


def dump_round(round_: Round, task_code: str, model_ids: list[uuid.UUID]) -> dict:
    return {"record": "round", "id": str(round_.id), "task": task_code, "number": round_.number,
            "description": round_.description, "goal_message": round_.goal_message, "status": round_.status,
            "fooled_rule": round_.fooled_rule, "opened_at": _time(round_.opened_at), "closed_at": _time(round_.closed_at),
            "settings": round_.settings, "target_models": [str(m) for m in model_ids], **_stamps(round_)}


def dump_context(context: Context) -> dict:
    return {"record": "context", "id": str(context.id), "round": str(context.round_id), "text": context.text,
            "data": context.data, "tag": context.tag, "source": context.source, "times_used": context.times_used,
            **_stamps(context)}


def dump_example(example: Example, task_code: str, *, author_id: uuid.UUID | None = None) -> dict:
    return {
        "record": "example", "id": str(example.id), "task": task_code, "round": str(example.round_id),
        "context": str(example.context_id) if example.context_id else None,
        "author": str(author_id or example.author_id), "inputs": example.inputs, "true_label": example.true_label,
        "answer": example.answer, "model_fooled": example.model_fooled, "fooled_rule": example.fooled_rule,
        "meta": example.meta, "origin": example.origin,
        "perturbation_of": str(example.perturbation_of) if example.perturbation_of else None,
        "edit_ops": example.edit_ops, "edit_distance": example.edit_distance, "status": example.status,
        "status_reason": example.status_reason, "time_spent_ms": example.time_spent_ms,
        "submitted_at": _time(example.submitted_at), "source": example.source, "external_id": example.external_id,
        "outputs": [
            {"model": str(o.model_id), "model_sha256": o.model_sha256, "label": o.label,
             "probabilities": o.probabilities, "latency_ms": o.latency_ms, "answer": o.answer, "fooled": o.fooled}
            for o in example.outputs
        ],
        # only when there is one: a server from before the assistant takes the records it always took
        **({"assistance": example.assistance} if example.assistance is not None else {}),
        **_stamps(example),
    }


def dump_validation(validation: Validation, *, validator_id: uuid.UUID | None = None) -> dict:
    return {"record": "validation", "id": str(validation.id), "example": str(validation.example_id),
            "validator": str(validator_id or validation.validator_id), "verdict": validation.verdict,
            "corrected_label": validation.corrected_label, "reason": validation.reason,
            "model_note": validation.model_note, "mode": validation.mode, "time_spent_ms": validation.time_spent_ms,
            **_stamps(validation)}


def dump_example_review(review: ExampleReview) -> dict:
    """A lead's accept or return of an example (it travels by sync; files do not carry it)."""
    return {"record": "example_review", "id": str(review.id), "example": str(review.example_id),
            "lead": str(review.lead_id), "action": review.action, "comment": review.comment, **_stamps(review)}


def read_record(data: Any) -> dict:
    """Check a record's shape; the details are checked when it is stored."""
    if not isinstance(data, dict):
        raise ValueError("a record must be a JSON object")
    kind = data.get("record")
    if kind not in KINDS:
        raise ValueError(f"unknown record kind {kind!r}; expected one of {', '.join(KINDS)}")
    try:
        uuid.UUID(str(data["id"]))
    except (KeyError, ValueError):
        raise ValueError(f"a {kind} record needs an 'id' that is a UUID") from None
    return data


def _uuid(value: Any, what: str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError:
        raise DynadeskError(f"{what} '{value}' is not a UUID") from None


def _stamp_fields(record: dict) -> dict:
    out: dict[str, Any] = {}
    for key in ("created_at", "updated_at"):
        if record.get(key):
            out[key] = _parse_time(record[key])
    if "revision" in record:
        out["revision"] = whole_number(record["revision"], "revision")
    return out


def _count(record: dict, key: str) -> int:
    """A whole-number field (absent or null: 0) that fits a database column."""
    return whole_number(record.get(key) or 0, key)


def _check_types(record: dict, expected: dict[str, tuple[type, ...]]) -> None:
    """Fields that must be JSON objects, lists or flags: anything else is refused by name, not by a crash later."""
    names = {dict: "an object", list: "a list", bool: "true or false", str: "text", type(None): "null"}
    for key, kinds in expected.items():
        value = record.get(key)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            allowed = " or ".join(names[k] for k in kinds)
            raise DynadeskError(f"'{key}' must be {allowed}, not {json.dumps(value)[:60]}")


EXAMPLE_TYPES = {"inputs": (dict,), "meta": (dict, type(None)), "origin": (dict, type(None)),
                 "outputs": (list, type(None)), "edit_ops": (list, type(None)), "answer": (dict, type(None)),
                 "model_fooled": (bool, type(None)), "true_label": (str, type(None)), "task": (str,),
                 "fooled_rule": (str, type(None)), "status_reason": (str, type(None)), "source": (str, type(None)),
                 "external_id": (str, type(None))}


class RecordWriter:
    """Stores records in one session; references are resolved through ``self.ids``."""

    def __init__(self, session: Session, desk, report, *, flush_each: bool = True):
        self.session = session
        self.desk = desk
        self.report = report
        # Flushing after each example or validation pins a failure on its record; a writer that
        # stores many records at once (sync) flushes them together, in bulk.
        self.flush_each = flush_each
        self.ids: dict[uuid.UUID, uuid.UUID] = {}  # id in the file -> id on this desk
        self.touched: set[uuid.UUID] = set()  # examples whose validation summary must be recomputed

    def ref(self, value: Any, what: str) -> uuid.UUID:
        raw = _uuid(value, what)
        return self.ids.get(raw, raw)

    def write(self, record: dict) -> None:
        what = f"{record['record']} record {record.get('id')}"
        problems = record_problems(record["record"], record)
        if problems:  # the server would refuse it, and one such record once stopped a whole team's sync
            raise DynadeskError(f"{what}: {'; '.join(problems)}")
        try:
            getattr(self, f"_write_{record['record']}")(record)
        except KeyError as exc:
            raise DynadeskError(f"{what}: the field {exc} is missing") from exc
        except (TypeError, ValueError, AttributeError, OverflowError) as exc:
            raise DynadeskError(f"{what}: {exc}") from exc

    def _present(self, model, record_id: uuid.UUID) -> bool:
        if self.session.get(model, record_id) is not None:
            self.report.already_present += 1
            return True
        return False

    def _task(self, code: str) -> Task:
        task = self.session.scalar(select(Task).where(Task.code == code))
        if task is None:
            raise DynadeskError(f"task '{code}' is not defined on this desk")
        return task

    def _write_person(self, r: dict) -> None:
        person_id = _uuid(r["id"], "person id")
        if self._present(Person, person_id):
            return
        self.session.add(Person(id=person_id, display_name=printable(str(r["display_name"]))[:200],
                                role=Role(r["role"]).value,
                                **_stamp_fields(r)))
        self.report.count("people")

    def _write_model(self, r: dict) -> None:
        model_id = _uuid(r["id"], "model id")
        same = self.session.scalar(select(ModelRecord).where(ModelRecord.sha256 == r["sha256"]))
        if same is not None:
            self.ids[model_id] = same.id
            self.report.already_present += 1
            return
        task_id = self._task(r["task"]).id if r.get("task") else None
        self.session.add(ModelRecord(id=model_id, name=r["name"], format=ModelFormat(r["format"]).value,
                                     sha256=r["sha256"], label_map=r.get("label_map") or {}, task_id=task_id,
                                     provenance=r.get("provenance") or {}, **_stamp_fields(r)))
        self.session.flush()
        self.report.count("models")

    def _write_round(self, r: dict) -> None:
        round_id = _uuid(r["id"], "round id")
        _check_types(r, {"task": (str,), "description": (str, type(None)), "goal_message": (str, type(None)),
                         "status": (str, type(None)), "fooled_rule": (str, type(None)), "settings": (dict, type(None))})
        task = self._task(r["task"])
        number = whole_number(r["number"], "number", low=1, high=MAX_ROUND_NUMBER)
        same = self.session.scalar(select(Round).where(Round.task_id == task.id, Round.number == number))
        if same is not None:
            self.ids[round_id] = same.id
            self.report.already_present += 1
            return
        self.session.add(Round(id=round_id, task_id=task.id, number=number, description=r.get("description", ""),
                               goal_message=r.get("goal_message", ""), status=r.get("status", "open"),
                               fooled_rule=r.get("fooled_rule", "mean"), opened_at=_parse_time(r.get("opened_at")),
                               closed_at=_parse_time(r.get("closed_at")), settings=r.get("settings") or {},
                               **_stamp_fields(r)))
        self.session.flush()
        for position, model in enumerate(r.get("target_models") or []):
            self.session.add(RoundModel(round_id=round_id, model_id=self.ref(model, "model id"), position=position))
        self.report.count("rounds")

    def _write_context(self, r: dict) -> None:
        context_id = _uuid(r["id"], "context id")
        round_id = self.ref(r["round"], "round id")
        _check_types(r, {"text": (str,)})
        digest = content_hash(r["text"])
        same = self.session.scalar(select(Context).where(Context.round_id == round_id, Context.content_hash == digest))
        if same is not None:
            self.ids[context_id] = same.id
            self.report.already_present += 1
            return
        self.session.add(Context(id=context_id, round_id=round_id, text=r["text"], data=r.get("data"),
                                 tag=r.get("tag", ""), source=r.get("source", ""), content_hash=digest,
                                 times_used=_count(r, "times_used"), **_stamp_fields(r)))
        self.session.flush()
        self.report.count("contexts")

    def _write_example(self, r: dict) -> None:
        example_id = _uuid(r["id"], "example id")
        if self._present(Example, example_id):
            return
        _check_types(r, EXAMPLE_TYPES)
        for output in r.get("outputs") or []:
            if not isinstance(output, dict):
                raise DynadeskError(f"each of 'outputs' must be an object, not {json.dumps(output)[:60]}")
            _check_types(output, {"probabilities": (dict, type(None)), "fooled": (bool, type(None))})
        status = ExampleStatus(r["status"])
        if status == ExampleStatus.DRAFT:
            raise DynadeskError("drafts are not imported")
        task = self._task(r["task"])
        definition = self.desk.tasks.definition(task.id)
        try:
            checked = check_content(definition, Content(r["inputs"], r.get("true_label"), Span.from_json(r.get("answer")),
                                                        r.get("meta") or {}), require_metadata=False)
            # the record's figure is not taken: the distance is measured again on this text
            assistance = received_assistance(r.get("assistance"), written_text(definition, checked.inputs),
                                             max_chars=distance_bound(definition)).record
        except InvalidExample as exc:
            raise DynadeskError(str(exc)) from exc
        example = Example(
            id=example_id, task_id=task.id, round_id=self.ref(r["round"], "round id"),
            context_id=self.ref(r["context"], "context id") if r.get("context") else None,
            author_id=self.ref(r["author"], "person id"), inputs=checked.inputs,
            text=written_text(definition, checked.inputs), true_label=checked.true_label,
            answer=checked.answer.to_json() if checked.answer else None, model_fooled=r.get("model_fooled"),
            fooled_rule=r.get("fooled_rule", "mean"), meta=checked.meta, origin=r.get("origin") or {},
            perturbation_of=self.ref(r["perturbation_of"], "example id") if r.get("perturbation_of") else None,
            edit_ops=r.get("edit_ops"),
            edit_distance=_count(r, "edit_distance") if r.get("edit_distance") is not None else None,
            assistance=assistance, status=status.value,
            status_reason=r.get("status_reason"), time_spent_ms=_count(r, "time_spent_ms"),
            submitted_at=_parse_time(r.get("submitted_at")), source=r.get("source"), external_id=r.get("external_id"),
            sync_state=SyncState.LOCAL.value, **_stamp_fields(r),
        )
        example.outputs = [
            ModelOutputRow(model_id=self.ref(o["model"], "model id"), position=i, model_sha256=o["model_sha256"],
                           label=o["label"], probabilities=o.get("probabilities") or {}, latency_ms=o.get("latency_ms"),
                           answer=o.get("answer"), fooled=o.get("fooled"))
            for i, o in enumerate(r.get("outputs") or [])
        ]
        self.session.add(example)
        if self.flush_each:
            self.session.flush()
        self.session.add_all(ExampleFacet.rows_for(example.id, facet_values(definition, checked.meta)))
        self.touched.add(example.id)
        self.report.count("examples")

    def _write_validation(self, r: dict) -> None:
        validation_id = _uuid(r["id"], "validation id")
        if self._present(Validation, validation_id):
            return
        example_id = self.ref(r["example"], "example id")
        if self.session.get(Example, example_id) is None:
            raise DynadeskError(f"it validates example {example_id}, which is not in the data")
        self.session.add(Validation(id=validation_id, example_id=example_id,
                                    validator_id=self.ref(r["validator"], "person id"),
                                    verdict=Verdict(r["verdict"]).value, corrected_label=r.get("corrected_label"),
                                    reason=r.get("reason"), model_note=r.get("model_note"),
                                    mode=ValidationMode(r.get("mode", "peer")).value,
                                    time_spent_ms=_count(r, "time_spent_ms"), sync_state=SyncState.LOCAL.value,
                                    **_stamp_fields(r)))
        if self.flush_each:
            self.session.flush()
        self.touched.add(example_id)
        self.report.count("validations")

    def finish(self) -> None:
        for example_id in self.touched:
            example = self.session.get_one(Example, example_id)
            threshold = self.desk.tasks.agreement_threshold(example.task_id)
            self.session.refresh(example, ["validations"])
            summarise_on_desk(example, list(example.validations), threshold)
