"""Concurrency: 20 desks, each pushing 100 records in 5 steps while all of them pull, against a
real server process (`serve run --workers 4` on PostgreSQL, as a team that outgrows one server
process runs it; SQLite with one). Nothing is lost, the per-round
totals are right, every desk ends with exactly its team's work, and texts written on several
desks at once are marked as duplicates exactly once each.

The measured figures are printed (``pytest -s``); time is never asserted.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict

import httpx
import pytest
from sqlalchemy import func, select

from app.core.storage.models import Example as DeskExample
from sync.client import SyncClient
from sync.local import local_status
from sync.server import models as server_models
from sync.transport import RetryPolicy
from tests.sync.conftest import BACKENDS, _database_url
from tests.sync.helpers import (
    ProcessServer,
    add_account,
    fill_outbox,
    open_desks,
    publish_basics,
    run_in_threads,
    server_counts,
    server_database,
)

# 20 desks at once, as many requests as 500 records each in batches of 100 made; the bench
# (bench/bench_sync.py, concurrency_large) runs 1,000 records a desk and bigger teams.
DESKS, PER_DESK, STEPS, BATCH = 20, 100, 5, 20
TEAMS = 10  # pairs: each desk pulls its partner's records
SHARED = [(1, "the same words, written on every desk at once"), (1, "Die gleichen Worte überall 🙂"),
          (2, "نفس الكلمات في كل مكان")]


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    holder, url = _database_url(request.param, tmp_path)
    yield request.param, url
    if holder is not None:
        holder.__exit__(None, None, None)


def test_twenty_desks_push_and_pull_at_the_same_time(backend, tmp_path):
    kind, url = backend
    db = server_database(url)
    server = ProcessServer(url, tmp_path / "server", workers=4 if kind == "postgresql" else 1)
    desks, threads = [], []
    try:
        server.start()
        owner = add_account(db, "Olga Owner", "owner", "T0")
        publish_basics(server.url, owner, tmp_path)
        leads = {f"T{t}": add_account(db, f"Lead {t}", "lead", f"T{t}") for t in range(TEAMS)}
        people = [add_account(db, f"Annotator {i:02d}", "annotator", f"T{i % TEAMS}") for i in range(DESKS)]
        open_desks(tmp_path, people, desks)

        written: dict[uuid.UUID, Counter] = defaultdict(Counter)  # author -> round -> examples
        errors: list[str] = []
        start = threading.Barrier(DESKS)
        pushed = threading.Barrier(DESKS)
        policy = RetryPolicy(attempts=20, first_delay=0.05, max_delay=1.0, timeout=120)

        def work(i: int) -> None:
            desk, person = desks[i], people[i]
            try:
                with SyncClient(desk, server.url, person.token, batch_size=BATCH, page_size=5 * BATCH,
                                policy=policy) as client:
                    start.wait(timeout=120)
                    for step in range(STEPS):
                        per_round = fill_outbox(desk, person.id, PER_DESK // STEPS, seed=1000 * i + step,
                                                shared=SHARED if step == 0 else [], tag=f"d{i}s{step}-")
                        written[person.id].update(per_round)
                        client.run(fetch_models=False)  # pushes this step's examples, pulls the others'
                    pushed.wait(timeout=300)
                    client.run(fetch_models=False)  # everything the others pushed is there now
            except Exception as exc:  # reported below, with the desk it happened on
                errors.append(f"desk {i}: {exc.__class__.__name__}: {exc}")
                pushed.abort()

        began = time.perf_counter()
        threads = run_in_threads(work, DESKS)
        seconds = time.perf_counter() - began
        assert not errors, errors
        assert not any(thread.is_alive() for thread in threads)

        # Nothing lost, nothing twice.
        counts = server_counts(db)
        with db.read() as session:
            by_author = dict(session.execute(select(server_models.Example.author_id, func.count())
                                             .group_by(server_models.Example.author_id)).all())
            by_round_team = dict(
                ((team, number), n) for team, number, n in session.execute(
                    select(server_models.Example.team, server_models.Round.number, func.count())
                    .join(server_models.Round, server_models.Round.id == server_models.Example.round_id)
                    .group_by(server_models.Example.team, server_models.Round.number)))
            shared = list(session.execute(select(server_models.Example.text, server_models.Example.id,
                                                 server_models.Example.duplicate_of, server_models.Example.stored_seq)
                                          .where(server_models.Example.text.in_([t for _, t in SHARED]))))
        assert counts["examples"] == DESKS * PER_DESK == counts["example changes"]
        assert by_author == {p.id: PER_DESK for p in people}

        # Per-round totals, as leads read them from the server, match what the desks wrote.
        for team, lead in leads.items():
            response = httpx.get(f"{server.url}/v1/team/stats", params={"by": "round"},
                                 headers={"Authorization": f"Bearer {lead.token}"}, timeout=60)
            assert response.status_code == 200, response.text
            figures = {row["name"]: row for row in response.json()["rows"]}
            expected = Counter()
            for person in people:
                if person.team == team:
                    expected.update(written[person.id])
            assert {name: row["submitted"] for name, row in figures.items()} == \
                   {f"Hate speech · round {n}": c for n, c in expected.items()}
            assert {n: by_round_team[(team, n)] for n in expected} == dict(expected)

        # Every desk holds exactly its own work and its team's, nothing of the other teams'.
        for desk, person in zip(desks, people):
            with desk.db.read() as session:
                held = Counter(session.execute(select(DeskExample.author_id)).scalars())
            team_members = {p.id for p in people if p.team == person.team}
            assert held == {member: PER_DESK for member in team_members}, person.name
            assert local_status(desk.db, person.id).pending == 0

        # The shared texts: one original each, every other copy points at it.
        for _, text in SHARED:
            copies = [row for row in shared if row.text == text]
            originals = [row for row in copies if row.duplicate_of is None]
            assert len(copies) == DESKS and len(originals) == 1, text
            first = min(copies, key=lambda row: row.stored_seq)
            assert originals[0].id == first.id
            assert all(row.duplicate_of == first.id for row in copies if row is not first)
        print(f"\n[concurrency, {kind}] {DESKS} desks x {PER_DESK} records in {STEPS} steps, pulling as they go: "
              f"server examples {counts['examples']}, per-author counts all {PER_DESK}, per-round totals right for "
              f"{TEAMS} teams, {len(SHARED)} shared texts with 1 original and {DESKS - 1} duplicates each; "
              f"{seconds:.1f} s, {DESKS * PER_DESK / seconds:,.0f} records/s pushed (while pulling)")
    finally:
        for thread in threads:
            thread.join(timeout=1)
        for desk in desks:
            desk.close()
        server.stop()
        db.close()
