"""The PyTorch form of a round's target, fetched from the team's server when the assistant first needs
gradients (word substitution). Qt-free.

    source = gradient_source(desk, records)       # None: a PyTorch form is here, or no target names one
    record = fetch_gradient_form(desk, clients, source, handle=handle)   # progress: handle's "models" phase

A desk runs its target in its fastest form (ONNX, int8 where it keeps the decisions), which has no
gradients. The bundled default model's PyTorch form is assembled here instead (seconds, from the files
every desk has), when its checksum is the one the target names. An owner's (or promoting lead's) publish sends each target's PyTorch form with the round,
files and all (``SyncClient.publish``), but a sync does not download it: it is large, and only the
assistant uses it. The first time the writer asks for suggestions on a desk without it, it comes down
here: every file checked against its sha256 and the whole against the form's checksum (which the target's
own record names, so no other model can stand in for it), into a staging folder that is moved into place
only when complete. A dropped connection keeps what arrived; asking again resumes it. Nothing of a
download that did not finish is registered or used.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sqlalchemy import select

from app.core.domain import ModelFormat
from app.core.formatting import size_text
from app.core.storage.models import ModelRecord, Round, RoundModel, Task
from sync.protocol import ModelRecordWire, form_parents
from sync.transport import Interrupted, Offline, SyncError, SyncHandle, SyncReport

if TYPE_CHECKING:
    from sync.client import ClientFactory

log = logging.getLogger(__name__)

_MAX_HOPS = 4  # an export of an export at most (as ``app.core.assist.forms``)


class GradientFormMissing(SyncError):
    """The team's server has no PyTorch form of the target (its publisher did not send it)."""


class GradientFormNotFetched(SyncError):
    """The PyTorch form did not arrive whole (the connection dropped, or it came damaged); nothing of it is used."""


@dataclass(frozen=True)
class GradientSource:
    """A target whose PyTorch form is not on this desk, and the checksum that names that form."""

    target: str  # the target's name
    sha256: str  # the PyTorch form's checksum
    task: str | None  # the target's task code and round, for what the lead or owner can do
    round_number: int | None
    bundled: bool = False  # the target is a form of the bundled default model: its PyTorch form is built here


def gradient_source(desk, records: Sequence[ModelRecord]) -> GradientSource | None:
    """For targets none of which has its PyTorch form on this desk: the first one exported from a PyTorch
    form, and that form's checksum. None when one has its form here, or none names one."""
    from app.core.assist.forms import first_gradient_form

    if not records or first_gradient_form(desk, records) is not None:
        return None
    by_sha = {r.sha256: r for r in desk.models.all()}
    for record in records:
        sha = _pytorch_parent(record, by_sha)
        if sha is not None:
            task, number = _round_of(desk, record)
            return GradientSource(record.name, sha, task, number,
                                  bundled=bool((record.provenance or {}).get("default_model")))
    return None


def _pytorch_parent(record: ModelRecord, by_sha: dict[str, ModelRecord]) -> str | None:
    current = record
    for _ in range(_MAX_HOPS):
        if current.format == ModelFormat.HF_TORCH.value:
            return current.sha256 if current is not record else None  # a PyTorch target comes with every sync
        parent = ((current.provenance or {}).get("parent_model") or {}).get("sha256") \
            or next(iter(sorted(form_parents(current.provenance or {}))), None)
        if not parent:
            return None
        known = by_sha.get(parent)
        if known is None or known.format == ModelFormat.HF_TORCH.value:
            return parent
        current = known  # an export of an export: its own parent
    return None


def _round_of(desk, record: ModelRecord) -> tuple[str | None, int | None]:
    """The task and the newest round that has ``record`` as its target."""
    with desk.db.read() as session:
        row = session.execute(select(Task.code, Round.number).join(Round, Round.task_id == Task.id)
                              .join(RoundModel, RoundModel.round_id == Round.id)
                              .where(RoundModel.model_id == record.id).order_by(Round.number.desc())).first()
    return (row[0], row[1]) if row else (None, None)


def missing_message(source: GradientSource) -> str:
    """One sentence: word substitution cannot run here, and what the owner or lead can do about it."""
    publish = f"`dynadesk sync publish {source.task}" + (f" --round {source.round_number}`" if source.round_number
                                                          else "`")
    return (f"Word substitution needs the PyTorch form of {source.target}, which the team's server does not have: "
            f"the owner (or the lead whose promotion opened the round) can publish it from the desk that "
            f"trained or prepared it with {publish if source.task else '`dynadesk sync publish TASK`'}.")


def fetch_gradient_form(desk, clients: ClientFactory, source: GradientSource, *,
                        handle: SyncHandle | None = None) -> ModelRecord:
    """Download ``source``'s PyTorch form from the team's server and register it on this desk (progress
    through ``handle``'s "models" phase, in bytes). Raises ``GradientFormMissing`` when the server has no
    such form (or only its record), ``GradientFormNotFetched`` when it did not arrive whole or the server cannot
    be reached, and the client's other errors (``AuthError``, ``Cancelled``...) as they are."""
    if source.bundled:
        built = _bundled_form(desk, source)
        if built is not None:
            return built
    client = clients.ready()
    if client is None:
        raise SyncError("This desk has no team server (or no token for it) to fetch the PyTorch form from.")
    handle = handle or SyncHandle()
    try:
        return _fetch(desk, client, source, handle)
    except Offline as exc:
        raise GradientFormNotFetched(f"The team's server cannot be reached for the PyTorch form of {source.target} "
                                     f"({exc.__cause__ or exc}); ask for suggestions again once it can.") from exc


def _fetch(desk, client, source: GradientSource, handle: SyncHandle) -> ModelRecord:
    with client:
        response = client.request("GET", f"/models/{source.sha256}", handle, ok=(200, 404))
        if response.status_code == 404:
            raise GradientFormMissing(missing_message(source))
        wire = ModelRecordWire.model_validate_json(response.content)
        if wire.format.value != ModelFormat.HF_TORCH.value or not wire.files or wire.sha256 != source.sha256:
            raise GradientFormMissing(missing_message(source))
        record, created = _local_record(desk, wire)
        total = sum(f.size for f in wire.files)
        handle.progress("models", 0, total)
        try:
            client.download_model(record, wire, handle, SyncReport(), damaged_attempts=2)
        except Interrupted as exc:  # also Damaged: the file kept its wrong checksum
            _forget(desk, record, created)
            reason = exc.reason or str(exc)
            raise GradientFormNotFetched(
                f"The PyTorch form of {source.target} ({size_text(total)}) did not arrive whole ({reason}); "
                "nothing of it is used. Ask for suggestions again to resume the download.") from exc
        except SyncError:
            _forget(desk, record, created)
            raise
    with desk.db.read() as session:
        fetched = session.get(ModelRecord, record.id)
        assert fetched is not None  # download_model pointed it at its files
    log.info("fetched the PyTorch form %s (%s) for word substitution", fetched.name, fetched.sha256[:12])
    return fetched


def _bundled_form(desk, source: GradientSource) -> ModelRecord | None:
    """The bundled default model's PyTorch form, assembled here (seconds, from files every desk has) when
    it is the one ``source`` names; None when it is another (the server's copy is fetched then)."""
    from app.core.services.default_model_forms import prepare_torch_files
    from app.core.services.target_models import register_default_forms
    from local_models.engine import model_sha256

    prepared = prepare_torch_files(desk)
    if model_sha256(prepared.torch_dir, format="hf-torch") != source.sha256:
        return None
    record: ModelRecord = register_default_forms(desk, prepared)  # no ONNX folder: the PyTorch record
    log.info("built the bundled model's PyTorch form here for word substitution (%s)", record.sha256[:12])
    return record


def _local_record(desk, wire: ModelRecordWire) -> tuple[ModelRecord, bool]:
    """This desk's record of the form (by checksum: a sync may have brought it without files), made from
    the server's when missing (then True)."""
    with desk.db.write() as session:
        same = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == wire.sha256))
        if same is not None:
            return same, False
        task = session.scalar(select(Task).where(Task.code == wire.task)) if wire.task else None
        taken = session.get(ModelRecord, wire.id) is not None
        record = ModelRecord(name=wire.name, format=wire.format.value, sha256=wire.sha256,
                             label_map=dict(wire.label_map), task_id=task.id if task else None,
                             provenance=dict(wire.provenance), created_at=wire.created_at,
                             updated_at=wire.updated_at, revision=wire.revision,
                             **({} if taken else {"id": wire.id}))
        session.add(record)
        session.flush()
        return record, True


def _forget(desk, record: ModelRecord, created: bool) -> None:
    """A record made for a download that failed goes again: no record without files stands for the form
    (the staging folder stays, for the next attempt to resume)."""
    if created:
        with desk.db.write() as session:
            row = session.get(ModelRecord, record.id)
            if row is not None and not row.path:
                session.delete(row)


def published_gradient_forms(desk, targets: Sequence[ModelRecord]) -> dict[uuid.UUID, ModelRecord]:
    """The PyTorch forms ``targets`` were exported from whose files are on this desk, by id: they go with a
    publish of the targets' rounds (``SyncClient.publish``), for desks to fetch when they need them."""
    from app.core.assist.forms import gradient_form

    forms = (gradient_form(desk, record) for record in targets if record.format != ModelFormat.HF_TORCH.value)
    return {form.id: form for form in forms if form is not None}
