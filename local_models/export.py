"""ONNX export of Hugging Face models, int8 forms checked on the task's texts, and their parity.

    report = export_onnx(model_dir, out_dir)                                   # fp32
    report = export_onnx(model_dir, out_dir, int8=True, task_texts=texts)      # int8, searched and checked
    report = export_onnx(model_dir, out_dir, int8=True, recorded=recipe)       # int8 as recorded: its bytes or answers

The result is a folder with ``model.onnx`` (dynamic batch and sequence axes; labels and the
maximum length in its metadata), the tokenizer, ``config.json`` and ``dynadesk_model.json``
(where it came from, and the check's figures, under ``export``).

fp32: a conversion check; the exported graph and the original answer ``PARITY_TEXTS`` within
``FP32_MAX_DIFFERENCE``. int8: the parity rule of ``local_models.parity`` on at least 2,000 of the
task's texts (``local_models.int8_search``), or a recipe whose graph was checked that way and is
rebuilt: the same bytes, or the same answers on the recipe's check texts (``local_models.int8_check``).
A refusal raises ``ParityCheckFailed`` and keeps nothing, unless ``force`` is given, and then the
override is recorded with the figures. A recipe marked ``fused`` quantizes the fused graph
(``local_models.fused_graph``), exported again from the PyTorch model where it is built. Every form records
its latency as built (``form_latency``, under ``export.latency``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from local_models.backends.base import METADATA_FILE, read_json_file
from local_models.backends.onnx import MODEL_FILENAME
from local_models.engine import InferenceEngine, load_engine
from local_models.errors import ExportFailed, ParityCheckFailed, UnsupportedOperation
from local_models.files import install_dir, make_staging_dir
from local_models.fused_graph import FUSED_OPSET, export_fused_graph, is_fused_graph
from local_models.heads import softmax
from local_models.int8 import Int8Recipe, build_int8
from local_models.int8_search import FUSED_FILE, RecordedInt8, TaskTexts, build_recorded, search_int8
from local_models.parity import MIN_TEXTS
from local_models.progress import Progress
from local_models.quiet import first_line, quiet
from local_models.tokenization import ModelInput, tokenizer_files

if TYPE_CHECKING:
    import onnx

    from local_models.backends.hf_torch import TorchRuntime

log = logging.getLogger(__name__)

FP32_MAX_DIFFERENCE = 1e-3  # fp32 graph vs the PyTorch model: a conversion check, not a quantization rule
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
    parity: dict[str, Any] | None = None  # int8: the parity verdict (local_models.parity), as recorded
    quantization: str = "none"  # the int8 recipe's name


def export_onnx(
    model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    int8: bool = False,
    sample_texts: Sequence[ModelInput] | None = None,
    max_difference: float = FP32_MAX_DIFFERENCE,
    task_texts: TaskTexts | None = None,
    recorded: RecordedInt8 | None = None,
    force: bool = False,
    replace: bool = True,
    graph: Path | None = None,
    fused: bool = False,
    progress: Progress | None = None,
) -> ExportReport:
    """Export the Hugging Face model in ``model_dir`` to ``out_dir``, which is created, or replaced
    when present (kept instead, without ``replace``). ``graph``: an fp32 ONNX file already exported
    from this model, to quantize instead of exporting again. ``fused`` (fp32): export the fused graph
    (``local_models.fused_graph``, the graph a fused int8 recipe quantizes; faster in fp32 too), or the
    plain one when the model has none.

    fp32: ``sample_texts`` (default ``PARITY_TEXTS``) must agree within ``max_difference``. int8:
    ``recorded`` (a recipe checked elsewhere, rebuilt and verified by its bytes or answers), else a search on
    ``task_texts``; without either, int8 is refused unless ``force``."""
    progress = progress or Progress()
    if int8 and recorded is None and task_texts is None and not force:
        raise _no_task_texts()  # before the export's minutes, not after
    started = time.perf_counter()
    source = load_engine(model_dir, num_threads=None)
    if not source.backend.exportable:
        raise UnsupportedOperation(f"{model_dir} is a {source.format} model; only Hugging Face folders export to ONNX.")
    out_dir = Path(out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging_dir(out_dir)
    try:
        fp32 = staging / ("fp32.onnx" if int8 else MODEL_FILENAME)
        fused_ops: dict[str, int] | None = None
        if graph is None:
            progress.say("Exporting to ONNX ...")
            fused_ops = _export_fp32_graph(source, fp32, fused=fused and not int8)
        else:
            shutil.copy2(graph, fp32)
        if int8:
            progress.report(1, 4)
            parity, recipe_json, quantization = _int8_graph(source, fp32, staging, task_texts, recorded, force,
                                                            progress)
            fp32.unlink()
            (staging / FUSED_FILE).unlink(missing_ok=True)
            difference, texts_compared = float(parity.get("max_change", float("nan"))), int(parity.get("texts", 0))
            forced = bool(parity.get("forced"))
            check: dict[str, Any] = {"parity": parity, "int8_recipe": recipe_json}
        _write_metadata(staging / MODEL_FILENAME, source, quantization if int8 else "none")
        _copy_companions(source, staging)
        if not int8:
            progress.report(3, 4)  # the graph is built; the comparison is the last quarter
            progress.say("Comparing the exported model with the original ...")
            texts = list(sample_texts) if sample_texts else _default_samples(source)
            exported = load_engine(staging, format="onnx", num_threads=None)
            try:
                difference = parity_difference(source, exported, texts)
            finally:
                exported.close()
            texts_compared, forced = len(texts), force and difference > max_difference
            if difference > max_difference and not force:
                raise ParityCheckFailed(
                    f"The exported model differs from the original by up to {difference:.4f} in probability on "
                    f"{len(texts)} sample texts (allowed: {max_difference}). Nothing was kept; export again with "
                    "force to keep it anyway.", difference,
                )
            check = {"conversion_check": {"max_probability_difference": difference, "texts": len(texts),
                                          "allowed": max_difference, "forced": forced}}
            if fused_ops:
                check |= {"opset": FUSED_OPSET, "fused_ops": fused_ops}
        check["latency"] = form_latency(staging, _default_samples(source))
        description = _description(source, quantization if int8 else "none", check)
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
    return ExportReport(out_dir, sha, int8, difference, texts_compared, forced, time.perf_counter() - started,
                        source.sha256, parity=check.get("parity"), quantization=quantization if int8 else "none")


def _no_task_texts() -> ParityCheckFailed:
    return ParityCheckFailed(
        f"int8 refused: no task texts to check it on. The int8 form must keep the float model's labels on at "
        f"least {MIN_TEXTS:,} of the task's own texts; give them (e.g. `--samples FILE`, one text a line), or "
        "force to keep an unchecked int8 form (recorded as such).", float("nan"))


def _int8_graph(source: InferenceEngine, fp32: Path, staging: Path, task_texts: TaskTexts | None,
                recorded: RecordedInt8 | None, force: bool,
                progress: Progress) -> tuple[dict[str, Any], dict[str, Any] | None, str]:
    """Build ``staging/model.onnx`` in int8 and return (the parity record, the recipe, its name).
    ``ParityCheckFailed`` when no int8 form passes, unless ``force``."""
    target = staging / MODEL_FILENAME
    if recorded is not None:
        progress.say("Building the int8 form from its recorded recipe ...")
        if recorded.recipe is not None and recorded.recipe.fused:  # the recipe quantizes the fused graph
            if is_fused_graph(fp32):  # the fp32 form given is that graph: quantized as it was exported
                strip_dynadesk_metadata(fp32)
            else:
                progress.say("Exporting the fused graph the recipe quantizes ...")
                fp32 = export_fused_graph(source, staging / FUSED_FILE).path
        try:
            verified = build_recorded(fp32, recorded, target, engine=source)
            assert recorded.recipe is not None and recorded.parity is not None  # build_recorded checked usable
            # the check travels with the form (its provenance), so a desk that fetches it can ask it again
            answers = {"answers": recorded.check} if recorded.check is not None else {}
            return ({**recorded.parity, "verified_by": verified.pop("verified_by"), "verification": verified,
                     **answers}, recorded.recipe.to_json(), recorded.recipe.name)
        except ParityCheckFailed as exc:
            if not force or recorded.recipe is None:
                raise ParityCheckFailed(f"int8 refused: {exc}", float("nan"), recorded.parity) from exc
            build_int8(fp32, target, recorded.recipe)
            return ({**(recorded.parity or {}), "passed": False, "forced": True, "problems": [str(exc)]},
                    recorded.recipe.to_json(), recorded.recipe.name)
    if task_texts is None:
        if not force:
            raise _no_task_texts()
        recipe = Int8Recipe("dynamic")
        build_int8(fp32, target, recipe)
        return ({"passed": False, "forced": True, "texts": 0, "problems": ["no task texts were given to check it on"]},
                recipe.to_json(), recipe.name)
    search = search_int8(source, fp32, task_texts, staging / ".int8-search", progress=progress)
    fused = staging / ".int8-search" / FUSED_FILE  # what fused recipes quantize
    try:
        if search.passed and search.recipe is not None:
            build_int8(fused if search.recipe.fused else fp32, target, search.recipe)
            assert search.verdict is not None  # passed
            answers = {"answers": search.check} if search.check is not None else {}
            return ({**search.verdict.to_json(), "attempts": list(search.attempts),
                     **({"latency": search.latency} if search.latency else {}), **answers}, search.recipe.to_json(),
                    search.recipe.name)
        if not force:
            verdict = search.verdict.to_json() if search.verdict is not None else None
            raise ParityCheckFailed(f"{search.reason}. Nothing was kept; give more task texts, or force to keep the "
                                    "last int8 form measured anyway (recorded as forced, with its figures).",
                                    float(verdict["max_change"]) if verdict else float("nan"), verdict)
        # the recipe the recorded figures belong to; plain dynamic int8 when none was measured on the parity texts
        recipe = search.measured if search.measured is not None else Int8Recipe("dynamic")
        build_int8(fused if recipe.fused else fp32, target, recipe)
    finally:
        shutil.rmtree(staging / ".int8-search", ignore_errors=True)
    verdict = search.verdict.to_json(forced=force) if search.verdict is not None else None
    record = verdict or {"passed": False, "texts": len(task_texts.parity), "problems": [search.reason]}
    return ({**record, "forced": True, "attempts": list(search.attempts)}, recipe.to_json(), recipe.name)


def _export_fp32_graph(source: InferenceEngine, path: Path, *, fused: bool) -> dict[str, int] | None:
    """The fp32 graph at ``path``: the fused one when asked and the model has one (its fused op counts are
    returned), else the plain export (None). The caller compares it with the model."""
    if fused:
        try:
            return export_fused_graph(source, path, check=False).counts
        except ExportFailed as exc:  # FusionUnavailable too: the plain graph serves
            log.warning("no fused graph for %s, the plain export serves: %s", source.name, exc)
            path.unlink(missing_ok=True)
    _export_graph(source, path)
    return None


def strip_dynadesk_metadata(path: Path) -> None:
    """Remove the metadata ``_write_metadata`` added, giving back the graph's bytes as exported (what a
    recipe's ``fp32_sha256`` names, and what its int8 graph is quantized from)."""
    import onnx

    model = onnx.load(str(path))
    del model.metadata_props[:]
    onnx.save(model, str(path))


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
        with warnings.catch_warnings(), quiet("torch.onnx", "torch.export", "torch._dynamo", "onnxscript"):
            warnings.simplefilter("ignore")
            program = torch.onnx.export(
                Exported(runtime.module).eval(), args, None, input_names=names, output_names=outputs,
                dynamic_shapes=dynamic, dynamo=True, optimize=True,
                opset_version=OPSET, verbose=False,
            )
            assert program is not None  # dynamo=True always returns a program
            program.save(str(path), external_data=False)
    except Exception as exc:
        raise ExportFailed(f"PyTorch could not export {source.name} to ONNX: {first_line(exc)}") from exc


LATENCY_ROUNDS = 3


def form_latency(folder: Path, texts: Sequence[ModelInput]) -> dict[str, Any]:
    """How fast an exported form answers on this machine as it is built: milliseconds per call of
    ``predict_one`` over ``texts`` (``LATENCY_ROUNDS`` rounds, the first call of each text a warm-up),
    on the desk's thread count. Stored with the form; ``dynadesk models list`` shows it."""
    from local_models.engine import default_num_threads

    engine = load_engine(folder, format="onnx", num_threads=default_num_threads())
    try:
        timings, tokens = [], []
        for round_number in range(LATENCY_ROUNDS + 1):
            for text in texts:
                started = time.perf_counter()
                engine.predict_one(text)
                if round_number:
                    timings.append((time.perf_counter() - started) * 1000)
        tokens = [int(n) for n in engine.encode(list(texts)).lengths]
    finally:
        engine.close()
    return {"median_ms": round(float(np.median(timings)), 3), "p95_ms": round(float(np.quantile(timings, 0.95)), 3),
            "calls": len(timings), "median_tokens": float(np.median(tokens)), "threads": default_num_threads(),
            "where": "measured when the form was built, on the export's sample texts, one text per call"}


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


def _write_metadata(path: Path, source: InferenceEngine, quantization: str) -> None:
    import onnx

    model = onnx.load(str(path))
    strip_build_details(model)
    entries = {
        "id2label": json.dumps({str(i): name for i, name in enumerate(source.runtime.model_labels)}),
        "max_length": str(source.max_length),
        "architecture": source.runtime.architecture,
        "parent_sha256": source.sha256,
        "quantization": quantization,
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


def _description(source: InferenceEngine, quantization: str, check: dict[str, Any]) -> dict[str, Any]:
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
            "quantization": f"int8: {quantization}" if quantization != "none" else "none",
            "opset": OPSET,
            **check,
        },
    }


def read_export_description(folder: Path) -> dict[str, Any]:
    path = Path(folder) / METADATA_FILE
    return read_json_file(path, "model description") if path.is_file() else {}

