"""An fp32 ONNX graph that onnxruntime's transformer fuser recognises: fused Attention,
SkipLayerNormalization, BiasGelu and EmbedLayerNormalization nodes instead of the dozens of small
ops an encoder layer exports to.

    fused = export_fused_graph(engine, folder / "fused-fp32.onnx")   # FusedGraph, or FusionUnavailable
    fused.counts        # {"Attention": 6, "SkipLayerNormalization": 12, "BiasGelu": 6, ...}
    fused_counts(path)  # the same count, of any graph

Why a second export: the fuser's attention patterns match the TorchScript exporter's graph of the
eager attention, not the graph ``torch.export`` makes of scaled-dot-product attention (0 Attention
nodes fused there; ``onnxruntime``'s own session optimizer fuses the LayerNorms and GELUs of either
graph, but never the attention). The fuser runs with ``opt_level=0``: only its Python pattern
rewrites, no graph optimized for this machine's CPU is saved, so the same weights give the same bytes.

The fused graph must answer as the PyTorch model does (``FUSED_MAX_DIFFERENCE`` on the export's
sample texts, as one padded batch and one at a time), or it is not used: a model whose layout the
fuser gets wrong (position ids that do not start at 0, another attention) is caught here.
"""

from __future__ import annotations

import collections
import contextlib
import io
import logging
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from local_models.errors import ExportFailed
from local_models.quiet import first_line, quiet

if TYPE_CHECKING:
    from local_models.backends.hf_torch import TorchRuntime
    from local_models.engine import InferenceEngine

log = logging.getLogger(__name__)

FUSED_OPS = ("Attention", "MultiHeadAttention", "SkipLayerNormalization", "BiasGelu", "FastGelu", "Gelu",
             "EmbedLayerNormalization", "QAttention")
FUSED_OPSET = 17
LIBRARIES = ("onnxruntime", "torch.onnx", "transformers")  # whose logging an export keeps quiet
FUSED_MAX_DIFFERENCE = 1e-3  # as the fp32 conversion check of ``local_models.export``


class FusionUnavailable(ExportFailed):
    """The model has no fused graph (the fuser matched no attention, or its graph answers differently)."""


@dataclass(frozen=True)
class FusedGraph:
    path: Path
    counts: dict[str, int]  # fused op type -> nodes of that type in the graph
    max_difference: float  # against the PyTorch model, on the sample texts


def is_fused_graph(path: Path) -> bool:
    """Whether the graph at ``path`` has fused attention (an export of ``export_fused_graph``)."""
    return bool(fused_counts(path).get("Attention"))


def fused_counts(path: Path) -> dict[str, int]:
    """How many nodes of each fused op type ``path`` holds (op types with none are left out)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    counted = collections.Counter(node.op_type for node in model.graph.node if node.op_type in FUSED_OPS)
    return dict(sorted(counted.items()))


def export_fused_graph(source: InferenceEngine, path: Path, *, samples: Sequence[Any] | None = None,
                       check: bool = True) -> FusedGraph:
    """Export ``source`` (a PyTorch model) to a fused fp32 graph at ``path``. ``FusionUnavailable`` when
    no attention fuses or the graph does not answer as the model; ``ExportFailed`` when the export breaks.
    ``check=False``: the caller compares the graph with the model itself (``max_difference`` is NaN then)."""
    import tempfile

    from local_models.export import PARITY_TEXTS, parity_difference, strip_build_details

    if not source.backend.exportable:
        raise FusionUnavailable(f"{source.name} is a {source.format} model; only PyTorch models export a fused graph")
    runtime = cast("TorchRuntime", source.runtime)
    config = runtime.module.config
    heads, hidden = int(getattr(config, "num_attention_heads", 0)), int(getattr(config, "hidden_size", 0))
    if not heads or not hidden:
        raise FusionUnavailable(f"{source.name} names no attention heads or hidden size in its config")
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dynadesk-fuse-") as tmp:
        plain = Path(tmp) / "torchscript.onnx"
        _torchscript_export(source, runtime, plain)
        model = _fuse(plain, heads, hidden)
    strip_build_details(model)
    import onnx

    onnx.save(model, str(path))
    counts = fused_counts(path)
    if not counts.get("Attention"):
        path.unlink(missing_ok=True)
        raise FusionUnavailable(f"the transformer fuser matched no attention in {source.name} "
                                f"({', '.join(f'{k} {v}' for k, v in counts.items()) or 'nothing fused'})")
    if not check:
        return FusedGraph(path, counts, float("nan"))
    difference = _difference(source, path, list(samples) if samples else list(PARITY_TEXTS), parity_difference)
    if not difference <= FUSED_MAX_DIFFERENCE:  # NaN fails too
        path.unlink(missing_ok=True)
        raise FusionUnavailable(f"the fused graph of {source.name} answers differently from the model (up to "
                                f"{difference:.4f} in probability, allowed {FUSED_MAX_DIFFERENCE})")
    return FusedGraph(path, counts, difference)


def _torchscript_export(source: InferenceEngine, runtime: TorchRuntime, path: Path) -> None:
    """The legacy exporter over the model with eager attention (the pattern the fuser knows)."""
    import torch

    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if runtime.takes_token_types else [])
    outputs = list(runtime.head_type.output_names)
    try:
        with warnings.catch_warnings(), quiet(*LIBRARIES):
            warnings.simplefilter("ignore")
            module = type(runtime.module).from_pretrained(str(runtime.path), attn_implementation="eager",
                                                          local_files_only=True).eval()

            class Exported(torch.nn.Module):  # type: ignore[misc]
                def __init__(self, inner: torch.nn.Module) -> None:
                    super().__init__()
                    self.inner = inner

                def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
                    result = self.inner(**dict(zip(names, args)))
                    return tuple(getattr(result, name) for name in outputs)

            example = runtime.feeds(source.encode(["an example text for the export of this model"] * 2))
            axes = {name: {0: "batch", 1: "sequence"} for name in names}
            with torch.no_grad():
                torch.onnx.export(Exported(module), tuple(example[n] for n in names), str(path), input_names=names,
                                  output_names=outputs, dynamic_axes=axes, opset_version=FUSED_OPSET, dynamo=False,
                                  do_constant_folding=True)
    except Exception as exc:
        raise ExportFailed(f"PyTorch could not export {source.name} for the fused graph: {first_line(exc)}") from exc


def _fuse(plain: Path, heads: int, hidden: int) -> Any:
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat, FusionOptions
    from onnxruntime.transformers.optimizer import optimize_model

    options = FusionOptions("bert")
    # the 2D mask as given: exact for any padding side (the default, an end index, assumes right padding)
    options.attention_mask_format = AttentionMaskFormat.AttentionMask
    try:
        with quiet(*LIBRARIES), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            optimized = optimize_model(str(plain), model_type="bert", num_heads=heads, hidden_size=hidden,
                                       opt_level=0, optimization_options=options)
    except Exception as exc:
        raise FusionUnavailable(f"the transformer fuser failed: {first_line(exc)}") from exc
    model = optimized.model
    if not any(o.domain == "com.microsoft" for o in model.opset_import):  # the fused ops' domain
        import onnx

        model.opset_import.append(onnx.helper.make_opsetid("com.microsoft", 1))
    return model


def _difference(source: InferenceEngine, path: Path, samples: list[Any], measure: Any) -> float:
    import shutil
    import tempfile

    from local_models.engine import load_engine
    from local_models.export import _copy_companions, _write_metadata

    with tempfile.TemporaryDirectory(prefix="dynadesk-fused-check-") as tmp:
        folder = Path(tmp)
        shutil.copy2(path, folder / "model.onnx")
        _write_metadata(folder / "model.onnx", source, "none")
        _copy_companions(source, folder)
        exported = load_engine(folder, format="onnx", num_threads=1)
        try:
            if not source.runtime.head_type.has_labels:
                samples = [(q, c) for q, c in zip(samples[:10], samples[10:20])] if isinstance(samples[0], str) \
                    else samples
            return float(measure(source, exported, samples))
        finally:
            exported.close()
