"""The server's wellbeing endpoints: exposure and breaks in, out to the person and their team's
leads only; a team's exposure alert lines (``store.wellbeing`` holds the rules)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import FastAPI, Query, Response

from sync.protocol import API
from sync.server.db import ServerDatabase
from sync.server.proposal_routes import Caller
from sync.server.store import wellbeing as store
from sync.wellbeing_wire import TeamLimitsUpdate, TeamLimitsWire, WellbeingFeed, WellbeingPush, WellbeingPushResult


def add_wellbeing_routes(api: FastAPI, db: ServerDatabase, errors: dict[int | str, dict[str, Any]]) -> None:
    @api.post(f"{API}/wellbeing/push", response_model=WellbeingPushResult, responses=errors, tags=["wellbeing"],
              summary="Store this person's own exposure spans and answered break prompts")
    def push(request: WellbeingPush, person: Caller) -> WellbeingPushResult:
        """Idempotent by record id; a record of anyone else stores nothing (403)."""
        return store.push(db, person, request.records)

    @api.get(f"{API}/wellbeing/records", response_model=WellbeingFeed, responses=errors, tags=["wellbeing"],
             summary="Exposure and breaks since a cursor: leads and owners get their own team's, others their own")
    def records(person: Caller, since: Annotated[int, Query(ge=0, le=2**63 - 1)] = 0,
                limit: Annotated[int, Query(ge=1, le=2000)] = 1000) -> WellbeingFeed:
        return store.feed(db, person, since, limit)

    @api.put(f"{API}/wellbeing/limits", response_model=TeamLimitsWire, responses=errors, tags=["wellbeing"],
             summary="Set this lead's team's exposure alert lines (leads and owners)")
    def set_limits(update: TeamLimitsUpdate, person: Caller) -> TeamLimitsWire:
        return store.set_limits(db, person, update)

    @api.get(f"{API}/wellbeing/limits", response_model=TeamLimitsWire, responses=errors | {204: {}},
             tags=["wellbeing"], summary="The exposure alert lines in force for this person's team (204: none set)")
    def limits(person: Caller) -> TeamLimitsWire | Response:
        found = store.limits(db, person)
        return found if found is not None else Response(status_code=204)
