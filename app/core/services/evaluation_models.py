"""Which models an evaluation runs: resolving model specs to records, their labels and families, loading their predictors."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.core.errors import DynadeskError
from app.core.storage.models import ModelRecord


class EvaluationError(DynadeskError):
    pass



@dataclass
class ModelChoice:
    """One model under test: a registered model, or several answering as an ensemble."""

    label: str  # as the user named it: "default", "round:2", "a+b"
    records: list[ModelRecord]

    @property
    def name(self) -> str:
        return " + ".join(r.name for r in self.records)

    def to_json(self) -> dict:
        return {"label": self.label, "name": self.name, "members": [
            {"id": str(r.id), "name": r.name, "format": r.format, "sha256": r.sha256, "path": r.path}
            for r in self.records]}



def resolve_models(desk, specs: Sequence[str], task_code: str | None = None) -> list[ModelChoice]:
    """``default`` (the bundled model), ``round:N`` (that round's target models), a model's name,
    id or checksum prefix; ``a+b`` joins models into an ensemble."""
    from app.core.domain import ModelFormat
    from app.core.services import target_models

    if not specs:
        raise EvaluationError("Name at least one model (--models default, round:1, a model's name, or a+b).")
    records = desk.models.all()
    choices = []
    for spec in specs:
        members = []
        for part in [p.strip() for p in spec.split("+")]:
            if not part:
                raise EvaluationError(f"'{spec}' has an empty part; join models with +, as in a+b.")
            if part == "default":
                members.append(target_models.ensure_default_model(desk))
            elif part.startswith("round:"):
                members.extend(_round_models(desk, part, task_code or target_models.DEFAULT_TASK))
            else:
                members.append(_find_record(records, part))
        for record in members:
            if record.format == ModelFormat.IMPORTED.value:
                raise EvaluationError(f"{record.name} is known only by predictions recorded elsewhere; it cannot run here.")
        choices.append(ModelChoice(spec, members))
    return choices


def _round_models(desk, part: str, task_code: str) -> list[ModelRecord]:
    try:
        number = int(part.split(":", 1)[1])
    except ValueError:
        raise EvaluationError(f"'{part}' should be round:N with N a round number.") from None
    try:
        round_ = desk.tasks.round(task_code, number)
    except DynadeskError as exc:
        raise EvaluationError(str(exc)) from exc
    members = desk.models.round_models(round_.id)
    if not members:
        raise EvaluationError(f"Round {number} of {task_code} has no target model.")
    return members


def _find_record(records: list[ModelRecord], part: str) -> ModelRecord:
    exact = [r for r in records if r.name == part or str(r.id) == part]
    if len(exact) == 1:
        return exact[0]
    prefix = [r for r in records if len(part) >= 6 and (r.sha256.startswith(part) or str(r.id).startswith(part))]
    partial = prefix or [r for r in records if part.casefold() in r.name.casefold()]
    if len(partial) == 1:
        return partial[0]
    if not partial:
        known = "; ".join(r.name for r in records) or "none registered"
        raise EvaluationError(f"No registered model is called '{part}' (models: {known}).")
    raise EvaluationError(f"'{part}' matches {len(partial)} models ({'; '.join(r.name for r in partial)}); be more precise.")


def format_label(record: ModelRecord) -> str:
    """How a record's files hold the model: "PyTorch folder", "ONNX", "ONNX int8"."""
    if record.format != "onnx":
        return "PyTorch folder" if record.format == "hf-torch" else record.format
    quantization = ((record.provenance or {}).get("export") or {}).get("quantization") or ""
    return "ONNX int8" if "int8" in quantization or "int8" in record.name.casefold() else "ONNX"


def model_families(records: Sequence[ModelRecord]) -> list[list[ModelRecord]]:
    """Records grouped by the model they hold: an ONNX export (fp32 or int8) joins the record it
    was exported from (``provenance.parent_model``); the source first, then ONNX, then ONNX int8."""
    by_key = {key: r for r in records for key in (str(r.id), r.sha256)}

    def root(record: ModelRecord) -> ModelRecord:
        seen = set()
        while record.id not in seen:
            seen.add(record.id)
            parent = (record.provenance or {}).get("parent_model") or {}
            found = by_key.get(str(parent.get("id"))) or by_key.get(parent.get("sha256") or "")
            if found is None:
                break
            record = found
        return record

    families: dict = {}
    for record in records:
        families.setdefault(root(record).id, []).append(record)
    return [sorted(members, key=lambda r: (r.format == "onnx", format_label(r))) for members in families.values()]


def family_name(members: Sequence[ModelRecord]) -> str:
    """The name the family's records share, without a format suffix ("X, PyTorch", "X (ONNX int8)")."""
    name = members[0].name
    for suffix in (", PyTorch", " (PyTorch)", ", ONNX int8", ", ONNX fp32", " (ONNX int8)", " (ONNX)"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def load_predictor(choice: ModelChoice, num_threads: int | None = None):
    from app.core.services.target_models import load_ensemble

    return load_ensemble(choice.records, num_threads=num_threads)

