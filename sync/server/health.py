"""``GET /health``: whether this server process can answer, for load balancers and monitoring.

Outside ``/v1``: no token, no request limit. 200 when the database answers within the pool's time and
holds the schema this server expects; 503 (with the reason) otherwise, so a balancer sends desks to a
server that can serve them.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI
from fastapi.responses import JSONResponse
from sqlalchemy import text

from sync.server.db import ServerDatabase, head_revision

log = logging.getLogger(__name__)


def add_health_route(api: FastAPI, db: ServerDatabase, blobs_kind: str) -> None:
    expected = head_revision()

    @api.get("/health", tags=["server"], summary="Whether this server process can serve (no token needed)",
             responses={503: {"description": "It cannot: the database is unreachable or at another schema."}})
    def health() -> JSONResponse:
        try:
            with db.read() as session:
                session.execute(text("SELECT 1"))
            schema = db.current_revision()
        except Exception as exc:  # any failure to reach the database means: send desks elsewhere
            log.warning("health check: the database does not answer: %s", exc)
            return JSONResponse({"status": "unavailable", "reason": "the database does not answer"}, status_code=503)
        if schema != expected:
            return JSONResponse({"status": "unavailable",
                                 "reason": f"the database is at schema {schema}, this server expects {expected}"},
                                status_code=503)
        return JSONResponse({"status": "ok", "database": db.dialect, "schema": schema, "blobs": blobs_kind})
