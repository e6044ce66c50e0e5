"""The lead's data-quality figures for a round of 100,000 examples (DESIGN.md §5: artifact and
diversity figures ≤ 2 s on a worker). Run by bench_quality (GROUP "quality"), after the near-duplicate figures.

The desk holds an earlier round of 20,000 examples and the measured round of 100,000, their
texts drawn from HateCheck's dev suite and Davidson et al. (2017) (read from /work/shared/data,
with their labels), half of them with a filler word put in at a random place so that not every
repeat is exact. Timed, as the Dashboard's quality view computes them on its worker:

- reading the task's examples (``QualityData.load``);
- the artifact tables of every round (so that tokens can be marked across rounds) and distinct-n
  of the measured round, from the texts (the term matrix is built afresh each time);
- the novel share of the measured round (the near-duplicate index, built beforehand as the desk
  keeps it; its clusters and duplicate rates are bench_quality's own rows);
- all of these together: the figures of a round, as the worker computes them;
- the embedding spread of the round's 500-example sample in the default model's space (ONNX),
  which runs as a job of the inference service.
"""

from __future__ import annotations

import csv
import random
import time
import uuid
from datetime import timedelta

from sqlalchemy import insert

from app.core.desk import Desk
from app.core.domain import utcnow
from app.core.storage.models import Example
from bench.common import BenchContext, Result, summarise, time_calls
from tests.conftest import SHARED_DATA

GROUP = "quality"
BUDGET_MS = 2000
FILLERS = ("really", "honestly", "just", "totally", "so", "literally", "today", "again", "now", "ok")


def texts_with_labels() -> list[tuple[str, str]]:
    pool = []
    with open(SHARED_DATA / "hatecheck" / "test_suite_cases_dev.csv", newline="", encoding="utf-8") as handle:
        pool += [(row["test_case"].strip(), "hate" if row["label_gold"] == "hateful" else "not hate")
                 for row in csv.DictReader(handle)]
    with open(SHARED_DATA / "davidson2017" / "labeled_data.csv", newline="", encoding="utf-8") as handle:
        pool += [(row["tweet"], "hate" if row["class"] == "0" else "not hate") for row in csv.DictReader(handle)]
    return pool


def fill_rounds(desk: Desk, sizes: dict[int, int], rng: random.Random) -> None:
    task = desk.tasks.task("hate_speech")
    people = [desk.people.create(f"Writer {i:02d}", "annotator").id for i in range(40)]
    pool = texts_with_labels()
    start = utcnow() - timedelta(days=30)
    position = 0
    for number, size in sorted(sizes.items()):
        round_id = desk.tasks.get_or_create_round("hate_speech", number).id
        for offset in range(0, size, 20_000):
            rows = []
            for _ in range(offset, min(size, offset + 20_000)):
                text, label = rng.choice(pool)
                if rng.random() < 0.5:
                    words = text.split()
                    words.insert(rng.randint(0, len(words)), rng.choice(FILLERS))
                    text = " ".join(words)
                rows.append({"id": uuid.uuid4(), "task_id": task.id, "round_id": round_id,
                             "author_id": rng.choice(people), "inputs": {"text": text}, "text": text,
                             "true_label": label, "model_fooled": rng.random() < 0.4,
                             "meta": {"label_explanation": "generated"}, "status": "submitted",
                             "time_spent_ms": 60_000, "submitted_at": start + timedelta(seconds=position),
                             "sync_state": "pending"})
                position += 1
            with desk.db.write() as session:
                session.execute(insert(Example), rows)
    desk.db.refresh_statistics()


def run(ctx: BenchContext) -> list[Result]:
    from app.core.quality.report import AlertThresholds, QualityData, quality_report
    from app.core.quality.service import load_quality_data

    size = 10_000 if ctx.quick else 100_000
    earlier = size // 5
    rng = random.Random(21)
    desk = Desk(ctx.work_dir / "figures-desk")
    started = time.perf_counter()
    fill_rounds(desk, {1: earlier, 2: size}, rng)
    filled = time.perf_counter() - started
    task = desk.tasks.task("hate_speech")
    labels = desk.tasks.definition_by_code("hate_speech").labels
    started = time.perf_counter()
    desk.near_duplicates.ensure_built(task.id)
    index_built = time.perf_counter() - started
    lines = AlertThresholds()
    where = f"round of {size:,} (+ an earlier round of {earlier:,})"
    n = 3
    results = []

    load = time_calls(lambda: QualityData.load(desk.db, task.id, labels), n, warmup=1)
    results.append(summarise(GROUP, f"read the task's examples ({size + earlier:,})", load))

    data = load_quality_data(desk, "hate_speech")

    def report():
        fresh = QualityData.from_rows(list(zip(data.ids, (data.round_ids[int(r)] for r in data.rounds),
                                               (data.author_keys[int(a)] for a in data.authors), data.texts,
                                               (data.label_names[int(c)] for c in data.labels))),
                                      {rid: n for n, rid in data.round_ids.items()}, data.author_names, labels)
        started = time.perf_counter()
        quality_report(fresh, rounds=[2], thresholds=lines)
        return time.perf_counter() - started

    samples = [report() * 1000 for _ in range(n)]
    results.append(summarise(GROUP, f"artifact tables + distinct-n, {where}", samples, budget_p95_ms=BUDGET_MS,
                             notes="terms read afresh from the texts"))
    data.matrix  # noqa: B018 (built once, as the dashboard keeps it for one state of the data)
    again = time_calls(lambda: quality_report(data, rounds=[2], by_annotator=True, thresholds=lines), n, warmup=1)
    results.append(summarise(GROUP, f"the same after a filter change (terms kept; with 40 annotators' tables), "
                                    f"{where}", again, budget_p95_ms=BUDGET_MS))
    task_id, round_id = task.id, uuid.UUID(data.round_ids[2])
    novel = time_calls(lambda: desk.near_duplicates.novel_share(task_id, round_id), n, warmup=1)
    results.append(summarise(GROUP, f"novel share of the round (near-duplicate index, sample of 2,000), {where}",
                             novel, budget_p95_ms=BUDGET_MS, notes=f"index built beforehand in {index_built:.1f} s"))

    def everything():
        fresh = load_quality_data(desk, "hate_speech")
        quality_report(fresh, rounds=[2], thresholds=lines)
        desk.near_duplicates.novel_share(task_id, round_id)

    total = time_calls(everything, n, warmup=1)
    results.append(summarise(GROUP, f"a round's artifact and diversity figures on the worker (read + all of the "
                                    f"above), {where}", total, budget_p95_ms=BUDGET_MS,
                             notes=f"desk filled in {filled:.0f} s; the embedding spread is the job below"))
    results.extend(spread(ctx, data))
    desk.close()
    return results


def spread(ctx: BenchContext, data) -> list[Result]:
    """The embedding spread's job: the round's sample through the default model's ONNX form, and the spread."""
    import resources
    from app.core.quality.report import embedding_spreads
    from local_models.default_model import prepare_default_model
    from local_models.engine import load_engine

    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    assert prepared.onnx_dir is not None
    engine = load_engine(prepared.onnx_dir)
    try:
        samples = time_calls(lambda: embedding_spreads(data, engine, [2]), 3 if ctx.quick else 5, warmup=1)
        value, count = embedding_spreads(data, engine, [2])[2]
    finally:
        engine.close()
    result = summarise(GROUP, f"embedding spread of a {count}-example sample (default model, ONNX"
                              f"{' int8' if prepared.onnx_int8 else ''}), inference job", samples)
    result.notes = f"spread {value:.3f}"
    return [result]
