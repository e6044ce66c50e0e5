"""Registered models: every stored prediction names exactly the model (by sha256) that made it."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.core.domain import ModelFormat, ModelOutput
from app.core.errors import NotFound
from app.core.storage.db import Database
from app.core.storage.models import ModelOutputRow, ModelRecord, RoundModel


def merge_model_records(session: Session, keep: ModelRecord, twin: ModelRecord) -> None:
    """Make ``twin`` one with ``keep``: its predictions and round targets now name ``keep`` (and its
    checksum), and its row goes. Predictions of both on one example keep ``keep``'s."""
    both = select(ModelOutputRow.example_id).where(ModelOutputRow.model_id == keep.id)
    session.execute(delete(ModelOutputRow).where(ModelOutputRow.model_id == twin.id,
                                                 ModelOutputRow.example_id.in_(both)))
    session.execute(update(ModelOutputRow).where(ModelOutputRow.model_id == twin.id)
                    .values(model_id=keep.id, model_sha256=keep.sha256))
    targets = select(RoundModel.round_id).where(RoundModel.model_id == keep.id)
    session.execute(delete(RoundModel).where(RoundModel.model_id == twin.id, RoundModel.round_id.in_(targets)))
    session.execute(update(RoundModel).where(RoundModel.model_id == twin.id).values(model_id=keep.id))
    session.delete(twin)
    session.flush()


class ModelService:
    def __init__(self, db: Database):
        self.db = db

    def register(
        self,
        name: str,
        format: ModelFormat | str,
        sha256: str,
        *,
        path: str = "",
        label_map: dict[str, Any] | None = None,
        task_id: uuid.UUID | None = None,
        provenance: dict[str, Any] | None = None,
    ) -> ModelRecord:
        """Register a model, or return the record that already has this checksum."""
        with self.db.write() as session:
            record = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha256))
            if record is None:
                record = ModelRecord(
                    name=name,
                    format=ModelFormat(format).value,
                    sha256=sha256,
                    path=path,
                    label_map=label_map or {},
                    task_id=task_id,
                    provenance=provenance or {},
                )
                session.add(record)
                session.flush()
            return record

    def get(self, model_id: uuid.UUID) -> ModelRecord:
        with self.db.read() as session:
            record = session.get(ModelRecord, model_id)
        if record is None:
            raise NotFound(f"There is no registered model with id {model_id}.")
        return record

    def set_path(self, model_id: uuid.UUID, folder: Path) -> ModelRecord:
        """This desk's copy of a model's files is ``folder``, self-contained (tokenizer inside); the
        caller has checked that they have the record's checksum."""
        with self.db.write() as session:
            record = session.get(ModelRecord, model_id)
            if record is None:
                raise NotFound(f"There is no registered model with id {model_id}.")
            provenance = dict(record.provenance or {})
            provenance["runtime"] = {**(provenance.get("runtime") or {}), "tokenizer_dir": None}
            record.path, record.provenance = str(folder), provenance
            return record

    def all(self) -> list[ModelRecord]:
        with self.db.read() as session:
            return list(session.scalars(select(ModelRecord).order_by(ModelRecord.name)))

    def answers(self, record: ModelRecord, texts: Sequence[str]) -> list[ModelOutput]:
        """``record``'s output for each text, in order (the model is loaded, run in batches and closed);
        ``TargetModelError`` when it cannot run here."""
        from app.core.services.target_models import load_engine_for, to_model_output

        engine = load_engine_for(record)
        try:
            return [to_model_output(p, record) for p in engine.predict_batched(list(texts), batch_size=64)]
        finally:
            engine.close()

    def round_models(self, round_id: uuid.UUID) -> list[ModelRecord]:
        with self.db.read() as session:
            return list(
                session.scalars(
                    select(ModelRecord)
                    .join(RoundModel, RoundModel.model_id == ModelRecord.id)
                    .where(RoundModel.round_id == round_id)
                    .order_by(RoundModel.position)
                )
            )
