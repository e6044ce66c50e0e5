"""Typed, versioned settings stored as JSON text beside the database.

Older files are migrated step by step; a file that cannot be read is kept aside
(never deleted) and the defaults are used, with a message saying so.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from app.core.errors import DynadeskError
from app.core.wellbeing.profile import WellbeingProfile

log = logging.getLogger(__name__)

SETTINGS_VERSION = 1


class Settings(BaseModel):
    model_config = ConfigDict(extra="ignore", validate_assignment=True)

    version: int = SETTINGS_VERSION
    current_person_id: str | None = None
    last_task: str | None = None
    last_round: dict[str, int] = Field(default_factory=dict)  # task code -> round number
    font_size: int = Field(default=11, ge=6, le=48)
    window_geometry: str | None = None  # base64 of QMainWindow.saveGeometry()
    window_state: str | None = None  # base64 of QMainWindow.saveState()
    acknowledged_warnings: list[str] = Field(default_factory=list)  # task codes
    draft_autosave_ms: int = Field(default=400, ge=50, le=10_000)
    # Sync. The token is never stored here: see sync.client.TokenStore.
    server_url: str | None = None
    server_ca_file: str | None = None  # a team's own certificate authority (PEM), trusted besides the usual ones
    sync_interval_s: int = Field(default=300, ge=30, le=86_400)
    wellbeing: dict[str, WellbeingProfile] = Field(default_factory=dict)  # person id -> their choices

    def wellbeing_for(self, person_id: str | None) -> WellbeingProfile:
        return self.wellbeing.get(person_id or "", WellbeingProfile())


# version N -> function turning a version-N dict into a version-(N+1) dict
MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


def migrate(raw: dict[str, Any]) -> dict[str, Any]:
    version = int(raw.get("version", 1))
    if version > SETTINGS_VERSION:
        raise ValueError(f"settings version {version} is newer than this Dynadesk understands ({SETTINGS_VERSION})")
    while version < SETTINGS_VERSION:
        raw = MIGRATIONS[version](dict(raw))
        version += 1
        raw["version"] = version
    return raw


class SettingsStore:
    """Loads and saves one settings file atomically."""

    def __init__(self, path: Path):
        self.path = path
        self.problem: str | None = None  # set when the file could not be read

    def load(self) -> Settings:
        if not self.path.exists():
            return Settings()
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(raw, dict):
                raise ValueError("the file does not hold a JSON object")
            return Settings.model_validate(migrate(raw))
        except (OSError, ValueError, ValidationError, RecursionError) as exc:  # nested past any reader: damaged too
            kept = self.path.with_name(f"{self.path.name}.unreadable-{datetime.now():%Y%m%d-%H%M%S}")
            os.replace(self.path, kept)
            self.problem = f"Settings in {self.path} could not be read ({exc}); defaults are used and the old file was kept as {kept.name}."
            log.warning(self.problem)
            return Settings()

    def save(self, settings: Settings) -> None:
        text = json.dumps(settings.model_dump(mode="json"), indent=2, ensure_ascii=False)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".settings-", suffix=".json")
        except OSError as exc:
            raise DynadeskError(f"the settings cannot be saved: the folder {self.path.parent} is read-only "
                                f"({exc.strerror}).") from exc
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
