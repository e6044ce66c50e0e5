"""The sync server's HTTP interface: a FastAPI app built by :func:`create_app`.

Every request under ``/v1`` is authenticated (``Authorization: Bearer <token>``) before its
body is read: a missing or wrong token is a 401, whatever else is wrong with the request.
Bodies are limited in size and must be UTF-8 JSON without NaN or Infinity (400 otherwise);
pydantic checks their shape (422, naming each bad record). Every error answer is an
``ErrorBody``. ``/openapi.json`` describes every endpoint (the interactive docs pages are off:
they would load scripts from the internet).

Requests over the per-token or per-address limit get 429 with ``Retry-After`` (sync/server/limits.py; counted in
the database on PostgreSQL, sync/server/shared_limits.py). Model files live where ``sync/server/blob_store.py`` says.

Every answer says the sync protocol the server speaks and the lowest it serves; each desk is answered in
the highest protocol both speak, a desk outside that window refused with 426 (sync/server/shaping.py).

With several uvicorn workers, each worker builds its app with :func:`create_app_from_env`.
"""

from __future__ import annotations

import gc
import json
import logging
import os
from pathlib import Path
from typing import Annotated, Any, Literal

import anyio
from fastapi import Depends, FastAPI, Query, Request, Security
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import __version__
from app.core.domain import utcnow
from app.core.errors import DynadeskError
from app.core.io.rows import finite_float
from sync.protocol import (
    API,
    MAX_BLOB_BYTES,
    MAX_BODY_BYTES,
    MAX_PULL_RECORDS,
    BlobStored,
    ChangesResponse,
    Duplicates,
    ErrorBody,
    Me,
    ModelForms,
    ModelRecordWire,
    PublishRequest,
    PushRequest,
    PushResponse,
    RecordError,
    StorageUse,
    TeamAssistantSplit,
    TeamStats,
)
from sync.server import store
from sync.server.blob_store import BLOBS_ENV, Blobs, open_blobs
from sync.server.blobs import BlobMismatch
from sync.server.db import ServerDatabase
from sync.server.health import add_health_route
from sync.server.limits import DEFAULT_PER_ADDRESS, DEFAULT_PER_TOKEN, Rate, RequestLimits
from sync.server.models import Person
from sync.server.proposal_routes import add_proposal_routes
from sync.server.shaping import ProtocolHeaders, ProtocolWindow, ShapedRoute, changes_for, desk_protocol
from sync.server.shared_limits import SHARED_LIMITS_ENV, DatabaseCounts, shares_limits
from sync.server.store import storage
from sync.server.wellbeing_routes import add_wellbeing_routes

log = logging.getLogger(__name__)

DB_ENV = "DYNADESK_SERVER_DB"
DATA_ENV = "DYNADESK_SERVER_DATA"
TOKEN_LIMIT_ENV = "DYNADESK_SERVER_TOKEN_LIMIT"
ADDRESS_LIMIT_ENV = "DYNADESK_SERVER_ADDRESS_LIMIT"
SHA256 = r"^[0-9a-f]{64}$"

ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"model": ErrorBody, "description": "The body is not UTF-8 JSON (or holds NaN/Infinity)."},
    401: {"model": ErrorBody, "description": "No token, or a token this server does not know."},
    403: {"model": ErrorBody, "description": "Not allowed for this person's role or team; nothing was stored."},
    413: {"model": ErrorBody, "description": f"The body is larger than {MAX_BODY_BYTES // 2**20} MiB."},
    422: {"model": ErrorBody, "description": "The request does not fit the schema; each bad record is named."},
    426: {"model": ErrorBody, "description": "The desk's sync protocol is outside what this server serves; "
                                             "`detail` names both versions."},
    429: {"model": ErrorBody, "description": "Over the request limit of this token or address; wait `Retry-After` s."},
}

bearer = HTTPBearer(auto_error=False, scheme_name="token",
                    description="The API token that `dynadesk serve add-person` printed.")


def current_person(request: Request,
                   _credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer)] = None) -> Person:
    # The Gate middleware authenticated the request before its body was read.
    return request.state.person


Caller = Annotated[Person, Depends(current_person)]


def _error(status: int, detail: str, errors: list[RecordError] | None = None, headers: dict | None = None) -> JSONResponse:
    body = ErrorBody(detail=detail, errors=errors or [])
    return JSONResponse(body.model_dump(mode="json"), status_code=status, headers=headers)


def _failed(method: str) -> str:
    """What a failure the server cannot explain means for the client; only what is known (a write may
    have been committed before the failure, e.g. while its answer was being written)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return "The server failed on this request, a read: it changed nothing. The server log has details."
    return ("The server failed on this request; whether it was stored is unknown. Sending the same request "
            "again is safe (each record, proposal and file is stored once). The server log has details.")


def _reject_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


class Gate:
    """Authenticates, then limits and checks the body, before the app sees the request."""

    def __init__(self, app, db: ServerDatabase):
        self.app = app
        self.db = db

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(API + "/"):
            return await self.app(scope, receive, send)
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        scheme, _, token = headers.get("authorization", "").partition(" ")
        person = None
        if scheme.lower() == "bearer" and token.strip():
            person = await anyio.to_thread.run_sync(store.authenticate, self.db, token.strip())
        if person is None:
            response = _error(401, "Give a valid API token: 'Authorization: Bearer <token>'.",
                              headers={"WWW-Authenticate": "Bearer"})
            return await response(scope, receive, send)
        scope.setdefault("state", {})["person"] = person
        if scope["method"] not in ("POST", "PUT", "PATCH") or scope["path"].startswith(API + "/blobs/"):
            return await self.app(scope, receive, send)

        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES:
            return await self._too_large(scope, receive, send)
        chunks, size = [], 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                return await self._too_large(scope, receive, send)
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = self._body_problem(body)
        if problem:
            return await _error(400, problem)(scope, receive, send)
        delivered = False

        async def replay():
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    @staticmethod
    def _body_problem(body: bytes) -> str | None:
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            return f"The body is not UTF-8: byte {exc.start} ({body[exc.start:exc.start + 1]!r}) is {exc.reason}."
        if not text.strip():
            return None  # the endpoint says what it expected
        try:
            json.loads(text, parse_constant=_reject_constant, parse_float=finite_float)  # 1e999: no JSON column takes inf
        except json.JSONDecodeError as exc:
            return f"The body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})."
        except (ValueError, RecursionError) as exc:
            return f"The body is not valid JSON: {exc}."
        return None

    @staticmethod
    async def _too_large(scope, receive, send):
        response = _error(413, f"The body is larger than {MAX_BODY_BYTES // 2**20} MiB; send fewer records at a time.",
                          headers={"Connection": "close"})
        await response(scope, receive, send)


def _record_errors(exc: RequestValidationError) -> tuple[str, list[RecordError]]:
    """Pydantic's errors grouped by record: which record, and what is wrong with it."""
    body = exc.body if isinstance(exc.body, dict) else {}
    records = body.get("records")
    raw = records if isinstance(records, list) else []
    by_record: dict[int | None, list[str]] = {}
    for error in exc.errors():
        loc = list(error.get("loc", ()))
        if loc and loc[0] == "body":
            loc = loc[1:]
        index = None
        if len(loc) >= 2 and loc[0] == "records" and isinstance(loc[1], int):
            index, loc = loc[1], loc[2:]
            if loc and isinstance(loc[0], str) and loc[0] in ("example", "validation", "example_review", "person",
                                                                "task", "model", "round", "context", "task_setting"):
                loc = loc[1:]  # the record kind pydantic chose by the 'record' tag
        where = ".".join(str(part) for part in loc) or "record"
        message = error.get("msg", "invalid")
        if error.get("type") == "extra_forbidden":
            message = "unknown field"
        by_record.setdefault(index, []).append(f"{where}: {message}")
    errors = []
    for index, problems in by_record.items():
        record_id = None
        if index is not None and index < len(raw) and isinstance(raw[index], dict):
            record_id = str(raw[index].get("id"))[:64] if raw[index].get("id") is not None else None
        errors.append(RecordError(index=index, id=record_id, reason="; ".join(problems[:10])))
    bad = sum(1 for e in errors if e.index is not None)
    detail = (f"{bad} record(s) do not fit the protocol; nothing was stored. Fix or set aside the records named."
              if bad else "The request does not fit the protocol: " + "; ".join(errors[0].reason.split("; ")[:3]))
    return detail, errors


def create_app(db: ServerDatabase, data_dir: Path, *, per_token: Rate | None = None,
               per_address: Rate | None = None, blobs: Blobs | str | None = "files",
               shared_limits: bool = False) -> FastAPI:
    """``blobs``: a store, or its kind (``sync.server.blob_store``); ``shared_limits``: count requests in the
    database, shared by every server process on it (``sync.server.shared_limits``)."""
    if blobs is None or isinstance(blobs, str):
        blobs = open_blobs(blobs, db, data_dir)
    api = FastAPI(
        title="Dynadesk sync server",
        version=__version__,
        description=(
            "Shares validated adversarial examples between Dynadesk desks. Desks push examples and validations "
            "(idempotent by record id and revision) and pull changes since a cursor. Owners publish tasks, rounds, "
            "contexts and target models. Every request needs `Authorization: Bearer <token>`."),
        docs_url=None, redoc_url=None, openapi_url="/openapi.json",
    )
    api.state.db = db
    api.state.blobs = blobs
    api.router.route_class = ShapedRoute  # every route's answers in the desk's protocol
    api.add_middleware(ProtocolWindow)  # after the token was checked
    api.add_middleware(Gate, db=db)
    api.add_middleware(RequestLimits, per_token=per_token or Rate.parse(DEFAULT_PER_TOKEN),  # before auth
                       per_address=per_address or Rate.parse(DEFAULT_PER_ADDRESS),
                       shared=DatabaseCounts(db) if shared_limits else None)
    api.add_middleware(ProtocolHeaders)  # outermost: every answer says the server's protocol

    @api.exception_handler(RequestValidationError)
    async def invalid(_request, exc: RequestValidationError):
        detail, errors = _record_errors(exc)
        return _error(422, detail, errors)

    @api.exception_handler(StarletteHTTPException)
    async def http_error(_request, exc: StarletteHTTPException):
        return _error(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))

    @api.exception_handler(store.Forbidden)
    async def forbidden(_request, exc: store.Forbidden):
        return _error(403, str(exc), exc.errors)

    @api.exception_handler(DynadeskError)
    async def refused(_request, exc: DynadeskError):
        return _error(400, str(exc))

    @api.exception_handler(Exception)
    async def crashed(request, exc: Exception):
        log.exception("%s %s failed", request.method, request.url.path)
        return _error(500, _failed(request.method))

    @api.get(f"{API}/me", response_model=Me, responses=ERRORS, tags=["people"],
             summary="Who this token belongs to")
    def me(request: Request, person: Caller) -> Me:
        """The token's person, role and team, and the sync protocol of this exchange (the highest both the
        desk and the server speak); also a cheap way to check a connection."""
        return Me(id=person.id, display_name=person.display_name, role=person.role, team=person.team,
                  protocol=desk_protocol(request), server_version=__version__)

    @api.post(f"{API}/push", response_model=PushResponse, responses=ERRORS, tags=["records"],
              summary="Store examples, validations and lead reviews")
    def push(request: PushRequest, person: Caller) -> PushResponse:
        """Idempotent by record id and revision: a resent batch changes nothing and reports each record
        as `already_stored`. Each record gets its own result; a conflicting revision is reported back
        with the server's version, never overwritten. A request that writes as someone else, or
        adjudicates, accepts or returns work without being a lead, stores nothing (403)."""
        now = utcnow()  # also the new records' received_at: a desk orders its own reviews by it
        results = store.push(db, person, request.records, now)
        return PushResponse(results=results, server_time=now)

    @api.post(f"{API}/publish", response_model=PushResponse, responses=ERRORS, tags=["records"],
              summary="Publish tasks, rounds, contexts and target models (owners)")
    def publish(request: PublishRequest, person: Caller) -> PushResponse:
        """Task definitions, rounds (by task and number), contexts (by round and content) and model
        records (by sha256). A model's files must be uploaded (PUT /v1/blobs) before its record
        names them."""
        now = utcnow()
        results = store.publish(db, person, request.records, blobs.exists, now)
        return PushResponse(results=results, server_time=now)

    @api.get(f"{API}/changes", response_model=ChangesResponse, responses=ERRORS, tags=["records"],
             summary="Changes since a cursor")
    def changes(request: Request, person: Caller,
                since: Annotated[int, Query(ge=0, le=2**63 - 1, description="the cursor of the last page")] = 0,
                limit: Annotated[int, Query(ge=1, le=MAX_PULL_RECORDS)] = 500) -> Any:
        """Tasks, rounds, contexts, model records, and the examples, validations and lead reviews of this
        person's team (all teams for owners), except this person's own, in the order they were stored. Each page
        carries the records it refers to, so it can be stored on its own. A desk of an older protocol is sent
        what it takes; the rest is counted (`held_back`) and sent again once it speaks the newer protocol."""
        return changes_for(request, db, person, since, limit)

    @api.get(f"{API}/models/{{sha256}}", response_model=ModelRecordWire, responses=ERRORS | {404: {"model": ErrorBody}},
             tags=["models"], summary="A model record and its files")
    def model(person: Caller, sha256: Annotated[str, PathParam(pattern=SHA256)]) -> ModelRecordWire:
        found = store.model_manifest(db, sha256)
        if found is None:
            raise StarletteHTTPException(404, f"No model with sha256 {sha256} is published on this server.")
        return found

    @api.get(f"{API}/models/{{sha256}}/forms", response_model=ModelForms, responses=ERRORS, tags=["models"],
             summary="The faster (ONNX) forms published with a model")
    def model_forms(person: Caller, sha256: Annotated[str, PathParam(pattern=SHA256)]) -> ModelForms:
        """Each with its files: a desk downloads one (checking every sha256) instead of exporting it."""
        return ModelForms(forms=store.model_forms(db, sha256))

    @api.get(f"{API}/blobs/{{sha256}}", response_class=FileResponse, tags=["models"],
             responses=ERRORS | {200: {"content": {"application/octet-stream": {}}, "description": "The file."},
                                 404: {"model": ErrorBody}},
             summary="Download a model file by its sha256")
    def download(person: Caller, sha256: Annotated[str, PathParam(pattern=SHA256)]):
        """Verify the sha256 of what arrives: the name is the checksum."""
        size = blobs.size_of(sha256)
        if size is None:
            raise StarletteHTTPException(404, f"No file with sha256 {sha256} on this server.")
        path = blobs.local_path(sha256)
        if path is not None:
            return FileResponse(path, media_type="application/octet-stream")
        return StreamingResponse(blobs.chunks(sha256), media_type="application/octet-stream",
                                 headers={"Content-Length": str(size)})

    @api.head(f"{API}/blobs/{{sha256}}", tags=["models"], status_code=200,
              responses=ERRORS | {200: {"description": "The server has this file."}, 404: {"description": "It has not."}},
              summary="Whether the server has a model file")
    def has_blob(person: Caller, sha256: Annotated[str, PathParam(pattern=SHA256)]) -> Response:
        return Response(status_code=200 if blobs.exists(sha256) else 404)

    @api.put(f"{API}/blobs/{{sha256}}", response_model=BlobStored, tags=["models"],
             responses=ERRORS | {201: {"model": BlobStored}},
             openapi_extra={"requestBody": {"required": True, "content": {
                 "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}},
             summary="Upload a model file (owners and leads)")
    async def upload(request: Request, person: Caller, sha256: Annotated[str, PathParam(pattern=SHA256)]):
        """The server keeps the file only if its content hashes to `sha256`, and only within the uploader's
        quota (413 otherwise, with nothing stored; `GET /v1/storage` says how much is in use)."""
        if person.role not in ("owner", "lead"):  # leads upload the files of their proposals
            raise store.Forbidden("Only owners and leads upload model files.")
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > MAX_BLOB_BYTES:
            raise StarletteHTTPException(413, f"A model file may have at most {MAX_BLOB_BYTES // 2**30} GiB.")
        if blobs.exists(sha256):
            async for _ in request.stream():
                pass
            return JSONResponse(BlobStored(sha256=sha256, size=blobs.size_of(sha256) or 0,
                                           created=False).model_dump(), status_code=200)
        allowance = await anyio.to_thread.run_sync(storage.allowance, db, person)
        room = allowance.room()
        limit = MAX_BLOB_BYTES if room is None else min(room, MAX_BLOB_BYTES)

        def too_large(size: int) -> StarletteHTTPException:
            if room is not None and size > room:
                return StarletteHTTPException(413, storage.over_quota_message(
                    person, allowance.used, allowance.quota or 0, size))
            return StarletteHTTPException(413, f"A model file may have at most {MAX_BLOB_BYTES // 2**30} GiB.")

        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large(int(declared))
        writer = await anyio.to_thread.run_sync(blobs.writer, sha256)
        try:
            async for chunk in request.stream():
                if writer.size + len(chunk) > limit:
                    raise too_large(writer.size + len(chunk))
                await anyio.to_thread.run_sync(writer.write, chunk)
            await anyio.to_thread.run_sync(writer.finish)
            # counted (and checked against concurrent uploads) before the file is in place
            await anyio.to_thread.run_sync(storage.record_upload, db, person, sha256, writer.size)
            try:
                created = await anyio.to_thread.run_sync(writer.place)
            except Exception:  # a full disk, a lost database: the upload is not counted
                await anyio.to_thread.run_sync(storage.forget_upload, db, sha256)
                raise
        except BlobMismatch as exc:
            raise StarletteHTTPException(422, f"The upload is not the file named {sha256}: {exc}.") from None
        except storage.OverQuota as exc:
            raise StarletteHTTPException(413, str(exc)) from None
        finally:
            await anyio.to_thread.run_sync(writer.abort)
        return JSONResponse(BlobStored(sha256=sha256, size=writer.size, created=created).model_dump(),
                            status_code=201 if created else 200)

    @api.get(f"{API}/storage", response_model=StorageUse, responses=ERRORS, tags=["models"],
             summary="The model files this person keeps on the server, and their quota")
    def storage_use(person: Caller) -> StorageUse:
        """What `PUT /v1/blobs` counts: the files this person uploaded that the server still keeps."""
        allowance = storage.allowance(db, person)
        return StorageUse(used=allowance.used, files=allowance.files, quota=allowance.quota)

    @api.get(f"{API}/team/stats", response_model=TeamStats, responses=ERRORS, tags=["team"],
             summary="MER and vMER per round or per annotator (leads and owners)")
    def team_stats(person: Caller, by: Literal["round", "annotator"] = "round",
                   team: Annotated[str | None, Query(max_length=64)] = None) -> TeamStats:
        """Submitted and flagged examples only, as in the desk's own figures; `duplicates` counts
        examples whose text an earlier example of the same round already had."""
        scope, rows = store.team_figures(db, person, by, team)
        return TeamStats(team=scope, by=by, rows=rows)

    @api.get(f"{API}/team/assistant", response_model=TeamAssistantSplit, responses=ERRORS, tags=["team"],
             summary="MER, vMER, rejection rate and time per example, assisted and unassisted (leads and owners)")
    def team_assistant(person: Caller, by: Literal["round", "annotator"] = "round",
                       team: Annotated[str | None, Query(max_length=64)] = None) -> TeamAssistantSplit:
        """The writing assistant's A-B split by the arm of the session each example was written in;
        `applied` counts the assisted examples a suggestion was applied to."""
        scope, rows, outside = store.team_assistant_split(db, person, by, team)
        return TeamAssistantSplit(team=scope, by=by, rows=rows, outside=outside)

    @api.get(f"{API}/team/duplicates", response_model=Duplicates, responses=ERRORS, tags=["team"],
             summary="Examples whose text an earlier example of the round already had (leads and owners)")
    def team_duplicates(person: Caller, team: Annotated[str | None, Query(max_length=64)] = None) -> Duplicates:
        return Duplicates(duplicates=store.duplicates(db, person, team))

    add_proposal_routes(api, db, blobs, ERRORS)
    add_health_route(api, db, blobs.kind)
    add_wellbeing_routes(api, db, ERRORS)
    return api


def create_app_from_env() -> FastAPI:
    """The app for one uvicorn worker process (``uvicorn --factory``)."""
    url, data_dir = os.environ.get(DB_ENV), os.environ.get(DATA_ENV)
    if not url or not data_dir:
        raise RuntimeError(f"{DB_ENV} and {DATA_ENV} must be set (dynadesk serve run sets them)")
    db = ServerDatabase(url)
    db.check_schema()
    app = create_app(db, Path(data_dir), per_token=Rate.parse(os.environ.get(TOKEN_LIMIT_ENV, DEFAULT_PER_TOKEN)),
                     per_address=Rate.parse(os.environ.get(ADDRESS_LIMIT_ENV, DEFAULT_PER_ADDRESS)),
                     blobs=os.environ.get(BLOBS_ENV, "auto"),
                     shared_limits=shares_limits(os.environ.get(SHARED_LIMITS_ENV), db))
    # Everything imported so far lives as long as the worker: keep it out of the collector's
    # full passes, which otherwise cost ~40% of a large push.
    gc.freeze()
    return app
