"""Target models for the application: model files become ModelRecords, records become engines,
and engine predictions become the ModelOutputs stored with examples.

Qt-free. Loading and first-use preparation take seconds, so the GUI calls these on a worker.

    record = register_model(desk, path, task_code="hate_speech")
    engine = load_engine_for(record)                  # or model_spec(record) for the Qt service
    output = to_model_output(engine.predict_one(text), record)
    record = ensure_default_model(desk)              # the bundled round-1 hate-speech model
    record = adopt_default_model(desk)               # ... and made round 1's target on first start
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from app.core import paths
from app.core.domain import ModelFormat, ModelOutput, Span
from app.core.errors import DynadeskError
from app.core.storage.models import ModelRecord
from app.core.tasks.definition import InputKind, TaskDefinition
from local_models.engine import Ensemble, InferenceEngine, ModelSpec, Prediction, load_engine, model_sha256
from local_models.errors import ModelError
from local_models.progress import Progress
from local_models.tokenization import ModelInput
from local_models.train import assemble, is_trained_part, part_fingerprint

log = logging.getLogger(__name__)

DEFAULT_TASK = "hate_speech"
DEFAULT_MODEL_NAME = "Hate speech R1 (MiniLM-L6 + trained top layer)"


class TargetModelError(DynadeskError):
    """A model problem, in the words of the model layer (which are written for the user)."""


def default_trained_part() -> Path:
    import resources

    return resources.ROOT / "models" / "hate_speech_r1"


def register_model(
    desk,
    path: str | os.PathLike,
    *,
    name: str | None = None,
    task_code: str | None = None,
    format: str | None = None,
    tokenizer_dir: str | os.PathLike | None = None,
    label_map: Mapping[str, str] | None = None,
    provenance: Mapping[str, Any] | None = None,
) -> ModelRecord:
    """Check and load a model, then register it with the sha256 of its files.

    The model's labels are matched to the task's (``label_map`` maps them by hand when their
    names differ). A folder written by ``dynadesk train`` (a trained part) is first assembled
    with its base model into the data folder's model cache. Registering the same files again
    returns the existing record.
    """
    path = Path(path).expanduser().resolve()
    int8_check = None
    if is_trained_part(path):
        int8_check = trained_part_int8_check(path)
        path = assemble_trained_part(desk, path)
    task = desk.tasks.task(task_code) if task_code else None
    definition = desk.tasks.definition(task.id) if task else None
    task_labels = definition.labels if definition and definition.labels else None
    try:
        engine = load_engine(path, format=format, tokenizer_dir=tokenizer_dir, task_labels=task_labels,
                             label_map=label_map, num_threads=1)
    except ModelError as exc:
        raise TargetModelError(str(exc)) from exc
    try:
        if definition is not None and definition.is_extractive != (engine.kind == "extractive-qa"):
            raise TargetModelError(
                f"{path.name} is a {engine.kind} model; the task '{definition.code}' needs "
                f"{'an extractive-qa' if definition.is_extractive else 'a classification'} model."
            )
        runtime = engine.runtime
        details: dict[str, Any] = {key: runtime.metadata[key]
                                   for key in ("name", "base", "training", "metrics", "export")
                                   if key in runtime.metadata}
        record_provenance: dict[str, Any] = {
            **details,
            "runtime": {
                "kind": engine.kind, "architecture": runtime.architecture, "max_length": engine.max_length,
                "model_labels": list(runtime.model_labels),
                "tokenizer_dir": str(Path(tokenizer_dir).resolve()) if tokenizer_dir else None,
            },
            **({"int8_check": int8_check} if int8_check else {}),
            **(provenance or {}),
        }
        mapping = {str(i): label for i, label in engine.head.label_map.items()}
        return desk.models.register(
            name or runtime.metadata.get("name") or path.name, ModelFormat(engine.format), engine.sha256,
            path=str(path), label_map=mapping, task_id=task.id if task else None, provenance=record_provenance,
        )
    finally:
        engine.close()


def trained_part_int8_check(part_dir: Path) -> dict[str, Any]:
    """What the int8 recipe written by ``dynadesk train`` says (the recipe's name, its parity figures,
    or why the model has no int8 form), for the record's provenance."""
    from local_models.int8_search import read_recipe_file

    try:
        recorded = read_recipe_file(part_dir)
    except ValueError as exc:
        return {"reason": str(exc)}
    return {"recipe": recorded.document.get("recipe_name"), "parity": recorded.parity, "reason": recorded.reason,
            "int8_sha256": recorded.int8_sha256}


def assemble_trained_part(desk, part_dir: Path) -> Path:
    """The full model folder for a trained part, built once in the model cache."""
    target = paths.models_cache_dir(desk.root) / f"trained-{part_fingerprint(part_dir)}"
    if (target / "model.safetensors").is_file():
        return target
    try:
        return assemble(part_dir, target, replace=False)
    except ModelError as exc:
        raise TargetModelError(str(exc)) from exc


def model_spec(record: ModelRecord, *, device: str = "cpu", num_threads: int | None = None) -> ModelSpec:
    """What the inference service needs to load ``record`` (plain data; safe to send to a thread)."""
    if record.format == ModelFormat.IMPORTED.value:
        raise TargetModelError(f"{record.name} is known only by predictions recorded elsewhere; it cannot run here.")
    runtime = (record.provenance or {}).get("runtime", {})
    tokenizer_dir = runtime.get("tokenizer_dir")
    return ModelSpec(
        path=Path(record.path), format=record.format, device=device,
        tokenizer_dir=Path(tokenizer_dir) if tokenizer_dir else None,
        label_map=dict(record.label_map) if record.label_map else None,
        expected_sha256=record.sha256, num_threads=num_threads, name=record.name,
    )


def load_engine_for(record: ModelRecord, *, device: str = "cpu", num_threads: int | None = None) -> InferenceEngine:
    """An engine for a registered model; refuses files that changed since registration."""
    try:
        return model_spec(record, device=device, num_threads=num_threads).load()
    except ModelError as exc:
        raise TargetModelError(str(exc)) from exc


def load_ensemble(records: Sequence[ModelRecord], *, num_threads: int | None = None) -> Ensemble:
    """The records' engines answering as one ensemble; those already loaded are closed when one fails."""
    engines: list[InferenceEngine] = []
    try:
        for record in records:
            engines.append(load_engine_for(record, num_threads=num_threads))
    except Exception:
        for engine in engines:
            engine.close()
        raise
    return Ensemble(engines)


def to_model_output(prediction: Prediction, record: ModelRecord) -> ModelOutput:
    """The stored form of one prediction, naming the record (and the checksum) that made it."""
    if prediction.model_sha != record.sha256:
        raise TargetModelError(
            f"This prediction was made by a model with checksum {prediction.model_sha[:12]}..., "
            f"not by {record.name} ({record.sha256[:12]}...)."
        )
    answer = None
    if prediction.answer is not None:
        answer = Span(prediction.answer.start, prediction.answer.end, prediction.answer.text)
    return ModelOutput(
        model_id=record.id, model_sha256=record.sha256, label=prediction.label or "",
        probabilities=dict(prediction.probabilities), latency_ms=prediction.latency_ms, answer=answer,
    )


def model_input(definition: TaskDefinition, inputs: Mapping[str, str]) -> ModelInput:
    """What the target model reads for an example's inputs.

    Classification: the text, or (context, written text) as in (premise, hypothesis).
    Extractive QA: (question, context), the answer being a span of the context.
    """
    written = [inputs.get(f.name, "") for f in definition.inputs if f.kind == InputKind.WRITTEN]
    if definition.is_extractive:
        assert definition.answer is not None  # is_extractive
        return (" ".join(written), inputs.get(definition.answer.span_of, ""))
    contexts = [inputs.get(f.name, "") for f in definition.inputs if f.kind == InputKind.CONTEXT]
    text = " ".join(written)
    return (" ".join(contexts), text) if contexts else text


def export_twin_key(record: ModelRecord) -> tuple | None:
    """What makes two records of the bundled model's export the same model whatever their bytes:
    older exports held the exporting desk's source paths, so each desk computed its own sha256 for
    identical weights. Same name, format, parent weights, quantization and opset: the same model.
    None for other models (their checksum alone names them)."""
    provenance = record.provenance or {}
    export = provenance.get("export") or {}
    if not provenance.get("default_model") or not export.get("parent_sha256"):
        return None
    return (record.name, record.format, export["parent_sha256"], export.get("quantization"), export.get("opset"))


def find_twin(desk, record_like: ModelRecord) -> ModelRecord | None:
    """A registered record of the same model (``export_twin_key``) under another checksum."""
    key = export_twin_key(record_like)
    if key is None:
        return None
    return next((r for r in desk.models.all() if r.sha256 != record_like.sha256 and export_twin_key(r) == key), None)


def find_by_sha(desk, sha256: str) -> ModelRecord | None:
    return next((r for r in desk.models.all() if r.sha256 == sha256), None)


def prepare_default_files(desk, *, progress: Progress | None = None):
    """The slow, database-free part of ``ensure_default_model``: assembly and ONNX export, once."""
    from local_models.default_model import prepare_default_model

    try:
        return prepare_default_model(default_trained_part(), paths.models_cache_dir(desk.root), progress=progress)
    except ModelError as exc:
        raise TargetModelError(f"The default model could not be prepared: {exc}") from exc


def ensure_default_model(desk, *, variant: str = "onnx", progress: Progress | None = None) -> ModelRecord:
    """The bundled round-1 hate-speech model, assembled and registered at first use.

    ``variant`` "onnx" (the default; int8 when it passes the parity check) answers fastest and
    explains itself by word ablation; "torch" also gives gradient attributions. Both are
    registered on first use; the ONNX record names the PyTorch one as its parent. The first
    call takes tens of seconds (assembly and ONNX export); later calls take a fraction of one.
    """
    if variant not in ("onnx", "torch"):
        raise ValueError("variant is 'onnx' or 'torch'")
    from local_models.default_model import prepare_default_model

    cache = paths.models_cache_dir(desk.root)
    try:
        prepared = prepare_default_model(default_trained_part(), cache, with_onnx=variant == "onnx",
                                         progress=progress)
        return register_default_forms(desk, prepared)
    except ModelError as exc:
        raise TargetModelError(f"The default model could not be prepared: {exc}") from exc


def register_default_forms(desk, prepared) -> ModelRecord:
    """Register the prepared default model's forms (once; later calls find the records): its
    PyTorch form, and its ONNX form when ``prepared`` has one, which is returned then (naming the
    PyTorch record as its parent)."""
    try:
        torch_record = find_by_sha(desk, model_sha256(prepared.torch_dir, format="hf-torch"))
        if torch_record is None:
            torch_record = register_model(desk, prepared.torch_dir, name=f"{DEFAULT_MODEL_NAME}, PyTorch",
                                          task_code=DEFAULT_TASK, format="hf-torch",
                                          provenance={"default_model": True})
        elif not torch_record.path or not Path(torch_record.path).exists():
            # known from the team's server without its files (a pull brings the target's PyTorch form's record)
            torch_record = desk.models.set_path(torch_record.id, prepared.torch_dir)
        if prepared.onnx_dir is None:
            return torch_record
        flavour = "ONNX int8" if prepared.onnx_int8 else "ONNX fp32"
        onnx_sha = model_sha256(prepared.onnx_dir, format="onnx")
        onnx_record = find_by_sha(desk, onnx_sha) or _usable_twin(desk, ModelRecord(
            name=f"{DEFAULT_MODEL_NAME}, {flavour}", format=ModelFormat.ONNX.value, sha256=onnx_sha,
            provenance={"default_model": True, **_export_details(prepared.onnx_dir)}))
        if onnx_record is None:
            onnx_record = register_model(
                desk, prepared.onnx_dir, name=f"{DEFAULT_MODEL_NAME}, {flavour}", task_code=DEFAULT_TASK,
                format="onnx", provenance={"default_model": True, "parent_model": {
                    "id": str(torch_record.id), "sha256": torch_record.sha256}, "notes": list(prepared.notes)},
            )
        elif not onnx_record.path or not Path(onnx_record.path).exists():
            # known from the team's server without its files (a pull): these are they, prepared here
            onnx_record = desk.models.set_path(onnx_record.id, prepared.onnx_dir)
        return onnx_record
    except ModelError as exc:
        raise TargetModelError(f"The default model could not be registered: {exc}") from exc


def _export_details(folder: Path) -> dict:
    from local_models.export import read_export_description

    export = read_export_description(folder).get("export")
    return {"export": export} if export else {}


def _usable_twin(desk, record_like: ModelRecord) -> ModelRecord | None:
    """The same model under the checksum another desk gave it (the server's, once synced), when its
    files are here: one model is listed once, and predictions name the identity the team shares."""
    twin = find_twin(desk, record_like)
    return twin if twin is not None and twin.path and Path(twin.path).exists() else None


def needs_default_model(desk) -> bool:
    """True on a fresh desk, whose hate-speech round 1 still waits for its target model."""
    return DEFAULT_TASK in desk.catalog.tasks and desk.rounds.untouched_first_round(DEFAULT_TASK) is not None


def adopt_default_model(desk, *, variant: str = "onnx", progress: Progress | None = None) -> ModelRecord | None:
    """First start: the default model becomes the target of the hate-speech task's round 1.

    Returns the record when round 1 took it; None when the round was already set up (by a lead,
    or an earlier start), in which case nothing is prepared. ``variant`` "torch": the PyTorch
    form, which answers within seconds (see ``default_model_forms`` for the switch to ONNX).
    """
    if not needs_default_model(desk):
        return None
    record = ensure_default_model(desk, variant=variant, progress=progress)
    return record if desk.rounds.adopt_first_models(DEFAULT_TASK, [record.id]) else None
