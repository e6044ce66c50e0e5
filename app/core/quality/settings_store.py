"""A task's QualitySettings in a desk's meta table (``QUALITY_KEY``), read and written in the
caller's unit of work, as the agreement threshold is (``app.core.services.tasks``)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.quality.settings import QUALITY_KEY, InvalidQualitySettings, QualitySettings
from app.core.storage.meta_values import meta_value, store_meta_value


def quality_settings_in(session: Session, code: str) -> QualitySettings:
    """The task's settings on this desk (the defaults until a lead sets them)."""
    try:
        value = meta_value(session, QUALITY_KEY.format(code=code))
        return QualitySettings() if value is None else QualitySettings.from_json(value)
    except (ValueError, TypeError, InvalidQualitySettings):
        return QualitySettings()  # a damaged value is not a reason to stop writing; the lead can set it again


def store_quality_settings(session: Session, code: str, settings: QualitySettings) -> None:
    store_meta_value(session, QUALITY_KEY.format(code=code),
                     None if settings == QualitySettings() else settings.to_json())
