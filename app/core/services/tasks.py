"""Task definitions in the database, and the rounds of each task."""

from __future__ import annotations

import json
import uuid
from functools import lru_cache
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.assist.lexicon import Lexicon, load_lexicon, shipped_lexicon
from app.core.domain import RoundStatus, SyncState, utcnow
from app.core.errors import NotFound
from app.core.storage.db import Database
from app.core.storage.models import Meta, OutboxEntry, Round, Task
from app.core.task_settings import TaskSettings
from app.core.tasks.definition import TaskCatalog, TaskDefinition
from app.core.wellbeing.word_list import task_words

# A task's lead settings on this desk, one meta value per task: the ``task_setting`` record (its wire
# form) that carries them, with ``sync_state`` and, once the server has it, ``received_at``. The
# lead's desk writes and pushes it; every desk keeps the latest it pulled, by the server's arrival time.
SETTING_KEY = "task_setting.{code}"


def task_setting_in(session: Session, code: str) -> dict | None:
    """The ``task_setting`` record this desk holds for the task (None until a lead set one)."""
    row = session.get(Meta, SETTING_KEY.format(code=code))
    return json.loads(row.value) if row is not None else None


def store_task_setting(session: Session, code: str, record: dict[str, Any]) -> None:
    """Keep ``record`` as the task's settings in force on this desk."""
    session.merge(Meta(key=SETTING_KEY.format(code=code), value=json.dumps(record, ensure_ascii=False)))


def task_settings_in(session: Session, code: str) -> TaskSettings:
    """The task's settings in force on this desk (the defaults until a lead sets them)."""
    row = session.get(Meta, SETTING_KEY.format(code=code))
    return TaskSettings() if row is None else _settings_of(row.value)


@lru_cache(maxsize=64)
def _settings_of(stored: str) -> TaskSettings:
    # Read for every example decided: parsed and checked once per stored value.
    try:
        data = json.loads(stored)
    except ValueError:
        data = None
    # a damaged value is not a reason to stop writing: what can be read is kept, the rest is the default
    return TaskSettings.from_json(data.get("settings") if isinstance(data, dict) else None, fallback=TaskSettings())


def agreement_threshold_in(session: Session, definition: TaskDefinition) -> int:
    return task_settings_in(session, definition.code).threshold_for(definition)


class TaskService:
    def __init__(self, db: Database, catalog: TaskCatalog):
        self.db = db
        self.catalog = catalog
        self._definitions: dict[uuid.UUID, TaskDefinition] = {}

    def sync_catalog(self) -> list[str]:
        """Store every definition of the catalog; a changed YAML file bumps the task's revision.

        Returns the codes of tasks that were added or changed.
        """
        changed = []
        with self.db.write() as session:
            existing = {task.code: task for task in session.scalars(select(Task))}
            for definition in self.catalog:
                data = definition.model_dump(mode="json")
                task = existing.get(definition.code)
                if task is None:
                    session.add(Task(code=definition.code, name=definition.name, definition=data,
                                     fingerprint=definition.fingerprint()))
                    changed.append(definition.code)
                elif task.fingerprint != definition.fingerprint():
                    task.name, task.definition, task.fingerprint = definition.name, data, definition.fingerprint()
                    task.bump()
                    changed.append(definition.code)
        self._definitions.clear()
        return changed

    def ensure_first_rounds(self) -> None:
        """Every task gets an open round 1 the first time it is seen."""
        with self.db.write() as session:
            for task in session.scalars(select(Task)):
                if not session.scalar(select(Round.id).where(Round.task_id == task.id).limit(1)):
                    session.add(Round(task_id=task.id, number=1, description=f"{task.name}: round 1"))

    def task(self, code: str) -> Task:
        with self.db.read() as session:
            task = session.scalar(select(Task).where(Task.code == code))
        if task is None:
            known = ", ".join(sorted(self.catalog.tasks)) or "none"
            raise NotFound(f"There is no task '{code}'. Known tasks: {known}.")
        return task

    def tasks(self) -> list[Task]:
        with self.db.read() as session:
            return list(session.scalars(select(Task).order_by(Task.name)))

    def definition(self, task_id: uuid.UUID) -> TaskDefinition:
        """The definition stored with the task (what its examples were written against)."""
        cached = self._definitions.get(task_id)
        if cached is None:
            with self.db.read() as session:
                task = session.get(Task, task_id)
                if task is None:
                    raise NotFound(f"There is no task with id {task_id}.")
                cached = self._definitions[task_id] = TaskDefinition.model_validate(task.definition)
        return cached

    def agreement_threshold(self, task_id: uuid.UUID) -> int:
        """Matching peer verdicts that decide an example: the lead's choice on this desk where there is
        one (a team of two cannot reach the usual 3), else the task definition's."""
        definition = self.definition(task_id)
        with self.db.read() as session:
            return agreement_threshold_in(session, definition)

    def settings(self, task_code: str) -> TaskSettings:
        """The lead settings of the task in force on this desk (the defaults until set)."""
        with self.db.read() as session:
            return task_settings_in(session, task_code)

    def assist_lexicon(self, task_code: str) -> Lexicon:
        """The assistant's word lists for the task: the shipped ones with the lead's changes."""
        definition = self.definition_by_code(task_code)
        shipped = shipped_lexicon(task_code)
        if shipped.labels and not set(shipped.labels.values()) <= set(definition.labels):
            shipped = load_lexicon(task_code, labels=definition.labels)  # raises, naming the label
        return shipped.with_changes(self.settings(task_code).assist_words)

    def blur_words(self, task_code: str) -> tuple[str, ...]:
        """Every word a reading view blurs for the task: the bundled list and the leads' words."""
        return task_words(task_code, self.settings(task_code).blur_words)

    def set_settings(self, task_code: str, settings: TaskSettings, lead_id: uuid.UUID) -> None:
        """Keep a lead's settings for the task in force here (the caller checks the role and the
        settings) and queue them for the team in one ``task_setting`` record; one not sent yet is
        replaced."""
        self.task(task_code)
        now = utcnow().isoformat()
        record: dict[str, Any] = {"record": "task_setting", "id": str(uuid.uuid4()), "task": task_code,
                                  "settings": settings.to_json(), "lead": str(lead_id), "created_at": now,
                                  "updated_at": now, "revision": 1, "received_at": None,
                                  "sync_state": SyncState.PENDING.value}
        with self.db.write() as session:
            unsent = task_setting_in(session, task_code)
            if unsent is not None and unsent.get("sync_state") == SyncState.PENDING.value and unsent.get("id"):
                session.execute(delete(OutboxEntry).where(OutboxEntry.record_id == uuid.UUID(unsent["id"])))
            store_task_setting(session, task_code, record)
            session.add(OutboxEntry(kind="task_setting", record_id=uuid.UUID(record["id"]), person_id=lead_id,
                                    revision=1, state="pending", attempts=0))

    def task_code(self, task_id: uuid.UUID) -> str:
        return self.definition(task_id).code

    def definition_by_code(self, code: str) -> TaskDefinition:
        return self.definition(self.task(code).id)

    def rounds(self, task_code: str) -> list[Round]:
        task = self.task(task_code)
        with self.db.read() as session:
            return list(session.scalars(select(Round).where(Round.task_id == task.id).order_by(Round.number)))

    def round(self, task_code: str, number: int | None = None) -> Round:
        """Round ``number`` of the task, or its newest open round when no number is given."""
        rounds = self.rounds(task_code)
        if number is None:
            open_rounds = [r for r in rounds if r.status == RoundStatus.OPEN]
            if not open_rounds:
                raise NotFound(f"Task '{task_code}' has no open round.")
            return open_rounds[-1]
        for found in rounds:
            if found.number == number:
                return found
        raise NotFound(f"Task '{task_code}' has no round {number}.")

    def round_by_id(self, round_id: uuid.UUID) -> Round:
        with self.db.read() as session:
            found = session.get(Round, round_id)
        if found is None:
            raise NotFound(f"There is no round with id {round_id}.")
        return found

    def get_or_create_round(self, task_code: str, number: int) -> Round:
        task = self.task(task_code)
        with self.db.write() as session:
            found = session.scalar(select(Round).where(Round.task_id == task.id, Round.number == number))
            if found is None:
                found = Round(task_id=task.id, number=number, description=f"{task.name}: round {number}")
                session.add(found)
                session.flush()
            return found
