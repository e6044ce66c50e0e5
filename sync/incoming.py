"""Sync coming in, in the desk's database: storing pulled pages (with the cursor after each) through a ``RecordWriter`` that maps them onto this desk's own rows."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.core.domain import ReviewAction, SyncState
from app.core.errors import DynadeskError
from app.core.io.records import RecordWriter
from app.core.services.lead import review_order
from app.core.services.tasks import agreement_threshold_in, store_task_setting, task_setting_in, task_settings_in
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleReview, Person, Round, RoundModel, Task
from app.core.task_settings import TaskSettings
from app.core.tasks.definition import TaskDefinition
from sync import wire_versions
from sync.local import set_meta
from sync.outgoing import SYNCED_TABLES

log = logging.getLogger(__name__)


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

    def write(self, record: dict) -> None:
        kind, record_id = record.get("record"), record.get("id")
        if kind in SYNCED_TABLES and record_id and uuid.UUID(str(record_id)) in self.present[kind]:
            self._fill_in_newer_fields(SYNCED_TABLES[kind], kind, record)
        super().write(record)

    def _fill_in_newer_fields(self, model, kind: str, record: dict) -> None:
        """A record this desk has, sent again with fields a newer protocol brought (a server held them back
        while this desk spoke an older one, sync.negotiation): what this desk's copy lacks is filled in."""
        newer = [name for (of, name) in wire_versions.FIELD_SINCE if of == kind
                 and record.get(name) is not None and name in model.__table__.columns]
        if not newer:
            return
        row = self.session.get(model, uuid.UUID(str(record["id"])))
        if row is None:
            return
        for name in newer:
            if getattr(row, name) in (None, "", [], {}):
                setattr(row, name, record[name])
                self.report.updated += 1

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
                assert existing is not None  # self.present says it is here
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
        """A lead of this team set the task's settings: the latest to reach the server is in force here too."""
        task = self._task(r["task"])
        held = task_setting_in(self.session, r["task"])
        if held is not None and held.get("id") == r["id"]:
            self.report.already_present += 1
            return
        if held is not None and held.get("sync_state") == SyncState.PENDING.value:
            self.report.already_present += 1  # this desk's lead set it since: theirs reaches the server last
            return
        if held is not None and held.get("received_at") and r.get("received_at") and \
                datetime.fromisoformat(held["received_at"]) >= datetime.fromisoformat(r["received_at"]):
            self.report.already_present += 1  # a newer one is in force here already
            return
        before = task_settings_in(self.session, r["task"])
        # What this desk cannot take (a newer desk's rule it lacks) keeps the value in force here.
        settings = TaskSettings.from_json(r.get("settings"), fallback=before)
        store_task_setting(self.session, r["task"], {**r, "settings": settings.to_json(),
                                                     "sync_state": SyncState.SYNCED.value})
        if settings.agreement_threshold != before.agreement_threshold:
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
        table = cast(Table, Example.__table__)
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
            table = cast(Table, model.__table__)
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
