"""Evaluation speed with the real default model (DESIGN.md §5: a HateCheck-size suite, 3.7k
cases, in at most 15 s).

The suite is the shared HateCheck dev file (2,297 cases) repeated to HateCheck's full size of
3,728 cases. The repeated cases get one seeded character swap each, so that every text is
distinct: the evaluation computes each distinct text once, and exact repeats would time only
2,297 predictions. Timed end to end as ``dynadesk eval`` runs it, minus process start: read
the suite file, load the model from its files, predict every case in batches, compute every
figure. Identity swaps, spelling perturbations and latency sampling are off for this timing
(they add their own cases); single-case latency is measured on its own row.
"""

from __future__ import annotations

import csv
import random
import statistics
import time
from pathlib import Path

from bench.common import BenchContext, Result, percentile, summarise

GROUP = "evaluation"
SUITE_SIZE = 3728  # HateCheck's full suite
BUDGET_S = 15.0
ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared" / "data" / "hatecheck" / "test_suite_cases_dev.csv"


def hatecheck_size_suite(target: Path, size: int = SUITE_SIZE) -> Path:
    from app.core.services.evaluation_data import perturb

    with open(SHARED, encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header, rows = reader.fieldnames, list(reader)
    out, seen, copy = [], set(), 0
    while len(out) < size:
        for row in rows:
            if len(out) >= size:
                break
            row = dict(row)
            if copy:
                row["case_id"] = f"{row['case_id']}.{copy}"
                row["ref_case_id"] = ""
                row["test_case"] = perturb(row["test_case"], "char_swap", random.Random(f"{copy}:{row['case_id']}")) \
                    or row["test_case"] + "!" * copy
            if row["test_case"].strip() in seen:
                row["test_case"] = row["test_case"].strip() + " ." * (copy + 1)
            seen.add(row["test_case"].strip())
            out.append(row)
        copy += 1
    with open(target, "w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(out)
    return target


def run(ctx: BenchContext) -> list[Result]:
    import resources
    from app.core.services import evaluation as ev
    from app.core.services.evaluation_models import ModelChoice
    from app.core.services.evaluation_data import read_hatecheck_suite
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.batch_run import BatchRun
    from local_models.default_model import prepare_default_model
    from local_models.engine import Ensemble, default_num_threads, load_engine

    quiet_transformers()
    if not SHARED.is_file():
        return [Result(GROUP, "HateCheck-size suite", "s", notes=f"skipped: {SHARED} is not present")]
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    model_dir = prepared.onnx_dir
    flavour = f"ONNX {'int8' if prepared.onnx_int8 else 'fp32'} (the desk's default model)"
    suite_file = hatecheck_size_suite(ctx.work_dir / "hatecheck-size.csv")
    labels = ["hate", "not hate"]
    results: list[Result] = []
    runs = 1 if ctx.quick else 3
    for threads in dict.fromkeys([default_num_threads(), 2]):
        seconds, distinct = [], 0
        for _ in range(runs):
            started = time.perf_counter()
            suite = read_hatecheck_suite(suite_file)
            options = ev.EvaluationOptions(identity_swap=False, robustness=False, latency_samples=0,
                                           num_threads=threads)
            choice = ModelChoice("default", [])
            doc = ev.evaluate([choice], [suite], options, loader=lambda _c: Ensemble(
                [load_engine(model_dir, task_labels=labels, num_threads=threads)]))
            seconds.append(time.perf_counter() - started)
            distinct = doc["models"][0]["run"]["distinct_inputs"]
            accuracy = doc["results"]["m1"]["sets"]["suite"]["accuracy"]
        median = statistics.median(seconds)
        results.append(Result(
            GROUP, f"HateCheck-size suite ({len(suite.cases)} cases), {threads} thread(s)", "s", median,
            percentile(seconds, 0.95), len(seconds), budget=f"<= {BUDGET_S:g} s", within_budget=median <= BUDGET_S,
            notes=f"{flavour}; {distinct} distinct texts; read, load, predict, figures; accuracy {accuracy:.3f}; "
                  f"{len(suite.cases) / median:.0f} cases/s end to end",
            extra={"runs_s": seconds}))

    engine = load_engine(model_dir, task_labels=labels, num_threads=default_num_threads())
    texts = [c.text for c in read_hatecheck_suite(suite_file).cases]
    run = BatchRun(engine, batch_size=64, latency_samples=0)
    _, stats = run.run(texts)
    results.append(Result(GROUP, "batched prediction throughput", "items/s", stats.items_per_second, None, len(texts),
                          notes=f"{default_num_threads()} thread(s), batch 64, token-length order; "
                                f"peak RSS {stats.peak_rss_mb:.0f} MB"))
    latency = BatchRun(engine, latency_samples=100 if ctx.quick else 300, seed=1).sample_latency(texts)
    results.append(summarise(GROUP, "single-case latency (HateCheck texts)", latency, budget_p95_ms=5.0,
                             notes="one case per call, as the GUI and the latency figure of a report"))
    engine.close()
    return results
