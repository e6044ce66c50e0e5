"""A model's prepared faster forms from the team's server: a desk whose lead published them (with
the model, ``SyncClient.publish``) downloads one instead of exporting it. Qt-free.

    record = fetch_prepared_form(desk, tokens, torch_record)   # None: prepare it here

Every file is checked against its sha256 and the whole against the form's checksum; a damaged
arrival is refused at once (``Damaged``, an ``Interrupted``), and the caller prepares its own.
"""

from __future__ import annotations

import logging
import uuid

from sqlalchemy import select

from app.core.storage.models import ModelRecord, Task
from sync.client import SyncClient
from sync.protocol import API, ModelForms, ModelRecordWire
from sync.tokens import TokenStore
from sync.transport import SyncError, SyncHandle, SyncReport, _expect

log = logging.getLogger(__name__)


def fetch_prepared_form(desk, tokens: TokenStore, model: ModelRecord, *, handle: SyncHandle | None = None,
                        **client_options) -> ModelRecord | None:
    """The fastest published form of ``model`` (int8 first), downloaded and registered on this desk;
    None when no server is set, it cannot be reached, or it has none. A form found but damaged on the
    way raises ``SyncError`` (nothing of it is used)."""
    from sync.transport import AuthError, Offline

    url = desk.settings.server_url
    token = tokens.get(url) if url else None
    if not url or not token:
        return None
    handle = handle or SyncHandle()
    try:
        with SyncClient(desk, url, token, **client_options) as client:
            response = client._call("GET", f"{API}/models/{model.sha256}/forms", handle)
            if response.status_code == 404:  # a server from before forms were published
                return None
            _expect(response, 200)
            forms = [f for f in ModelForms.model_validate_json(response.content).forms if f.files]
            if not forms:
                return None
            chosen = forms[0]
            record, created = _local_record(desk, chosen)
            try:
                client.download_model(record, chosen, handle, SyncReport(), damaged_attempts=1)
            except SyncError:
                if created:  # a record without its files would be taken for the form prepared here
                    with desk.db.write() as session:
                        session.delete(session.get(ModelRecord, record.id))
                raise
    except (Offline, AuthError) as exc:
        log.info("no prepared form from the team's server: %s", exc)
        return None
    with desk.db.read() as session:
        return session.get(ModelRecord, record.id)


def _local_record(desk, wire: ModelRecordWire) -> tuple[ModelRecord, bool]:
    """This desk's record of the published form (by checksum), made from the server's when missing
    (then True)."""
    with desk.db.write() as session:
        same = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == wire.sha256))
        if same is not None:
            return same, False
        task = session.scalar(select(Task).where(Task.code == wire.task)) if wire.task else None
        record_id = wire.id if session.get(ModelRecord, wire.id) is None else uuid.uuid4()
        record = ModelRecord(id=record_id, name=wire.name, format=wire.format.value, sha256=wire.sha256,
                             label_map=dict(wire.label_map), task_id=task.id if task else None,
                             provenance=dict(wire.provenance), created_at=wire.created_at,
                             updated_at=wire.updated_at, revision=wire.revision)
        session.add(record)
        session.flush()
        return record, True
