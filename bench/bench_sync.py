"""Sync (DESIGN.md §5: 10,000 examples over loopback in ≤ 10 s, nothing lost or duplicated),
server push throughput with 20 concurrent clients on SQLite and PostgreSQL, and the larger
configuration of the fault and concurrency tests.

PostgreSQL runs when DYNADESK_TEST_PG_URL is set (``.ci/run`` starts one); each scenario gets
its own schema. Servers are real ``dynadesk serve run`` processes on loopback.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

import httpx

from bench.common import BenchContext, Result, percentile
from bench.sync_checks import _peak_rss_mb, worst_record_push
from sync.client import SyncClient
from sync.transport import RetryPolicy
from tests.sync.helpers import (
    PG_ENV,
    CuttingProxy,
    ProcessServer,
    add_account,
    copy_desk,
    desk_records,
    fill_outbox,
    open_desks,
    postgres_schema,
    prepare_desk,
    publish_basics,
    server_counts,
    server_database,
    server_records,
    sync_until_done,
)

GROUP = "sync"
BUDGET_S = 10.0


@contextmanager
def backend(kind: str, work: Path):
    if kind == "sqlite":
        yield f"sqlite:///{work / 'server' / 'server.sqlite'}"
    else:
        with postgres_schema(os.environ[PG_ENV]) as url:
            yield url


def backends() -> list[str]:
    return ["sqlite", "postgresql"] if os.environ.get(PG_ENV) else ["sqlite"]


def _exact(db, desk, author_id) -> str:
    ours, theirs = desk_records(desk, author_id), server_records(db, author_id)
    missing, extra = len(ours.keys() - theirs.keys()), len(theirs.keys() - ours.keys())
    differing = sum(1 for key in ours.keys() & theirs.keys() if ours[key] != theirs[key])
    assert not (missing or extra or differing), f"{missing} missing, {extra} extra, {differing} differing"
    return f"{len(theirs):,} on the server, 0 missing, 0 twice, every field equal"


AUTHOR = uuid.UUID("5f0c2a8e-8b1e-4a53-9a0e-6c1f3d2b9a77")


def sync_10k(ctx: BenchContext, kind: str, runs: int) -> Result:
    """One desk with 10,000 submitted examples waiting: the time of ``dynadesk sync --now``'s work
    (push and pull) against a fresh server each run."""
    from tests.sync.helpers import Account

    template = ctx.work_dir / f"sync10k-{kind}-template"
    desk = prepare_desk(template, Account(AUTHOR, "Fay Fast", "annotator", "A", ""))
    fill_outbox(desk, AUTHOR, 10_000, seed=10)
    desk.close()
    times, exact = [], ""
    for run in range(runs):
        work = ctx.work_dir / f"sync10k-{kind}-{run}"
        with backend(kind, work) as url:
            db = server_database(url)
            owner = add_account(db, "Olga Owner", "owner", "A")
            author = add_account(db, "Fay Fast", "annotator", "A", person_id=AUTHOR)
            server = ProcessServer(url, work / "server")
            server.start()
            try:
                publish_basics(server.url, owner, work)
                desk = copy_desk(template, work / "desk")
                with SyncClient(desk, server.url, author.token) as client:
                    started = time.perf_counter()
                    report = client.run(fetch_models=False)
                    times.append(time.perf_counter() - started)
                assert report.pushed == 10_000, report.summary()
                exact = _exact(db, desk, AUTHOR)
                desk.close()
            finally:
                server.stop()
                db.close()
    return Result(GROUP, f"sync 10,000 examples over loopback ({kind} server)", "s", median=statistics.median(times),
                  p95=percentile(times, 0.95), n=len(times), budget=f"<= {BUDGET_S:g} s",
                  within_budget=max(times) <= BUDGET_S, notes=f"push + pull, 500 per request; {exact}")


def push_throughput(ctx: BenchContext, kind: str, clients: int, per_client: int, batch: int) -> list[Result]:
    """``clients`` threads pushing prepared batches as fast as the server answers."""
    work = ctx.work_dir / f"throughput-{kind}"
    with backend(kind, work) as url:
        db = server_database(url)
        owner = add_account(db, "Olga Owner", "owner", "A")
        accounts = [add_account(db, f"Pusher {i:02d}", "annotator", f"T{i % 4}") for i in range(clients)]
        workers = 2 if kind == "postgresql" else 1
        server = ProcessServer(url, work / "server", workers=workers)
        server.start()
        try:
            publish_basics(server.url, owner, work)
            bodies: list[list[bytes]] = []
            from sync.outgoing import pending_batch

            for i, account in enumerate(accounts):
                desk = prepare_desk(work / f"desk-{i:02d}", account)
                fill_outbox(desk, account.id, per_client, seed=i, tag=f"p{i}-")
                requests, after = [], 0
                while True:
                    outgoing = pending_batch(desk.db, account.id, after=after, limit=batch)
                    if not outgoing.entries:
                        break
                    requests.append(json.dumps({"records": outgoing.records}).encode())
                    after = outgoing.last_seq
                bodies.append(requests)
                desk.close()
            latencies: list[float] = []
            lock = threading.Lock()
            barrier = threading.Barrier(clients + 1)

            def pusher(i: int) -> None:
                headers = {"Authorization": f"Bearer {accounts[i].token}", "Content-Type": "application/json"}
                with httpx.Client(base_url=server.url, headers=headers, timeout=300) as http:
                    barrier.wait()
                    for body in bodies[i]:
                        started = time.perf_counter()
                        response = http.post("/v1/push", content=body)
                        elapsed = time.perf_counter() - started
                        assert response.status_code == 200, response.text[:300]
                        with lock:
                            latencies.append(elapsed * 1000)

            threads = [threading.Thread(target=pusher, args=(i,)) for i in range(clients)]
            for thread in threads:
                thread.start()
            barrier.wait()
            started = time.perf_counter()
            for thread in threads:
                thread.join()
            seconds = time.perf_counter() - started
            total = server_counts(db)["examples"]
            assert total == clients * per_client, total
        finally:
            server.stop()
            db.close()
    rate = total / seconds
    return [
        Result(GROUP, f"server push throughput, {clients} concurrent clients ({kind}, {workers} worker(s))",
               "records/s", median=rate, n=total,
               notes=f"{total:,} records in {seconds:.1f} s, {batch} per request; all stored once"),
        Result(GROUP, f"push request latency under that load ({kind}, {batch} records)", "ms",
               median=statistics.median(latencies), p95=percentile(latencies, 0.95), n=len(latencies)),
    ]


def faults_large(ctx: BenchContext, kind: str, n: int) -> Result:
    """The cutting-proxy fault test at a larger size."""
    work = ctx.work_dir / f"faults-{kind}"
    with backend(kind, work) as url:
        db = server_database(url)
        owner = add_account(db, "Olga Owner", "owner", "A")
        author = add_account(db, "Fay Fault", "annotator", "A")
        server = ProcessServer(url, work / "server")
        server.start()
        proxy = CuttingProxy(int(server.url.rsplit(":", 1)[1]), seed=21)
        try:
            publish_basics(server.url, owner, work)
            desk = prepare_desk(work / "desk", author)
            fill_outbox(desk, author.id, n, seed=21)
            policy = RetryPolicy(attempts=12, first_delay=0.05, max_delay=2.0, timeout=120)
            with SyncClient(desk, proxy.url, author.token, policy=policy) as client:
                outcome = sync_until_done(client, desk, author.id, max_runs=50)
            proxy.enabled = False
            exact = _exact(db, desk, author.id)
            desk.close()
        finally:
            proxy.stop()
            server.stop()
            db.close()
    return Result(GROUP, f"{n:,} records through a connection-cutting proxy ({kind})", "s", median=outcome.seconds,
                  n=1, notes=f"{proxy.cuts['request']} cuts mid-request, {proxy.cuts['response']} mid-response, "
                             f"{outcome.retries} retries; {exact}")


def _all_desks_sync(opened: list, server_url: str, people: list, per_desk: int, *, batch_size: int,
                    wait_s: float, prepare: Callable[[SyncClient], None] = lambda client: None) -> float:
    """Every desk, each on its own thread, writes ``per_desk`` examples in five steps and syncs after each,
    then all sync once more together (so each pulls everything); the seconds it took. ``prepare`` sees each
    client before its first sync."""
    errors: list[str] = []
    steps = 5
    barrier = threading.Barrier(len(opened))

    def work_on(i: int) -> None:
        try:
            with SyncClient(opened[i], server_url, people[i].token, batch_size=batch_size,
                            policy=RetryPolicy(attempts=20, first_delay=0.05, max_delay=1.0)) as client:
                prepare(client)
                for step in range(steps):
                    fill_outbox(opened[i], people[i].id, per_desk // steps, seed=100 * i + step,
                                tag=f"d{i}s{step}-")
                    client.run(fetch_models=False)
                barrier.wait(timeout=wait_s)
                client.run(fetch_models=False)
        except Exception as exc:
            errors.append(f"desk {i}: {exc}")
            barrier.abort()

    started = time.perf_counter()
    threads = [threading.Thread(target=work_on, args=(i,)) for i in range(len(opened))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    return time.perf_counter() - started


def concurrency_large(ctx: BenchContext, kind: str, desks: int, per_desk: int, team_size: int) -> Result:
    """The concurrency test at a larger size: bigger teams, so every desk pulls more."""
    work = ctx.work_dir / f"concurrency-{kind}"
    teams = max(1, desks // team_size)
    with backend(kind, work) as url:
        db = server_database(url)
        owner = add_account(db, "Olga Owner", "owner", "T0")
        people = [add_account(db, f"Annotator {i:02d}", "annotator", f"T{i % teams}") for i in range(desks)]
        server = ProcessServer(url, work / "server", workers=2 if kind == "postgresql" else 1)
        server.start()
        opened = []
        try:
            publish_basics(server.url, owner, work)
            open_desks(work, people, opened)
            seconds = _all_desks_sync(opened, server.url, people, per_desk, batch_size=250, wait_s=600)
            total = server_counts(db)["examples"]
            assert total == desks * per_desk, total
            pulled = 0
            from sqlalchemy import func, select

            from app.core.storage.models import Example

            for desk, person in zip(opened, people):
                with desk.db.read() as session:
                    held = session.scalar(select(func.count()).select_from(Example))
                assert held == per_desk * sum(1 for p in people if p.team == person.team), person.name
                pulled += held - per_desk
        finally:
            for desk in opened:
                desk.close()
            server.stop()
            db.close()
    return Result(GROUP, f"{desks} desks x {per_desk:,} records, teams of {team_size}, pushing and pulling ({kind})",
                  "s", median=seconds, n=1,
                  notes=f"{total:,} pushed and {pulled:,} pulled, {total / seconds:,.0f} records/s pushed while "
                        "pulling; every desk holds exactly its team's work")


def _server_tree_peak_mb(pid: int) -> tuple[float, float]:
    """The largest peak RSS of one server process and the sum over the server and its worker processes."""
    pids = [pid]
    for task in Path(f"/proc/{pid}/task").iterdir():
        children = (task / "children").read_text().split()
        pids += [int(child) for child in children]
    peaks = []
    for one in pids:
        try:
            peaks.append(_peak_rss_mb(one))
        except OSError:  # a worker that ended between the listing and the read
            continue
    return max(peaks), sum(peaks)


def team_scale(ctx: BenchContext, desks: int, per_desk: int, workers: int) -> list[Result]:
    """``desks`` desks of one team each pushing ``per_desk`` examples in five syncs to one PostgreSQL server
    with ``workers`` processes, all at once: each sync's push and pull timed on their own, the totals checked
    exactly on the server and on every desk, and the server's peak memory (every worker process)."""
    from sqlalchemy import func, select

    from app.core.storage.models import Example

    work = ctx.work_dir / "team-scale"
    with backend("postgresql", work) as url:
        db = server_database(url)
        owner = add_account(db, "Olga Owner", "owner", "T")
        people = [add_account(db, f"Annotator {i:02d}", "annotator", "T") for i in range(desks)]
        server = ProcessServer(url, work / "server", workers=workers)
        server.start()
        opened = []
        push_s: list[float] = []
        pull_s: list[float] = []
        try:
            publish_basics(server.url, owner, work)
            open_desks(work, people, opened)
            def timed(client: SyncClient, name: str, into: list[float]) -> None:
                call = getattr(client, name)

                def wrapper(*args, **kwargs):
                    started = time.perf_counter()
                    try:
                        return call(*args, **kwargs)
                    finally:
                        into.append(time.perf_counter() - started)
                setattr(client, name, wrapper)

            def time_push_and_pull(client: SyncClient) -> None:
                timed(client, "push", push_s)
                timed(client, "pull", pull_s)

            seconds = _all_desks_sync(opened, server.url, people, per_desk, batch_size=100, wait_s=900,
                                      prepare=time_push_and_pull)
            assert server.process is not None
            largest, summed = _server_tree_peak_mb(server.process.pid)
            total = server_counts(db)["examples"]
            assert total == desks * per_desk, f"{total:,} on the server, {desks * per_desk:,} pushed"
            for desk, person in zip(opened, people):
                with desk.db.read() as session:
                    held = session.scalar(select(func.count()).select_from(Example))
                assert held == desks * per_desk, f"{person.name}'s desk holds {held:,}"
        finally:
            for desk in opened:
                desk.close()
            server.stop()
            db.close()
    where = f"{desks} desks x {per_desk:,} examples, one team, PostgreSQL, --workers {workers}"
    exact = f"exact: {total:,} on the server and on each of the {desks} desks; {seconds:.1f} s in all"
    return [
        Result(GROUP, f"push of one sync (one request of 100 examples), {where}", "s", median=statistics.median(push_s),
               p95=percentile(push_s, 0.95), n=len(push_s), notes=exact),
        Result(GROUP, f"pull of one sync (every page it takes), {where}", "s", median=statistics.median(pull_s),
               p95=percentile(pull_s, 0.95), n=len(pull_s), notes="each desk's pull phase of every sync, timed on its own (desks pull while the others push)"),
        Result(GROUP, f"server peak RSS, {where}", "MB", median=largest, n=1,
               notes=f"largest process (VmHWM); {summed:.0f} MB summed over the server and its workers"),
    ]


def pull_memory(ctx: BenchContext, n: int) -> list[Result]:
    """Pulling ``n`` large-but-legal examples (origin and edit_ops each just under the 64 KiB a free-form
    field may take): the peak memory (tracemalloc) of building and serialising one page, as the server does
    for ``/v1/changes``, with pages capped by bytes and, for reference, capped only by records (as before)."""
    import tracemalloc

    from app.core.limits import MAX_FIELD_BYTES
    from sync.protocol import MAX_PULL_BYTES, PublishRequest, PushRequest
    from sync.server import store
    from tests.sync.helpers import basics_records
    from tests.sync.test_server import example

    work = ctx.work_dir / "pull-memory"
    db = server_database(f"sqlite:///{work / 'server.sqlite'}")
    owner = add_account(db, "Olga Owner", "owner", "A")
    ann = add_account(db, "Ann Annotator", "annotator", "A")
    bob = add_account(db, "Bob Annotator", "annotator", "A")
    people = {a.id: store.authenticate(db, a.token) for a in (owner, ann, bob)}
    store.publish(db, people[owner.id], PublishRequest.model_validate({"records": basics_records(work)}).records,
                  lambda *_: True)
    blob = "x" * (MAX_FIELD_BYTES - 200)
    for start in range(0, n, 50):
        records = [example(ann, f"large {i}", origin={"kind": "scratch", "note": blob},
                           edit_ops=[{"op": "keep", "text": blob}]) for i in range(start, min(n, start + 50))]
        store.push(db, people[ann.id], PushRequest.model_validate({"records": records}).records)

    def pull(max_bytes: int) -> tuple[list[int], list[int], int, float]:
        peaks, sizes, seen, cursor = [], [], 0, 0
        started = time.perf_counter()
        while True:
            tracemalloc.start()
            page = store.changes(db, people[bob.id], cursor, 500, max_bytes=max_bytes)
            body = page.model_dump_json().encode()
            peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()
            sizes.append(len(body))
            seen += sum(1 for r in page.records if r.record == "example")
            del body
            if not page.more:
                return peaks, sizes, seen, time.perf_counter() - started
            cursor = page.cursor

    results = []
    for label, cap in (("pages capped at 4 MiB", MAX_PULL_BYTES), ("reference: 500 records a page, no byte cap", 2**62)):
        peaks, sizes, seen, seconds = pull(cap)
        assert seen == n, f"{seen} of {n} examples pulled"
        mib = [p / 2**20 for p in peaks]
        results.append(Result(GROUP, f"pull memory per page, {n:,} examples of ~128 KiB ({label})", "MiB",
                              median=statistics.median(mib), p95=max(mib), n=len(peaks),
                              notes=f"peak traced memory of one page (p95 column: the largest); {len(sizes)} pages, "
                                    f"largest response {max(sizes) / 2**20:.1f} MiB, {seconds:.1f} s in all; "
                                    f"all {n:,} pulled once",
                              extra={"page_bytes": sizes, "peak_bytes": peaks}))
    db.close()
    return results


def run(ctx: BenchContext) -> list[Result]:
    results: list[Result] = []
    random.seed(0)
    kinds = backends()
    results += worst_record_push(ctx)
    for kind in kinds:
        results.append(sync_10k(ctx, kind, runs=1 if ctx.quick else 3))
    for kind in kinds:
        results += push_throughput(ctx, kind, clients=20, per_client=250 if ctx.quick else 1500, batch=100)
    results += pull_memory(ctx, 100 if ctx.quick else 400)
    if not ctx.quick:
        for kind in kinds:
            results.append(faults_large(ctx, kind, 30_000))
            results.append(concurrency_large(ctx, kind, desks=20, per_desk=1_000, team_size=5))
    if "postgresql" in kinds:
        results += team_scale(ctx, desks=20, per_desk=100 if ctx.quick else 500, workers=4)
    if "postgresql" not in kinds:
        results.append(Result(GROUP, "PostgreSQL scenarios", "-", notes=f"skipped: set {PG_ENV} (.ci/run does)"))
    return results
