"""The writing assistant: generating and checking 64 candidates on the default model.

The target runs in the desk's form (ONNX int8 when it passes parity); word substitution takes its
gradients from the PyTorch form, as the desk's ONNX record names it (provenance.parent_model).
Texts: HateCheck's hateful cases and Davidson tweets, as a writer would ask for suggestions on
them. Reported: the whole ``suggest`` call (budget p95 ≤ 150 ms) and its parts: attributions (when
the caller has none: the PyTorch form's one gradient pass, which HotFlip reuses), generation
(obfuscation + HotFlip's ranking over the vocabulary) and the check.

The desk checks the candidates one text at a time (one int8 run per text, on the row pool's two
threads). Measured here side by side, call for call on the same texts: the same ``suggest`` with
the int8 form's per-text batches (local_models/backends/per_text_int8.py: each text quantized on
its own, so its answer does not depend on the batch; off on the desk, see
OnnxRuntime.per_text_batches), with how far the answers differ; and a batch evaluation
(BatchRun) both ways. A plain padded batch is not used: it moves answers by up to ~0.1 (one
activation range for the whole batch); its drift is reported for reference. On a shared machine
read the CPU-time rows: wall time there also waits for a core.
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
    from app.core.assist.pipeline import suggest
    from local_models.engine import Ensemble, default_num_threads, load_engine

    load_before = os.getloadavg()
    loaded = load_assist_models(ctx.work_dir / "cache")
    definition, target, gradients, models, form = (loaded.definition, loaded.target, loaded.gradients,
                                                   loaded.models, loaded.form)
    runtime = target.runtime
    runtime.per_text_batches = True  # off on the desk (OnnxRuntime.per_text_batches): measured here
    # the same form as it runs without per-text batches: each text alone, on the row pool's threads
    before = load_engine(runtime.path, task_labels=definition.labels)
    before.runtime.per_text_batches = False
    models_before = Ensemble([before])
    texts = bench_texts(24 if ctx.quick else 120)
    for text, _ in texts[:3]:  # warm: sessions, the per-text graph, the vocabulary table, the tables file
        for ensemble in (models, models_before):
            suggest(ensemble, definition, text, goal="fool", writer_label="hate", gradients=gradients)

    totals, totals_before, cpu = [], [], []
    parts: dict[str, list[float]] = {"attributions": [], "generate": [], "check": []}
    check_before: list[float] = []
    checked, fooled, sets, lengths = [], 0, [], []
    moved, label_differences, compared = 0.0, 0, 0
    for k, (text, _) in enumerate(texts):
        answers = {}
        for turn in ((models, models_before) if k % 2 == 0 else (models_before, models)):
            began, began_cpu = time.perf_counter(), time.process_time()
            result = suggest(turn, definition, text, goal="fool", writer_label="hate", gradients=gradients, limit=64)
            wall, spent = (time.perf_counter() - began) * 1000, (time.process_time() - began_cpu) * 1000
            answers[turn is models] = result
            if turn is models:
                totals.append(wall)
                cpu.append(spent)
                for name in parts:
                    parts[name].append(result.timings_ms.get(name, 0.0))
            else:
                totals_before.append(wall)
                check_before.append(result.timings_ms.get("check", 0.0))
        result, old = answers[True], answers[False]
        lengths.append(target.encode([text]).lengths[0])
        checked.append(len(result.suggestions))
        fooled += bool(result.fooling)
        sets.append(result)
        old_by_text = {s.candidate.text: s for s in old.suggestions}
        for s in result.suggestions:
            o = old_by_text.get(s.candidate.text)
            if o is not None:
                compared += 1
                label_differences += s.predicted != o.predicted
                moved = max(moved, abs(s.probabilities["hate"] - o.probabilities["hate"]))

    # The same checks as one plain padded batch (what a float model does): how far its answers move
    from app.core.assist.pipeline import with_written

    plain_moved = []
    if getattr(runtime, "row_by_row", False):
        for result in sets[: len(sets) // 2]:
            batch = [result.text, *(with_written(result.text, 0, s.candidate.text) for s in result.suggestions)]
            alone = before.predict(batch)
            runtime.row_by_row = False
            try:
                padded = target.predict(batch)
            finally:
                runtime.row_by_row = True
            plain_moved += [abs(a.probabilities["hate"] - b.probabilities["hate"]) for a, b in zip(alone, padded)]
    evaluation: list[Result] = []
    if getattr(runtime, "row_by_row", False):
        evaluated = [t for t, _ in bench_texts(96 if ctx.quick else 480, seed=11)]
        evaluation = _evaluation_side_by_side(target, before, evaluated)
    before.close()

    load_after = os.getloadavg()
    n_candidates = f"{statistics.median(checked):.0f} candidates checked (median; cap 64)"
    note = (f"default model, target {form}: {runtime.batch_rule}; gradients from its PyTorch form; {len(texts)} texts "
            f"(HateCheck hateful + Davidson); {n_candidates}; {default_num_threads()} intra-op thread(s), the batch "
            f"on {runtime.row_threads}; load {load_before[0]:.2f} → {load_after[0]:.2f}")
    agreement = (f"against one text at a time: labels differ on {label_differences} of {compared} candidates, "
                 f"P(hate) moves by at most {moved:.1e}")
    results = [
        summarise(GROUP, "suggest: generate + check 64 candidates (whole call), per-text batches", totals,
                  budget_p95_ms=BUDGET_MS,
                  notes=f"{note}; {agreement}"),
        summarise(GROUP, "suggest: generate + check 64 candidates, one text at a time (the desk's rule)", totals_before,
                  budget_p95_ms=BUDGET_MS, notes="each text alone on the row pool's threads; the same texts as the "
                                                 "row above, call for call, turn about"),
        Result(GROUP, "suggest: one text at a time / per-text batch", "ratio",
               statistics.median(totals_before) / statistics.median(totals),
               percentile(totals_before, 0.95) / percentile(totals, 0.95), len(totals),
               notes="above 1: per-text batches are faster; whole call (median, p95)"),
        summarise(GROUP, "  the same calls, CPU time of the process (all threads)", cpu,
                  notes="onnxruntime and torch at 1 intra-op thread: on a busy machine this is what the call "
                        "costs without waiting for a core"),
        *(summarise(GROUP, f"  texts of {name} tokens (whole call)", [t for t, n in zip(totals, lengths) if keep(n)],
                    notes=f"CPU time median {statistics.median([c for c, n in zip(cpu, lengths) if keep(n)]):.0f} ms, "
                          f"p95 {percentile([c for c, n in zip(cpu, lengths) if keep(n)], 0.95):.0f} ms")
          for name, keep in ((f"≤ {SHORT_TOKENS}", lambda n: n <= SHORT_TOKENS),
                             (f"> {SHORT_TOKENS}", lambda n: n > SHORT_TOKENS))
          if any(keep(n) for n in lengths)),
        summarise(GROUP, "  part: attributions (the gradient pass, shared with HotFlip)", parts["attributions"]),
        summarise(GROUP, "  part: generate (obfuscation + HotFlip ranking)", parts["generate"]),
        summarise(GROUP, "  part: check (every candidate through the target)", parts["check"],
                  notes=f"one text at a time (the desk's rule): median {statistics.median(check_before):.1f} ms, "
                        f"p95 {percentile(check_before, 0.95):.1f} ms"),
        Result(GROUP, "texts with a fooling suggestion", "share", fooled / len(texts), None, len(texts)),
    ]
    results += evaluation
    if plain_moved:
        results.append(Result(GROUP, "  a plain padded batch would move P(hate) by (not used)", "probability",
                              statistics.median(plain_moved), percentile(plain_moved, 0.95), len(plain_moved),
                              notes=f"max {max(plain_moved):.3f}: one activation range for the whole batch"))
    return results


def _evaluation_side_by_side(target, before, texts: list[str]) -> list[Result]:
    """Batch evaluation (BatchRun, the evaluation's default batches) of the same texts with per-text
    batches and one text at a time, three turns about: wall time and process CPU time per run."""
    from local_models.batch_run import BatchRun

    wall: dict[str, list[float]] = {"per-text batches": [], "one text at a time (the desk's rule)": []}
    cpu: dict[str, list[float]] = {name: [] for name in wall}
    runs = {"per-text batches": BatchRun(target, latency_samples=0),
            "one text at a time (the desk's rule)": BatchRun(before, latency_samples=0)}
    for turn in range(3):
        for name in (list(runs) if turn % 2 == 0 else list(runs)[::-1]):
            began, began_cpu = time.perf_counter(), time.process_time()
            runs[name].run(texts)
            wall[name].append((time.perf_counter() - began) * 1000)
            cpu[name].append((time.process_time() - began_cpu) * 1000)
    return [summarise(GROUP, f"  batch evaluation of {len(texts)} texts, {name}", wall[name],
                      notes=f"BatchRun, 3 runs turn about; process CPU time median {statistics.median(cpu[name]):.0f} ms; "
                            f"{len(texts) / statistics.median(wall[name]) * 1000:.0f} texts/s")
            for name in wall]
