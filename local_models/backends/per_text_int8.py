"""A dynamically quantized graph that quantizes each text of a batch on its own, so that a batch
gives each text its own answer.

Why a plain batch changes int8 answers: ``DynamicQuantizeLinear`` takes one scale and zero point
from the range of the whole tensor, so in a batch every text is quantized with the range of the
widest text beside it, and of the padding's hidden states (which are not zero). Its answer then
depends on its company: P(label) moved by up to 0.1 on the assistant's candidates.

The rewrite (``per_text_graph``) keeps the graph and its weights and replaces each
``DynamicQuantizeLinear`` by the same arithmetic per batch row:
- the range is taken per row over its real tokens only (a padding token's values read as 0,
  which the range always includes);
- scale = (max(0, max) - min(0, min)) / 255 (1 for an empty range), zero point =
  round-half-even(clip(-min / scale, 0, 255)): onnxruntime's own formula;
- the values are quantized by ``QuantizeLinear`` along axis 0 (each row its own scale and zero point;
  the MLAS routine DynamicQuantizeLinear calls);
- onnxruntime's ``MatMulInteger`` takes one activation zero point per tensor, so the product runs
  without it and subtracts zero point x (column sums of the int8 weights) after, in int32: the
  same integers.
Every other op works per token, or reads other tokens only through attention, where a padding key
gets weight exactly 0.

The rule it gives (``RULE``; the probe check enforces it before a runtime uses the graph):
- a text's outputs in a batch are the same bits whatever the batch: its company, its place,
  the padding (checked on probe batches of mixed lengths; tests/local_models/test_per_text_batches.py);
- they are close to the int8 graph's own answer for the text alone, not equal bit for bit:
  onnxruntime fuses the original's MatMulInteger + Cast + Mul + Add into MatMulIntegerToFloat,
  whose rounding differs in the last bit (with that fusion turned off the two graphs agree bit
  for bit), and a last-bit change can flip one quantization step later. Not bounded by
  construction: the probe requires ``PROBE_TOLERANCE`` (logits) on its texts, and the bench
  measures it (7,511 assistant candidates: P(hate) moved by at most 1.6e-3, most not at all);
- labels are the text's labels alone: ``InferenceEngine.forward`` answers a text whose two top
  labels are within ``LABEL_GUARD`` alone.
A graph with ops that quantize inside the kernel (``PER_CALL_QUANTIZERS``), without an attention
mask, or that fails the probe keeps one text at a time (``OnnxRuntime.batch_rule`` says why).

Off on the desk (``OnnxRuntime.per_text_batches``): measured side by side on the 2-core
development machine it was no faster than each text alone on two threads, which gives the exact
answers; the bench rows (``python -m bench --only assist``, ``python -m bench.bench_models
ablation``) say when that changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from local_models.backends.row_pool import RowPool

MASK_INPUT = "attention_mask"
_PREFIX = "dynadesk_per_text"


class NotRewritable(ValueError):
    """The graph quantizes in a way this rewrite does not know; batches stay one text at a time."""


def per_text_graph(model: Any) -> Any:
    """A copy of ``model`` (an ``onnx.ModelProto``) whose activations are quantized per batch row."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = _copy(model)
    graph = model.graph
    if MASK_INPUT not in {i.name for i in graph.input}:
        raise NotRewritable("the graph takes no attention mask, so padding cannot be told from text")
    internal = sorted({n.op_type for n in graph.node if n.op_type in PER_CALL_QUANTIZERS})
    if internal:  # first: the reason no opset or other rewrite would change (a fused int8 graph's QAttention)
        raise NotRewritable(f"{', '.join(internal)} quantize(s) inside the kernel, one range per batch")
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < 18:
        raise NotRewritable(f"opset {opset}: the rewrite needs opset 18 (reductions with axes as inputs)")
    quantizers = [n for n in graph.node if n.op_type == "DynamicQuantizeLinear"]
    if not quantizers:
        raise NotRewritable("the graph has no DynamicQuantizeLinear")
    ranks = _ranks(model, [n.input[0] for n in quantizers])
    initializers = {t.name: t for t in graph.initializer}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    added_initializers = [
        numpy_helper.from_array(np.array([-1], dtype=np.int64), f"{_PREFIX}_last_axis"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), f"{_PREFIX}_axis1"),
        numpy_helper.from_array(np.array([1, 2], dtype=np.int64), f"{_PREFIX}_axes12"),
        numpy_helper.from_array(np.array(0.0, dtype=np.float32), f"{_PREFIX}_zero"),
        numpy_helper.from_array(np.array(1.0, dtype=np.float32), f"{_PREFIX}_one"),
        numpy_helper.from_array(np.array(255.0, dtype=np.float32), f"{_PREFIX}_qmax"),
    ]
    z, one, qmax = f"{_PREFIX}_zero", f"{_PREFIX}_one", f"{_PREFIX}_qmax"
    mask = f"{_PREFIX}_mask"
    prelude = [
        helper.make_node("Cast", [MASK_INPUT], [f"{mask}_bool"], to=TensorProto.BOOL, name=f"{mask}_cast"),
        helper.make_node("Unsqueeze", [f"{mask}_bool", f"{_PREFIX}_last_axis"], [mask], name=f"{mask}_unsqueeze"),
    ]
    replaced: dict[int, list[Any]] = {}  # node position -> nodes that take its place
    for k, node in enumerate(graph.node):
        if node.op_type != "DynamicQuantizeLinear":
            continue
        x, (quantized, scale_out, zero_out) = node.input[0], node.output
        rank = ranks.get(x)
        if rank not in (2, 3):
            raise NotRewritable(f"{node.name}: quantizes a tensor of rank {rank}; only [batch, tokens, hidden] "
                                "and [batch, hidden] are known")
        p = f"{_PREFIX}_{k}"
        if rank == 3:
            # per token first (one read of x, nothing written), then padding tokens read as 0,
            # which the range includes anyway, then per row
            nodes = []
            for bound, reduce in (("max", "ReduceMax"), ("min", "ReduceMin")):
                nodes += [
                    helper.make_node(reduce, [x, f"{_PREFIX}_last_axis"], [f"{p}_{bound}_tokens"], keepdims=0,
                                     name=f"{p}_{bound}_tokens"),
                    helper.make_node("Where", [f"{mask}_bool", f"{p}_{bound}_tokens", z], [f"{p}_{bound}_real"],
                                     name=f"{p}_{bound}_real"),
                    helper.make_node(reduce, [f"{p}_{bound}_real", f"{_PREFIX}_axis1"], [f"{p}_{bound}0"],
                                     keepdims=0, name=f"{p}_{bound}0"),
                ]
        else:
            nodes = [helper.make_node(reduce, [x, f"{_PREFIX}_axis1"], [f"{p}_{bound}0"], keepdims=0,
                                      name=f"{p}_{bound}0")
                     for bound, reduce in (("max", "ReduceMax"), ("min", "ReduceMin"))]
        nodes += [
            helper.make_node("Max", [f"{p}_max0", z], [f"{p}_max"], name=f"{p}_max"),
            helper.make_node("Min", [f"{p}_min0", z], [f"{p}_min"], name=f"{p}_min"),
            helper.make_node("Sub", [f"{p}_max", f"{p}_min"], [f"{p}_span"], name=f"{p}_span"),
            helper.make_node("Div", [f"{p}_span", qmax], [f"{p}_scale0"], name=f"{p}_scale0"),
            helper.make_node("Equal", [f"{p}_max", f"{p}_min"], [f"{p}_empty"], name=f"{p}_empty"),
            helper.make_node("Where", [f"{p}_empty", one, f"{p}_scale0"], [f"{p}_scale"], name=f"{p}_scale"),
            helper.make_node("Div", [f"{p}_min", f"{p}_scale"], [f"{p}_ratio"], name=f"{p}_ratio"),
            helper.make_node("Sub", [z, f"{p}_ratio"], [f"{p}_zp0"], name=f"{p}_zp0"),
            helper.make_node("Clip", [f"{p}_zp0", z, qmax], [f"{p}_zp1"], name=f"{p}_zp1"),
            helper.make_node("Round", [f"{p}_zp1"], [f"{p}_zp2"], name=f"{p}_zp2"),
            helper.make_node("Cast", [f"{p}_zp2"], [f"{p}_zp"], to=TensorProto.UINT8, name=f"{p}_zp"),
            helper.make_node("QuantizeLinear", [x, f"{p}_scale", f"{p}_zp"], [quantized], axis=0,
                             name=f"{p}_quantize"),
            # the scale and zero point as [batch, 1(, 1)], to broadcast against [batch, (tokens,) columns]
            helper.make_node("Unsqueeze", [f"{p}_scale", f"{_PREFIX}_axis1" if rank == 2 else f"{_PREFIX}_axes12"],
                             [scale_out], name=f"{p}_scale_rows"),
            helper.make_node("Cast", [f"{p}_zp"], [f"{p}_zp_int"], to=TensorProto.INT32, name=f"{p}_zp_int"),
            helper.make_node("Unsqueeze", [f"{p}_zp_int", f"{_PREFIX}_axis1" if rank == 2 else f"{_PREFIX}_axes12"],
                             [zero_out], name=f"{p}_zp_rows"),
        ]
        replaced[k] = nodes
        for consumer in consumers.get(quantized, []) + consumers.get(zero_out, []):
            if consumer.op_type != "MatMulInteger" or list(consumer.input[:1]) != [quantized] or \
                    len(consumer.input) < 3 or consumer.input[2] != zero_out:
                raise NotRewritable(f"{consumer.name} ({consumer.op_type}) reads a dynamic quantization's output")
        for consumer in consumers.get(scale_out, []):
            if consumer.op_type != "Mul":
                raise NotRewritable(f"{consumer.name} ({consumer.op_type}) reads a dynamic quantization's scale")

    for k, node in enumerate(graph.node):
        if node.op_type != "MatMulInteger" or len(node.input) < 3 or not node.input[2]:
            continue
        if not any(node.input[2] == q.output[2] for q in quantizers):
            continue
        weight = initializers.get(node.input[1])
        if weight is None:
            raise NotRewritable(f"{node.name}: its int8 weights are not a constant")
        w = numpy_helper.to_array(weight).astype(np.int32)
        if len(node.input) > 3 and node.input[3]:
            zp_tensor = initializers.get(node.input[3])
            if zp_tensor is None:
                raise NotRewritable(f"{node.name}: its weights' zero point is not a constant")
            w = w - numpy_helper.to_array(zp_tensor).astype(np.int32)
        if w.ndim != 2:
            raise NotRewritable(f"{node.name}: weights of rank {w.ndim}")
        p = f"{_PREFIX}_mm{k}"
        column_sums = f"{p}_column_sums"
        added_initializers.append(numpy_helper.from_array(w.sum(axis=0).astype(np.int32), column_sums))
        (out,) = node.output
        inputs = list(node.input)
        zero_rows = inputs[2]
        inputs[2] = ""  # no activation zero point in the product: subtracted below, per row
        replaced[k] = [
            helper.make_node("MatMulInteger", inputs, [f"{p}_raw"], name=node.name),
            helper.make_node("Mul", [zero_rows, column_sums], [f"{p}_offset"], name=f"{p}_offset"),
            helper.make_node("Sub", [f"{p}_raw", f"{p}_offset"], [out], name=f"{p}_exact"),
        ]

    nodes = list(prelude)
    for k, node in enumerate(graph.node):
        nodes.extend(replaced.get(k, [node]))
    del graph.node[:]
    graph.node.extend(nodes)
    graph.initializer.extend(added_initializers)
    onnx.checker.check_model(model) if model.ByteSize() < 2**31 - 2**20 else None
    return model


def _vocabulary_rows(model: Any) -> int:
    """Rows of the token embedding (the constant that input_ids index), so that probe ids exist."""
    constants = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Gather" and len(node.input) > 1 and node.input[1] == "input_ids" \
                and node.input[0] in constants:
            return int(constants[node.input[0]].dims[0])
    raise NotRewritable("no token embedding reads input_ids")


def _copy(model: Any) -> Any:
    import onnx

    copied = onnx.ModelProto()
    copied.CopyFrom(model)
    return copied


def _ranks(model: Any, names: list[str]) -> dict[str, int | None]:
    """The rank of each tensor in ``names``, by onnx shape inference."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v.type.tensor_type for v in list(inferred.graph.value_info) + list(inferred.graph.output)
             + list(inferred.graph.input)}
    out: dict[str, int | None] = {}
    for name in names:
        tensor = typed.get(name)
        out[name] = len(tensor.shape.dim) if tensor is not None and tensor.HasField("shape") else None
    return out


# Largest move of a logit that the probe texts may show against the int8 graph's own answer alone
# (measured on the default model: 1e-7 typical, 2.2e-4 at most on the probes)
PROBE_TOLERANCE = 1e-3
# Ops that quantize their float input per call inside the kernel (one range per tensor), which
# the rewrite cannot reach: a graph with any of them keeps one text at a time
PER_CALL_QUANTIZERS = ("DynamicQuantizeMatMul", "QAttention", "DynamicQuantizeLSTM", "QEmbedLayerNormalization")

# Token counts of the probe batch: one text of a few tokens beside long ones, a repeat, odd lengths
PROBE_LENGTHS = (2, 9, 3, 31, 17, 9, 64, 5)


@dataclass
class PerTextSession:
    """The rewritten graph's session, with the pad id that fills a batch's short rows."""

    session: Any
    pad_token_id: int

    def run(self, names: Sequence[str], rows: Sequence[Mapping[str, np.ndarray]], pool: RowPool,
            parts: int = 1) -> list[list[np.ndarray]]:
        """Each row's outputs (one [1, ...] array per name), as ``session.run`` gives them for the
        row alone. The rows (each [1, its own length], unpadded) are ordered by length and cut into
        ``parts`` batches of about equal padded size, one per thread of ``pool``."""
        order = sorted(range(len(rows)), key=lambda i: rows[i]["input_ids"].shape[1])
        groups = _balanced(order, [rows[i]["input_ids"].shape[1] for i in order], max(1, min(parts, len(rows))))
        session = self.session

        def run_group(g: int) -> list[Any]:
            values: list[Any] = session.run(list(names), padded([rows[i] for i in groups[g]], self.pad_token_id))
            return values

        outputs = pool.map(run_group, len(groups))
        result: list[list[np.ndarray]] = [[] for _ in rows]
        for members, values in zip(groups, outputs):
            for j, i in enumerate(members):
                result[i] = [np.asarray(v[j:j + 1]) for v in values]
        return result


def _balanced(order: list[int], lengths: list[int], parts: int) -> list[list[int]]:
    """``order`` (ascending lengths) cut into ``parts`` consecutive runs of about equal token count."""
    total = sum(lengths) or 1
    groups: list[list[int]] = [[] for _ in range(parts)]
    running = 0
    for i, n in zip(order, lengths):
        part = min(parts - 1, running * parts // total)
        groups[part].append(i)
        running += n
    return [g for g in groups if g]


def padded(rows: Sequence[Mapping[str, np.ndarray]], pad_token_id: int) -> dict[str, np.ndarray]:
    """One batch of unpadded [1, n] rows: padded at the end to the longest, attention mask 0 there."""
    width = max(r["input_ids"].shape[1] for r in rows)
    out = {}
    for name in rows[0]:
        dtype = rows[0][name].dtype
        fill = pad_token_id if name == "input_ids" else 0
        batch = np.full((len(rows), width), fill, dtype=dtype)
        for k, r in enumerate(rows):
            batch[k, :r[name].shape[1]] = r[name][0]
        out[name] = batch
    return out


def per_text_session(file: Path, session: Any, names: Sequence[str], input_types: Mapping[str, Any],
                     pad_token_id: int) -> tuple[PerTextSession | None, str]:
    """The rewritten graph's session when it passes the probe check (``probe_mismatch``), else None;
    and a line that says which rule batches follow and why."""
    import onnx
    import onnxruntime

    try:
        model = onnx.load(str(file))
        rewritten = per_text_graph(model)
        vocab_size = _vocabulary_rows(model)
        candidate = onnxruntime.InferenceSession(rewritten.SerializeToString(),
                                                 sess_options=session.get_session_options(),
                                                 providers=session.get_providers())
    except NotRewritable as exc:
        return None, f"one text at a time: {exc}"
    except Exception as exc:  # onnx and onnxruntime raise their own types
        return None, f"one text at a time: the per-text graph does not load ({str(exc).splitlines()[0][:200]})"
    try:
        mismatch, moved = probe_mismatch(session, candidate, names, input_types, pad_token_id, vocab_size)
    except Exception as exc:  # onnxruntime's own types
        mismatch, moved = f"fails on the probe texts ({str(exc).splitlines()[0][:200]})", float("nan")
    if mismatch is not None:
        return None, f"one text at a time: the per-text graph {mismatch}"
    return PerTextSession(candidate, pad_token_id), f"{RULE} (probe texts: logits within {moved:.1e})"


RULE = ("one batch, each text quantized on its own: a text's answer does not depend on the batch, its label "
        "is its label alone, its probabilities close to alone")


def probe_mismatch(session: Any, candidate: Any, names: Sequence[str], input_types: Mapping[str, Any],
                   pad_token_id: int, vocab_size: int) -> tuple[str | None, float]:
    """(None, the largest logit move) when ``candidate`` gives each probe row the same bits in two
    batches of different company and padding as alone, and stays within ``PROBE_TOLERANCE`` of
    ``session``'s answer for the row alone; else (what differed, the move)."""
    rng = np.random.default_rng(0)
    low = min(1000, max(vocab_size // 2, 1))
    rows = []
    for n in PROBE_LENGTHS:
        ids = rng.integers(low, max(vocab_size, low + 1), size=(1, n))
        row = {"input_ids": ids, "attention_mask": np.ones((1, n)), "token_type_ids": np.zeros((1, n))}
        rows.append({name: row[name].astype(dtype) for name, dtype in input_types.items()})
    reference = [session.run(list(names), r) for r in rows]
    own = [candidate.run(list(names), r) for r in rows]
    moved = 0.0
    for i in range(len(rows)):
        for name, got, want in zip(names, own[i], reference[i]):
            diff = float(np.abs(np.asarray(got, dtype=np.float64) - want).max())
            moved = max(moved, diff)
            if not diff <= PROBE_TOLERANCE:
                return f"moved {name} of a probe text by {diff:.3g} against the text alone", moved
    for company in (list(range(len(rows))), list(range(len(rows)))[::-2]):
        values = candidate.run(list(names), padded([rows[i] for i in company], pad_token_id))
        for j, i in enumerate(company):
            for name, got, want in zip(names, values, own[i]):
                if not np.array_equal(np.asarray(got[j:j + 1]), np.asarray(want)):
                    return f"gave a probe text other bits in a batch than alone ({name})", moved
    return None, moved
