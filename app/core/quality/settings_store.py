"""A task's QualitySettings in a desk's meta table (``QUALITY_KEY``), read and written in the
caller's unit of work, as the agreement threshold is (``app.core.services.tasks``)."""

from __future__ import annotations

import json

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.core.quality.settings import QUALITY_KEY, InvalidQualitySettings, QualitySettings
from app.core.storage.models import Meta


def quality_settings_in(session: Session, code: str) -> QualitySettings:
    """The task's settings on this desk (the defaults until a lead sets them)."""
    row = session.get(Meta, QUALITY_KEY.format(code=code))
    if row is None:
        return QualitySettings()
    try:
        return QualitySettings.from_json(json.loads(row.value))
    except (ValueError, TypeError, InvalidQualitySettings):
        return QualitySettings()  # a damaged value is not a reason to stop writing; the lead can set it again


def store_quality_settings(session: Session, code: str, settings: QualitySettings) -> None:
    key = QUALITY_KEY.format(code=code)
    if settings == QualitySettings():
        session.execute(delete(Meta).where(Meta.key == key))
    else:
        session.merge(Meta(key=key, value=json.dumps(settings.to_json())))
