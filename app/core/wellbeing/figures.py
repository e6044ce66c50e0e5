"""What the exposure figures are made of, free of storage (view-models and widgets import them)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import date, datetime

from pydantic import BaseModel, ConfigDict, Field

from app.core.domain import SyncState


class TeamLimits(BaseModel):
    """Alert lines a lead sets for their team: figures for care, never targets."""

    model_config = ConfigDict(frozen=True)

    daily_min: int = Field(default=240, ge=10, le=1440)
    continuous_min: int = Field(default=60, ge=5, le=480)
    team: str | None = None
    set_by: uuid.UUID | None = None
    set_at: datetime | None = None
    sync_state: str = SyncState.PENDING.value


@dataclass(frozen=True)
class PersonDay:
    """One person's day for the lead's view."""

    person_id: uuid.UUID
    name: str
    day: date
    writing_min: float
    validating_min: float
    reviewing_min: float
    longest_run_min: float
    breaks_taken: int
    snoozes: int

    @property
    def total_min(self) -> float:
        return self.writing_min + self.validating_min + self.reviewing_min
