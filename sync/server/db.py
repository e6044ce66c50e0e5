"""The server's database: an embedded SQLite file by default, PostgreSQL (psycopg 3) for teams.

Writes go through :meth:`ServerDatabase.write_retrying`: a transaction that lost a race
(two desks storing the same record at once, a PostgreSQL deadlock or serialisation failure,
SQLite busy past its timeout) is run again from the start, where the other writer's work is
visible and the record reads as already stored.
"""

from __future__ import annotations

import logging
import random
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.core.errors import DynadeskError
from app.core.storage.db import WRITE_OPTION, sqlite_engine
from app.core.storage.db import alembic_config as storage_alembic_config
from app.core.storage.db import head_revision as storage_head_revision

log = logging.getLogger(__name__)
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "dynadesk_server_version"
ADVISORY_LOCK = 7263201  # held by whoever upgrades or restores the schema
# Tests set it to a file: the first migration step, applied but not committed, creates it and waits to be killed.
PAUSE_IN_MIGRATION_ENV = "DYNADESK_TEST_PAUSE_IN_MIGRATION"
WRITE_ATTEMPTS = 8
T = TypeVar("T")

# PostgreSQL SQLSTATEs worth a retry: serialization_failure, deadlock_detected.
_RETRY_SQLSTATES = {"40001", "40P01"}


def database_url(value: str | Path) -> str:
    """A SQLAlchemy URL from what a user typed: a URL, or a path to a SQLite file."""
    text = str(value)
    if "://" not in text:
        return f"sqlite:///{Path(text).expanduser().resolve()}"
    url = make_url(text)
    if url.get_backend_name() == "postgresql":
        if url.drivername in ("postgresql", "postgres"):
            return url.set(drivername="postgresql+psycopg").render_as_string(hide_password=False)
        if url.drivername != "postgresql+psycopg":
            raise DynadeskError(f"Use the psycopg 3 driver for PostgreSQL (postgresql+psycopg://...), not {url.drivername}.")
        return text
    if url.get_backend_name() != "sqlite":
        raise DynadeskError(f"The server stores its data in SQLite or PostgreSQL, not {url.get_backend_name()}.")
    return text


def alembic_config(connection: Connection | None = None) -> Config:
    return storage_alembic_config(connection, MIGRATIONS_DIR)


def head_revision() -> str:
    return storage_head_revision(MIGRATIONS_DIR)


def _retryable(exc: Exception) -> bool:
    if isinstance(exc, IntegrityError):
        return True  # a concurrent insert of the same record: the retry sees it as stored
    if isinstance(exc, OperationalError):
        orig = getattr(exc, "orig", None)
        if isinstance(orig, sqlite3.OperationalError):
            return "locked" in str(orig) or "busy" in str(orig)
    if isinstance(exc, DBAPIError):
        return getattr(getattr(exc, "orig", None), "sqlstate", None) in _RETRY_SQLSTATES
    return False


class ServerDatabase:
    def __init__(self, url: str | Path, *, pool_size: int = 10):
        self.url = database_url(url)
        self.dialect = make_url(self.url).get_backend_name()
        if self.dialect == "sqlite":
            path = make_url(self.url).database
            if path and path != ":memory:":
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            self.engine: Engine = sqlite_engine(self.url)
        else:
            # Request threads each hold one connection for one transaction.
            self.engine = create_engine(self.url, pool_size=pool_size, max_overflow=pool_size * 3, pool_pre_ping=True,
                                        pool_timeout=60)
        self._readers = sessionmaker(self.engine, expire_on_commit=False)
        self._writers = sessionmaker(self.engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False)
        self._local_lock = threading.Lock() if self.dialect == "sqlite" else None
        self.races = 0  # transactions run again after losing a race (for tests and benchmarks)

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._readers() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """One transaction: committed as a whole when the block ends, or rolled back."""
        if self._local_lock is not None:
            # SQLite has one writer anyway; queueing here is cheaper than on the busy timeout.
            with self._local_lock, self._writers() as session, session.begin():
                yield session
        else:
            with self._writers() as session, session.begin():
                yield session

    def write_retrying(self, work: Callable[[Session], T], *, attempts: int = WRITE_ATTEMPTS) -> T:
        """Run ``work`` in a write transaction, again from the start if it lost a race."""
        for attempt in range(1, attempts + 1):
            try:
                with self.write() as session:
                    return work(session)
            except (IntegrityError, OperationalError, DBAPIError) as exc:
                if attempt == attempts or not _retryable(exc):
                    raise
                self.races += 1
                log.info("write lost a race (%s); retrying (%d/%d)", exc.__class__.__name__, attempt, attempts)
                time.sleep(random.uniform(0.005, 0.05) * attempt)
        raise AssertionError("unreachable")

    def close(self) -> None:
        self.engine.dispose()

    def current_revision(self) -> str | None:
        with self.engine.connect() as connection:
            return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()

    def _refuse_newer(self, current: str | None) -> None:
        script = ScriptDirectory.from_config(alembic_config())
        if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
            raise DynadeskError(f"The server database {self.describe()} was written by a newer Dynadesk "
                                f"(schema {current}). Install the Dynadesk version that wrote it, or a newer one, "
                                "to use it.")

    def upgrade(self, say: Callable[[str], object] = log.info) -> None:
        """Bring the schema to the newest revision (once, before workers start). A database written by an
        earlier release is copied first (``sync.server.backups``), and ``say`` is told where the copy is.

        Each upgrade is one transaction: killed midway, the database stays as it was, and the next start
        says so and upgrades again."""
        with self.engine.connect() as connection:
            if self.dialect == "postgresql":
                # Two servers started at once on one database: one copies and migrates, the other waits.
                connection.exec_driver_sql(f"SELECT pg_advisory_lock({ADVISORY_LOCK})")
                connection.commit()
            try:
                self._upgrade_on(connection, say)
            finally:
                if self.dialect == "postgresql":
                    connection.rollback()
                    connection.exec_driver_sql(f"SELECT pg_advisory_unlock({ADVISORY_LOCK})")
                    connection.commit()

    def _upgrade_on(self, connection: Connection, say: Callable[[str], object]) -> None:
        from sync.server import backups

        current = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()
        connection.commit()
        self._refuse_newer(current)
        head = head_revision()
        if current == head:
            return
        if current is not None:
            earlier = [b for b in backups.listed(self) if b.revision == current]
            if earlier:
                say(f"An earlier upgrade of {self.describe()} from schema {current} did not complete (or was undone "
                    f"with `serve restore-backup`): the database is still at {current}, with nothing of that upgrade "
                    f"in it. Upgrading again; the copy made then is at {earlier[0].name}.")
            where = backups.make(self, connection, current)
            say(f"Upgrading {self.describe()} from schema {current} to {head}; a copy as it was is kept at {where} "
                "(`dynadesk serve restore-backup` puts it back).")
        with connection.begin():
            command.upgrade(alembic_config(connection), "head")

    def check_schema(self) -> None:
        current = self.current_revision()
        if current != head_revision():
            self._refuse_newer(current)
            raise DynadeskError(
                f"The server database {self.describe()} is at schema {current or 'none'}, not {head_revision()}; "
                "run `dynadesk serve run` once: it upgrades the database before serving.")

    def describe(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

