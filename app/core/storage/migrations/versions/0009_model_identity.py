"""One model, one checksum: strip build paths from exported ONNX models and re-point predictions.

ONNX files exported by earlier versions held the absolute source paths of the exporting desk, so
the same model got another sha256 on every desk, and examples written against "another" one were
never accepted by the server. Registered ONNX models lose those bytes (their answers do not
change); each record, and every stored prediction naming it, takes the new checksum. A record whose
new checksum another record already has is merged into that one (its predictions and round targets
move over, and it goes).

The repair is frozen here, over the tables as this revision knows them, so that later changes to the
services or the ORM models cannot change what this migration does. The model files are still read and
checksummed by ``local_models``: the checksum must be the one the desk computes today.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

import logging
import uuid
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None

log = logging.getLogger(__name__)

model_records = sa.table(
    "model_records",
    sa.column("id", sa.Uuid()),
    sa.column("name", sa.String()),
    sa.column("format", sa.String()),
    sa.column("path", sa.Text()),
    sa.column("sha256", sa.String()),
    sa.column("provenance", sa.JSON()),
    sa.column("updated_at", sa.DateTime()),
)
model_outputs = sa.table(
    "model_outputs",
    sa.column("example_id", sa.Uuid()),
    sa.column("model_id", sa.Uuid()),
    sa.column("model_sha256", sa.String()),
    sa.column("updated_at", sa.DateTime()),
)
round_models = sa.table(
    "round_models",
    sa.column("round_id", sa.Uuid()),
    sa.column("model_id", sa.Uuid()),
)


def upgrade() -> None:
    connection = op.get_bind()
    changed = repair_stale_exports(connection)
    if changed:
        log.info("migration 0009: %d model record(s) took their files' new checksum", changed)


def downgrade() -> None:
    pass  # the stripped bytes were never part of the model


def repair_stale_exports(connection: sa.Connection) -> int:
    """Strip build details from the files of registered ONNX models and give each record (and its stored
    predictions) the checksum its files now have. Returns how many records changed."""
    from local_models.backends.onnx import onnx_file
    from local_models.engine import model_sha256
    from local_models.errors import ModelError
    from local_models.export import canonicalize_onnx_file, has_stale_build_details

    changed = 0
    records = connection.execute(
        sa.select(model_records.c.id, model_records.c.name, model_records.c.path, model_records.c.sha256,
                  model_records.c.provenance)
        .where(model_records.c.format == "onnx", model_records.c.path != "")
    ).all()
    for record in records:
        try:
            file = onnx_file(Path(record.path))
            if not has_stale_build_details(file):
                continue
            canonicalize_onnx_file(file)
            tokenizer_dir = ((record.provenance or {}).get("runtime") or {}).get("tokenizer_dir")
            sha = model_sha256(record.path, format="onnx", tokenizer_dir=tokenizer_dir)
        except (ModelError, OSError, ValueError) as exc:  # moved or unreadable: it keeps its checksum
            log.warning("model %s left as it is: %s", record.name, exc)
            continue
        if sha != record.sha256:
            _reidentify(connection, record.id, sha)
            changed += 1
    return changed


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)  # stored as naive UTC


def _reidentify(connection: sa.Connection, record_id: uuid.UUID, sha256: str) -> None:
    """The record's files now have checksum ``sha256``: it and its predictions take it, or the record that
    already has it absorbs this one."""
    same = connection.scalar(sa.select(model_records.c.id).where(model_records.c.sha256 == sha256))
    if same is not None:
        _merge(connection, keep=same, twin=record_id, sha256=sha256)
        return
    connection.execute(model_outputs.update().where(model_outputs.c.model_id == record_id)
                       .values(model_sha256=sha256, updated_at=_now()))
    connection.execute(model_records.update().where(model_records.c.id == record_id)
                       .values(sha256=sha256, updated_at=_now()))


def _merge(connection: sa.Connection, *, keep: uuid.UUID, twin: uuid.UUID, sha256: str) -> None:
    """``twin``'s predictions and round targets now name ``keep``, and its row goes; where both answered an
    example or both are a round's target, ``keep``'s row stays."""
    kept_examples = sa.select(model_outputs.c.example_id).where(model_outputs.c.model_id == keep)
    connection.execute(model_outputs.delete().where(model_outputs.c.model_id == twin,
                                                    model_outputs.c.example_id.in_(kept_examples)))
    connection.execute(model_outputs.update().where(model_outputs.c.model_id == twin)
                       .values(model_id=keep, model_sha256=sha256, updated_at=_now()))
    kept_rounds = sa.select(round_models.c.round_id).where(round_models.c.model_id == keep)
    connection.execute(round_models.delete().where(round_models.c.model_id == twin,
                                                   round_models.c.round_id.in_(kept_rounds)))
    connection.execute(round_models.update().where(round_models.c.model_id == twin).values(model_id=keep))
    connection.execute(model_records.delete().where(model_records.c.id == twin))
