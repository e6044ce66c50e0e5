"""The server's proposal and task-policy endpoints (``store.proposals`` holds the rules)."""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Request, Security
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from sync.proposal_wire import (
    ProposalCreate,
    ProposalDecision,
    ProposalList,
    ProposalWire,
    TaskPolicies,
    TaskPolicyUpdate,
    TaskPolicyWire,
)
from sync.protocol import API, ErrorBody
from sync.server.blob_store import Blobs
from sync.server.db import ServerDatabase
from sync.server.models import Person
from sync.server.store import proposals as store

CODE = r"^[a-z][a-z0-9_]*$"


bearer = HTTPBearer(auto_error=False, scheme_name="token",  # the same scheme as the app's other endpoints
                    description="The API token that `dynadesk serve add-person` printed.")


def _person(request: Request,
            _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None) -> Person:
    return request.state.person  # the Gate middleware authenticated the request


Caller = Annotated[Person, Depends(_person)]
TaskCode = Annotated[str, PathParam(pattern=CODE, max_length=64)]


def add_proposal_routes(api: FastAPI, db: ServerDatabase, blobs: Blobs, errors: dict[int | str, dict[str, Any]]
                        ) -> None:
    answers = errors | {404: {"model": ErrorBody}, 409: {"model": ErrorBody}}

    def _error(status: int, exc: Exception) -> JSONResponse:
        return JSONResponse(ErrorBody(detail=str(exc)).model_dump(mode="json"), status_code=status)

    @api.exception_handler(store.NotFound)
    async def not_found(_request, exc: store.NotFound):
        return _error(404, exc)

    @api.exception_handler(store.Conflict)
    async def conflict(_request, exc: store.Conflict):
        return _error(409, exc)

    @api.exception_handler(store.MissingFiles)
    async def missing(_request, exc: store.MissingFiles):
        return _error(409, exc)

    @api.post(f"{API}/tasks/{{task}}/proposals", response_model=ProposalWire, status_code=201, responses=answers,
              tags=["proposals"], summary="Propose a trained candidate for a task's next round (leads and owners)")
    def propose(task: TaskCode, request: ProposalCreate, person: Caller) -> ProposalWire:
        """Upload the candidate's files and its comparison report (PUT /v1/blobs) first. Idempotent by
        the proposal's id. A lead's new proposal supersedes their earlier open ones for the task."""
        return store.create_proposal(db, person, task, request, blobs.exists)

    @api.get(f"{API}/tasks/{{task}}/proposals", response_model=ProposalList, responses=answers,
             tags=["proposals"], summary="A task's proposals, newest first (owners: all; leads: their team's)")
    def proposals(task: TaskCode, person: Caller) -> ProposalList:
        return store.list_proposals(db, person, task)

    @api.get(f"{API}/proposals/{{proposal_id}}", response_model=ProposalWire, responses=answers,
             tags=["proposals"], summary="One proposal with its files (sha256 each)")
    def proposal(proposal_id: uuid.UUID, person: Caller) -> ProposalWire:
        return store.get_proposal(db, person, proposal_id)

    @api.post(f"{API}/proposals/{{proposal_id}}/decision", response_model=ProposalWire, responses=answers,
              tags=["proposals"], summary="Mark a proposal promoted or declined (owners; leads when the task allows)")
    def decide(proposal_id: uuid.UUID, decision: ProposalDecision, person: Caller) -> ProposalWire:
        """Records who decided and when. Promoting supersedes the task's other open proposals."""
        return store.decide_proposal(db, person, proposal_id, decision)

    @api.get(f"{API}/policies", response_model=TaskPolicies, responses=errors, tags=["proposals"],
             summary="Every task's policy: may leads promote and publish rounds themselves")
    def policies(person: Caller) -> TaskPolicies:
        return TaskPolicies(policies=store.policies(db))

    @api.put(f"{API}/tasks/{{task}}/policy", response_model=TaskPolicyWire, responses=answers, tags=["proposals"],
             summary="Set whether leads may promote (owners)")
    def set_policy(task: TaskCode, update: TaskPolicyUpdate, person: Caller) -> TaskPolicyWire:
        return store.set_policy(db, person, task, update.leads_may_promote)
