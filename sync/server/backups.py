"""Copies of the server database made before a schema upgrade, and putting one back.

SQLite: a copy of the file in ``backups/`` next to it (SQLite's online backup), named as the desk names its
copies (``server.before-upgrade-0013.<stamp>.sqlite``), so the desk's ``restore_backup`` puts it back.

PostgreSQL: ``pg_dump`` is not installed on every machine that runs a server, so the server copies its own
tables, rows only, into a schema of their own (``<schema>_before_<revision>_<stamp>``, in the same database),
the version table among them. Putting one back moves the current tables into a schema set aside (kept,
never dropped), builds the tables at the copy's revision with this release's migrations (constraints and
indexes as that revision had them) and copies the rows in.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from alembic import command
from sqlalchemy import MetaData, text
from sqlalchemy.engine import Connection, make_url

from app.core.errors import DynadeskError
from app.core.storage.db import BACKUPS_DIR, automatic_backups, copy_database_file, restore_backup

if TYPE_CHECKING:
    from sync.server.db import ServerDatabase

LABEL = "before-upgrade"
SCHEMA_MARK = "_before_"
ASIDE_MARK = "_aside_"
PREFIX_CHARS = 30  # of the live schema's name: PostgreSQL names hold 63 characters


@dataclass(frozen=True)
class Backup:
    name: str  # a file path (SQLite) or a schema name (PostgreSQL)
    revision: str | None
    made: datetime


def sqlite_path(db: ServerDatabase) -> Path:
    path = make_url(db.url).database
    if not path or path == ":memory:":
        raise DynadeskError("An in-memory server database has no backups.")
    return Path(path)


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y%m%d%H%M%S%f")


def _quote(connection: Connection, name: str) -> str:
    return connection.dialect.identifier_preparer.quote(name)


def _current_schema(connection: Connection) -> str:
    return connection.execute(text("SELECT current_schema()")).scalar_one()


def _tables(connection: Connection, schema: str) -> list[str]:
    return list(connection.execute(text("SELECT tablename FROM pg_tables WHERE schemaname = :s ORDER BY tablename"),
                                   {"s": schema}).scalars())


def make(db: ServerDatabase, connection: Connection, revision: str) -> str:
    """Copy the database as it is (at ``revision``); where the copy is. Committed before any migration runs."""
    if db.dialect == "sqlite":
        database = sqlite_path(db)
        folder = database.parent / BACKUPS_DIR
        folder.mkdir(exist_ok=True)
        target = folder / f"{database.stem}.{LABEL}-{revision}.{_stamp()}{database.suffix}"
        copy_database_file(database, target)
        return str(target)
    with connection.begin():
        live = _current_schema(connection)
        # to the microsecond: an upgrade undone and done again may copy twice within one second
        schema = f"{live[:PREFIX_CHARS]}{SCHEMA_MARK}{revision}_{_stamp()}"[:63]
        connection.exec_driver_sql(f"CREATE SCHEMA {_quote(connection, schema)}")
        for table in _tables(connection, live):
            connection.exec_driver_sql(f"CREATE TABLE {_quote(connection, schema)}.{_quote(connection, table)} AS "
                                       f"TABLE {_quote(connection, live)}.{_quote(connection, table)}")
    return f"schema {schema}"


def listed(db: ServerDatabase) -> list[Backup]:
    """The copies made before upgrades, newest first."""
    from sync.server.db import VERSION_TABLE

    if db.dialect == "sqlite":
        database = sqlite_path(db)
        return [Backup(str(path), _revision_in_name(path.name), datetime.fromtimestamp(path.stat().st_mtime))
                for path in automatic_backups(database) if f".{LABEL}-" in path.name]
    found = []
    with db.engine.connect() as connection:
        live = _current_schema(connection)
        prefix = f"{live[:PREFIX_CHARS]}{SCHEMA_MARK}"
        for schema in connection.execute(text("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, :p)"),
                                         {"p": prefix}).scalars():
            revision = connection.execute(text(
                f"SELECT version_num FROM {_quote(connection, schema)}.{_quote(connection, VERSION_TABLE)}")).scalar()
            stamp = schema.rsplit("_", 1)[-1]
            made = datetime.strptime(stamp, "%Y%m%d%H%M%S%f" if len(stamp) > 14 else "%Y%m%d%H%M%S")
            found.append(Backup(schema, revision, made.replace(tzinfo=UTC)))
    return sorted(found, key=lambda b: b.made, reverse=True)


def _revision_in_name(name: str) -> str | None:
    label = name.split(".")[1] if name.count(".") >= 2 else ""
    return label[len(LABEL) + 1:] if label.startswith(f"{LABEL}-") else None


def restore(db: ServerDatabase, backup: Backup) -> str:
    """Put ``backup`` in place of the live database (no server may be running); where the replaced data is kept."""
    if db.dialect == "sqlite":
        return str(restore_backup(sqlite_path(db), Path(backup.name)))
    from sync.server.db import ADVISORY_LOCK, VERSION_TABLE, alembic_config

    if backup.revision is None:
        raise DynadeskError(f"The backup schema {backup.name} has no {VERSION_TABLE} row: it cannot be restored.")
    with db.engine.connect() as connection:
        connection.exec_driver_sql(f"SELECT pg_advisory_lock({ADVISORY_LOCK})")
        connection.commit()
        try:
            with connection.begin():
                live = _current_schema(connection)
                aside = f"{live[:PREFIX_CHARS]}{ASIDE_MARK}{_stamp()}"[:63]
                connection.exec_driver_sql(f"CREATE SCHEMA {_quote(connection, aside)}")
                for table in _tables(connection, live):
                    connection.exec_driver_sql(f"ALTER TABLE {_quote(connection, live)}.{_quote(connection, table)} "
                                               f"SET SCHEMA {_quote(connection, aside)}")
                command.upgrade(alembic_config(connection), backup.revision)
                built = MetaData()
                built.reflect(connection, schema=live)
                copied = set(_tables(connection, backup.name))
                tables = [t for t in built.sorted_tables if t.name != VERSION_TABLE and t.name in copied]
                for table in reversed(tables):  # rows the migrations seed (counters) give way to the copy's
                    connection.exec_driver_sql(f"DELETE FROM {_quote(connection, live)}.{_quote(connection, table.name)}")
                for table in tables:  # parents before children: the foreign keys hold throughout
                    columns = ", ".join(_quote(connection, c.name) for c in table.columns)
                    connection.exec_driver_sql(
                        f"INSERT INTO {_quote(connection, live)}.{_quote(connection, table.name)} ({columns}) "
                        f"SELECT {columns} FROM {_quote(connection, backup.name)}.{_quote(connection, table.name)}")
        finally:
            connection.exec_driver_sql(f"SELECT pg_advisory_unlock({ADVISORY_LOCK})")
            connection.commit()
    return f"schema {aside}"
