"""The writing assistant: generating and checking 64 candidates on the default model.

The target runs in the desk's form (ONNX int8 when it passes parity); word substitution takes its
gradients from the PyTorch form, as the desk's ONNX record names it (provenance.parent_model).
Texts: HateCheck's hateful cases and Davidson tweets, as a writer would ask for suggestions on
them. Reported: the whole ``suggest`` call (budget p95 ≤ 150 ms) and its parts: attributions (when
the caller has none: the PyTorch form's one gradient pass, which HotFlip reuses), generation
(obfuscation + HotFlip's ranking over the vocabulary) and the check.

The desk checks the candidates one text at a time (one int8 run per text, on the row pool's two
threads). Measured side by side, call for call on the same texts, turn about: the way before
(word ablation on the target for the attributions when the model disagrees with the writer, each
candidate's word edits from the full matrix), the desk now (the gradient toward the model's label
through the gradient pass's forward instead of ablation, derived without a second backward for two
labels; word edits that pair the common tail first), the
desk now with the early check (the writer's text and the rules' candidates checked on the second
core during the gradient pass: app/core/assist/early_check.py, off on the desk), and the desk now
with the int8 form's per-text batches (local_models/backends/per_text_int8.py, off on the desk).
Answers are compared with each candidate typed (predict_one), with the way before and with the
early check on the same candidate texts. A batch evaluation (BatchRun) runs both ways too. A plain
padded batch is not used: it moves answers by up to ~0.1 (one activation range for the whole
batch); its drift is reported for reference. On a shared machine read the CPU-time notes: wall
time there also waits for a core.
"""

from __future__ import annotations

import csv
import functools
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


@dataclass(frozen=True)
class Variant:
    """One way of running ``suggest``, measured side by side with the others."""

    name: str
    per_text_batches: bool = False  # the target's int8 per-text batches (off on the desk)
    ablation_when_disagreeing: bool = False  # the way before: word ablation when the pass aims elsewhere
    full_matrix_edits: bool = False  # the way before: each candidate's word edits from the whole matrix
    early_check: bool = False  # the writer's text and the rules' candidates checked during the gradient pass


BEFORE = Variant("before: ablation when the model disagrees, full-matrix word edits",
                 ablation_when_disagreeing=True, full_matrix_edits=True)
DESK = Variant("desk now: gradient toward the model's label from the same pass, tail-first word edits")
EARLY = Variant("desk now + early check on the second core (off on the desk)", early_check=True)
PER_TEXT = Variant("desk now + int8 per-text batches (off on the desk)", per_text_batches=True)
VARIANTS = (BEFORE, DESK, EARLY, PER_TEXT)


class _Turn:
    """Sets the pipeline's switches for one variant (the bench runs on one thread)."""

    def __init__(self, variant: Variant, engines: dict[bool, Any]):
        self.variant, self.engines = variant, engines

    def __enter__(self) -> Any:
        from app.core import text
        from app.core.assist import early_check, pipeline

        pipeline.ABLATION_WHEN_DISAGREEING = self.variant.ablation_when_disagreeing
        early_check.ENABLED = self.variant.early_check
        self.saved = text._alignment, text._word_texts
        if self.variant.full_matrix_edits:
            text._alignment = functools.partial(self.saved[0], pair_tail=False)  # before the tail was paired first
            text._word_texts = lambda t: tuple(w.text for w in text.words(t))  # type: ignore[assignment]
        return self.engines[self.variant.per_text_batches]

    def __exit__(self, *_: object) -> None:
        from app.core import text
        from app.core.assist import early_check, pipeline

        pipeline.ABLATION_WHEN_DISAGREEING = False
        early_check.ENABLED = False
        text._alignment, text._word_texts = self.saved  # type: ignore[assignment]


def run(ctx: BenchContext) -> list[Result]:
    from app.core.assist.pipeline import suggest
    from local_models.engine import Ensemble, default_num_threads, load_engine

    load_before = os.getloadavg()
    loaded = load_assist_models(ctx.work_dir / "cache")
    definition, target, gradients, models, form = (loaded.definition, loaded.target, loaded.gradients,
                                                   loaded.models, loaded.form)
    runtime = target.runtime
    runtime.per_text_batches = True  # off on the desk (OnnxRuntime.per_text_batches): measured here
    # the same form as the desk runs it: each text alone, on the row pool's threads
    desk = load_engine(runtime.path, task_labels=definition.labels)
    desk.runtime.per_text_batches = False
    engines = {True: models, False: Ensemble([desk])}
    texts = bench_texts(24 if ctx.quick else 120)
    for text, _ in texts[:3]:  # warm: sessions, the per-text graph, the vocabulary table, the tables file
        for variant in VARIANTS:
            with _Turn(variant, engines) as ensemble:
                suggest(ensemble, definition, text, goal="fool", writer_label="hate", gradients=gradients)

    wall: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
    cpu: dict[str, list[float]] = {v.name: [] for v in VARIANTS}
    parts: dict[str, dict[str, list[float]]] = {v.name: {"attributions": [], "generate": [], "check": []}
                                                for v in VARIANTS}
    checked, early, fooled, sets, lengths = [], [], {v.name: 0 for v in VARIANTS}, [], []
    moved, label_differences, compared = 0.0, 0, 0  # per-text batches against one at a time
    differing_answers, same_text_compared = 0, 0  # the desk now against before, the same candidate texts
    early_differing, early_compared = 0, 0  # the desk now against the early check (the same candidates)
    alone_moved, alone_compared, alone_labels = 0.0, 0, 0  # the desk now against predict_one on each candidate
    for k, (text, _) in enumerate(texts):
        answers = {}
        order = VARIANTS if k % 2 == 0 else VARIANTS[::-1]
        for variant in order[k % len(order):] + order[:k % len(order)]:
            with _Turn(variant, engines) as ensemble:
                began, began_cpu = time.perf_counter(), time.process_time()
                result = suggest(ensemble, definition, text, goal="fool", writer_label="hate", gradients=gradients,
                                 limit=64)
                wall[variant.name].append((time.perf_counter() - began) * 1000)
                cpu[variant.name].append((time.process_time() - began_cpu) * 1000)  # every thread of the process
            answers[variant.name] = result
            fooled[variant.name] += bool(result.fooling)
            for name in parts[variant.name]:
                parts[variant.name][name].append(result.timings_ms.get(name, 0.0))
        result = answers[DESK.name]
        lengths.append(target.encode([text]).lengths[0])
        checked.append(len(result.suggestions))
        early.append(answers[EARLY.name].checked_early)
        sets.append(result)
        per_text = {s.candidate.text: s for s in answers[PER_TEXT.name].suggestions}
        before = {s.candidate.text: s for s in answers[BEFORE.name].suggestions}
        for s in result.suggestions:
            o = per_text.get(s.candidate.text)
            if o is not None:
                compared += 1
                label_differences += s.predicted != o.predicted
                moved = max(moved, abs(s.probabilities["hate"] - o.probabilities["hate"]))
            b = before.get(s.candidate.text)
            if b is not None:
                same_text_compared += 1
                differing_answers += (s.probabilities, s.predicted, s.fools) != (b.probabilities, b.predicted, b.fools)
        early_answers = [(s.candidate.text, s.probabilities, s.predicted, s.fools)
                         for s in answers[EARLY.name].suggestions]
        early_compared += len(early_answers)
        early_differing += sum(a != (s.candidate.text, s.probabilities, s.predicted, s.fools)
                               for a, s in zip(early_answers, result.suggestions))
        early_differing += abs(len(early_answers) - len(result.suggestions))
        if k % 4 == 0:  # each candidate as the desk's form answers it typed (predict_one)
            for s in result.suggestions:
                typed = desk.predict_one(s.candidate.text)
                alone_compared += 1
                alone_moved = max(alone_moved, max(abs(s.probabilities[x] - typed.probabilities[x])
                                                   for x in typed.probabilities))
                alone_labels += s.predicted != typed.label or s.fools != (typed.label != "hate")

    # The same checks as one plain padded batch (what a float model does): how far its answers move
    from app.core.assist.pipeline import with_written

    plain_moved = []
    if getattr(runtime, "row_by_row", False):
        for result in sets[: len(sets) // 2]:
            batch = [result.text, *(with_written(result.text, 0, s.candidate.text) for s in result.suggestions)]
            alone = desk.predict(batch)
            runtime.row_by_row = False
            try:
                padded = target.predict(batch)
            finally:
                runtime.row_by_row = True
            plain_moved += [abs(a.probabilities["hate"] - b.probabilities["hate"]) for a, b in zip(alone, padded)]
    evaluation: list[Result] = []
    if getattr(runtime, "row_by_row", False):
        evaluated = [t for t, _ in bench_texts(96 if ctx.quick else 480, seed=11)]
        evaluation = _evaluation_side_by_side(target, desk, evaluated)
    desk.close()

    load_after = os.getloadavg()
    n_candidates = f"{statistics.median(checked):.0f} candidates checked (median; cap 64)"
    note = (f"default model, target {form}, each text alone on the row pool's threads; gradients from its PyTorch "
            f"form; {len(texts)} texts (HateCheck hateful + Davidson); {n_candidates}, "
            f"with the early check {statistics.median(early):.0f} of them during the gradient pass (median); "
            f"{default_num_threads()} intra-op thread(s), the batch on {runtime.row_threads}; load {load_before[0]:.2f} → {load_after[0]:.2f}")
    agreement = (f"against each candidate typed (predict_one, {alone_compared} candidates): P moves by at most "
                 f"{alone_moved:.1e}, label or fools differs on {alone_labels}; against 'before' on the same "
                 f"candidate texts: {differing_answers} of "
                 f"{same_text_compared} answers differ; with the early check: {early_differing} of {early_compared} "
                 f"suggestions differ (text, probabilities, label, fools, in order)")
    results = [summarise(GROUP, "suggest: generate + check 64 candidates (whole call), desk now", wall[DESK.name],
                         budget_p95_ms=BUDGET_MS, notes=f"{note}; {agreement}")]
    for variant in VARIANTS:
        results.append(summarise(
            GROUP, f"  variant: {variant.name}", wall[variant.name],
            notes=f"CPU time (all threads) median {statistics.median(cpu[variant.name]):.0f} ms, "
                  f"p95 {percentile(cpu[variant.name], 0.95):.0f} ms; texts with a fooling suggestion "
                  f"{fooled[variant.name]}/{len(texts)}; the same texts call for call, turn about"))
    for variant in (BEFORE, DESK):
        results += [
            summarise(GROUP, f"  {variant.name}: texts of {name} tokens",
                      [t for t, n in zip(wall[variant.name], lengths) if keep(n)],
                      notes=f"CPU time median "
                            f"{statistics.median([c for c, n in zip(cpu[variant.name], lengths) if keep(n)]):.0f} ms, "
                            f"p95 {percentile([c for c, n in zip(cpu[variant.name], lengths) if keep(n)], 0.95):.0f} ms")
            for name, keep in ((f"≤ {SHORT_TOKENS}", lambda n: n <= SHORT_TOKENS),
                               (f"> {SHORT_TOKENS}", lambda n: n > SHORT_TOKENS))
            if any(keep(n) for n in lengths)]
    for part, what in (("attributions", "the gradient pass (ablation in 'before' when the model disagrees)"),
                       ("generate", "obfuscation + HotFlip ranking"), ("check", "every candidate through the target")):
        results.append(summarise(GROUP, f"  part: {part} ({what}), desk now", parts[DESK.name][part],
                                 notes=f"before: median {statistics.median(parts[BEFORE.name][part]):.1f} ms, "
                                       f"p95 {percentile(parts[BEFORE.name][part], 0.95):.1f} ms"))
    results.append(Result(GROUP, "  per-text batches / one text at a time: answers", "probability", moved, None,
                          compared, notes=f"P(hate) moves by at most {moved:.1e}; labels differ on "
                                          f"{label_differences} of {compared} candidates"))
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
