"""How an int8 graph is built from an fp32 ONNX graph: a recipe, and the tools that find one.

    recipe = Int8Recipe("dynamic", excluded_nodes=("node_MatMul_244",))
    build_int8(fp32_path, int8_path, recipe)          # the same recipe and graph give the same bytes
    ranked = node_errors(fp32_path, feeds)              # which MatMuls lose most when quantized

A recipe is small, plain JSON (``to_json``/``from_json``): the approach, per-channel weights,
whether the transformer graph optimizer runs first, and the nodes kept in float. Static
recipes also carry their calibration ranges (onnxruntime's calibration cache), so a desk
rebuilds exactly the graph that was checked without running the calibration again.

A ``fused`` recipe quantizes the fused fp32 graph (``local_models.fused_graph``): its Attention nodes
become QAttention, its SkipLayerNormalization and BiasGelu nodes stay float (with ``plain_layer_norm``,
SkipLayerNormalization is written back as Add + LayerNormalization first: onnxruntime runs those faster).

Approaches: ``dynamic`` (weights int8 per channel, activations quantized per call from their
own range) and ``static`` (QDQ, activation ranges fixed by calibration on task texts: MinMax,
Entropy or Percentile).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from local_models.errors import ExportFailed

log = logging.getLogger(__name__)

APPROACHES = ("dynamic", "static")
CALIBRATIONS = ("minmax", "entropy", "percentile")
QUANTIZED_OPS = ("MatMul", "Gemm")
Feeds = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class Int8Recipe:
    approach: str = "dynamic"
    per_channel: bool = True
    graph_optimizer: bool = False
    calibration: str | None = None  # static only
    excluded_nodes: tuple[str, ...] = ()  # kept in float
    ranges: Mapping[str, Any] | None = field(default=None, compare=False)  # static only: calibration cache
    # SmoothQuant-style smoothing: per input tensor of weight MatMuls, channel scales s (float16, base64):
    # the input is divided by s and the weights' rows multiplied by it, which leaves the float model
    # as it was but moves activation outliers into the weights, where int8 per channel copes with them
    smoothing: Mapping[str, str] | None = field(default=None, compare=False)
    smoothing_alpha: float | None = None
    # LLM.int8-style decomposition (Dettmers et al. 2022): per input tensor of weight MatMuls, the few
    # channels whose peak dwarfs the rest are multiplied in float and masked out of the int8 MatMul, so
    # one outlier channel no longer sets the activation scale of the whole tensor. The float model is
    # unchanged; ``float_channel_ratio`` is the peak / median-peak threshold they were chosen with
    float_channels: Mapping[str, tuple[int, ...]] | None = field(default=None, compare=False)
    float_channel_ratio: float | None = None
    # quantizes the fused fp32 graph (``local_models.fused_graph``: Attention, SkipLayerNormalization, BiasGelu
    # nodes), its Attention nodes too (QAttention), instead of the plain export; written to JSON only when set,
    # so recipes made before it keep their bytes
    fused: bool = False
    # the fused graph's SkipLayerNormalization nodes written back as Add + LayerNormalization
    # (``local_models.layer_norm``: onnxruntime's kernel for the fused node is the slower); JSON only when set
    plain_layer_norm: bool = False

    def __post_init__(self) -> None:
        if self.approach not in APPROACHES:
            raise ValueError(f"unknown int8 approach '{self.approach}' (known: {', '.join(APPROACHES)})")
        if self.approach == "static" and self.calibration not in CALIBRATIONS:
            raise ValueError(f"a static recipe needs a calibration of {', '.join(CALIBRATIONS)}")
        if self.approach == "static" and self.float_channel_ratio is not None:
            raise ValueError("float outlier channels go with dynamic int8 only")
        if self.approach == "static" and self.fused:
            raise ValueError("the fused graph goes with dynamic int8 only")
        if self.plain_layer_norm and not self.fused:
            raise ValueError("plain LayerNorm rewrites the fused graph's SkipLayerNormalization: it needs fused")

    @property
    def name(self) -> str:
        parts = ["optimizer + " if self.graph_optimizer else "", self.approach,
                 f" {self.calibration}" if self.calibration else "",
                 ", weights per channel" if self.per_channel else ", weights per tensor"]
        if self.smoothing is not None or self.smoothing_alpha is not None:
            parts.insert(0, f"smoothed (alpha {self.smoothing_alpha}) + ")
        if self.float_channel_ratio is not None:
            parts.append(f", outlier input channels (peak over {self.float_channel_ratio:g}x the median) kept float")
        if self.excluded_nodes:
            parts.append(f", {len(self.excluded_nodes)} most sensitive MatMul(s) kept float")
        if self.fused:
            parts.insert(0, "fused graph" + (" (LayerNorm unfused)" if self.plain_layer_norm else "") + " + ")
        return "".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {"approach": self.approach, "per_channel": self.per_channel, "graph_optimizer": self.graph_optimizer,
                "calibration": self.calibration, "excluded_nodes": list(self.excluded_nodes),
                "ranges": dict(self.ranges) if self.ranges is not None else None,
                "smoothing_alpha": self.smoothing_alpha,
                "smoothing": dict(self.smoothing) if self.smoothing is not None else None,
                "float_channel_ratio": self.float_channel_ratio,
                "float_channels": ({k: list(v) for k, v in self.float_channels.items()}
                                   if self.float_channels is not None else None),
                **({"fused": True} if self.fused else {}),
                **({"plain_layer_norm": True} if self.plain_layer_norm else {})}

    @classmethod
    def from_json(cls, data: Any) -> Int8Recipe:
        """``ValueError`` in words when ``data`` is not a recipe."""
        if not isinstance(data, Mapping):
            raise ValueError("the int8 recipe is not a JSON object")
        try:
            recipe = cls(approach=str(data["approach"]), per_channel=bool(data.get("per_channel", True)),
                         graph_optimizer=bool(data.get("graph_optimizer", False)),
                         calibration=data.get("calibration"),
                         excluded_nodes=tuple(str(n) for n in data.get("excluded_nodes") or ()),
                         ranges=data.get("ranges"), smoothing=data.get("smoothing"),
                         smoothing_alpha=data.get("smoothing_alpha"),
                         float_channels=_channels_from_json(data.get("float_channels")),
                         float_channel_ratio=data.get("float_channel_ratio"), fused=bool(data.get("fused", False)),
                         plain_layer_norm=bool(data.get("plain_layer_norm", False)))
        except KeyError as exc:
            raise ValueError(f"the int8 recipe has no '{exc.args[0]}'") from exc
        if recipe.approach == "static" and not isinstance(recipe.ranges, Mapping):
            raise ValueError("the static int8 recipe has no calibration ranges")
        if recipe.smoothing_alpha is not None and not isinstance(recipe.smoothing, Mapping):
            raise ValueError("the int8 recipe smooths activations but has no smoothing scales")
        if recipe.float_channel_ratio is not None and recipe.float_channels is None:
            raise ValueError("the int8 recipe keeps outlier channels in float but does not name them")
        return recipe


def _channels_from_json(data: Any) -> dict[str, tuple[int, ...]] | None:
    if data is None:
        return None
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError("the int8 recipe's float channels are not lists of channel numbers per tensor")
    return {str(k): tuple(int(i) for i in v) for k, v in data.items()}


def build_int8(fp32_path: Path, int8_path: Path, recipe: Int8Recipe) -> None:
    """Quantize ``fp32_path`` into ``int8_path`` as ``recipe`` says. Deterministic: no calibration
    runs here (static recipes carry their ranges)."""
    import onnx

    if recipe.approach == "static" and recipe.ranges is None:
        raise ExportFailed("A static int8 recipe needs its calibration ranges; calibrate first.")
    if recipe.smoothing_alpha is not None and recipe.smoothing is None:
        raise ExportFailed("A smoothed int8 recipe needs its smoothing scales; measure them first.")
    if recipe.float_channel_ratio is not None and recipe.float_channels is None:
        raise ExportFailed("An int8 recipe with float outlier channels needs them named; measure them first.")
    try:
        with tempfile.TemporaryDirectory(prefix="dynadesk-int8-") as tmp:
            source = _optimized(fp32_path, Path(tmp)) if recipe.graph_optimizer else Path(fp32_path)
            model = onnx.load(str(source))
            if recipe.fused and not any(node.op_type == "Attention" for node in model.graph.node):
                raise ExportFailed("The int8 recipe quantizes the fused graph, and this graph has no fused Attention "
                                   "node; build it from the fused fp32 graph (local_models.fused_graph).")
            if recipe.plain_layer_norm:
                from local_models.layer_norm import unfuse_skip_layer_norm

                unfuse_skip_layer_norm(model)
            if recipe.smoothing:
                apply_smoothing(model, recipe.smoothing)
            float_nodes = split_float_channels(model, recipe.float_channels) if recipe.float_channels else []
            # the exporter's intermediate shape annotations trip the quantizer's own shape inference;
            # they are optional, and onnxruntime infers shapes again at load
            del model.graph.value_info[:]
            with _quiet():
                if recipe.approach == "dynamic":
                    _dynamic(model, int8_path, recipe, float_nodes)
                else:
                    cache = Path(tmp) / "ranges.json"
                    cache.write_text(json.dumps(recipe.ranges), encoding="utf-8")
                    _static(model, int8_path, recipe, None, cache, float_nodes)
        onnx.checker.check_model(str(int8_path))
    except ExportFailed:
        raise
    except Exception as exc:
        raise ExportFailed(f"int8 quantization ({recipe.name}) failed: {_first_line(exc)}") from exc


def calibrate(fp32_path: Path, recipe: Int8Recipe, feeds: Sequence[Feeds]) -> Int8Recipe:
    """The static ``recipe`` with activation ranges measured on ``feeds`` (one text each). Histogram
    methods need inputs of one shape: texts are padded (or cut) to the longest length that 95 % fit."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader

    if recipe.approach != "static":
        return recipe
    items = list(feeds)
    if recipe.calibration != "minmax":
        width = int(np.quantile([f["input_ids"].shape[1] for f in items], 0.95))
        items = [{k: np.pad(v[:, :width], ((0, 0), (0, max(0, width - v.shape[1])))) for k, v in f.items()}
                 for f in items]

    class Reader(CalibrationDataReader):  # type: ignore[misc]
        def __init__(self) -> None:
            self.position = 0

        def get_next(self) -> dict[str, np.ndarray] | None:
            if self.position >= len(items):
                return None
            self.position += 1
            return dict(items[self.position - 1])

    try:
        with tempfile.TemporaryDirectory(prefix="dynadesk-calibrate-") as tmp:
            source = _optimized(fp32_path, Path(tmp)) if recipe.graph_optimizer else Path(fp32_path)
            model = onnx.load(str(source))
            del model.graph.value_info[:]
            cache = Path(tmp) / "ranges.json"
            with _quiet(stdout=True):
                _static(model, Path(tmp) / "int8.onnx", recipe, Reader(), cache)
            ranges = json.loads(cache.read_text(encoding="utf-8"))
    except Exception as exc:
        raise ExportFailed(f"int8 calibration ({recipe.name}) failed: {_first_line(exc)}") from exc
    return replace(recipe, ranges=ranges)


def _dynamic(model: Any, int8_path: Path, recipe: Int8Recipe, float_nodes: Sequence[str] = ()) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Embedding tables (Gather) stay float: quantizing them costs accuracy and buys no speed
    quantize_dynamic(model, str(int8_path), weight_type=QuantType.QInt8, per_channel=recipe.per_channel,
                     op_types_to_quantize=list(QUANTIZED_OPS) + (["Attention"] if recipe.fused else []),
                     nodes_to_exclude=list(recipe.excluded_nodes) + list(float_nodes),
                     extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def _static(model: Any, int8_path: Path, recipe: Int8Recipe, reader: Any, cache: Path,
            float_nodes: Sequence[str] = ()) -> None:
    import onnx
    from onnxruntime.quantization import CalibrationMethod, QuantFormat, QuantType, quantize_static

    method = {"minmax": CalibrationMethod.MinMax, "entropy": CalibrationMethod.Entropy,
              "percentile": CalibrationMethod.Percentile}[str(recipe.calibration)]
    quantize_static(model, str(int8_path), reader, quant_format=QuantFormat.QDQ, per_channel=recipe.per_channel,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, calibrate_method=method,
                    op_types_to_quantize=list(QUANTIZED_OPS),
                    nodes_to_exclude=list(recipe.excluded_nodes) + list(float_nodes), calibration_cache_path=cache,
                    extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})


def _optimized(fp32_path: Path, folder: Path) -> Path:
    """onnxruntime's transformer optimizer (model_type bert: attention, LayerNorm and GELU fusions)."""
    from onnxruntime.transformers.optimizer import optimize_model

    with _quiet(stdout=True):
        model = optimize_model(str(fp32_path), model_type="bert", num_heads=0, hidden_size=0, opt_level=0)
        target = folder / "optimized.onnx"
        model.save_model_to_file(str(target))
    return target


def quantizable_nodes(fp32_path: Path) -> list[str]:
    """The MatMul/Gemm nodes whose second input is a weight: what the quantizer turns to int8."""
    import onnx

    model = onnx.load(str(fp32_path), load_external_data=False)
    weights = {t.name for t in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type in QUANTIZED_OPS and n.input[1] in weights]


def node_errors(fp32_path: Path, feeds: Sequence[Feeds], *, per_channel: bool = True) -> list[tuple[str, float]]:
    """Each weight MatMul's own error under dynamic int8, most sensitive first: the relative error
    of its output when only its inputs are quantized, on the float activations of ``feeds``.

    One float run gives every node's input; the quantization is emulated in numpy (weights
    int8 symmetric, activations uint8 over their own range, as onnxruntime does per call), so no
    graph is quantized more than once."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(fp32_path))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    nodes = [n for n in model.graph.node if n.op_type in QUANTIZED_OPS and n.input[1] in weights]
    wanted = sorted({n.input[0] for n in nodes})
    quantized_weights = {}
    for node in nodes:
        weight = weights[node.input[1]].astype(np.float32)
        if node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
            weight = weight.T
        quantized_weights[node.name] = (weight, _fake_weight(weight, per_channel))
    session, names = _exposing(model, wanted)
    errors: dict[str, list[float]] = {n.name: [] for n in nodes}
    for feed in feeds:
        values = dict(zip(wanted, session.run(wanted, {k: v for k, v in feed.items() if k in names})))
        for node in nodes:
            x = values[node.input[0]]
            weight, fake = quantized_weights[node.name]
            exact = x @ weight
            errors[node.name].append(float(np.linalg.norm(_fake_activation(x) @ fake - exact)
                                           / (np.linalg.norm(exact) + 1e-12)))
    return sorted(((name, float(np.mean(e))) for name, e in errors.items()), key=lambda item: -item[1])


def _fake_weight(weight: np.ndarray, per_channel: bool) -> np.ndarray:
    scale = (np.abs(weight).max(axis=0, keepdims=True) if per_channel else np.abs(weight).max()) / 127.0
    scale = np.where(scale == 0, 1.0, scale)
    return np.clip(np.round(weight / scale), -127, 127) * scale


def _fake_activation(x: np.ndarray) -> np.ndarray:
    low, high = min(float(x.min()), 0.0), max(float(x.max()), 0.0)
    scale = (high - low) / 255.0 or 1.0
    zero = np.clip(np.round(-low / scale), 0, 255)
    return np.asarray((np.clip(np.round(x / scale) + zero, 0, 255) - zero) * scale)


def _session(model_bytes: bytes) -> Any:
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.log_severity_level = 3
    return onnxruntime.InferenceSession(model_bytes, sess_options=options, providers=["CPUExecutionProvider"])


@contextlib.contextmanager
def _quiet(*, stdout: bool = False) -> Iterator[None]:
    """onnxruntime's quantizer logs warnings and progress on the root logger itself (``logging.warning``),
    its transformer optimizer on ``onnxruntime.*`` loggers; with ``stdout`` also what the optimizer and the
    histogram calibrators print. A filter on the root logger drops only records made on the root logger:
    raising the root's level instead would silence every logger of the process, the desk's threads included,
    for as long as a promotion quantizes. Stdout is process-wide, so only the steps that print swallow it."""
    import io
    import warnings

    root = logging.getLogger()
    library = logging.getLogger("onnxruntime")
    before = library.level
    only_errors = _RootRecordsBelow(logging.ERROR)
    root.addFilter(only_errors)
    library.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.ExitStack() as stack:
            warnings.simplefilter("ignore")
            if stdout:
                stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
            yield
    finally:
        root.removeFilter(only_errors)
        library.setLevel(before)


class _RootRecordsBelow(logging.Filter):
    """Drops records below ``level`` made on the root logger; records propagated from named loggers
    never pass a parent's filters, so they stay untouched."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= self.level


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:300]


def measure_smoothing(fp32_path: Path, feeds: Sequence[Feeds], alpha: float = 0.5) -> dict[str, str]:
    """SmoothQuant's scales (Xiao et al. 2023) for every input tensor of weight MatMuls:
    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) over the texts of ``feeds``, rounded to float16
    (any s keeps the float model; rounding makes the recipe short and exact)."""
    weights, consumers, peaks = _input_peaks(fp32_path, feeds)
    scales = {}
    for name in sorted(consumers):
        weight_peak = np.max([np.abs(_as_kn(node, weights[node.input[1]])).max(axis=1) for node in consumers[name]],
                             axis=0)
        s = np.power(np.maximum(peaks[name], 1e-5), alpha) / np.power(np.maximum(weight_peak, 1e-5), 1 - alpha)
        s = np.clip(s, 1e-3, 1e3).astype(np.float16)
        scales[name] = base64.b64encode(s.tobytes()).decode("ascii")
    return scales


def _input_peaks(fp32_path: Path, feeds: Sequence[Feeds]) -> tuple[dict[str, np.ndarray], dict[str, list[Any]],
                                                                    dict[str, np.ndarray]]:
    """The graph's weights, the weight MatMuls reading each input tensor, and each such tensor's
    peak |x| per channel over ``feeds`` (the tensors exposed as extra outputs of one session)."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(str(fp32_path))
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consumers = _weight_consumers(model, weights)
    wanted = sorted(consumers)
    session, names = _exposing(model, wanted)
    peaks: dict[str, np.ndarray] = {}
    for feed in feeds:
        for name, value in zip(wanted, session.run(wanted, {k: v for k, v in feed.items() if k in names})):
            peak = np.abs(value.reshape(-1, value.shape[-1])).max(axis=0)
            peaks[name] = peak if name not in peaks else np.maximum(peaks[name], peak)
    return weights, consumers, peaks


def _exposing(model: Any, tensors: Sequence[str]) -> tuple[Any, set[str]]:
    """A session over ``model`` (changed in place) that also answers the float ``tensors``, and its input names."""
    import onnx

    del model.graph.value_info[:]
    outputs = {o.name for o in model.graph.output}
    for name in tensors:
        if name not in outputs:
            model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = _session(model.SerializeToString())
    return session, {i.name for i in session.get_inputs()}


def apply_smoothing(model: Any, smoothing: Mapping[str, str]) -> None:
    """Rewrite ``model`` in place: each smoothed tensor X feeds its weight MatMuls as X / s, and
    their weights become diag(s) W. The float answers stay the same up to rounding."""
    import onnx
    from onnx import numpy_helper

    weights = {t.name: t for t in model.graph.initializer}
    arrays = {name: numpy_helper.to_array(t) for name, t in weights.items()}
    consumers = _weight_consumers(model, arrays)
    used = {name for node in model.graph.node for name in node.input}
    for index, (name, encoded) in enumerate(sorted(smoothing.items())):
        if name not in consumers:
            raise ExportFailed(f"The int8 recipe smooths '{name}', which no weight MatMul of this graph reads; "
                               "the recipe was made for another model.")
        s = np.frombuffer(base64.b64decode(encoded), dtype=np.float16).astype(np.float32)
        inverse = numpy_helper.from_array((1.0 / s).astype(np.float32), f"dynadesk_smooth_{index}_inverse")
        model.graph.initializer.append(inverse)
        smoothed = f"dynadesk_smooth_{index}_out"
        model.graph.node.append(onnx.helper.make_node("Mul", [name, inverse.name], [smoothed],
                                                      name=f"dynadesk_smooth_{index}"))
        for node in consumers[name]:
            weight = _as_kn(node, arrays[node.input[1]])
            if weight.shape[0] != s.shape[0]:
                raise ExportFailed(f"The int8 recipe's smoothing of '{name}' has {s.shape[0]} channels, the graph "
                                   f"{weight.shape[0]}; the recipe was made for another model.")
            scaled = weight * s[:, None]
            if node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
                scaled = scaled.T
            new_name = f"{node.input[1]}_smoothed_{index}"
            model.graph.initializer.append(numpy_helper.from_array(scaled.astype(np.float32), new_name))
            node.input[0], node.input[1] = smoothed, new_name
        used.discard(name)
    keep = {n for node in model.graph.node for n in node.input}
    kept = [t for t in model.graph.initializer if t.name in keep]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    _topological_sort(model.graph)


def _weight_consumers(model: Any, weights: Mapping[str, Any]) -> dict[str, list[Any]]:
    consumers: dict[str, list[Any]] = {}
    for node in model.graph.node:
        if node.op_type in QUANTIZED_OPS and node.input[1] in weights and node.input[0] not in weights:
            consumers.setdefault(node.input[0], []).append(node)
    return consumers


def _as_kn(node: Any, weight: np.ndarray) -> np.ndarray:
    """A MatMul/Gemm weight as [input channels, output channels]."""
    if node.op_type == "Gemm" and any(a.name == "transB" and a.i for a in node.attribute):
        return np.asarray(weight).T
    return np.asarray(weight)


def _topological_sort(graph: Any) -> None:
    """Appended nodes go where their inputs are ready (ONNX wants nodes in order)."""
    ready = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {""}
    pending, ordered = list(graph.node), []
    while pending:
        rest = []
        for node in pending:
            if all(name in ready for name in node.input):
                ordered.append(node)
                ready.update(node.output)
            else:
                rest.append(node)
        if len(rest) == len(pending):
            raise ExportFailed("The smoothed graph has a cycle or a missing input; the recipe does not fit it.")
        pending = rest
    del graph.node[:]
    graph.node.extend(ordered)


def measure_float_channels(fp32_path: Path, feeds: Sequence[Feeds], ratio: float = 6.0,
                           most: int = 4) -> dict[str, tuple[int, ...]]:
    """Per input tensor of weight MatMuls, the channels (at most ``most``) whose peak |x| over ``feeds``
    exceeds ``ratio`` times the median channel's peak: what ``split_float_channels`` keeps in float.
    In BERT-like encoders these are a handful of LayerNorm and GELU outputs' channels, 10-20x the rest."""
    return float_channels_at(input_peaks(fp32_path, feeds), ratio, most)


def input_peaks(fp32_path: Path, feeds: Sequence[Feeds]) -> dict[str, Any]:
    """Each input tensor of weight MatMuls: its peak |x| per channel over ``feeds`` (one float run)."""
    return _input_peaks(fp32_path, feeds)[2]


def float_channels_at(peaks: Mapping[str, Any], ratio: float, most: int = 4) -> dict[str, tuple[int, ...]]:
    """``measure_float_channels`` from peaks measured once: several ratios cost one float run."""
    chosen = {}
    for name, peak in peaks.items():
        threshold = ratio * float(np.median(peak))
        channels = sorted(int(i) for i in np.argsort(-peak, kind="stable")[:most] if peak[i] > threshold)
        if channels:
            chosen[name] = tuple(channels)
    return chosen


def split_float_channels(model: Any, channels: Mapping[str, Sequence[int]]) -> list[str]:
    """Rewrite ``model`` in place: each weight MatMul reading a tensor X of ``channels`` reads X with those
    channels zeroed, and a small float MatMul of just those channels (and the weights' rows) is added
    to its output. The float answers stay the same up to rounding. Returns the float MatMuls' names
    (the quantizer must leave them alone)."""
    import onnx
    from onnx import numpy_helper

    arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    consumers = _weight_consumers(model, arrays)
    helper, float_nodes = onnx.helper, []
    for index, (name, kept) in enumerate(sorted(channels.items())):
        if name not in consumers:
            raise ExportFailed(f"The int8 recipe keeps channels of '{name}' in float, which no weight MatMul of this "
                               "graph reads; the recipe was made for another model.")
        width = _as_kn(consumers[name][0], arrays[consumers[name][0].input[1]]).shape[0]
        if not kept or max(kept) >= width or min(kept) < 0:
            raise ExportFailed(f"The int8 recipe's float channels of '{name}' do not fit its {width} channels; "
                               "the recipe was made for another model.")
        prefix = f"dynadesk_float_channels_{index}"
        mask = np.ones(width, dtype=np.float32)
        mask[list(kept)] = 0.0
        model.graph.initializer.extend([numpy_helper.from_array(mask, f"{prefix}_mask"),
                                        numpy_helper.from_array(np.asarray(kept, dtype=np.int64), f"{prefix}_index")])
        model.graph.node.extend([helper.make_node("Mul", [name, f"{prefix}_mask"], [f"{prefix}_rest"],
                                                  name=f"{prefix}_mask"),
                                 helper.make_node("Gather", [name, f"{prefix}_index"], [f"{prefix}_kept"], axis=-1,
                                                  name=f"{prefix}_gather")])
        for number, node in enumerate(consumers[name]):
            alpha = next((a.f for a in node.attribute if a.name == "alpha"), 1.0) if node.op_type == "Gemm" else 1.0
            rows = (alpha * _as_kn(node, arrays[node.input[1]])[list(kept), :]).astype(np.float32)
            part = f"{prefix}_{number}"
            model.graph.initializer.append(numpy_helper.from_array(rows, f"{part}_weight"))
            output = node.output[0]
            node.input[0], node.output[0] = f"{prefix}_rest", f"{part}_int8"
            model.graph.node.extend([
                helper.make_node("MatMul", [f"{prefix}_kept", f"{part}_weight"], [f"{part}_float"],
                                 name=f"{part}_float"),
                helper.make_node("Add", [f"{part}_int8", f"{part}_float"], [output], name=f"{part}_add")])
            float_nodes.append(f"{part}_float")
    _topological_sort(model.graph)
    return float_nodes
