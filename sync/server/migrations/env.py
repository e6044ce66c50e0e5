"""Alembic environment of the sync server: runs on the connection ``ServerDatabase`` hands over."""

from alembic import context

from sync.server.db import VERSION_TABLE
from sync.server.models import Base


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
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
