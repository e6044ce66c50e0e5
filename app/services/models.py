"""Registered models: every stored prediction names exactly the model (by sha256) that made it."""

from __future__ import annotations

import hashlib
import uuid
from typing import Any

from sqlalchemy import select

from app.domain import ModelFormat
from app.errors import NotFound
from app.storage.db import Database
from app.storage.models import ModelRecord, RoundModel


def imported_model_sha(name: str) -> str:
    """Models known only by their recorded predictions get a stable stand-in checksum."""
    return hashlib.sha256(f"imported-model:{name}".encode()).hexdigest()


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

    def all(self) -> list[ModelRecord]:
        with self.db.read() as session:
            return list(session.scalars(select(ModelRecord).order_by(ModelRecord.name)))

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
