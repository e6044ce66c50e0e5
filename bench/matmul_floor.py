"""The matmul-only floor of an ONNX form: a lower bound on its time that this runtime's own kernels set.

A form's graph, as onnxruntime optimizes it for this machine (the session options the desk uses), is
cut down to its matrix nodes only (``MATRIX_OPS``: MatMul, Gemm, FusedMatMul, MatMulInteger,
MatMulIntegerToFloat, DynamicQuantizeMatMul, Attention, QAttention, MatMulNBits, ...) with their real
weights. Every one of them reads graph inputs holding the very activations the form computes for a
text of that token count (captured from the form itself), and every output is a graph output, so the
nodes run side by side, each once, and nothing else runs: no LayerNorm, GELU, Softmax outside
attention, Transpose, Gather, activation quantization outside the fused matmul ops. The form runs
these same nodes with these same inputs and more, so it cannot be faster than this graph; timed call
for call against the form (alternating, the same token counts), the ratio says how much of the form's
time is matmul work this runtime cannot shed, and a floor that misses a budget proves the budget out
of reach for these kernels on this machine. The verdict takes each token count's quickest call (a busy
machine only adds time) and the p95 of those over the texts as they were called.

Unlike a rate measured on square matrices, this floor uses the shapes the form really multiplies (5-64
rows), where the kernels run far below their square-matrix rate. Times are wall-clock and the calling
thread's CPU time: with one intra-op thread onnxruntime runs the kernels in the calling thread (the
``outside`` figure, process minus thread CPU time, checks it), so CPU time stays meaningful on a shared
machine where wall time counts other processes' turns (though not a shared core's cache and memory
traffic, which the quickest call per token count leaves out).
"""

from __future__ import annotations

import collections
import json
import os
import statistics
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import Result, percentile, summarise

GROUP = "models"
MATRIX_OPS = frozenset({"MatMul", "Gemm", "FusedMatMul", "MatMulInteger", "MatMulIntegerToFloat", "QGemm",
                        "DynamicQuantizeMatMul", "Attention", "QAttention", "MultiHeadAttention", "MatMulNBits"})
BINS = ((1, 8), (9, 16), (17, 24), (25, 32), (33, 48), (49, 64), (65, 512))  # token bands, a row each
CALLS_PER_TOKEN_COUNT = 5  # at least: the quickest of them is the bound
Feeds = dict[str, np.ndarray]


@dataclass(frozen=True)
class FloorGraph:
    model: bytes  # the matmul-only graph
    matrix_nodes: dict[str, int]  # op type -> matrix nodes of the form's optimized graph (all kept)
    other_nodes: int  # nodes of the optimized graph left out
    form_feeds: dict[int, Feeds]  # per token count: the form's inputs
    feeds: dict[int, Feeds]  # per token count: the matmul-only graph's inputs (the form's activations)
    output_shapes: dict[int, dict[str, tuple[int, ...]]]
    outputs: dict[int, Feeds] | None = None  # with ``keep_outputs``: what the form's matrix nodes gave


def session_options(threads: int, **config: str) -> Any:
    from local_models.backends.onnx import session_options as desk_options

    options = desk_options(threads)
    for key, value in config.items():
        options.add_session_config_entry(key, value)
    return options


def optimized_form(model_path: Path, threads: int, target: Path) -> Any:
    """The form's graph as the desk's session options optimize it (onnx ModelProto)."""
    import onnx
    import onnxruntime

    options = session_options(threads)
    options.optimized_model_filepath = str(target)
    onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    return onnx.load(str(target))


def token_feeds(encoder: Any, texts: Sequence[str]) -> dict[int, Feeds]:
    """One text per token count: its model inputs (int64, as the desk feeds them)."""
    out: dict[int, Feeds] = {}
    for text in texts:
        batch = encoder.encode([text])
        out.setdefault(int(batch.lengths[0]), {
            "input_ids": batch.input_ids.astype(np.int64), "attention_mask": batch.attention_mask.astype(np.int64),
            "token_type_ids": batch.token_type_ids.astype(np.int64)})
    return out


def build_floor_graph(model_path: Path, form_feeds: Mapping[int, Feeds], threads: int, *,
                      keep_outputs: bool = False) -> FloorGraph:
    """The matmul-only graph of the form at ``model_path`` and, per token count of ``form_feeds``, its inputs
    (and with ``keep_outputs`` the outputs the form's matrix nodes gave on them, to check the graph by)."""
    import onnx
    import onnxruntime
    from onnx import helper

    with tempfile.TemporaryDirectory(prefix="dynadesk-floor-") as tmp:
        optimized = optimized_form(model_path, threads, Path(tmp) / "optimized.onnx")
    weights = {t.name: t for t in optimized.graph.initializer}
    nodes = [n for n in optimized.graph.node if n.op_type in MATRIX_OPS]
    if not nodes:
        raise ValueError(f"{model_path} has no matrix nodes ({', '.join(sorted(MATRIX_OPS))})")
    activations = sorted({i for n in nodes for i in n.input if i and i not in weights})
    outputs = [o for n in nodes for o in n.output if o]
    # the optimized graph with those tensors as outputs, run as saved (no second optimization pass)
    capture = onnx.ModelProto()
    capture.CopyFrom(optimized)
    given = {i.name for i in capture.graph.input}
    listed = {o.name for o in capture.graph.output}
    for name in [*activations, *outputs]:
        if name not in given and name not in listed:
            capture.graph.output.append(helper.make_empty_tensor_value_info(name))
            listed.add(name)
    options = session_options(threads)
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = onnxruntime.InferenceSession(capture.SerializeToString(), options, providers=["CPUExecutionProvider"])
    wanted = [n for n in [*activations, *outputs] if n not in given]
    feeds: dict[int, Feeds] = {}
    shapes: dict[int, dict[str, tuple[int, ...]]] = {}
    sample: dict[str, np.ndarray] = {}
    kept: dict[int, Feeds] = {}
    for tokens, feed in form_feeds.items():
        values = dict(zip(wanted, session.run(wanted, {k: v for k, v in feed.items() if k in given})))
        values.update({k: v for k, v in feed.items() if k in activations})
        feeds[tokens] = {_input_name(a, outputs): np.ascontiguousarray(values[a]) for a in activations}
        shapes[tokens] = {o: tuple(values[o].shape) for o in outputs}
        if keep_outputs:
            kept[tokens] = {o: values[o] for o in outputs}
        sample = values
    floor_nodes = []
    for node in nodes:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.input[:] = [_input_name(i, outputs) if i and i not in weights else i for i in node.input]
        floor_nodes.append(copy)
    used = {i for n in nodes for i in n.input if i in weights}
    graph = helper.make_graph(
        floor_nodes, "matmul-only",
        [_value_info(_input_name(a, outputs), sample[a]) for a in activations],
        [_value_info(o, sample[o]) for o in outputs],
        initializer=[weights[name] for name in sorted(used)])
    model = helper.make_model(graph, opset_imports=list(optimized.opset_import))
    model.ir_version = optimized.ir_version
    counts = collections.Counter(n.op_type for n in nodes)
    return FloorGraph(model.SerializeToString(), dict(sorted(counts.items())), len(optimized.graph.node) - len(nodes),
                      {k: dict(v) for k, v in form_feeds.items()}, feeds, shapes, kept if keep_outputs else None)


def _input_name(name: str, outputs: Sequence[str]) -> str:
    """A tensor one matrix node makes and another reads becomes an input of its own (nodes run side by side)."""
    return f"{name}.floor_input" if name in outputs else name


def _value_info(name: str, value: np.ndarray) -> Any:
    from onnx import helper

    dims = [f"{name}_dim{i}" for i in range(value.ndim)]
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(value.dtype), dims)


class _Bound:
    """A session with each token count's inputs and preallocated outputs bound (no copies in the timed call)."""

    def __init__(self, model: bytes | str, feeds: Mapping[int, Feeds], threads: int) -> None:
        import onnxruntime

        self.session = onnxruntime.InferenceSession(model, session_options(threads), providers=["CPUExecutionProvider"])
        names = {i.name for i in self.session.get_inputs()}
        self.bindings: dict[int, Any] = {}
        self.buffers: list[np.ndarray] = []
        for tokens, feed in feeds.items():
            given = {k: v for k, v in feed.items() if k in names}
            first = self.session.run(None, given)
            binding = self.session.io_binding()
            for k, v in given.items():
                binding.bind_cpu_input(k, v)
            for meta, value in zip(self.session.get_outputs(), first):
                buffer = np.empty_like(value)
                self.buffers.append(buffer)
                binding.bind_output(meta.name, "cpu", 0, buffer.dtype, list(buffer.shape), buffer.ctypes.data)
            self.bindings[tokens] = binding

    def run(self, tokens: int) -> None:
        self.session.run_with_iobinding(self.bindings[tokens])


@dataclass
class Timings:
    tokens: list[int]  # call k's token count
    wall: dict[str, list[float]]  # "form" / "floor" -> ms per call
    cpu: dict[str, list[float]]  # the calling thread's CPU ms per call
    outside: dict[str, list[float]]  # process CPU ms minus the calling thread's: work on other threads


def time_side_by_side(model_path: Path, floor: FloorGraph, order: Sequence[int], threads: int, n: int,
                      warmup: int = 3) -> Timings:
    """``n`` calls of the form and of its matmul-only graph, call k of both on ``order[k]`` tokens, taking
    turns (which runs first alternates)."""
    import gc

    bound = {"form": _Bound(str(model_path), floor.form_feeds, threads), "floor": _Bound(floor.model, floor.feeds, threads)}
    for b in bound.values():
        for tokens in list(floor.feeds)[:warmup]:
            b.run(tokens)
    gc.collect()
    out = Timings([], {k: [] for k in bound}, {k: [] for k in bound}, {k: [] for k in bound})
    names = list(bound)
    for k in range(n):
        tokens = order[k % len(order)]
        out.tokens.append(tokens)
        for name in (names if k % 2 == 0 else names[::-1]):
            wall, cpu, process = time.perf_counter(), time.thread_time(), time.process_time()
            bound[name].run(tokens)
            spent_cpu = time.thread_time() - cpu
            out.wall[name].append((time.perf_counter() - wall) * 1000)
            out.cpu[name].append(spent_cpu * 1000)
            out.outside[name].append((time.process_time() - process - spent_cpu) * 1000)
    return out


def op_profile(model: bytes | str, feeds: Mapping[int, Feeds], threads: int, rounds: int = 3) -> dict[int, dict[str, float]]:
    """Per token count, ms per call in each op type (onnxruntime's profiler; kernel time)."""
    import onnxruntime

    with tempfile.TemporaryDirectory(prefix="dynadesk-floor-profile-") as tmp:
        options = session_options(threads)
        options.enable_profiling = True
        options.profile_file_prefix = str(Path(tmp) / "floor")
        session = onnxruntime.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        names = {i.name for i in session.get_inputs()}
        first = next(iter(feeds))
        session.run(None, {k: v for k, v in feeds[first].items() if k in names})  # warm-up, left out below
        marks = []
        for _ in range(rounds):
            for tokens, feed in feeds.items():
                marks.append(tokens)
                session.run(None, {k: v for k, v in feed.items() if k in names})
        path = session.end_profiling()
        events = json.loads(Path(path).read_text())
        os.unlink(path)
    spent: dict[int, collections.Counter[str]] = {t: collections.Counter() for t in feeds}
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run"]
    starts = sorted((e["ts"], e["ts"] + e["dur"]) for e in runs)
    starts = starts[1:]  # the warm-up run
    run_tokens = marks
    for event in events:
        if event.get("cat") != "Node" or not event.get("name", "").endswith("_kernel_time"):
            continue
        for (begin, end), tokens in zip(starts, run_tokens):
            if begin <= event["ts"] <= end:
                spent[tokens][event["args"]["op_name"]] += event["dur"]
                break
    calls = collections.Counter(run_tokens)
    return {t: {op: us / calls[t] / 1000 for op, us in c.most_common()} for t, c in spent.items()}


def floor_rows(prefix: str, form: str, floor: FloorGraph, timings: Timings, profiles: Mapping[str, Mapping[int, Mapping[str, float]]],
               budget_ms: float | None, note: str) -> list[Result]:
    """The form and its matmul-only graph, all calls and per band of token counts, with the profile's top op types."""
    nodes = ", ".join(f"{k} {v}" for k, v in floor.matrix_nodes.items())
    graph_note = f"{note}; matmul-only graph: {nodes} ({floor.other_nodes} other nodes left out)"
    rows = []
    for name, label in (("form", "full form"), ("floor", "matmul-only graph (lower bound)")):
        wall, cpu, outside = timings.wall[name], timings.cpu[name], timings.outside[name]
        rows.append(summarise(GROUP, f"{prefix}matmul floor: {form}: {label}", cpu, unit="CPU ms",
                              notes=f"the calling thread's CPU time per call; wall ms median "
                                    f"{statistics.median(wall):.2f}, p95 {percentile(wall, 0.95):.2f}; CPU on other "
                                    f"threads median {statistics.median(outside):.3f} ms/call; {graph_note}"))
    # a busy machine only adds time (a shared core's cache and turns count in CPU time too): each token
    # count's quickest call is the honest bound, spread over the texts as they were called
    best = {name: _quickest(timings.tokens, timings.cpu[name]) for name in ("form", "floor")}
    floor_best = [best["floor"][t] for t in timings.tokens]
    form_p95 = percentile([best["form"][t] for t in timings.tokens], 0.95)
    row = summarise(GROUP, f"{prefix}matmul floor: {form}: matmul-only graph, quickest call per token count",
                    floor_best, unit="CPU ms",
                    notes=f"each token count's quickest CPU time over its {len(timings.tokens) // len(best['floor'])}+ "
                          f"calls, over the texts as called; the full form the same way: p95 {form_p95:.2f}")
    if budget_ms is not None:
        row.budget = f"floor p95 <= {budget_ms:g} ms, else out of reach"
        row.within_budget = row.p95 is not None and row.p95 <= budget_ms
        row.notes = (("the matmul work alone leaves room for the budget" if row.within_budget else
                      "the matmul work alone misses the budget even in its quickest calls: this form cannot meet "
                      "it with these kernels on this machine") + f"; {row.notes}")
    rows.append(row)
    ratios = [f / w for f, w in zip(timings.cpu["floor"], timings.cpu["form"])]
    rows.append(Result(GROUP, f"{prefix}matmul floor: {form}: matmul-only / full form", "fraction",
                       statistics.median(ratios), percentile(ratios, 0.95), len(ratios),
                       notes="CPU time of the matmul-only graph / the form's, call by call (median, p95); 1 would "
                             "be a form that does nothing but its matmuls; quickest calls per token count: median "
                             f"{statistics.median(best['floor'][t] / best['form'][t] for t in best['form']):.2f}"))
    for low, high in BINS:
        picked = [k for k, t in enumerate(timings.tokens) if low <= t <= high]
        if not picked:
            continue
        form_ms = statistics.median(timings.cpu["form"][k] for k in picked)
        floor_ms = statistics.median(timings.cpu["floor"][k] for k in picked)
        counts = {timings.tokens[k] for k in picked}
        quick_form = statistics.median(best["form"][t] for t in counts)
        quick_floor = statistics.median(best["floor"][t] for t in counts)
        tops = {}
        for which, profile in profiles.items():
            spent: collections.Counter[str] = collections.Counter()
            counted = [t for t in profile if low <= t <= high]
            for t in counted:
                spent.update({op: ms / len(counted) for op, ms in profile[t].items()})
            tops[which] = ", ".join(f"{op} {ms:.2f}" for op, ms in spent.most_common(4))
        rows.append(Result(
            GROUP, f"{prefix}matmul floor: {form}: {band_name(timings.tokens[k] for k in picked)}", "ms", form_ms,
            None, len(picked),
            notes=f"CPU ms per call, medians: full form {form_ms:.2f}, matmul-only {floor_ms:.2f} "
                  f"({floor_ms / form_ms:.2f} of it); quickest: {quick_form:.2f} and {quick_floor:.2f}; profiler "
                  f"ms/call, full form: {tops.get('form', '')}; matmul-only: {tops.get('floor', '')}",
            extra={"form_cpu_ms": form_ms, "floor_cpu_ms": floor_ms, "form_quickest_ms": quick_form,
                   "floor_quickest_ms": quick_floor,
                   "form_wall_ms": statistics.median(timings.wall["form"][k] for k in picked),
                   "floor_wall_ms": statistics.median(timings.wall["floor"][k] for k in picked)}))
    return rows


def _quickest(tokens: Sequence[int], ms: Sequence[float]) -> dict[int, float]:
    out: dict[int, float] = {}
    for t, value in zip(tokens, ms):
        out[t] = min(value, out.get(t, value))
    return out


def band_name(tokens: Iterable[int]) -> str:
    """The token counts a band's calls had, as a range."""
    seen = sorted(set(tokens))
    return f"{seen[0]}-{seen[-1]} tokens" if seen[0] != seen[-1] else f"{seen[0]} tokens"


def measure(prefix: str, form: str, model_path: Path, encoder: Any, texts: Sequence[str], threads: int, n: int,
            budget_ms: float | None, note: str) -> list[Result]:
    """The floor rows of the form at ``model_path`` over ``texts`` (timed in their order, cycled)."""
    feeds = token_feeds(encoder, texts)
    floor = build_floor_graph(model_path, feeds, threads)
    order = [int(encoder.encode([t]).lengths[0]) for t in texts]
    timings = time_side_by_side(model_path, floor, order, threads, max(n, CALLS_PER_TOKEN_COUNT * len(feeds)))
    profiles = {"form": op_profile(str(model_path), floor.form_feeds, threads),
                "floor": op_profile(floor.model, floor.feeds, threads)}
    return floor_rows(prefix, form, floor, timings, profiles, budget_ms, note)
