"""Evaluation speed with the real default model (DESIGN.md §5: a HateCheck-size suite, 3.7k
cases, in at most 15 s; at most 8 s with the int8 form), and the batching that
chose the evaluation's default batches.

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
INT8_BUDGET_S = 8.0  # with the int8 form, on a quiet machine
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
    from app.core.services.evaluation_data import read_hatecheck_suite
    from app.core.services.evaluation_models import ModelChoice
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.batch_run import BatchRun
    from local_models.default_model import prepare_default_model
    from local_models.engine import Ensemble, default_num_threads, load_engine
    from local_models.export import export_onnx

    quiet_transformers()
    if not SHARED.is_file():
        return [Result(GROUP, "HateCheck-size suite", "s", notes=f"skipped: {SHARED} is not present")]
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    forms = {f"ONNX {'int8' if prepared.onnx_int8 else 'fp32'} (the desk's default model)": prepared.onnx_dir}
    if not prepared.onnx_int8:  # refused for the desk by the parity check; timed all the same
        forced = export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-int8", int8=True, force=True)
        forms["ONNX int8 (NOT the desk's form: refused by the parity check)"] = forced.path
    int8_dir = list(forms.values())[-1]
    suite_file = hatecheck_size_suite(ctx.work_dir / "hatecheck-size.csv")
    labels = ["hate", "not hate"]
    results: list[Result] = []
    runs = 1 if ctx.quick else 3
    for flavour, model_dir in forms.items():
        for threads in dict.fromkeys([default_num_threads(), 2]):
            seconds, distinct = [], 0
            for _ in range(runs):
                started = time.perf_counter()
                suite = read_hatecheck_suite(suite_file)
                options = ev.EvaluationOptions(identity_swap=False, robustness=False, latency_samples=0,
                                               num_threads=threads)
                choice = ModelChoice("default", [])
                doc = ev.evaluate([choice], [suite], options, loader=lambda _c, d=model_dir, t=threads: Ensemble(
                    [load_engine(d, task_labels=labels, num_threads=t)]))
                seconds.append(time.perf_counter() - started)
                distinct = doc["models"][0]["run"]["distinct_inputs"]
                accuracy = doc["results"]["m1"]["sets"]["suite"]["accuracy"]
            median = statistics.median(seconds)
            int8 = "int8" in flavour.split("(")[0]
            results.append(Result(
                GROUP, f"HateCheck-size suite ({len(suite.cases)} cases), {flavour.split(' (')[0]}, {threads} thread(s)",
                "s", median, percentile(seconds, 0.95), len(seconds),
                budget=f"<= {INT8_BUDGET_S if int8 else BUDGET_S:g} s",
                within_budget=median <= (INT8_BUDGET_S if int8 else BUDGET_S),
                notes=f"{flavour}; {distinct} distinct texts; read, load, predict, figures; accuracy {accuracy:.3f}; "
                      f"batches of {options.batch_size} or {options.max_batch_tokens} tokens; "
                      f"{len(suite.cases) / median:.0f} cases/s end to end", extra={"runs_s": seconds}))

    engine = load_engine(int8_dir, task_labels=labels, num_threads=default_num_threads())
    texts = [c.text for c in read_hatecheck_suite(suite_file).cases]
    results += _batch_sweep(engine, texts, 1 if ctx.quick else 3)
    latency = BatchRun(engine, latency_samples=100 if ctx.quick else 300, seed=1).sample_latency(texts)
    results.append(summarise(GROUP, "single-case latency (HateCheck texts), int8", latency, budget_p95_ms=5.0,
                             notes="one case per call, as the GUI and the latency figure of a report"))
    engine.close()
    return results


# (batch size, padded-token budget): fixed sizes, and dynamic batches bounded by tokens
BATCH_CONFIGS = ((16, None), (32, None), (64, None), (128, None), (256, 512), (256, 1024), (256, 2048))


def _batch_sweep(engine, texts: list[str], rounds: int) -> list[Result]:
    """The batched prediction alone, per batching, the configurations taking turns each round."""
    from local_models.batch_run import BatchRun
    from local_models.engine import default_num_threads

    seconds: dict[tuple, list[float]] = {config: [] for config in BATCH_CONFIGS}
    for k in range(rounds):
        shift = k % len(BATCH_CONFIGS)
        for size, tokens in BATCH_CONFIGS[shift:] + BATCH_CONFIGS[:shift]:
            _, stats = BatchRun(engine, batch_size=size, max_batch_tokens=tokens, latency_samples=0).run(texts)
            seconds[(size, tokens)].append(stats.seconds)
    out = []
    for (size, tokens), values in seconds.items():
        median = statistics.median(values)
        name = f"at most {size} texts" + (f" and {tokens} padded tokens" if tokens else "")
        out.append(Result(GROUP, f"batched prediction, int8, {name}", "items/s", len(texts) / median, None,
                          len(values), notes=f"{median:.2f} s for {len(texts)} texts (median of {len(values)}), "
                                             f"{default_num_threads()} thread(s), token-length order"))
    return out
