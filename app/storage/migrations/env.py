"""Alembic environment: runs on the connection that ``app.storage.db`` hands over."""

from alembic import context

from app.storage.models import Base

# Tables that live outside the ORM (full-text search) and SQLite's own bookkeeping.
UNMANAGED_PREFIXES = ("example_fts", "sqlite_")


def include_name(name, type_, parent_names):
    if type_ == "table":
        return not (name or "").startswith(UNMANAGED_PREFIXES)
    return True


def run_migrations_online() -> None:
    connection = context.config.attributes.get("connection")
    if connection is None:
        raise RuntimeError("Dynadesk migrations run through app.storage.db.Database, which provides the connection")
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
