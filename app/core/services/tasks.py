"""Task definitions in the database, and the rounds of each task."""

from __future__ import annotations

import json
import uuid

from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from app.core.domain import RoundStatus, SyncState, utcnow
from app.core.errors import NotFound
from app.core.assist.lexicon import Lexicon, WordChanges, load_lexicon, shipped_lexicon
from app.core.assist.words_store import assist_words_in, store_assist_words
from app.core.quality.settings import QualitySettings
from app.core.quality.settings_store import quality_settings_in, store_quality_settings
from app.core.storage.db import Database
from app.core.storage.models import Meta, OutboxEntry, Round, Task
from app.core.tasks.definition import TaskCatalog, TaskDefinition
from app.core.wellbeing.word_list import task_words
from app.core.wellbeing.word_store import lead_words_in, store_lead_words


# A lead's choice of a task's agreement threshold on this desk, in the database's meta table, so
# that every writer of verdict summaries (validation, import, sync pull) sees the same number.
THRESHOLD_KEY = "agreement_threshold.{code}"
# The team-wide record behind it (``task_setting`` on the wire, JSON): what the lead's desk pushes,
# and the latest this desk pulled, by the server's arrival time.
SETTING_KEY = "task_setting.{code}"
MAX_THRESHOLD = 20


def agreement_threshold_in(session: Session, definition: TaskDefinition) -> int:
    row = session.get(Meta, THRESHOLD_KEY.format(code=definition.code))
    return int(row.value) if row is not None else definition.agreement_threshold


def store_threshold(session: Session, definition: TaskDefinition, threshold: int, setting: dict) -> None:
    """Keep ``threshold`` as the task's on this desk (the task's own number removes the override),
    with the ``task_setting`` record it came from or goes out as."""
    key = THRESHOLD_KEY.format(code=definition.code)
    if threshold == definition.agreement_threshold:
        session.execute(delete(Meta).where(Meta.key == key))
    else:
        session.merge(Meta(key=key, value=str(threshold)))  # insert or update by key
    session.merge(Meta(key=SETTING_KEY.format(code=definition.code), value=json.dumps(setting)))


def task_setting_in(session: Session, code: str) -> dict | None:
    row = session.get(Meta, SETTING_KEY.format(code=code))
    return json.loads(row.value) if row is not None else None


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

    def set_agreement_threshold(self, task_code: str, threshold: int, lead_id: uuid.UUID) -> None:
        """Store a lead's choice (the caller checks the role) and queue it for the team: the server
        and the team's desks decide with it once it is synced."""
        self._queue_setting(task_code, lead_id, threshold=threshold)

    def quality_settings(self, task_code: str) -> QualitySettings:
        """The lead's data-quality settings for the task on this desk (the defaults until set)."""
        with self.db.read() as session:
            return quality_settings_in(session, task_code)

    def set_quality_settings(self, task_code: str, settings: QualitySettings, lead_id: uuid.UUID) -> None:
        """Store a lead's data-quality settings (the caller checks the role) and queue them for the
        team, in the same ``task_setting`` record as the agreement threshold in force here."""
        self._queue_setting(task_code, lead_id, quality=settings)

    def assist_words(self, task_code: str) -> WordChanges:
        """A lead's changes to the task's assistant word lists on this desk (none until made)."""
        with self.db.read() as session:
            return assist_words_in(session, task_code)

    def assist_lexicon(self, task_code: str) -> Lexicon:
        """The assistant's word lists for the task: the shipped ones with the lead's changes."""
        definition = self.definition_by_code(task_code)
        shipped = shipped_lexicon(task_code)
        if shipped.labels and not set(shipped.labels.values()) <= set(definition.labels):
            shipped = load_lexicon(task_code, labels=definition.labels)  # raises, naming the label
        return shipped.with_changes(self.assist_words(task_code))

    def set_assist_words(self, task_code: str, changes: WordChanges, lead_id: uuid.UUID) -> None:
        """Store a lead's word-list changes (the caller checks the role and the lists) and queue
        them for the team in the ``task_setting`` record, with the settings in force here."""
        self._queue_setting(task_code, lead_id, assist_words=changes)

    def lead_blur_words(self, task_code: str) -> tuple[str, ...]:
        """The words the team's leads added to the task's blur list (``app.core.wellbeing.word_list``)."""
        with self.db.read() as session:
            return lead_words_in(session, task_code)

    def blur_words(self, task_code: str) -> tuple[str, ...]:
        """Every word a reading view blurs for the task: the bundled list and the leads' words."""
        return task_words(task_code, self.lead_blur_words(task_code))

    def set_blur_words(self, task_code: str, words: tuple[str, ...], lead_id: uuid.UUID) -> None:
        """Store a lead's blur words (checked by the caller; the caller checks the role) and queue them
        for the team, in the same ``task_setting`` record as the task's other settings."""
        self._queue_setting(task_code, lead_id, blur_words=words)

    def _queue_setting(self, task_code: str, lead_id: uuid.UUID, *, threshold: int | None = None,
                       quality: QualitySettings | None = None, assist_words: WordChanges | None = None,
                       blur_words: tuple[str, ...] | None = None) -> None:
        """One ``task_setting`` record carries every lead setting of the task: the one changed, and
        the others as they are in force here (None: keep)."""
        definition = self.definition_by_code(task_code)
        with self.db.read() as session:
            threshold = agreement_threshold_in(session, definition) if threshold is None else threshold
            quality = quality_settings_in(session, task_code) if quality is None else quality
            assist_words = assist_words_in(session, task_code) if assist_words is None else assist_words
            blur_words = lead_words_in(session, task_code) if blur_words is None else blur_words
        now = utcnow().isoformat()
        setting: dict[str, Any] = {"record": "task_setting", "id": str(uuid.uuid4()), "task": task_code,
                   "agreement_threshold": threshold, "quality": quality.to_json(),
                   "assist_words": assist_words.to_json(), "blur_words": list(blur_words), "lead": str(lead_id),
                   "created_at": now, "updated_at": now,
                   "revision": 1, "received_at": None, "sync_state": SyncState.PENDING.value}
        with self.db.write() as session:
            unsent = task_setting_in(session, task_code)
            if unsent is not None and unsent.get("sync_state") == SyncState.PENDING.value:  # replaced before it went
                session.execute(delete(OutboxEntry).where(OutboxEntry.record_id == uuid.UUID(unsent["id"])))
            store_threshold(session, definition, threshold, setting)
            store_quality_settings(session, task_code, quality)
            store_assist_words(session, task_code, assist_words)
            store_lead_words(session, task_code, blur_words)
            session.add(OutboxEntry(kind="task_setting", record_id=uuid.UUID(setting["id"]), person_id=lead_id,
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
