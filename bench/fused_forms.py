"""The fused graph (``local_models.fused_graph``) in the model benchmarks: its int8 forms timed side by
side with the desk's form and the transformers pipeline, and where each form's time goes, op type by
op type (onnxruntime's own profiler, the same texts for every form), so that a fused op's gain or a
budget's limit is read off the table rather than guessed.

Forms: the fused fp32 graph; fused dynamic int8 (QAttention); fused dynamic int8 with the outlier channels
of the desk's recipe ratio kept in float (measured on the fused graph over the bench texts); each int8 one
also with its SkipLayerNormalization nodes written back as Add + LayerNormalization (``plain_layer_norm``). Parity is not
judged here: the int8 search judges it on the task's texts (its attempts carry the figures).
"""

from __future__ import annotations

import collections
import json
import os
import shutil
import statistics
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.common import Result, summarise

GROUP = "models"
PROFILE_ROUNDS = 2
PLAIN = "LayerNorm unfused"  # the recipe's plain_layer_norm: Add + LayerNormalization, not SkipLayerNormalization
PLAIN_LAYER_NORM = f"ONNX int8 fused, {PLAIN}"


def fused_forms(torch_dir: Path, int8_dir: Path, work: Path, texts: Sequence[str],
                ratio: float | None) -> tuple[dict[str, Path], dict[str, int], str]:
    """Folders of the fused forms (named as in the table), the fused graph's op counts, and a note; the
    folders copy ``int8_dir``'s tokenizer and description. ({}, {}, why) when the model has no fused graph."""
    from local_models.engine import load_engine
    from local_models.fused_graph import FusionUnavailable, export_fused_graph
    from local_models.int8 import Int8Recipe, build_int8, float_channels_at, input_peaks
    from local_models.int8_search import feeds_for

    source = load_engine(torch_dir)
    try:
        try:
            fused = export_fused_graph(source, work / "fused-fp32.onnx")
        except FusionUnavailable as exc:
            return {}, {}, str(exc)
        recipes = {"ONNX int8 fused": Int8Recipe("dynamic", fused=True),
                   PLAIN_LAYER_NORM: Int8Recipe("dynamic", fused=True, plain_layer_norm=True)}
        if ratio is not None:
            peaks = input_peaks(fused.path, [feeds_for(source, [t]) for t in texts])
            channels = float_channels_at(peaks, ratio)
            recipes["ONNX int8 fused + outliers"] = Int8Recipe(
                "dynamic", fused=True, float_channels=channels, float_channel_ratio=ratio)
            recipes[f"ONNX int8 fused + outliers, {PLAIN}"] = Int8Recipe(
                "dynamic", fused=True, float_channels=channels, float_channel_ratio=ratio, plain_layer_norm=True)
    finally:
        source.close()
    forms: dict[str, Path] = {}
    for name, recipe in [("ONNX fp32 fused", None), *recipes.items()]:
        folder = work / name.replace(" ", "-").replace("+", "plus")
        shutil.copytree(int8_dir, folder)
        if recipe is None:
            shutil.copy2(fused.path, folder / "model.onnx")
        else:
            build_int8(fused.path, folder / "model.onnx", recipe)
        forms[name] = folder
    return forms, fused.counts, f"fused graph: {', '.join(f'{k} {v}' for k, v in fused.counts.items())}"


def op_profile(folders: dict[str, Path], encoder: Any, texts: Sequence[str], threads: int) -> dict[str, dict[str, float]]:
    """Per form, milliseconds per call spent in each op type (onnxruntime's profiler over ``texts``,
    ``PROFILE_ROUNDS`` rounds, forms taking turns text by text), and "session.run" for the whole call."""
    import numpy as np
    import onnxruntime

    sessions = {}
    with tempfile.TemporaryDirectory(prefix="dynadesk-profile-") as tmp:
        for name, folder in folders.items():
            options = onnxruntime.SessionOptions()
            options.intra_op_num_threads, options.inter_op_num_threads, options.log_severity_level = threads, 1, 3
            options.enable_profiling = True
            options.profile_file_prefix = str(Path(tmp) / name.replace(" ", "_"))
            session = onnxruntime.InferenceSession(str(folder / "model.onnx"), options,
                                                   providers=["CPUExecutionProvider"])
            sessions[name] = (session, {i.name for i in session.get_inputs()})
        feeds = []
        for text in texts:
            batch = encoder.encode([text])
            feeds.append({"input_ids": batch.input_ids.astype(np.int64),
                          "attention_mask": batch.attention_mask.astype(np.int64),
                          "token_type_ids": batch.token_type_ids.astype(np.int64)})
        for _ in range(PROFILE_ROUNDS):
            for feed in feeds:
                for session, names in sessions.values():
                    session.run(None, {k: v for k, v in feed.items() if k in names})
        calls = PROFILE_ROUNDS * len(feeds)
        out: dict[str, dict[str, float]] = {}
        for name, (session, _) in sessions.items():
            path = session.end_profiling()
            events = json.loads(Path(path).read_text())
            os.unlink(path)
            spent: collections.Counter[str] = collections.Counter()
            for event in events:
                if event.get("cat") == "Node" and event.get("name", "").endswith("_kernel_time"):
                    spent[event["args"]["op_name"]] += event["dur"]
                elif event.get("cat") == "Session" and event.get("name") == "model_run":
                    spent["session.run"] += event["dur"]
            out[name] = {op: us / calls / 1000 for op, us in spent.most_common()}
    return out


def profile_rows(profile: dict[str, dict[str, float]], note: str) -> list[Result]:
    """One row per form and op type (ms per call, its share of the call); op types under 1 % are summed."""
    rows = []
    for form, spent in profile.items():
        total = spent.get("session.run") or sum(v for k, v in spent.items() if k != "session.run")
        rows.append(Result(GROUP, f"profile: {form}: whole call (session.run)", "ms", total, None, 0, notes=note))
        small = 0.0
        for op, ms in spent.items():
            if op == "session.run":
                continue
            if ms < 0.01 * total:
                small += ms
                continue
            rows.append(Result(GROUP, f"profile: {form}: {op}", "ms", ms, None, 0,
                               notes=f"{ms / total:.0%} of the call; {note}"))
        rows.append(Result(GROUP, f"profile: {form}: other op types (each < 1 %)", "ms", small, None, 0, notes=note))
    return rows


def fused_move_rows(profile: dict[str, dict[str, float]], unfused: str, fused: str) -> list[Result]:
    """How the time moves from the unfused form to the fused one: per op type present in either, the
    difference in ms per call (negative: the fused form spends less there)."""
    a, b = profile.get(unfused, {}), profile.get(fused, {})
    rows = []
    for op in sorted(set(a) | set(b), key=lambda o: -(abs(b.get(o, 0.0) - a.get(o, 0.0)))):
        delta = b.get(op, 0.0) - a.get(op, 0.0)
        if abs(delta) < 0.005:
            continue
        rows.append(Result(GROUP, f"fused vs unfused: {op}", "ms", delta, None, 0,
                           notes=f"{fused} minus {unfused}, ms per call ({a.get(op, 0.0):.3f} -> {b.get(op, 0.0):.3f})"))
    return rows


def timed_rows(prefix: str, samples: dict[str, list[float]], reference: str, note: str,
               ratio: Callable[[str, list[float], list[float], float | None], Result]) -> list[Result]:
    rows = []
    for name, values in samples.items():
        if name == reference:
            continue
        rows.append(summarise(GROUP, f"{prefix}{name}", values, notes=note))
        rows.append(ratio(f"{prefix}{reference} / {name}", samples[reference], values, None))
    return rows


def median(values: Sequence[float]) -> float:
    return statistics.median(values)
