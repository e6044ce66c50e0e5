"""A writer's session on the Create page of a round: its number among their sessions in the
round and, from the round's assistant setting, its arm (app.core.assist.arms). Every example the
session writes records both (``Assistance.arm`` / ``Assistance.session``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import select

from app.core.assist.arms import Arm, next_session_number, round_key, session_arm
from app.core.assist.types import Assistance, AssistantMode
from app.core.errors import NotFound
from app.core.services.rounds import RoundSettings
from app.core.storage.db import Database
from app.core.storage.models import Example, Round, Task


@dataclass(frozen=True)
class WritingSession:
    round_id: uuid.UUID
    writer_id: uuid.UUID
    mode: AssistantMode  # the round's setting when the session began
    number: int  # the writer's session number in the round, from 1
    arm: Arm | None  # None: the assistant is off in this round

    @property
    def assisted(self) -> bool:
        """Whether the writer gets suggestions in this session."""
        return self.arm == "on"

    def assistance(self) -> Assistance:
        """The record a new example of this session starts with."""
        return Assistance(arm=self.arm, session=self.number)


def begin_writing_session(db: Database, round_id: uuid.UUID, writer_id: uuid.UUID) -> WritingSession:
    """A new session of ``writer_id`` in the round: numbered after the sessions recorded on their
    examples there (drafts included, from any desk once synced), its arm drawn by ``session_arm``."""
    with db.read() as session:
        found = session.execute(select(Round.settings, Round.number, Task.code).join(Task, Task.id == Round.task_id)
                                .where(Round.id == round_id)).first()
        if found is None:
            raise NotFound(f"There is no round with id {round_id}.")
        settings, number_in_task, task_code = found
        recorded = session.scalars(
            select(Example.assistance["session"].as_integer())
            .where(Example.round_id == round_id, Example.author_id == writer_id, Example.assistance.is_not(None))
        ).all()
    mode = RoundSettings.model_validate(settings or {}).assistant
    number = next_session_number(list(recorded))
    arm = session_arm(mode, writer_id, number, round_key=round_key(task_code, number_in_task))
    return WritingSession(round_id, writer_id, mode, number, arm)
