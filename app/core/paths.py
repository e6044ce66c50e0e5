"""Where Dynadesk keeps its files. ``--data-dir`` or ``DYNADESK_DATA_DIR`` overrides the default."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

from app.core.errors import DynadeskError

APP_NAME = "dynadesk"
DATA_DIR_ENV = "DYNADESK_DATA_DIR"
DATABASE_FILENAME = "dynadesk.sqlite"
SETTINGS_FILENAME = "settings.json"


def data_dir(override: str | os.PathLike[str] | None = None) -> Path:
    """The folder that holds the database, settings, user tasks and cached models."""
    chosen = override or os.environ.get(DATA_DIR_ENV) or platformdirs.user_data_dir(APP_NAME, appauthor=False)
    path = Path(chosen).expanduser().resolve()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DynadeskError(f"the data folder {path} cannot be created: {exc.strerror}. "
                            "Choose another with --data-dir.") from exc
    return path


def database_path(root: Path) -> Path:
    return root / DATABASE_FILENAME


def settings_path(root: Path) -> Path:
    return root / SETTINGS_FILENAME


def user_tasks_dir(root: Path) -> Path:
    return root / "tasks"


def models_cache_dir(root: Path) -> Path:
    return root / "models"


def cache_dir(root: Path) -> Path:
    """Files Dynadesk can make again (deleting the folder costs time, never data)."""
    return root / "cache"


def frozen_states_cache_dir(root: Path) -> Path:
    """The frozen layers' outputs kept between training runs (``local_models.frozen_cache``)."""
    return cache_dir(root) / "frozen-states"
