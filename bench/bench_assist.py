"""The writing assistant: generating and checking 64 candidates on the default model (issue 20).

The target runs in the desk's form (ONNX int8 when it passes parity, which runs a batch one text
at a time, see OnnxRuntime.row_by_row); word substitution takes its gradients from the PyTorch
form, as the desk's ONNX record names it (provenance.parent_model). Texts: HateCheck's hateful
cases and Davidson tweets, as a writer would ask for suggestions on them. Reported: the whole
``suggest`` call (budget p95 ≤ 150 ms) and its parts: attributions (when the caller has none: the
PyTorch form's one gradient pass, which HotFlip reuses), generation (obfuscation + HotFlip's
ranking over the vocabulary) and the one-batch check; and, side by side, the check run as one
padded batch: what row by row costs, and how far a padded batch's answers would move.
"""

from __future__ import annotations

import csv
import os
import random
import statistics
import time
from pathlib import Path

from bench.common import BenchContext, Result, percentile, summarise

GROUP = "assist"
BUDGET_MS = 150.0
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


def run(ctx: BenchContext) -> list[Result]:
    import resources
    from app.core.assist.pipeline import suggest
    from app.core.tasks.definition import load_task_file
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.default_model import prepare_default_model
    from local_models.engine import Ensemble, default_num_threads, load_engine

    quiet_transformers()
    load_before = os.getloadavg()
    definition = load_task_file(resources.ROOT / "tasks" / "hate_speech.yaml")
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    assert prepared.onnx_dir is not None
    target = load_engine(prepared.onnx_dir, task_labels=definition.labels)
    gradients = load_engine(prepared.torch_dir, task_labels=definition.labels)
    models = Ensemble([target])
    form = "ONNX int8" if prepared.onnx_int8 else "ONNX fp32"
    texts = bench_texts(24 if ctx.quick else 120)
    for text, _ in texts[:3]:  # warm: sessions, the vocabulary table, the tables file
        suggest(models, definition, text, goal="fool", writer_label="hate", gradients=gradients)

    totals, parts, checked, fooled = [], {"attributions": [], "generate": [], "check": []}, [], 0
    sets = []
    for text, _ in texts:
        began = time.perf_counter()
        result = suggest(models, definition, text, goal="fool", writer_label="hate", gradients=gradients, limit=64)
        totals.append((time.perf_counter() - began) * 1000)
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

    load_after = os.getloadavg()
    n_candidates = f"{statistics.median(checked):.0f} candidates checked (median; cap 64)"
    note = (f"default model, target {form} ({'row by row' if getattr(runtime, 'row_by_row', False) else 'batched'})"
            f", gradients from its PyTorch form; {len(texts)} texts (HateCheck hateful + Davidson); {n_candidates}; "
            f"{default_num_threads()} thread(s); load {load_before[0]:.2f} → {load_after[0]:.2f}")
    results = [
        summarise(GROUP, "suggest: generate + check 64 candidates (whole call)", totals, budget_p95_ms=BUDGET_MS,
                  notes=note),
        summarise(GROUP, "  part: attributions (the gradient pass, shared with HotFlip)", parts["attributions"]),
        summarise(GROUP, "  part: generate (obfuscation + HotFlip ranking)", parts["generate"]),
        summarise(GROUP, "  part: check (one batch through the target)", parts["check"]),
        Result(GROUP, "texts with a fooling suggestion", "share", fooled / len(texts), None, len(texts)),
    ]
    if batch_ms:
        results.append(summarise(GROUP, "  check as one padded batch (not used: answers differ)", batch_ms,
                                 notes=f"row by row median {statistics.median(row_ms):.1f} ms; padded batch moves "
                                       f"P(hate) by up to {max(moved):.3f} (p95 {percentile(moved, 0.95):.3f})"))
    return results
