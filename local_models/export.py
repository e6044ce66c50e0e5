"""ONNX export of Hugging Face models, optional dynamic int8 quantization, and the parity check.

    report = export_onnx(model_dir, out_dir, int8=True)

The result is a folder with ``model.onnx`` (dynamic batch and sequence axes; labels and the
maximum length in its metadata), the tokenizer, ``config.json`` and ``dynadesk_model.json``
(where it came from, and the parity figures). The exported model and the original answer the
same sample texts; when their probabilities differ by more than ``max_difference`` (0.02) the
export is refused, unless ``force`` is given, and then the difference is recorded.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence, cast

import numpy as np

from local_models.backends.base import METADATA_FILE, read_json_file
from local_models.backends.onnx import MODEL_FILENAME
from local_models.engine import InferenceEngine, load_engine
from local_models.errors import ExportFailed, ParityCheckFailed, UnsupportedOperation
from local_models.files import install_dir, make_staging_dir
from local_models.heads import softmax
from local_models.progress import Progress
from local_models.tokenization import ModelInput, tokenizer_files

if TYPE_CHECKING:
    import onnx

    from local_models.backends.hf_torch import TorchRuntime

log = logging.getLogger(__name__)

MAX_PARITY_DIFFERENCE = 0.02
OPSET = 18
# Found in the ONNX files of exports made before ``strip_build_details``: the exporter's metadata keys.
STALE_BUILD_MARKER = b"pkg.torch."

# Varied on purpose: short and long, punctuation, emoji, zero-width characters, right-to-left
# scripts, leetspeak, and statements of the kinds a hate-speech model must tell apart.
PARITY_TEXTS: tuple[str, ...] = (
    "Have a lovely weekend, everyone!",
    "I can't stand people like them; they should all go back where they came from.",
    "Women are just as capable engineers as men.",
    "ugh mondays 🙄🙄 why is it always raining",
    "That referee was a complete idiot today, what a joke of a match.",
    "Immigrants built this city and they keep it running.",
    "ur all s0 st00pid lmao",
    "Je ne sais pas ce que tu veux dire.",
    "שלום לכולם, מה שלומכם היום?",
    "مرحبا بكم في المدينة الجميلة",
    "I ❤️ my family 👨‍👩‍👧 so much",
    "zero\u200bwidth spaces and joi\u200dners hide inside words",
    "ok",
    "",
    "!!!",
    "The committee will meet on Thursday to review the budget proposal and the new hiring plan for next year.",
    "They are animals and should be treated like animals.",
    "My neighbour is gay and he is the kindest person on the street.",
    "Go back to your own country.",
    "This is the worst pizza I have ever eaten, absolutely disgusting.",
    ("The long message goes on. " * 40).strip(),
    "@someone lol thats hilarious #funny",
)


@dataclass(frozen=True)
class ExportReport:
    path: Path  # the exported folder
    sha256: str
    int8: bool
    max_difference: float
    texts_compared: int
    forced: bool
    seconds: float
    parent_sha256: str


def export_onnx(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    int8: bool = False,
    sample_texts: Sequence[ModelInput] | None = None,
    max_difference: float = MAX_PARITY_DIFFERENCE,
    force: bool = False,
    replace: bool = True,
    graph: Path | None = None,
    progress: Progress | None = None,
) -> ExportReport:
    """Export the Hugging Face model in ``model_dir`` to ``out_dir``, which is created, or replaced
    when present (kept instead, without ``replace``). ``graph``: an fp32 ONNX file already exported
    from this model, to quantize instead of exporting again."""
    progress = progress or Progress()
    started = time.perf_counter()
    source = load_engine(model_dir, num_threads=None)
    if not source.backend.exportable:
        raise UnsupportedOperation(f"{model_dir} is a {source.format} model; only Hugging Face folders export to ONNX.")
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging_dir(out_dir)
    try:
        fp32 = staging / ("fp32.onnx" if int8 else MODEL_FILENAME)
        if graph is None:
            progress.say("Exporting to ONNX ...")
            _export_graph(source, fp32)
        else:
            shutil.copy2(graph, fp32)
        if int8:
            progress.say("Quantizing weights to int8 ...")
            quantize_int8(fp32, staging / MODEL_FILENAME)
            fp32.unlink()
        _write_metadata(staging / MODEL_FILENAME, source, int8)
        _copy_companions(source, staging)
        progress.report(3, 4)  # the graph is built; the comparison is the last quarter
        progress.say("Comparing the exported model with the original ...")
        texts = list(sample_texts) if sample_texts else _default_samples(source)
        exported = load_engine(staging, format="onnx", num_threads=None)
        try:
            difference = parity_difference(source, exported, texts)
        finally:
            exported.close()
        if difference > max_difference and not force:
            raise ParityCheckFailed(
                f"The exported model differs from the original by up to {difference:.4f} in probability on "
                f"{len(texts)} sample texts (allowed: {max_difference}). Nothing was kept; export again with "
                "force to keep it anyway.", difference,
            )
        description = _description(source, int8, difference, len(texts), force and difference > max_difference)
        (staging / METADATA_FILE).write_text(json.dumps(description, indent=2, ensure_ascii=False) + "\n",
                                             encoding="utf-8")
        install_dir(staging, out_dir, replace=replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        source.close()
    final = load_engine(out_dir, format="onnx", num_threads=1)
    sha = final.sha256
    final.close()
    return ExportReport(out_dir, sha, int8, difference, len(texts), force and difference > max_difference,
                        time.perf_counter() - started, source.sha256)


def _export_graph(source: InferenceEngine, path: Path) -> None:
    import torch

    runtime = cast("TorchRuntime", source.runtime)  # exports start from a PyTorch model
    names = ["input_ids", "attention_mask"] + (["token_type_ids"] if runtime.takes_token_types else [])
    outputs = list(runtime.head_type.output_names)

    class Exported(torch.nn.Module):
        def __init__(self, module: torch.nn.Module) -> None:
            super().__init__()
            self.module = module

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                    token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
            given = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
            result = self.module(**{name: given[name] for name in names})
            return tuple(getattr(result, name) for name in outputs)

    # a batch of 2 and a dozen tokens: sizes 0 and 1 would be specialised away by torch.export
    example = source.encode(["an example text for the export of this model"] * 2)
    feeds = runtime.feeds(example)
    args = tuple(feeds[name] for name in names)
    batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
    dynamic = {name: ({0: batch, 1: sequence} if name in names else None)
               for name in ("input_ids", "attention_mask", "token_type_ids")}
    try:
        with warnings.catch_warnings(), _quiet("torch.onnx", "torch.export", "torch._dynamo", "onnxscript"):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                Exported(runtime.module).eval(), args, None, input_names=names, output_names=outputs,
                dynamic_shapes=dynamic, dynamo=True, optimize=True,
                opset_version=OPSET, verbose=False,
            )
            assert program is not None  # dynamo=True always returns a program
            program.save(str(path), external_data=False)
    except Exception as exc:
        raise ExportFailed(f"PyTorch could not export {source.name} to ONNX: {_first_line(exc)}") from exc


def quantize_int8(fp32_path: Path, int8_path: Path) -> None:
    """Dynamic int8 quantization: MatMul/Gemm weights per output channel, activations per tensor
    at run time. Embedding tables (Gather) stay float: quantizing them costs accuracy and buys
    no speed."""
    import onnx

    try:
        from onnxruntime.quantization import QuantType, quantize_dynamic

        model = onnx.load(str(fp32_path))
        # the exporter's intermediate shape annotations trip the quantizer's own shape inference;
        # they are optional, and onnxruntime infers shapes again at load
        del model.graph.value_info[:]
        with _quiet("root", level=logging.ERROR):
            quantize_dynamic(model, str(int8_path), weight_type=QuantType.QInt8, per_channel=True,
                             op_types_to_quantize=["MatMul", "Gemm"],
                             extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT})
        onnx.checker.check_model(str(int8_path))
    except Exception as exc:
        raise ExportFailed(f"int8 quantization failed: {_first_line(exc)}") from exc


def parity_difference(original: InferenceEngine, exported: InferenceEngine, texts: Sequence[ModelInput]) -> float:
    """Largest absolute difference in any output probability, over ``texts`` as one batch and
    one at a time (both paths, since padding and batch size must not change answers)."""
    worst = 0.0
    for chunk in [list(texts)] + [[t] for t in texts[:8]]:
        a, b = original.encode(chunk), exported.encode(chunk)
        out_a, out_b = original.forward(a), exported.forward(b)
        for name in original.runtime.head_type.output_names:
            pa, pb = softmax(out_a[name].astype(np.float64)), softmax(out_b[name].astype(np.float64))
            if pa.shape != pb.shape:
                raise ExportFailed(f"The exported model's {name} has shape {pb.shape}, not {pa.shape}.")
            mask = a.attention_mask.astype(bool) if pa.ndim == 2 and name != "logits" else slice(None)
            worst = max(worst, float(np.abs(pa - pb)[mask].max()))
    return worst


def _default_samples(engine: InferenceEngine) -> list[ModelInput]:
    if engine.runtime.head_type.has_labels:
        return list(PARITY_TEXTS)
    return [(question, context) for question, context in zip(PARITY_TEXTS[:10], PARITY_TEXTS[10:20])]


def _write_metadata(path: Path, source: InferenceEngine, int8: bool) -> None:
    import onnx

    model = onnx.load(str(path))
    strip_build_details(model)
    entries = {
        "id2label": json.dumps({str(i): name for i, name in enumerate(source.runtime.model_labels)}),
        "max_length": str(source.max_length),
        "architecture": source.runtime.architecture,
        "parent_sha256": source.sha256,
        "quantization": "dynamic-int8" if int8 else "none",
        "exported_by": "dynadesk",
    }
    for key, value in entries.items():
        model.metadata_props.add(key=key, value=value)
    onnx.save(model, str(path))
    onnx.checker.check_model(str(path))


def strip_build_details(model: onnx.ModelProto) -> None:
    """Remove what the exporter notes about the machine that built the graph (stack traces with
    absolute source paths, FX node dumps, doc strings), everywhere in the model, so that the same
    weights give the same bytes, and so the same sha256, on every desk whatever its install path.
    Running it twice changes nothing; nothing it removes affects the model's answers."""

    def graph(g: onnx.GraphProto) -> None:
        g.doc_string = ""
        del g.metadata_props[:]
        for info in (*g.input, *g.output, *g.value_info):
            info.doc_string = ""
            del info.metadata_props[:]
        for tensor in (*g.initializer, *(s.values for s in g.sparse_initializer)):
            tensor.doc_string = ""
            del tensor.metadata_props[:]
        nodes(g.node)

    def nodes(items: Iterable[onnx.NodeProto]) -> None:
        for node in items:
            node.doc_string = ""
            del node.metadata_props[:]
            for attribute in node.attribute:
                attribute.doc_string = ""
                if attribute.HasField("g"):
                    graph(attribute.g)
                for sub in attribute.graphs:
                    graph(sub)

    model.doc_string = ""
    del model.metadata_props[:]
    graph(model.graph)
    for function in model.functions:
        function.doc_string = ""
        del function.metadata_props[:]
        nodes(function.node)


def has_stale_build_details(path: Path) -> bool:
    """Whether an ONNX file still holds the exporter's notes (``STALE_BUILD_MARKER``): a quick look
    at the bytes, so that clean files are never parsed."""
    with open(path, "rb") as handle:
        return STALE_BUILD_MARKER in handle.read()


def canonicalize_onnx_file(path: Path) -> bool:
    """Rewrite an ONNX file exported before build details were stripped, keeping Dynadesk's own
    metadata (labels, lengths, parent). Returns True when the file changed. Files with external
    weights are left alone (Dynadesk's exports keep their weights inside)."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    if any(tensor.external_data for tensor in model.graph.initializer):
        return False
    ours = [(p.key, p.value) for p in model.metadata_props]
    before = model.SerializeToString()
    strip_build_details(model)
    for key, value in ours:
        model.metadata_props.add(key=key, value=value)
    if model.SerializeToString() == before:
        return False
    staging = path.with_name(f".{path.name}.canonical")
    onnx.save(model, str(staging))
    os.replace(staging, path)
    return True


def _copy_companions(source: InferenceEngine, staging: Path) -> None:
    """Tokenizer and config beside the ONNX file, so the folder is a complete model."""
    folder = source.runtime.path
    for file in tokenizer_files(folder):
        shutil.copy2(file, staging / file.name)
    shutil.copy2(folder / "config.json", staging / "config.json")


def _description(source: InferenceEngine, int8: bool, difference: float, texts: int,
                 forced: bool) -> dict[str, Any]:
    parent = source.runtime.metadata
    described: dict[str, Any] = {key: parent[key]
                                 for key in ("name", "id2label", "max_length", "base", "training", "metrics")
                                 if key in parent}
    return {
        **described,
        "format": "onnx",
        "export": {
            "parent_sha256": source.sha256,
            "parent_architecture": source.runtime.architecture,
            "quantization": ("dynamic int8 (MatMul/Gemm weights per channel, activations per tensor)"
                             if int8 else "none"),
            "opset": OPSET,
            "parity": {"max_probability_difference": difference, "texts": texts,
                       "allowed": MAX_PARITY_DIFFERENCE, "forced": forced},
        },
    }


@contextlib.contextmanager
def _quiet(*names: str, level: int = logging.ERROR) -> Iterator[None]:
    loggers = [logging.getLogger(None if n == "root" else n) for n in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(level)
    try:
        yield
    finally:
        for lg, old in zip(loggers, before):
            lg.setLevel(old)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:300]


def read_export_description(folder: Path) -> dict[str, Any]:
    path = Path(folder) / METADATA_FILE
    return read_json_file(path, "model description") if path.is_file() else {}

