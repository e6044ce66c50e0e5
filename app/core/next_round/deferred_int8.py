"""A candidate promoted with its int8 search deferred (``dynadesk train --int8 later``, or the
next-round dialog's choice): its round opens at once on the fp32 ONNX form, and the int8 form
follows in the background, as the bundled model's first start does. Qt-free; the window runs
the steps on workers (app/gui/deferred_int8.py), the CLI in the foreground (`dynadesk rounds int8`).

    waiting = pending_int8(desk)                       # open rounds whose fp32 target waits for its int8 form
    prepared = prepare_int8_files(desk, waiting[0])     # minutes: the search, in a child process
    outcome = switch_to_int8(desk, waiting[0], prepared)  # the round now runs the int8 form (or why not)

Only a round that still has the fp32 form as a target switches: a round a lead changed meanwhile
keeps what they chose.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.core import paths
from app.core.domain import RoundStatus, utcnow
from app.core.errors import DynadeskError
from app.core.next_round.promotion import CANDIDATE_SLUG, DEFERRED_KEY, update_provenance
from app.core.storage.models import ModelRecord
from local_models.errors import ModelError
from local_models.progress import Progress


@dataclass(frozen=True)
class PendingInt8:
    task_code: str
    round_id: uuid.UUID
    round_number: int
    fp32_id: uuid.UUID
    name: str
    part_dir: Path


@dataclass(frozen=True)
class Int8Outcome:
    record: ModelRecord | None  # the int8 form's record; None when the search found none (``note`` says why)
    switched: bool  # the round now runs it
    note: str

    def line(self, pending: PendingInt8) -> str:
        """What the status bar and the CLI say."""
        if self.record is None:
            return f"{pending.task_code} round {pending.round_number} keeps the fp32 form: {self.note}"
        if self.switched:
            return (f"{pending.task_code} round {pending.round_number} now runs the int8 form ({self.note}); "
                    "publish the round again to bring it to the team.")
        return (f"The int8 form of {pending.name} is ready ({self.note}), but round {pending.round_number} "
                "no longer runs its fp32 form, so it keeps its targets.")


def pending_int8(desk, task_code: str | None = None) -> list[PendingInt8]:
    """Open rounds' targets that are fp32 forms waiting for their int8 search (of ``task_code``, or all)."""
    found = []
    codes = [task_code] if task_code else list(desk.catalog.tasks)
    for code in codes:
        for round_ in desk.tasks.rounds(code):
            if round_.status != RoundStatus.OPEN:
                continue
            for record in desk.models.round_models(round_.id):
                marker = (record.provenance or {}).get(DEFERRED_KEY)
                if isinstance(marker, dict) and marker.get("trained_part") and not marker.get("done") \
                        and _still_deferred(Path(marker["trained_part"])):
                    found.append(PendingInt8(code, round_.id, round_.number, record.id, record.name,
                                             Path(marker["trained_part"])))
    return found


def _still_deferred(part_dir: Path) -> bool:
    """The part is on this desk and its search has not run (another desk that pulled the round has
    no such folder: the promoting desk prepares the int8 form and publishes it)."""
    from local_models.int8_search import read_recipe_file

    try:
        return part_dir.is_dir() and read_recipe_file(part_dir).deferred
    except ValueError:
        return False


def prepare_int8_files(desk, pending: PendingInt8, *, progress: Progress | None = None,
                       in_child: bool = True) -> Any:
    """The int8 search and the int8 form (``local_models.default_model.prepare_deferred_int8``), in a
    child process at lower priority (``in_child``) so that predictions keep their pace."""
    from local_models.default_model import prepare_deferred_int8

    if not pending.part_dir.is_dir():
        raise DynadeskError(f"The trained candidate {pending.part_dir} is gone, so its int8 form cannot be prepared; "
                            "the fp32 form keeps serving.")
    arguments: dict[str, Any] = {"part_dir": pending.part_dir, "cache_dir": paths.models_cache_dir(desk.root),
                                 "slug": CANDIDATE_SLUG}
    try:
        if not in_child:
            return prepare_deferred_int8(**arguments, progress=progress)
        from local_models.child_process import run_in_child

        return run_in_child(prepare_deferred_int8, arguments, progress=progress)
    except ModelError as exc:
        raise DynadeskError(f"The int8 form of {pending.name} could not be prepared: {exc}") from exc


def switch_to_int8(desk, pending: PendingInt8, prepared: Any) -> Int8Outcome:
    """Register the int8 form (the fp32 form's parent and lineage) and put it in the fp32 form's place
    in its round; or, when the search found none, record why on the fp32 form, which keeps serving."""
    from app.core.int8_status import int8_detail
    from app.core.services.target_models import find_by_sha, register_model
    from local_models.engine import model_sha256
    from local_models.export import read_export_description

    fp32 = desk.models.get(pending.fp32_id)
    marker = dict((fp32.provenance or {}).get(DEFERRED_KEY) or {})
    if not prepared.onnx_int8 or prepared.onnx_dir is None:
        note = " ".join(prepared.notes) or "no int8 form passed its check"
        update_provenance(desk, fp32.id, lambda p: {**p, DEFERRED_KEY: {**marker, "done": utcnow().isoformat(),
                                                                         "note": note},
                                                     "notes": [*p.get("notes", []), note]})
        return Int8Outcome(None, False, note)
    note = int8_detail(read_export_description(prepared.onnx_dir)) or "int8 passed the parity check"
    provenance = fp32.provenance or {}
    record = find_by_sha(desk, model_sha256(prepared.onnx_dir, format="onnx"))
    if record is None:
        name = fp32.name.replace("ONNX fp32", "ONNX int8") if "ONNX fp32" in fp32.name else f"{fp32.name} (int8)"
        try:
            record = register_model(desk, prepared.onnx_dir, name=name, task_code=pending.task_code, format="onnx",
                                    provenance={key: provenance[key] for key in ("parent_model", "lineage")
                                                if key in provenance}
                                    | {"int8_of": {"id": str(fp32.id), "sha256": fp32.sha256}})
        except Exception as exc:  # noqa: BLE001 - any registration failure leaves the fp32 form serving
            raise DynadeskError(f"The int8 form of {fp32.name} could not be registered: {exc}") from exc
    switched = desk.rounds.replace_target(pending.round_id, fp32.id, record.id)
    update_provenance(desk, fp32.id, lambda p: {**p, DEFERRED_KEY: {**marker, "done": utcnow().isoformat(),
                                                                     "int8_sha256": record.sha256,
                                                                     "switched": switched}})
    return Int8Outcome(record, switched, note)
