"""Alembic environment: runs on the connection that ``app.core.storage.db`` hands over."""

from alembic import context

from app.core.storage.models import Base, include_name


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("Dynadesk migrations run through app.core.storage.db.Database, which provides the connection")
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=True,
        include_name=include_name,
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


run_migrations_online()
