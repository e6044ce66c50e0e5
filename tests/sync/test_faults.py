"""Fault injection: 2,000 records pushed (in 20 batches of 100) through a proxy that cuts connections, a
server killed and restarted mid-push, injected 500/503 answers, and duplicated deliveries.
Afterwards the server holds exactly the client's 2,000 records, none missing, none twice,
every field equal. The faults strike requests, so what counts is how many requests they meet: 20
pushes, as 10,000 records in batches of 500 made (``make bench --only sync`` runs the cut connections
and the kills at 30,000 records). Runs on SQLite, and on PostgreSQL when DYNADESK_TEST_PG_URL is set; the cut
connections and the kills also against `serve run --workers 4` on PostgreSQL, the way a team that
outgrows one server process runs it.

The measured counts are printed (``pytest -s``) for the closing note; time is never asserted.
"""

from __future__ import annotations

import random
import threading
import uuid

import pytest

from sync.client import SyncClient
from sync.local import local_status
from sync.transport import RetryPolicy, SyncHandle
from tests.sync.conftest import BACKENDS, _database_url
from tests.sync.helpers import (
    CuttingProxy,
    DuplicateDeliveries,
    FlakyResponses,
    ProcessServer,
    ThreadServer,
    add_account,
    copy_desk,
    desk_records,
    fill_outbox,
    prepare_desk,
    publish_basics,
    server_counts,
    server_database,
    server_records,
    sync_until_done,
)

N = 2_000
BATCH = 100  # N / BATCH = 20 pushes, for the faults to strike
AUTHOR = uuid.UUID("0b6f3c1e-1d1a-4a55-9c58-2f4f6d1e0a01")
FAST_RETRIES = RetryPolicy(attempts=10, first_delay=0.05, max_delay=2.0, timeout=60)
# A request of BATCH records spans ~2 chunks (one of 500, ~10): cuts spaced for the smaller requests
CUT_SPACING = {"request": (3, 10), "response": (2, 8)}
# The cut connections and the kills also run against four worker processes on PostgreSQL (~15 s
# each): the races between processes besides those between threads.
SCALED = [*BACKENDS, pytest.param("postgresql-4-workers", marks=pytest.mark.postgres)]


def _workers(kind: str) -> int:
    return 4 if kind == "postgresql-4-workers" else 1


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """One desk with N submitted examples waiting in its outbox, copied for each test."""
    from tests.sync.helpers import Account

    root = tmp_path_factory.mktemp("fault-template")
    author = Account(AUTHOR, "Fay Fault", "annotator", "A", "")
    desk = prepare_desk(root / "desk", author)
    per_round = fill_outbox(desk, AUTHOR, N, seed=6)
    desk.close()
    return root / "desk", per_round


@pytest.fixture(params=BACKENDS)
def backend(request, tmp_path):
    holder, url = _database_url(request.param, tmp_path)
    yield request.param, url
    if holder is not None:
        holder.__exit__(None, None, None)


def _setup(url, tmp_path, template):
    db = server_database(url)
    owner = add_account(db, "Olga Owner", "owner", "A")
    author = add_account(db, "Fay Fault", "annotator", "A", person_id=AUTHOR)
    desk = copy_desk(template[0], tmp_path / "desk")
    return db, owner, author, desk


def _check_everything_arrived(db, desk, label: str, extra: dict) -> None:
    counts = server_counts(db)
    ours = desk_records(desk, AUTHOR)
    theirs = server_records(db, AUTHOR)
    missing = set(ours) - set(theirs)
    strays = set(theirs) - set(ours)
    different = [rid for rid in ours.keys() & theirs.keys() if ours[rid] != theirs[rid]]
    status = local_status(desk.db, AUTHOR)
    print(f"\n[{label}] server examples {counts['examples']}, change-feed rows {counts['example changes']}, "
          f"missing {len(missing)}, extra {len(strays)}, differing {len(different)}, "
          f"outbox left {status.pending}/{status.rejected}/{status.conflicts}; {extra}")
    assert len(ours) == N
    assert counts["examples"] == N and counts["example changes"] == N
    assert not missing and not strays
    assert not different, f"{len(different)} records differ, e.g. {different[0]}: " \
                          f"{ {k: (ours[different[0]][k], theirs[different[0]].get(k)) for k in ours[different[0]] if ours[different[0]][k] != theirs[different[0]].get(k)} }"
    assert (status.pending, status.rejected, status.conflicts) == (0, 0, 0)


@pytest.mark.parametrize("backend", SCALED, indirect=True)
def test_a_proxy_that_cuts_connections_mid_request_and_mid_response(backend, tmp_path, template):
    kind, url = backend
    db, owner, author, desk = _setup(url, tmp_path, template)
    if _workers(kind) > 1:
        server = ProcessServer(url, tmp_path / "server", workers=_workers(kind))
        server.start()
    else:
        server = ThreadServer(db, tmp_path / "server")
    proxy = CuttingProxy(int(server.url.rsplit(":", 1)[1]), seed=11, spacing=CUT_SPACING)
    try:
        publish_basics(server.url, owner, tmp_path)
        with SyncClient(desk, proxy.url, author.token, batch_size=BATCH, policy=FAST_RETRIES) as client:
            outcome = sync_until_done(client, desk, AUTHOR)
        proxy.enabled = False
        _check_everything_arrived(db, desk, f"cutting proxy, {kind}", {
            "cuts mid-request": proxy.cuts["request"], "cuts mid-response": proxy.cuts["response"],
            "connections": proxy.connections, "sync runs": outcome.runs, "retries": outcome.retries,
            "seconds": round(outcome.seconds, 1)})
        assert proxy.cuts["request"] > 0 and proxy.cuts["response"] > 0  # the faults really happened
    finally:
        proxy.stop()
        server.stop()
        desk.close()
        db.close()


@pytest.mark.parametrize("backend", SCALED, indirect=True)
def test_a_server_killed_and_restarted_during_the_push(backend, tmp_path, template):
    kind, url = backend
    db, owner, author, desk = _setup(url, tmp_path, template)
    server = ProcessServer(url, tmp_path / "server", workers=_workers(kind))
    kills_wanted = 3
    rng = random.Random(5)
    progress_seen = threading.Event()
    marks = [N * (k + 1) // (kills_wanted + 1) for k in range(kills_wanted)]
    done_so_far = [0]

    def on_progress(phase, done, total):
        if phase == "push":
            done_so_far[0] = done
            if marks and done >= marks[0]:
                marks.pop(0)
                progress_seen.set()

    stop = threading.Event()

    def killer():
        # Kill when the push has reached each mark, a random moment into the next request (which
        # goes out as soon as the mark is reported, and takes the server ~0.1-0.3 s).
        while not stop.is_set() and server.kills < kills_wanted:
            if not progress_seen.wait(0.1):
                continue
            progress_seen.clear()
            stop.wait(rng.uniform(0.02, 0.12))
            server.kill()
            server.start(wait=False)

    try:
        server.start()
        publish_basics(server.url, owner, tmp_path)
        thread = threading.Thread(target=killer, daemon=True)
        thread.start()
        policy = RetryPolicy(attempts=40, first_delay=0.1, max_delay=1.0, timeout=60)
        with SyncClient(desk, server.url, author.token, batch_size=BATCH, policy=policy) as client:
            outcome = sync_until_done(client, desk, AUTHOR, handle=SyncHandle(on_progress=on_progress))
            stop.set()
            thread.join(timeout=30)
        server.wait_ready()
        _check_everything_arrived(db, desk, f"kill -9 and restart, {kind}", {
            "kills": server.kills, "server starts": server.starts, "sync runs": outcome.runs,
            "retries": outcome.retries, "failed runs": len(outcome.failures), "seconds": round(outcome.seconds, 1)})
        assert server.kills == kills_wanted
    finally:
        stop.set()
        server.stop()
        desk.close()
        db.close()


def test_500_and_503_answers(backend, tmp_path, template):
    kind, url = backend
    db, owner, author, desk = _setup(url, tmp_path, template)
    flaky: list[FlakyResponses] = []
    server = ThreadServer(db, tmp_path / "server", wrap=lambda app: flaky.append(FlakyResponses(app, seed=3)) or flaky[0])
    try:
        publish_basics_retrying(server.url, owner, tmp_path)
        with SyncClient(desk, server.url, author.token, batch_size=BATCH, policy=FAST_RETRIES) as client:
            outcome = sync_until_done(client, desk, AUTHOR)
        _check_everything_arrived(db, desk, f"500/503 answers, {kind}", {
            **flaky[0].injected, "requests": flaky[0].requests, "sync runs": outcome.runs,
            "retries": outcome.retries, "seconds": round(outcome.seconds, 1)})
        assert flaky[0].injected["503 before"] > 0 and flaky[0].injected["500 after"] > 0
    finally:
        server.stop()
        desk.close()
        db.close()


def test_duplicated_deliveries(backend, tmp_path, template):
    kind, url = backend
    db, owner, author, desk = _setup(url, tmp_path, template)
    wrappers: list[DuplicateDeliveries] = []
    server = ThreadServer(db, tmp_path / "server",
                          wrap=lambda app: wrappers.append(DuplicateDeliveries(app, seed=9)) or wrappers[0])
    try:
        publish_basics(server.url, owner, tmp_path)
        # Every batch is also sent a second time by the client itself, after its answer.
        with SyncClient(desk, server.url, author.token, batch_size=BATCH, policy=FAST_RETRIES) as client:
            original = client.request
            resent = [0]

            def twice(method, path, handle=None, **kwargs):
                response = original(method, path, handle, **kwargs)
                if path.endswith("/push"):
                    again = original(method, path, handle, **kwargs)
                    resent[0] += 1
                    assert again.status_code == 200
                    statuses = {r["status"] for r in again.json()["results"]}
                    assert statuses <= {"already_stored"}, statuses  # a resent batch changes nothing
                return response

            client.request = twice
            outcome = sync_until_done(client, desk, AUTHOR)
        _check_everything_arrived(db, desk, f"duplicated deliveries, {kind}", {
            "concurrent double deliveries": wrappers[0].duplicated, "client resends": resent[0],
            "lost races retried by the server": db.races,
            "sync runs": outcome.runs, "seconds": round(outcome.seconds, 1)})
        assert wrappers[0].duplicated > 0 and resent[0] > 0
    finally:
        server.stop()
        desk.close()
        db.close()


def publish_basics_retrying(url, owner, tmp_path, attempts: int = 20) -> None:
    """Publishing through a flaky server: retried until it went through (bounded)."""
    for _ in range(attempts):
        try:
            publish_basics(url, owner, tmp_path)
            return
        except AssertionError:
            continue
    raise AssertionError("could not publish through the flaky server")
