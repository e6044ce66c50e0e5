"""The server's side of protocol negotiation (``sync.negotiation``): every answer under ``/v1`` says the
protocol the server speaks and the lowest it serves; each desk is answered in the highest protocol both
speak, its answers shaped to it; a desk outside the window is refused (426) in one sentence naming both.

- ``ProtocolHeaders`` (outermost) reads what the desk says, keeps it for the request, stamps the answer.
- ``ProtocolWindow`` (after authentication) refuses a desk the server cannot serve.
- ``ShapedRoute`` shapes every JSON answer for a desk older than the server by its response model.
- ``changes_for`` serves the change feed: what a desk cannot take is held back, counted (``store.held_back``)
  and sent again once the desk speaks the protocol it needs.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter

from app import __version__
from sync import wire_versions
from sync.negotiation import (
    LOWEST_HEADER,
    PROTOCOL_HEADER,
    Tally,
    Unreadable,
    common,
    said,
    server_refusal,
    shape_answer,
)
from sync.protocol import API, ChangesResponse, ErrorBody
from sync.server.db import ServerDatabase
from sync.server.models import Person
from sync.server.store import held_back
from sync.server.store.feed import changes, remaining_after

UPGRADE_REQUIRED = 426


@dataclass(frozen=True)
class DeskProtocol:
    speaks: int  # what the desk says it speaks (1 when it says nothing)
    lowest: int
    version: int | None  # the protocol of this exchange; None: none both speak
    problem: str | None = None  # headers that could not be read


def _headers(scope) -> dict[str, str]:
    wanted = {PROTOCOL_HEADER.lower(), LOWEST_HEADER.lower()}
    out = {}
    for key, value in scope["headers"]:
        name = key.decode("latin-1").lower()
        if name in wanted:
            out[next(h for h in (PROTOCOL_HEADER, LOWEST_HEADER) if h.lower() == name)] = value.decode("latin-1")
    return out


class ProtocolHeaders:
    """Reads the desk's protocol headers into ``scope["state"]["protocol"]``; stamps the server's on every answer."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith(API + "/"):
            return await self.app(scope, receive, send)
        try:
            speaks, lowest = said(_headers(scope))
            desk = DeskProtocol(speaks, lowest, common(speaks, lowest))
        except Unreadable as exc:
            desk = DeskProtocol(0, 0, None, f"The request's protocol headers cannot be read: {exc}.")
        scope.setdefault("state", {})["protocol"] = desk
        ours = [(PROTOCOL_HEADER.encode(), str(wire_versions.PROTOCOL_VERSION).encode()),
                (LOWEST_HEADER.encode(), str(wire_versions.LOWEST_PROTOCOL).encode())]

        async def stamped(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *ours]}
            await send(message)

        await self.app(scope, receive, stamped)


class ProtocolWindow:
    """Refuses a desk outside the server's window (426) or with unreadable protocol headers (400), after the
    token was checked, in the ``ErrorBody`` shape every desk reads."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        desk = scope.get("state", {}).get("protocol") if scope["type"] == "http" else None
        if desk is None or desk.version is not None:
            return await self.app(scope, receive, send)
        if desk.problem:
            status, detail = 400, desk.problem
        else:
            status, detail = UPGRADE_REQUIRED, server_refusal(desk.speaks, desk.lowest, __version__)
        body = ErrorBody(detail=detail).model_dump(mode="json")
        await JSONResponse(body, status_code=status)(scope, receive, send)


def desk_protocol(request: Request) -> int:
    """The protocol of this exchange (the window was checked before the route ran)."""
    desk = request.scope.get("state", {}).get("protocol")
    return desk.version if desk is not None and desk.version is not None else wire_versions.PROTOCOL_VERSION


def _reachable(annotation: Any, seen: set[str]) -> set[str]:
    """The names shaping looks up for a response model: its classes' names and its record kinds."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        if annotation.__name__ in seen:
            return seen
        seen.add(annotation.__name__)
        record = annotation.model_fields.get("record")
        if record is not None:
            seen.update(str(arg) for arg in typing.get_args(record.annotation))
        for info in annotation.model_fields.values():
            _reachable(info.annotation, seen)
        return seen
    for arg in typing.get_args(annotation):
        _reachable(arg, seen)
    return seen


def needs_shaping(names: set[str], protocol: int) -> bool:
    return any(since > protocol and kind in names for kind, since in wire_versions.RECORD_SINCE.items()) or \
        any(since > protocol and kind in names for (kind, _field), since in wire_versions.FIELD_SINCE.items())


class ShapedRoute(APIRoute):
    """A route whose JSON answers to a desk older than the server are in that desk's protocol's shape."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        model = self.response_model
        names = _reachable(model, set()) if model is not None else set()
        adapter = TypeAdapter(model) if model is not None else None

        async def shaped(request: Request) -> Response:
            response = await handler(request)
            protocol = desk_protocol(request)
            if adapter is None or protocol >= wire_versions.PROTOCOL_VERSION or getattr(request.state, "shaped", False) \
                    or not 200 <= response.status_code < 300 or response.media_type != "application/json" \
                    or not needs_shaping(names, protocol):
                return response
            value = adapter.validate_json(bytes(response.body))
            headers = {k: v for k, v in response.headers.items() if k.lower() not in ("content-length", "content-type")}
            return JSONResponse(shape_answer(value, protocol), status_code=response.status_code, headers=headers)

        return shaped


def changes_for(request: Request, db: ServerDatabase, me: Person, since: int, limit: int) -> ChangesResponse | Response:
    """A page of changes for this desk's protocol. A desk that speaks a newer protocol than it did when changes
    were held back from it goes back to the first of them (an empty page, ``more``); a desk older than the
    server is sent what it takes, the rest counted for it and its lead."""
    protocol = desk_protocol(request)
    back = held_back.rewind_to(db, me, protocol, since)
    if back is not None:
        return ChangesResponse(records=[], cursor=back, more=True, remaining=remaining_after(db, me, back))
    page = changes(db, me, since, limit)
    if protocol >= wire_versions.PROTOCOL_VERSION:
        return page
    tally = Tally()
    body = shape_answer(page, protocol, tally)
    referenced = {str(r) for r in page.referenced}
    held = [i for i in [*tally.left_out, *tally.partly] if i not in referenced]
    if held:
        total = held_back.note(db, me, protocol, held)
    else:
        total = held_back.count(db, me, protocol) if "held_back" in body else 0
    if "held_back" in body:
        body["held_back"] = total
    request.state.shaped = True
    return JSONResponse(body)
