"""Two `dynadesk serve run` processes on one PostgreSQL behave as one server: the way a team behind a
load balancer runs it (docs/sync.md). Desks are round-robined between them: each pushes through one and
pulls through the other. Nothing is lost or counted twice, a model published through one is downloaded
through the other (its sha256 checked by the desk), a model file one machine kept in its own folder
from before is served by the other, and a token's request limit is one limit across both processes.

The measured figures are printed (``pytest -s``); time is never asserted.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
import uuid
from collections import Counter
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from app.core.storage.models import Example as DeskExample
from sync.client import SyncClient
from sync.local import local_status
from sync.protocol import manifest_sha256
from sync.server import models as server_models
from sync.server.blobs import BlobStore
from sync.transport import RetryPolicy
from tests.sync.helpers import (
    PG_ENV,
    ProcessServer,
    add_account,
    fill_outbox,
    open_desks,
    postgres_schema,
    publish_basics,
    run_in_threads,
    server_counts,
    server_database,
)

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

DESKS, PER_DESK, TEAM_SIZE = 20, 500, 2  # ten teams of two: each desk pulls its teammate's work
TOKEN_LIMIT = 60  # per hour: far above a desk's sync, hit on purpose by one token below


def auth(account) -> dict[str, str]:
    return {"Authorization": f"Bearer {account.token}"}


def model_files() -> dict[str, bytes]:
    """A target model's files; the tokenizer's spans three database chunks."""
    from tests.sync.test_client import tiny_onnx_model

    return {"model/model.onnx": tiny_onnx_model(),  # a 0.3 MB graph
            "model/config.json": b'{"model_type": "bert"}',
            "tokenizer/tokenizer.json": b'{"version": "1.0", "model": {}, "pad": "' + b"p" * 2_600_000 + b'"}'}


@pytest.fixture
def postgres_url():
    base = os.environ.get(PG_ENV)
    if not base:
        pytest.skip(f"{PG_ENV} is not set; .ci/run starts PostgreSQL 15 on loopback for these tests")
    with postgres_schema(base) as url:
        yield url


def test_two_server_processes_on_one_postgresql_act_as_one_server(postgres_url, tmp_path, monkeypatch):
    timings: dict[str, float] = {}
    began = time.perf_counter()
    monkeypatch.setenv("DYNADESK_SERVER_TOKEN_LIMIT", f"{TOKEN_LIMIT}/hour")
    monkeypatch.setenv("DYNADESK_SERVER_ADDRESS_LIMIT", "0")  # every test client is 127.0.0.1
    monkeypatch.delenv("DYNADESK_SERVER_BLOBS", raising=False)  # auto: in the database on PostgreSQL
    db = server_database(postgres_url)
    # Machine A kept a model file in its own folder from when it was the only server.
    legacy = b"weights kept on machine A before the team had two servers " * 1000
    legacy_sha = hashlib.sha256(legacy).hexdigest()
    writer = BlobStore(tmp_path / "a" / "blobs").writer(legacy_sha)
    writer.write(legacy)
    writer.commit()
    servers = [ProcessServer(postgres_url, tmp_path / "a"), ProcessServer(postgres_url, tmp_path / "b")]
    desks: list = []
    try:
        for server in servers:
            server.start(wait=False)
        for server in servers:
            server.wait_ready()
        timings["two servers started"] = time.perf_counter() - began
        for server in servers:  # what the load balancer asks
            health = httpx.get(f"{server.url}/health")
            assert health.status_code == 200 and health.json()["blobs"] == "database", health.text
        a, b = servers
        owner = add_account(db, "Olga Owner", "owner", "T0")
        publish_basics(a.url, owner, tmp_path)
        teams = [f"T{t}" for t in range(DESKS // TEAM_SIZE)]
        leads = {team: add_account(db, f"Lead {team}", "lead", team) for team in teams}
        people = [add_account(db, f"Annotator {i:02d}", "annotator", teams[i // TEAM_SIZE]) for i in range(DESKS)]
        open_desks(tmp_path, people, desks)
        mark = time.perf_counter()
        for i, (desk, person) in enumerate(zip(desks, people)):
            fill_outbox(desk, person.id, PER_DESK, seed=7000 + i, tag=f"desk{i}-")
        timings["10,000 examples written into 20 desks"] = time.perf_counter() - mark

        # Each desk pushes through one server; once all have pushed, it pulls through the other.
        errors: list[str] = []
        pushed = threading.Barrier(DESKS)
        push_done: list[float] = []
        reports: dict[int, list] = {}
        policy = RetryPolicy(attempts=20, first_delay=0.05, max_delay=1.0, timeout=120)

        def work(i: int) -> None:
            desk, person = desks[i], people[i]
            try:
                first, second = servers[i % 2], servers[(i + 1) % 2]
                with SyncClient(desk, first.url, person.token, policy=policy) as client:
                    reports[i] = [client.run(fetch_models=False)]
                pushed.wait(timeout=300)
                push_done.append(time.perf_counter())
                with SyncClient(desk, second.url, person.token, policy=policy) as client:
                    reports[i].append(client.run(fetch_models=False))
            except Exception as exc:  # reported below, with the desk it happened on
                errors.append(f"desk {i}: {exc.__class__.__name__}: {exc}")
                pushed.abort()

        mark = time.perf_counter()
        threads = run_in_threads(work, DESKS)
        timings["20 desks pushed (and pulled what was there) through one server"] = min(push_done, default=mark) - mark
        timings["then pulled the rest through the other"] = time.perf_counter() - min(push_done, default=mark)
        assert not errors, errors
        assert not any(thread.is_alive() for thread in threads)
        for i, runs in reports.items():
            assert runs[0].pushed == PER_DESK and not runs[0].problems and not runs[1].problems, (i, runs)
            assert runs[0].paced == runs[1].paced == 0  # the desks' syncs stay far under the shared limits

        # Exact totals: on the server, in each lead's team figures (asked of both servers), on every desk.
        counts = server_counts(db)
        assert counts["examples"] == DESKS * PER_DESK == counts["example changes"]
        with db.read() as session:
            by_author = dict(session.execute(select(server_models.Example.author_id, func.count())
                                             .group_by(server_models.Example.author_id)).all())
        assert by_author == {p.id: PER_DESK for p in people}
        for team, lead in leads.items():
            for server in servers:
                response = httpx.get(f"{server.url}/v1/team/stats", params={"by": "annotator"}, headers=auth(lead))
                assert response.status_code == 200, response.text
                rows = {row["name"]: row["submitted"] for row in response.json()["rows"]}
                assert rows == {p.name: PER_DESK for p in people if p.team == team}, (team, server.url)
        pulled = 0
        for desk, person in zip(desks, people):
            with desk.db.read() as session:
                held = Counter(session.execute(select(DeskExample.author_id)).scalars())
            assert held == {p.id: PER_DESK for p in people if p.team == person.team}, person.name
            assert local_status(desk.db, person.id).pending == 0
            pulled += sum(held.values()) - PER_DESK
        assert pulled == DESKS * (TEAM_SIZE - 1) * PER_DESK

        # A model published through A is downloaded through B, every file's sha256 checked on the desk.
        mark = time.perf_counter()
        files = model_files()
        shas = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
        for name, data in files.items():
            response = httpx.put(f"{a.url}/v1/blobs/{shas[name]}", content=data, headers=auth(owner))
            assert response.status_code == 201, response.text
        now = "2026-11-29T06:00:00+00:00"
        model = {"record": "model", "id": str(uuid.uuid4()), "name": "round-3 target", "format": "onnx",
                 "sha256": manifest_sha256(shas.items()), "label_map": {"0": "not hate", "1": "hate"},
                 "task": "hate_speech", "files": [{"name": n, "sha256": shas[n], "size": len(d)} for n, d in files.items()],
                 "created_at": now, "updated_at": now}
        round_three = {"record": "round", "id": str(uuid.uuid4()), "task": "hate_speech", "number": 3,
                       "target_models": [model["id"]], "created_at": now, "updated_at": now}
        response = httpx.post(f"{a.url}/v1/publish", json={"records": [model, round_three]}, headers=auth(owner))
        assert [r["status"] for r in response.json()["results"]] == ["stored", "stored"], response.text
        with SyncClient(desks[1], b.url, people[1].token, policy=policy) as client:
            report = client.run()
        assert report.models == ["round-3 target"] and not report.problems
        record = next(m for m in desks[1].models.all() if m.sha256 == model["sha256"])
        folder = Path(record.path)
        assert hashlib.sha256((folder / "model.onnx").read_bytes()).hexdigest() == shas["model/model.onnx"]
        assert (folder / "tokenizer" / "tokenizer.json").read_bytes() == files["tokenizer/tokenizer.json"]
        assert not (tmp_path / "b" / "blobs").exists() or not any((tmp_path / "b" / "blobs").rglob("*"))
        # and the file machine A kept on its own disk is served by B, copied into the database at A's start
        legacy_there = httpx.get(f"{b.url}/v1/blobs/{legacy_sha}", headers=auth(owner))
        assert legacy_there.status_code == 200 and hashlib.sha256(legacy_there.content).hexdigest() == legacy_sha
        timings["model published through A, downloaded through B"] = time.perf_counter() - mark

        # One token's limit across both processes: half its requests to each, together they hit the limit.
        mark = time.perf_counter()
        probe = add_account(db, "Pat Probe", "annotator", "T0")
        answers: dict[str, Counter] = {s.url: Counter() for s in servers}
        with httpx.Client(timeout=60) as http:
            for n in range(TOKEN_LIMIT + 4):
                server = servers[n % 2]
                response = http.get(f"{server.url}/v1/me", headers=auth(probe))
                answers[server.url][response.status_code] += 1
                if response.status_code == 429:
                    # a sliding window: the rest of this hour, and the part of the next one it takes for the
                    # full window's weight to leave room for one more request (an hour / the limit)
                    assert 1 <= int(response.headers["Retry-After"]) <= 3600 + 3600 // TOKEN_LIMIT + 1
        assert answers == {a.url: Counter({200: TOKEN_LIMIT // 2, 429: 2}),
                           b.url: Counter({200: TOKEN_LIMIT // 2, 429: 2})}, answers
        # another token is not limited by the probe's
        assert httpx.get(f"{b.url}/v1/me", headers=auth(owner)).status_code == 200
        timings[f"{TOKEN_LIMIT + 4} requests of one token, alternating"] = time.perf_counter() - mark
    finally:
        for desk in desks:
            desk.close()
        for server in servers:
            server.stop()
        db.close()
    timings["total"] = time.perf_counter() - began
    print("\n" + "\n".join(f"  {what}: {seconds:.1f} s" for what, seconds in timings.items()))
    print(f"  totals: {counts['examples']:,} examples on the server; {pulled:,} pulled by the desks")
