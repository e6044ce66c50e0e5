"""The wire form of exposure spans, answered break prompts and a team's exposure alert lines.

They carry no text: who, what kind of work, when, in which time zone. The server serves them to the
person and to the leads of their team only (``sync.server.store.wellbeing``)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, model_validator

from app.core.limits import Bound
from sync.protocol import Code, ShownName, Strict, Team

MAX_WELLBEING_RECORDS = 1000  # per push
Zone = Annotated[str, Field(min_length=1, pattern=r"^[A-Za-z0-9_+\-/:]+$"), Bound.line(64)]
Minutes = Annotated[int, Field(ge=0, le=100_000)]


class ExposureWire(Strict):
    record: Literal["exposure"] = "exposure"
    id: uuid.UUID
    person_id: uuid.UUID
    activity: Literal["writing", "validating", "reviewing"]
    task_code: Code
    example_id: uuid.UUID | None = None
    started_at: AwareDatetime
    ended_at: AwareDatetime
    zone: Zone

    @model_validator(mode="after")
    def _ordered(self) -> ExposureWire:
        if not self.started_at <= self.ended_at <= self.started_at + timedelta(days=1):
            raise ValueError("a span ends after it starts and lasts at most a day")
        return self


class BreakWire(Strict):
    record: Literal["break"] = "break"
    id: uuid.UUID
    person_id: uuid.UUID
    kind: Literal["short", "long"]
    action: Literal["taken", "snoozed"]
    at: AwareDatetime
    break_min: Minutes
    continuous_min: Minutes
    daily_min: Minutes
    zone: Zone


WellbeingWire = Annotated[ExposureWire | BreakWire, Field(discriminator="record")]


class WellbeingPush(Strict):
    records: list[WellbeingWire] = Field(max_length=MAX_WELLBEING_RECORDS)


class WellbeingPushResult(Strict):
    stored: int
    already_stored: int
    conflicts: list[uuid.UUID]  # the same id with other content: kept as the server has it


class WellbeingItem(Strict):
    """A record as a reader gets it, with whose it is."""

    seq: int
    team: Team
    person_name: ShownName
    person_role: ShownName
    record: WellbeingWire


class WellbeingFeed(Strict):
    records: list[WellbeingItem]
    cursor: int
    more: bool


class TeamLimitsUpdate(Strict):
    daily_min: int = Field(ge=10, le=1440)
    continuous_min: int = Field(ge=5, le=480)


class TeamLimitsWire(TeamLimitsUpdate):
    team: Team
    set_by: uuid.UUID
    set_at: datetime
