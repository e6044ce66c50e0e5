"""A lead's task settings: the agreement threshold that decides a team's examples."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.core.task_settings import TaskSettings
from sync.server.models import TaskSetting


def team_settings(session: Session, team: str, task_id: uuid.UUID) -> TaskSettings:
    """The settings a lead set for ``team``'s examples of a task (the latest to arrive; the defaults until one did)."""
    stored = session.scalar(select(TaskSetting.settings)
                            .where(TaskSetting.team == team, TaskSetting.task_id == task_id)
                            .order_by(TaskSetting.received_at.desc(), TaskSetting.id.desc()).limit(1))
    # checked when pushed; a rule added since leaves the value it refuses at its default, never stops the team
    return TaskSettings.from_json(stored, fallback=TaskSettings())

