"""Alembic environment of the sync server: runs on the connection ``ServerDatabase`` hands over."""

import os
import time
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any

from alembic import context
from alembic.runtime.migration import MigrationContext, MigrationInfo

from sync.server.db import PAUSE_IN_MIGRATION_ENV, VERSION_TABLE
from sync.server.models import Base

PAUSE_LIMIT_S = 300


def pause_after_first_step(ctx: MigrationContext, step: MigrationInfo, heads: Collection[Any],
                           run_args: Mapping[str, Any]) -> None:
    """For the killed-upgrade test: the first step is applied but not committed; say so, and wait to be killed."""
    marker = Path(os.environ[PAUSE_IN_MIGRATION_ENV])
    if marker.exists():
        return
    marker.write_text(f"{step.up_revision_id}\n")
    time.sleep(PAUSE_LIMIT_S)
    raise RuntimeError(f"{PAUSE_IN_MIGRATION_ENV} is set and nothing killed the upgrade in {PAUSE_LIMIT_S} s")


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("Server migrations run through sync.server.db.ServerDatabase, which provides the connection")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        version_table=VERSION_TABLE,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        on_version_apply=pause_after_first_step if os.environ.get(PAUSE_IN_MIGRATION_ENV) else None,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
