"""The bundled model's first start in two halves: it answers from its PyTorch form within
seconds, and switches to its faster ONNX form once that is prepared in the background. Qt-free;
the GUI runs each step on a worker (app/gui/first_start.py).

    prepare_torch_files(desk)                     # seconds (no database): the PyTorch folder
    record = adopt_torch_form(desk)               # round 1's target, answering now
    stand_in = waiting_stand_in(desk)             # later starts: still to switch? (resumes)
    prepared = prepare_fast_files(desk, progress)  # tens of seconds, in a child process
    record = switch_to_fast_form(desk, prepared)   # round 1 now runs the ONNX form

Only round 1 exactly as the first start left it switches: a round a lead (or the team's server)
changed in the meantime keeps what they chose.
"""

from __future__ import annotations

from typing import Any

from app.core import paths
from app.core.services.target_models import (
    DEFAULT_TASK,
    TargetModelError,
    default_trained_part,
    ensure_default_model,
    needs_default_model,
    register_default_forms,
)
from app.core.storage.models import ModelRecord
from local_models.errors import ModelError
from local_models.progress import Progress


def prepare_torch_files(desk, *, progress: Progress | None = None) -> Any:
    """The database-free part of ``adopt_torch_form``: the PyTorch folder, assembled once (seconds)."""
    from local_models.default_model import prepare_torch_form

    try:
        return prepare_torch_form(default_trained_part(), paths.models_cache_dir(desk.root), progress=progress)
    except ModelError as exc:
        raise TargetModelError(f"The default model could not be prepared: {exc}") from exc


def adopt_torch_form(desk, *, progress: Progress | None = None) -> ModelRecord | None:
    """A fresh desk: assemble the PyTorch form (seconds) and make it round 1's target. None when
    round 1 was already set up (nothing is prepared then)."""
    if not needs_default_model(desk):
        return None
    record = ensure_default_model(desk, variant="torch", progress=progress)
    return record if desk.rounds.adopt_first_models(DEFAULT_TASK, [record.id]) else None


def waiting_stand_in(desk) -> ModelRecord | None:
    """The default model's PyTorch form when it still stands in as round 1's target for its
    faster form (a first start that was closed or killed before the switch); else None."""
    if DEFAULT_TASK not in desk.catalog.tasks:
        return None
    model_id = desk.rounds.first_stand_in(DEFAULT_TASK)
    if model_id is None:
        return None
    record = desk.models.get(model_id)
    if not is_default_torch_form(record):
        return None
    return record


def is_default_torch_form(record: ModelRecord | None) -> bool:
    return (record is not None and record.format == "hf-torch"
            and bool((record.provenance or {}).get("default_model")))


def prepare_fast_files(desk, *, progress: Progress | None = None, in_child: bool = True) -> Any:
    """The ONNX forms of the default model (export, then the int8 attempt), in a child process at
    lower priority so that predictions keep their pace; resumes what an interrupted run left."""
    from local_models.default_model import prepare_fast_forms

    arguments = {"part_dir": default_trained_part(), "cache_dir": paths.models_cache_dir(desk.root)}
    try:
        if not in_child:
            return prepare_fast_forms(arguments["part_dir"], arguments["cache_dir"], progress=progress)
        from local_models.child_process import run_in_child

        return run_in_child(prepare_fast_forms, arguments, progress=progress)
    except ModelError as exc:
        raise TargetModelError(f"The faster form of the default model could not be prepared: {exc}") from exc


def prepared_fast_files(desk) -> Any:
    """The fast form already in this desk's model cache (prepared, or fetched from the team), or None."""
    from local_models.default_model import prepared_fast_form

    return prepared_fast_form(default_trained_part(), paths.models_cache_dir(desk.root))


def switch_to_fast_form(desk, prepared: Any = None, *, record: ModelRecord | None = None) -> ModelRecord | None:
    """Register the prepared fast form (or take ``record``, one fetched from the team's server) and
    make it round 1's target in place of its PyTorch stand-in. None when round 1 is no longer the
    first start's (it keeps what it has)."""
    stand_in = waiting_stand_in(desk)
    if stand_in is None:
        return None
    if record is None:
        if prepared is None or prepared.onnx_dir is None:
            raise ValueError("switch_to_fast_form needs a prepared ONNX form or a record")
        record = register_default_forms(desk, prepared)
    return record if desk.rounds.replace_first_stand_in(DEFAULT_TASK, stand_in.id, record.id) else None
