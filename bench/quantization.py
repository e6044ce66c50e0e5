"""int8 approaches for the default model, side by side: each one's parity figures on
the model's own held-out texts (Davidson et al. 2017 dev + test, read from ../shared/data) and
its latency at ~16 and ~64 tokens on one thread, timed interleaved with the fp32 graph.

Parity: the int8 graph runs one text at a time (as the desk predicts), the float PyTorch model
in batches; the rule (local_models.parity) needs >= 99.5 % of labels kept and a 99th percentile
of the probability change <= 0.05 on >= 2,000 texts. --quick measures on 600 texts and fewer
approaches: its verdicts are marked as indicative. Figures are reported, never asserted.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench.common import BenchContext, Result

GROUP = "models"
QUICK_TEXTS = 600
CALIBRATION_TEXTS = 256
LATENCY_CALLS = 40


def _approaches(quick: bool, ranked: list[str]) -> list[Any]:
    from local_models.int8 import Int8Recipe
    from local_models.int8_search import FLOAT_CHANNEL_RATIO

    dynamic = Int8Recipe("dynamic")
    outliers = Int8Recipe("dynamic", float_channel_ratio=FLOAT_CHANNEL_RATIO)  # channels measured in run()
    if quick:
        return [dynamic, outliers, Int8Recipe("dynamic", excluded_nodes=tuple(ranked[:8]))]
    return [
        dynamic,
        Int8Recipe("dynamic", per_channel=False),
        Int8Recipe("dynamic", graph_optimizer=True),
        Int8Recipe("static", calibration="minmax", per_channel=False),
        Int8Recipe("static", calibration="minmax"),
        Int8Recipe("static", calibration="entropy"),
        Int8Recipe("static", calibration="percentile"),
        Int8Recipe("dynamic", smoothing_alpha=0.5),
        outliers,
        *[Int8Recipe("dynamic", excluded_nodes=tuple(ranked[:k])) for k in (4, 8, 12)],
    ]


def _latency(graph: Path, fp32: Path, feeds: dict[int, dict[str, Any]]) -> dict[str, float]:
    """Median ms per call at each length, int8 and fp32 alternating call by call (same load for both)."""
    import onnxruntime

    def session(path: Path) -> Any:
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = 1, 1, 3
        return onnxruntime.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])

    sessions = {"int8": session(graph), "fp32": session(fp32)}
    out: dict[str, float] = {}
    for tokens, feed in feeds.items():
        samples: dict[str, list[float]] = {"int8": [], "fp32": []}
        for s in sessions.values():
            wanted = {i.name for i in s.get_inputs()}
            for _ in range(5):
                s.run(None, {k: v for k, v in feed.items() if k in wanted})
        for _ in range(LATENCY_CALLS):
            for name, s in sessions.items():
                wanted = {i.name for i in s.get_inputs()}
                given = {k: v for k, v in feed.items() if k in wanted}
                start = time.perf_counter()
                s.run(None, given)
                samples[name].append((time.perf_counter() - start) * 1000)
        for name, values in samples.items():
            out[f"{name}_ms_{tokens}"] = statistics.median(values)
    return out


def run(ctx: BenchContext) -> list[Result]:
    import resources
    from local_models.default_model import prepare_default_model
    from local_models.engine import load_engine
    from local_models.errors import ModelError
    from local_models.export import export_onnx
    from local_models.fused_graph import export_fused_graph
    from local_models.int8 import build_int8, calibrate, node_errors
    from local_models.int8_search import (
        TaskTexts,
        calibration_feeds,
        compare,
        probabilities,
        read_recipe_file,
        run_graph,
    )
    from local_models.parity import MIN_TEXTS, judge
    from local_models.quantize_default import default_task_texts

    part = resources.ROOT / "models" / "hate_speech_r1"
    try:
        texts = default_task_texts(part)
    except ModelError as exc:
        return [Result(GROUP, "int8 approaches", "agreement", notes=f"not measured: {exc}")]
    if ctx.quick:
        texts = TaskTexts(texts.parity[:QUICK_TEXTS], texts.calibration, texts.source + f" (first {QUICK_TEXTS})")
    prepared = prepare_default_model(part, ctx.work_dir / "cache")
    fp32 = ctx.work_dir / "quantization-fp32"
    if not (fp32 / "model.onnx").is_file():
        export_onnx(prepared.torch_dir, fp32)
    fp32_graph = fp32 / "model.onnx"
    source = load_engine(prepared.torch_dir, num_threads=None)
    results: list[Result] = []
    try:
        reference = probabilities(source, list(texts.parity))
        calibration = calibration_feeds(source, list(texts.calibration[:CALIBRATION_TEXTS]))
        ranked = [name for name, _ in node_errors(fp32_graph, calibration[:96])]
        lengths = {16: " ".join(["word"] * 14), 64: " ".join(["word"] * 62)}
        feeds = {tokens: calibration_feeds(source, [text])[0] for tokens, text in lengths.items()}
        recipes = _approaches(ctx.quick, ranked)
        try:
            recorded = read_recipe_file(part)
            if recorded.recipe is not None and recorded.recipe not in recipes:  # else marked where it is listed
                recipes.append(recorded.recipe)
        except ValueError:
            recorded = None
        fused_graph: Path | None = None
        for index, recipe in enumerate(recipes):
            graph = ctx.work_dir / f"int8-approach-{index}.onnx"
            started = time.perf_counter()
            try:
                if recipe.approach == "static":
                    recipe = calibrate(fp32_graph, recipe, calibration)
                if recipe.smoothing_alpha is not None and recipe.smoothing is None:
                    from dataclasses import replace

                    from local_models.int8 import measure_smoothing

                    recipe = replace(recipe, smoothing=measure_smoothing(fp32_graph, calibration,
                                                                         recipe.smoothing_alpha))
                if recipe.float_channel_ratio is not None and recipe.float_channels is None:
                    from dataclasses import replace

                    from local_models.int8 import measure_float_channels

                    recipe = replace(recipe, float_channels=measure_float_channels(
                        fp32_graph, calibration[:96], recipe.float_channel_ratio))
                start_graph = fp32_graph
                if recipe.fused:  # a fused recipe quantizes the fused graph, as the desk exports it
                    start_graph = fused_graph = fused_graph or export_fused_graph(source, ctx.work_dir / "quantization-fused.onnx").path
                build_int8(start_graph, graph, recipe)
            except ModelError as exc:
                results.append(Result(GROUP, f"int8 parity: {recipe.name}", "agreement", notes=f"failed: {exc}"))
                continue
            build_s = time.perf_counter() - started
            verdict = judge(compare(reference, run_graph(source, graph, list(texts.parity)), texts.source))
            f = verdict.figures
            timing = _latency(graph, fp32_graph, feeds)
            shipped = recorded is not None and recorded.recipe == recipe
            notes = (f"{f.labels_changed} of {f.texts:,} labels changed; prob. change p99 {f.p99_change:.4f}, "
                     f"max {f.max_change:.4f}, mean {f.mean_change:.4f}; 1 thread median "
                     f"{timing['int8_ms_16']:.2f} ms @16 tok, {timing['int8_ms_64']:.2f} ms @64 tok (fp32 "
                     f"{timing['fp32_ms_16']:.2f} / {timing['fp32_ms_64']:.2f} ms); built in {build_s:.1f} s"
                     + ("; THE DESK'S RECIPE" if shipped else "")
                     + ("; indicative only (fewer texts than the rule needs)" if f.texts < MIN_TEXTS else ""))
            results.append(Result(
                GROUP, f"int8 parity: {recipe.name}", "agreement", f.agreement, None, f.texts,
                budget=">= 99.5 % same label and p99 change <= 0.05", within_budget=verdict.passed, notes=notes,
                extra={**f.to_json(), **timing, "passed": verdict.passed, "desk_recipe": shipped,
                       "excluded_nodes": list(recipe.excluded_nodes)}))
            graph.unlink(missing_ok=True)
    finally:
        source.close()
    return results
