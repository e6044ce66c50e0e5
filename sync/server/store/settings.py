"""A lead's task settings: the agreement threshold that decides a team's examples."""

from __future__ import annotations

import uuid

from sqlalchemy import select
from sqlalchemy.orm import Session

from sync.server.models import TaskSetting


def team_threshold(session: Session, team: str, task_id: uuid.UUID) -> int | None:
    """The agreement threshold a lead set for ``team``'s examples of a task (the latest to arrive), if any."""
    return session.scalar(select(TaskSetting.agreement_threshold)
                          .where(TaskSetting.team == team, TaskSetting.task_id == task_id)
                          .order_by(TaskSetting.received_at.desc(), TaskSetting.id.desc()).limit(1))
