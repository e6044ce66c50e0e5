"""The writing assistant: generating and checking 64 candidates on the default model.

The target runs in the desk's form (ONNX int8 when it passes parity, which runs a batch one text
at a time, see OnnxRuntime.row_by_row); word substitution takes its gradients from the PyTorch
form, as the desk's ONNX record names it (provenance.parent_model). Texts: HateCheck's hateful
cases and Davidson tweets, as a writer would ask for suggestions on them. Reported: the whole
``suggest`` call (budget p95 ≤ 150 ms) and its parts: attributions (when the caller has none: the
PyTorch form's one gradient pass, which HotFlip reuses), generation (obfuscation + HotFlip's
ranking over the vocabulary) and the one-batch check; and, side by side, the check run as one
padded batch: what row by row costs, and how far a padded batch's answers would move.

Where the time goes (measured while writing this, 2-core Xeon): one int8 run costs ~0.9 ms of CPU
even for 3 tokens, most of it streaming the encoder's int8 weights once per text, so the check's
65 runs cost ~90 ms for a sentence and ~250 ms for a 50-token tweet. A padded batch shares the
weight reads (22-26 % faster at 12-25 tokens) but moves answers by up to 0.13; a rewrite that
quantizes per text inside one batch (Scan over the batch) agreed to 6e-6 but ran 9x slower in
onnxruntime, and was not kept. On a shared machine read the CPU-time rows: wall time there also
waits for a core.

Since then the check's texts run on 2 threads (row_pool.py: the desk's second core takes every
other text; answers bit for bit the same): the side-by-side rows run the same checks, chunked as
``suggest`` runs them, on 1 and on 2 threads in turn, and a batch evaluation (BatchRun) of the
same kind of texts. Two threads can only help when the second core is free: on a machine loaded
by other work (load ≥ 2 on 2 cores) both rows cost the same CPU time and wall time barely moves
(measured at load 4-5.6 on the 2-core box: check median 139 → 123 ms, p95 269 → 255 ms, CPU time
124 vs 126 ms; a batch evaluation of 480 texts 1000 → 973 ms). On a quiet second core the check's
wall time can fall towards half its CPU time.
"""

from __future__ import annotations

import csv
import os
import random
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import BenchContext, Result, percentile, summarise

GROUP = "assist"
BUDGET_MS = 150.0
SHORT_TOKENS = 24  # a sentence (HateCheck's cases are 6-15 tokens); tweets run to 60 and cost in proportion
_DATA = [Path(__file__).resolve().parents[2] / "shared" / "data", Path("/work/shared/data")]


def _shared(*parts: str) -> Path | None:
    for root in _DATA:
        if root.joinpath(*parts).is_file():
            return root.joinpath(*parts)
    return None


def bench_texts(n: int, seed: int = 5) -> list[tuple[str, str]]:
    """(text, source): half HateCheck hateful cases, half Davidson tweets, shuffled."""
    rng = random.Random(seed)
    texts: list[tuple[str, str]] = []
    hatecheck = _shared("hatecheck", "test_suite_cases_dev.csv")
    if hatecheck:
        with open(hatecheck, newline="", encoding="utf-8") as handle:
            rows = [r["test_case"].strip() for r in csv.DictReader(handle) if r["label_gold"] == "hateful"]
        texts += [(t, "hatecheck") for t in rng.sample(rows, min(n // 2, len(rows)))]
    davidson = _shared("davidson2017", "labeled_data.csv")
    if davidson:
        import html

        with open(davidson, newline="", encoding="utf-8") as handle:
            rows = [html.unescape(r["tweet"]).strip() for r in csv.DictReader(handle)]
        rows = [t for t in rows if 20 <= len(t) <= 200]
        texts += [(t, "davidson") for t in rng.sample(rows, min(n - len(texts), len(rows)))]
    if not texts:  # the shared data is not here: a few written sentences, so the bench still runs
        texts = [(t, "written") for t in ("I hate women.", "those people are vermin and should leave",
                                           "You are a stupid idiot and everyone knows it")] * (n // 3 + 1)
    rng.shuffle(texts)
    return texts[:n]


@dataclass
class AssistModels:
    """The hate-speech task and the default model as the desk runs the assistant on it: the target
    in its ONNX form (alone in ``models``), and its PyTorch form for substitution's gradients."""

    definition: Any
    target: Any
    gradients: Any
    models: Any
    form: str  # "ONNX int8" or "ONNX fp32"


def load_assist_models(cache_dir: Path) -> AssistModels:
    """Prepared under CACHE_DIR (kept, so a second run starts at once); shared with evidence_assist."""
    import resources
    from app.core.tasks.definition import load_task_file
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.default_model import prepare_default_model
    from local_models.engine import Ensemble, load_engine

    quiet_transformers()
    definition = load_task_file(resources.ROOT / "tasks" / "hate_speech.yaml")
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", cache_dir)
    assert prepared.onnx_dir is not None
    target = load_engine(prepared.onnx_dir, task_labels=definition.labels)
    gradients = load_engine(prepared.torch_dir, task_labels=definition.labels)
    return AssistModels(definition, target, gradients, Ensemble([target]),
                        "ONNX int8" if prepared.onnx_int8 else "ONNX fp32")


def run(ctx: BenchContext) -> list[Result]:
    from app.core.assist.pipeline import check, suggest
    from app.core.assist.types import Goal
    from local_models.engine import default_num_threads

    load_before = os.getloadavg()
    loaded = load_assist_models(ctx.work_dir / "cache")
    definition, target, gradients, models, form = (loaded.definition, loaded.target, loaded.gradients,
                                                   loaded.models, loaded.form)
    texts = bench_texts(24 if ctx.quick else 120)
    for text, _ in texts[:3]:  # warm: sessions, the vocabulary table, the tables file
        suggest(models, definition, text, goal="fool", writer_label="hate", gradients=gradients)

    totals, cpu, parts, checked, fooled = [], [], {"attributions": [], "generate": [], "check": []}, [], 0
    sets, lengths = [], []
    for text, _ in texts:
        began, began_cpu = time.perf_counter(), time.process_time()
        result = suggest(models, definition, text, goal="fool", writer_label="hate", gradients=gradients, limit=64)
        totals.append((time.perf_counter() - began) * 1000)
        cpu.append((time.process_time() - began_cpu) * 1000)
        lengths.append(target.encode([text]).lengths[0])
        for name in parts:
            parts[name].append(result.timings_ms.get(name, 0.0))
        checked.append(len(result.suggestions))
        fooled += bool(result.fooling)
        sets.append(result)

    # The same checks as one padded batch (what a float model does): the time row-by-row costs,
    # and how far its answers would move; the desk keeps row by row, whose answers match typing.
    from app.core.assist.pipeline import with_written

    row_ms, batch_ms, moved = [], [], []
    runtime = target.runtime
    for result in sets[: len(sets) // 2]:
        batch = [result.text, *(with_written(result.text, 0, s.candidate.text) for s in result.suggestions)]
        began = time.perf_counter()
        rows = target.predict(batch)
        row_ms.append((time.perf_counter() - began) * 1000)
        if getattr(runtime, "row_by_row", False):
            runtime.row_by_row = False
            try:
                began = time.perf_counter()
                padded = target.predict(batch)
                batch_ms.append((time.perf_counter() - began) * 1000)
            finally:
                runtime.row_by_row = True
            moved += [abs(a.probabilities["hate"] - b.probabilities["hate"]) for a, b in zip(rows, padded)]

    # The check itself (in chunks, as suggest runs it) on 1 thread and on 2, same texts, turn about
    # (which goes first alternates): wall time, and CPU time of the whole process (both threads).
    threads_wall: dict[int, list[float]] = {1: [], 2: []}
    threads_cpu: dict[int, list[float]] = {1: [], 2: []}
    default_threads = getattr(runtime, "row_threads", 1)
    evaluation: list[Result] = []
    if getattr(runtime, "row_by_row", False):
        try:
            for k, result in enumerate(sets):
                candidates = [s.candidate for s in result.suggestions]
                for threads in ((1, 2) if k % 2 == 0 else (2, 1)):
                    runtime.row_threads = threads
                    began, began_cpu = time.perf_counter(), time.process_time()
                    check(models, definition, result.text, 0, candidates, goal=Goal.FOOL, writer_label="hate")
                    threads_wall[threads].append((time.perf_counter() - began) * 1000)
                    threads_cpu[threads].append((time.process_time() - began_cpu) * 1000)
            evaluated = [t for t, _ in bench_texts(96 if ctx.quick else 480, seed=11)]
            evaluation = _evaluation_side_by_side(target, runtime, evaluated)
        finally:
            runtime.row_threads = default_threads

    load_after = os.getloadavg()
    n_candidates = f"{statistics.median(checked):.0f} candidates checked (median; cap 64)"
    note = (f"default model, target {form} ({'row by row' if getattr(runtime, 'row_by_row', False) else 'batched'})"
            f", gradients from its PyTorch form; {len(texts)} texts (HateCheck hateful + Davidson); {n_candidates}; "
            f"{default_num_threads()} intra-op thread(s), the check's texts on {default_threads}; "
            f"load {load_before[0]:.2f} → {load_after[0]:.2f}")
    results = [
        summarise(GROUP, "suggest: generate + check 64 candidates (whole call)", totals, budget_p95_ms=BUDGET_MS,
                  notes=note),
        summarise(GROUP, "  the same calls, CPU time of the process (all threads)", cpu,
                  notes="onnxruntime and torch at 1 intra-op thread; the check's texts on "
                        f"{default_threads} thread(s): on a busy machine this is what the call costs "
                        "without waiting for a core"),
        *(summarise(GROUP, f"  texts of {name} tokens (whole call)", [t for t, n in zip(totals, lengths) if keep(n)],
                    notes=f"CPU time median {statistics.median([c for c, n in zip(cpu, lengths) if keep(n)]):.0f} ms, "
                          f"p95 {percentile([c for c, n in zip(cpu, lengths) if keep(n)], 0.95):.0f} ms")
          for name, keep in ((f"≤ {SHORT_TOKENS}", lambda n: n <= SHORT_TOKENS),
                             (f"> {SHORT_TOKENS}", lambda n: n > SHORT_TOKENS))
          if any(keep(n) for n in lengths)),
        summarise(GROUP, "  part: attributions (the gradient pass, shared with HotFlip)", parts["attributions"]),
        summarise(GROUP, "  part: generate (obfuscation + HotFlip ranking)", parts["generate"]),
        summarise(GROUP, "  part: check (every candidate through the target)", parts["check"]),
        Result(GROUP, "texts with a fooling suggestion", "share", fooled / len(texts), None, len(texts)),
    ]
    for threads in (1, 2):
        if threads_wall[threads]:
            results.append(summarise(
                GROUP, f"  check on {threads} thread{'s' if threads > 1 else ''} (row by row; side by side)",
                threads_wall[threads],
                notes=f"process CPU time median {statistics.median(threads_cpu[threads]):.0f} ms, "
                      f"p95 {percentile(threads_cpu[threads], 0.95):.0f} ms; same checks, turn about; "
                      f"the desk uses {default_threads}"))
    results += evaluation
    if batch_ms:
        results.append(summarise(GROUP, "  check as one padded batch (not used: answers differ)", batch_ms,
                                 notes=f"row by row median {statistics.median(row_ms):.1f} ms; padded batch moves "
                                       f"P(hate) by up to {max(moved):.3f} (p95 {percentile(moved, 0.95):.3f})"))
    return results


def _evaluation_side_by_side(target, runtime, texts: list[str]) -> list[Result]:
    """Batch evaluation (BatchRun, the evaluation's default batches) of the same texts on 1 and 2
    threads, three turns about: wall time and process CPU time per run."""
    from local_models.batch_run import BatchRun

    wall: dict[int, list[float]] = {1: [], 2: []}
    cpu: dict[int, list[float]] = {1: [], 2: []}
    run = BatchRun(target, latency_samples=0)
    for turn in range(3):
        for threads in ((1, 2) if turn % 2 == 0 else (2, 1)):
            runtime.row_threads = threads
            began, began_cpu = time.perf_counter(), time.process_time()
            run.run(texts)
            wall[threads].append((time.perf_counter() - began) * 1000)
            cpu[threads].append((time.process_time() - began_cpu) * 1000)
    return [summarise(GROUP, f"  batch evaluation of {len(texts)} texts on {threads} thread{'s' if threads > 1 else ''}",
                      wall[threads], notes=f"BatchRun, 3 runs turn about; process CPU time median "
                                           f"{statistics.median(cpu[threads]):.0f} ms; "
                                           f"{len(texts) / statistics.median(wall[threads]) * 1000:.0f} texts/s")
            for threads in (1, 2)]
