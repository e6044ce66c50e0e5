"""Sync test fixtures: a real server database (SQLite always; PostgreSQL when
``DYNADESK_TEST_PG_URL`` is set, each test in its own schema), a real uvicorn server on
loopback, and a team of accounts with the basics published."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.sync.helpers import (
    PG_ENV,
    Account,
    ThreadServer,
    add_account,
    postgres_schema,
    publish_basics,
    server_database,
)

BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
REQUEST_TIMEOUT_S = 60  # httpx's own default (5 s) is shorter than a busy 2-core machine may take to answer


@pytest.fixture(autouse=True)
def patient_requests(monkeypatch):
    """The tests' direct requests (httpx.get/post/...) wait as long as the desk's client would, not 5 s."""
    import functools

    import httpx

    for name in ("get", "post", "put", "patch", "delete", "request"):
        original = getattr(httpx, name)
        if not isinstance(original, functools.partial):
            monkeypatch.setattr(httpx, name, functools.partial(original, timeout=REQUEST_TIMEOUT_S))


def _database_url(kind: str, tmp_path: Path):
    if kind == "sqlite":
        return None, f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}"
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set; .ci/run starts PostgreSQL 15 on loopback for these tests")
    schema = postgres_schema(base)
    return schema, schema.__enter__()


@pytest.fixture(params=BACKENDS)
def server_db_url(request, tmp_path):
    holder, url = _database_url(request.param, tmp_path)
    yield url
    if holder is not None:
        holder.__exit__(None, None, None)


@pytest.fixture
def server_db(server_db_url):
    db = server_database(server_db_url)
    yield db
    db.close()


@pytest.fixture
def server(server_db, tmp_path):
    running = ThreadServer(server_db, tmp_path / "server")
    yield running
    running.stop()


@pytest.fixture
def team_server(tmp_path):
    """A server on SQLite alone, for tests that publish what they need themselves."""
    db = server_database(f"sqlite:///{tmp_path / 'server.sqlite'}")
    running = ThreadServer(db, tmp_path / "server")
    yield running
    running.stop()
    db.close()


@dataclass
class Team:
    url: str
    owner: Account
    lead: Account
    ann: Account
    bob: Account
    cat: Account  # another team
    lia: Account  # lead of the other team


@pytest.fixture
def team(server, server_db, tmp_path) -> Team:
    team = Team(
        url=server.url,
        owner=add_account(server_db, "Olga Owner", "owner", "A"),
        lead=add_account(server_db, "Lee Lead", "lead", "A"),
        ann=add_account(server_db, "Ann Annotator", "annotator", "A"),
        bob=add_account(server_db, "Bob Annotator", "annotator", "A"),
        cat=add_account(server_db, "Cat Annotator", "annotator", "B"),
        lia=add_account(server_db, "Lia Lead", "lead", "B"),
    )
    publish_basics(server.url, team.owner, tmp_path)
    return team
