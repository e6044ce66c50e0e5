"""An owner's publish: tasks, target models, rounds and contexts."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any, cast

from sqlalchemy import select

from app.core.assist.types import AssistantMode
from app.core.domain import Role, utcnow
from app.core.tasks.definition import TaskDefinition
from app.core.text import content_hash
from sync.protocol import (
    ContextRecord,
    ModelRecordWire,
    RecordResult,
    RoundRecord,
    TaskRecord,
    form_parents,
    manifest_sha256,
)
from sync.server.db import ServerDatabase
from sync.server.models import Context, ModelRecord, Person, Round, Task
from sync.server.store.batch import Batch
from sync.server.store.proposals import claimed_round, may_not_publish
from sync.server.store.rules import Forbidden

ASSISTANT_MODES = tuple(m.value for m in AssistantMode)
LEAD_CHANGE = "only the owner changes {what}; a lead adds the round their own promotion opened and nothing else"
KIND_ORDER = {"task": 0, "model": 1, "round": 2, "context": 3}


class _Publish(Batch):
    def run(self, records: Sequence, blob_exists) -> list[RecordResult]:
        self.blob_exists = blob_exists
        self.lead = self.me.role != Role.OWNER.value  # a lead adds the round of their promotion, changes nothing
        self.opened: set[uuid.UUID] = set()  # rounds this publish created: a lead adds contexts only to those
        self.new_models = {r.sha256 for r in records if r.record == "model" and self.model(r.sha256) is None}
        self.model_ids: dict[uuid.UUID, ModelRecord] = {}  # publisher's id -> server row
        for i, r in sorted(self.in_time(records), key=lambda pair: KIND_ORDER[pair[1].record]):
            getattr(self, f"_{r.record}")(i, r)
        self.finish()
        return cast("list[RecordResult]", self.results)  # every record has its result by now

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
        if task is None and self.me.role != Role.OWNER.value:
            return self.result(i, r, "rejected", reason="only owners publish a new task")
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
        if self.me.role != Role.OWNER.value:
            return self.result(i, r, "rejected", reason="only owners change a task's name or definition")
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
        if model is None and self.lead and r.format.value == "onnx" and self._published_parents(r):
            # a form of a model other teams use would reach every desk that prepares that model
            return self.result(i, r, "rejected", reason="a lead publishes faster forms only of the model their "
                                                        "promotion adds; forms of published models are the owner's")
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
        if self.lead:
            return self.result(i, r, "rejected", reason=LEAD_CHANGE.format(what="a published model's files"))
        model.files = files
        self._bump(model, "model", i, r)

    def _published_parents(self, r: ModelRecordWire) -> bool:
        """Whether an ONNX record names a model published before this request: ``model_forms`` would serve
        it to every desk that prepares that model."""
        return any(self.model(sha) is not None for sha in form_parents(r.provenance or {}) - self.new_models)

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
        assistant = r.settings.get("assistant", "off")
        if assistant not in ASSISTANT_MODES:  # every desk reads it; a value none knows would stop them
            return self.result(i, r, "rejected", reason=f"round setting 'assistant' is {assistant!r}; "
                                                        f"one of {', '.join(ASSISTANT_MODES)}")
        values = dict(description=r.description, goal_message=r.goal_message, status=r.status.value,
                      fooled_rule=r.fooled_rule.value, opened_at=r.opened_at, closed_at=r.closed_at,
                      settings=r.settings, target_models=targets)
        round_ = self.round(task, r.number)
        if round_ is None and self.lead and not claimed_round(self.session, self.me, task.id, r.number):
            return self.result(i, r, "rejected", reason=f"a lead publishes only the round their own promotion "
                                                        f"opened; promote a proposal to round {r.number} first "
                                                        "(`dynadesk rounds promote`)")
        if round_ is None:
            taken = self.session.get(Round, r.id) is not None
            round_ = Round(id=uuid.uuid4() if taken else r.id, task_id=task.id, number=r.number, created_at=r.created_at,
                           updated_at=r.updated_at, revision=1, **values)
            self.session.add(round_)
            self._rounds[(task.id, r.number)] = round_
            self.opened.add(round_.id)
            self.changed(round_, "round", None, self.me.id, is_new=True)
            return self.result(i, r, "stored", revision=1)
        if all(getattr(round_, k) == v for k, v in values.items()):
            return self.result(i, r, "already_stored", revision=round_.revision)
        if self.lead and round_.id not in self.opened:
            return self.result(i, r, "rejected", reason=LEAD_CHANGE.format(what=f"round {r.number}, which every "
                                                                                "team works in"))
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
        if self.lead and round_.id not in self.opened:
            return self.result(i, r, "rejected", reason=LEAD_CHANGE.format(what=f"round {r.round_number}'s contexts"))
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
    """Owners publish anything; a lead, where the task's policy lets leads promote, publishes the round their
    own promotion opened (with its new target models, their forms and its contexts), and changes nothing that
    exists: no task, round, model or context (``store.proposals``)."""
    if me.role == Role.LEAD.value:
        _check_lead_may_publish(db, me, records)
    elif me.role != Role.OWNER.value:
        raise Forbidden("Only owners publish tasks, rounds, contexts and target models.")
    now = now or utcnow()
    return db.write_retrying(
        lambda session: _Publish(session, me, [None] * len(records), now=now).run(records, blob_exists))


def _check_lead_may_publish(db: ServerDatabase, me: Person, records: Sequence) -> None:
    codes = {r.code if r.record == "task" else r.task for r in records}
    if None in codes:
        raise Forbidden("A lead publishes only records of a task (a model record names its task).")
    with db.read() as session:
        refused = may_not_publish(session, me, codes)
    if refused:
        raise Forbidden(f"Only owners publish rounds of {', '.join(repr(c) for c in refused)}: the task does not let "
                        "leads promote. Propose the candidate to the owner (`dynadesk rounds propose`), or ask the "
                        "owner to allow it (`dynadesk rounds policy --task T --leads-may-promote yes`).")
