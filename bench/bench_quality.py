"""The data-quality guard over 100,000 examples: the near-duplicate check at submit
(p95 ≤ 50 ms), the index's build when a desk opens (first open of an older desk: the signature
backfill; later opens: stored signatures), its incremental update, and the lead's cluster and
duplicate-rate figures.

Data: bench_storage's generator (Zipf text, 50 annotators, 4 rounds), and a quarter of the examples
real tweets (Davidson et al. 2017, with light edits: case, punctuation, a dropped word)
where /work/shared/data is present, so that near-duplicates exist as they do in collected data.
"""

from __future__ import annotations

import csv
import random
import time
import uuid
from datetime import timedelta
from pathlib import Path

from sqlalchemy import insert

from app.core.desk import Desk
from app.core.domain import utcnow
from app.core.quality.near_duplicates import NearDuplicateIndex
from app.core.storage.models import Example
from bench import quality_figures
from bench.bench_storage import fill
from bench.common import BenchContext, Result, summarise, time_calls

GROUP = "quality"
CHECK_BUDGET_MS = 50
DAVIDSON = Path(__file__).resolve().parents[2] / "shared" / "data" / "davidson2017" / "labeled_data.csv"
DAVIDSON_FALLBACK = Path("/work/shared/data/davidson2017/labeled_data.csv")


def real_tweets() -> list[str]:
    for path in (DAVIDSON, DAVIDSON_FALLBACK):
        if path.exists():
            with path.open(encoding="utf-8", newline="") as handle:
                return [row["tweet"] for row in csv.DictReader(handle)]
    return []


def edited(text: str, rng: random.Random) -> str:
    words = text.split()
    choice = rng.random()
    if choice < 0.3 and len(words) > 4:
        del words[rng.randrange(len(words))]
    elif choice < 0.6:
        return text.upper() if rng.random() < 0.5 else text + "!!"
    return " ".join(words)


def add_tweets(desk: Desk, n: int, rng: random.Random) -> int:
    """``n`` more examples whose texts are tweets, some of them edited copies of each other (spread
    over the same annotators, rounds and time span as the generated ones)."""
    tweets = real_tweets()
    if not tweets or n <= 0:
        return 0
    task = desk.tasks.task("hate_speech").id
    rounds = [r.id for r in desk.tasks.rounds("hate_speech")]
    people = [p.id for p in desk.people.all()]
    start = utcnow() - timedelta(days=60)
    rows = []
    for _ in range(n):
        text = edited(rng.choice(tweets), rng)
        rows.append({"id": uuid.uuid4(), "task_id": task, "round_id": rng.choice(rounds),
                     "author_id": rng.choice(people), "inputs": {"text": text}, "text": text,
                     "true_label": rng.choice(("hate", "not hate")), "status": "submitted",
                     "submitted_at": start + timedelta(seconds=rng.randrange(60 * 86400)), "sync_state": "synced"})
    for offset in range(0, n, 10_000):
        with desk.db.write() as session:
            session.execute(insert(Example), rows[offset:offset + 10_000])
    return n


def run(ctx: BenchContext) -> list[Result]:
    n = 10_000 if ctx.quick else 100_000
    rng = random.Random(21)
    desk = Desk(ctx.work_dir / "desk")
    tweets = n // 4 if real_tweets() else 0
    fill(desk, n - tweets, rng)
    add_tweets(desk, tweets, rng)
    task = desk.tasks.task("hate_speech").id
    results: list[Result] = []

    backfill = NearDuplicateIndex(desk.db, lambda _: 0.5)
    started = time.perf_counter()
    backfill.ensure_built(task)  # no signatures yet: hashes every text and stores the signatures
    results.append(Result(GROUP, f"index build, first open of an older desk ({n // 1000}k, signature backfill)",
                          "s", median=time.perf_counter() - started, n=1,
                          notes=f"{backfill.size(task):,} examples indexed; on a worker, never the GUI thread"))
    builds = []
    for _ in range(1 if ctx.quick else 3):
        fresh = NearDuplicateIndex(desk.db, lambda _: 0.5)
        started = time.perf_counter()
        fresh.ensure_built(task)
        builds.append(time.perf_counter() - started)
    results.append(Result(GROUP, f"index build at open ({n // 1000}k, stored signatures)", "s",
                          median=sorted(builds)[len(builds) // 2], n=len(builds), notes="on a worker"))

    index = desk.near_duplicates
    index.ensure_built(task)
    with desk.db.read() as session:
        stored = list(session.scalars(Example.__table__.select().with_only_columns(Example.text).limit(5000)))
    probes = [edited(rng.choice(stored), rng) for _ in range(150)] + \
             [f"a brand new sentence number {i} about nothing at all" for i in range(50)]
    rng.shuffle(probes)
    cycle = iter(probes * 10)
    found = [len(index.nearest(task, p).near) for p in probes]
    results.append(summarise(GROUP, f"near-duplicate check at submit ({n // 1000}k examples)",
                             time_calls(lambda: index.nearest(task, next(cycle)), len(probes), warmup=5),
                             budget_p95_ms=CHECK_BUDGET_MS,
                             notes=f"{sum(1 for f in found if f)} of {len(probes)} probes had a near-duplicate; "
                                   f"{tweets:,} texts are tweets"))

    person = desk.people.by_name("Annotator 01").id
    round_id = desk.tasks.round("hate_speech", 1).id

    def one_arrives() -> None:  # an example stored by any path, then the next question catches up
        with desk.db.write() as session:
            session.execute(insert(Example), [{
                "id": uuid.uuid4(), "task_id": task, "round_id": round_id, "author_id": person,
                "inputs": {"text": "x"}, "text": f"an arriving example {rng.random()} {rng.choice(stored)}",
                "true_label": "hate", "status": "submitted", "submitted_at": utcnow(), "sync_state": "synced"}])

    samples = []
    for _ in range(30 if ctx.quick else 100):
        one_arrives()
        started = time.perf_counter()
        index.size(task)  # applies the change log
        samples.append((time.perf_counter() - started) * 1000)
    results.append(summarise(GROUP, "incremental update (one example stored, applied on the next question)",
                             samples, notes="reads the change log past the last entry; no rescan"))

    started = time.perf_counter()
    clusters = index.near_duplicate_clusters(task, round_id=round_id)
    results.append(Result(GROUP, f"near-duplicate clusters of one round ({n // 4000}k examples)", "s",
                          median=time.perf_counter() - started, n=1,
                          notes=f"{len(clusters):,} clusters, {sum(len(c.members) for c in clusters):,} examples"))
    started = time.perf_counter()
    rates = index.duplicate_rates(task, by="annotator")
    results.append(Result(GROUP, f"duplicate rate per annotator, whole task ({n // 1000}k), first time", "s",
                          median=time.perf_counter() - started, n=1,
                          notes=f"{len(rates)} annotators, mean rate {sum(r.rate for r in rates) / len(rates):.3f}"))
    samples = []
    for _ in range(10 if ctx.quick else 30):
        one_arrives()
        started = time.perf_counter()
        index.duplicate_rates(task, by="round")
        samples.append((time.perf_counter() - started) * 1000)
    results.append(summarise(GROUP, "duplicate rate per round after one more example (kept clusters extended)",
                             samples, notes="the dashboard's refresh after a new example"))
    started = time.perf_counter()
    share = index.novel_share(task, desk.tasks.round("hate_speech", 2).id)
    results.append(Result(GROUP, "share of a round novel relative to earlier rounds (sample of 1,000)", "s",
                          median=time.perf_counter() - started, n=1, notes=f"share {share.share:.3f}"))
    desk.close()
    # the lead's artifact and diversity figures for a round of 100k (bench/quality_figures.py, its own desk)
    results.extend(quality_figures.run(ctx))
    return results
