"""The local SQLite database: connection settings, migrations on open, and the unit of work.

Every write goes through :meth:`Database.write`: one writer at a time in this process (a lock)
and across processes (``BEGIN IMMEDIATE`` plus a busy timeout), so a write is either fully
committed or absent. Reads take a consistent snapshot and never wait for writers (WAL).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Iterator

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError as SADatabaseError
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.errors import DatabaseError
from app.storage.models import FTS_PREFIX, Meta

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 64 * 1024  # per connection; review scans over 100k examples stay in memory
WRITE_OPTION = "dynadesk_write"  # execution option of write sessions: BEGIN IMMEDIATE


def sqlite_engine(url: str, *, cache_kib: int | None = None) -> Engine:
    """An engine on a SQLite file set up for durable writes by several threads and processes:
    WAL, synchronous=FULL, foreign keys, a busy timeout, and BEGIN IMMEDIATE for writers (the desk
    and the sync server both use it)."""

    def configure(dbapi_connection: sqlite3.Connection, _record) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is unreliable).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA journal_mode = WAL")
        cursor.execute("PRAGMA synchronous = FULL")  # acknowledged work must survive a power cut
        cursor.execute("PRAGMA foreign_keys = ON")
        if cache_kib:
            cursor.execute(f"PRAGMA cache_size = -{cache_kib}")
        cursor.close()

    def begin(connection) -> None:
        # Writers reserve the database up front, so two writers never deadlock on a lock upgrade.
        connection.exec_driver_sql("BEGIN IMMEDIATE" if connection.get_execution_options().get(WRITE_OPTION)
                                   else "BEGIN")

    engine = create_engine(url, connect_args={"check_same_thread": False})
    event.listen(engine, "connect", configure)
    event.listen(engine, "begin", begin)
    return engine


def alembic_config(connection=None, migrations: Path = MIGRATIONS_DIR) -> Config:
    """Alembic's configuration for a migrations folder (the desk's, or the sync server's)."""
    config = Config()
    config.set_main_option("script_location", str(migrations))
    config.attributes["connection"] = connection
    return config


def head_revision(migrations: Path = MIGRATIONS_DIR) -> str:
    return ScriptDirectory.from_config(alembic_config(migrations=migrations)).get_current_head()


class Database:
    """One SQLite file. Use :meth:`read` for queries and :meth:`write` for the unit of work."""

    def __init__(self, path: Path, *, upgrade: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = sqlite_engine(f"sqlite:///{self.path}", cache_kib=CACHE_KIB)
        self._readers = sessionmaker(self.engine, expire_on_commit=False)
        self._writers = sessionmaker(self.engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False)
        self._write_lock = threading.RLock()
        self.backup_path: Path | None = None  # set when an upgrade kept a copy of the old file
        try:
            self._check_readable()
            if upgrade:
                self.upgrade()
                self.refresh_statistics()
        except BaseException:
            self.engine.dispose()
            raise

    # --- sessions -------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._readers() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A unit of work: everything done in the block commits together, or not at all."""
        with self._write_lock:
            with self._writers() as session:
                with session.begin():
                    yield session

    def close(self) -> None:
        self.engine.dispose()

    def refresh_statistics(self, *, force: bool = False) -> bool:
        """Give SQLite's planner fresh statistics when the examples table has grown by a quarter.

        Without them it sorts 100k rows where an index would serve a page in a millisecond.
        The full-text index's shadow tables are left out: statistics taken while they were small
        mislead FTS5's own queries, and inserts become some ten times slower.
        Returns whether statistics were gathered.
        """
        with self._write_lock, self.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT count(*) FROM examples").scalar()
            known = connection.exec_driver_sql("SELECT value FROM meta WHERE key = 'analyzed_rows'").scalar()
            if rows == 0 or (not force and known is not None and rows < int(known) * 1.25 + 1000):
                return False
            # A full pass: sampled statistics (analysis_limit) cap every estimate at the sample
            # size, which makes "task = X" look selective when it matches every row.
            connection.exec_driver_sql("ANALYZE")
            connection.exec_driver_sql(f"DELETE FROM sqlite_stat1 WHERE tbl LIKE '{FTS_PREFIX}%'")
            connection.exec_driver_sql("INSERT OR REPLACE INTO meta (key, value) VALUES ('analyzed_rows', ?)", (str(rows),))
            connection.commit()
            return True

    # --- schema ---------------------------------------------------------------------------

    def _check_readable(self) -> None:
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
        except (SADatabaseError, OperationalError) as exc:
            raise DatabaseError(
                f"{self.path} cannot be opened as a Dynadesk database: {exc.orig}. "
                "If it is damaged, restore a backup or move it aside to start afresh."
            ) from exc

    def current_revision(self) -> str | None:
        with self.engine.connect() as connection:
            return MigrationContext.configure(connection).get_current_revision()

    def upgrade(self, revision: str = "head") -> None:
        """Bring the schema up to ``revision``, keeping a copy of the old file first."""
        current = self.current_revision()
        script = ScriptDirectory.from_config(alembic_config())
        if current is not None and current not in {rev.revision for rev in script.walk_revisions()}:
            raise DatabaseError(
                f"{self.path} was written by a newer Dynadesk (schema {current}). Update Dynadesk to open it."
            )
        target = script.get_current_head() if revision == "head" else revision
        if current == target:
            return
        if current is not None:
            self.backup_path = self.backup(f"before-upgrade-{current}")
            log.info("Upgrading %s from %s to %s; a copy is kept at %s", self.path, current, target, self.backup_path)
        with self._write_lock:
            with self.engine.connect() as connection:
                # Table rebuilds during migrations need foreign keys off (a no-op inside a
                # transaction, hence on the driver connection); they are checked afterwards.
                driver = connection.connection.driver_connection
                driver.execute("PRAGMA foreign_keys = OFF")
                with connection.begin():
                    command.upgrade(alembic_config(connection), revision)
                    problems = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if problems:
                        raise DatabaseError(f"the upgrade would break {len(problems)} reference(s); nothing was changed")
                driver.execute("PRAGMA foreign_keys = ON")

    def backup(self, label: str) -> Path:
        """A consistent copy of the database file, made with SQLite's online backup."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        target = self.path.with_name(f"{self.path.stem}.{label}.{stamp}{self.path.suffix}")
        source = sqlite3.connect(self.path)
        try:
            copy = sqlite3.connect(target)
            try:
                source.backup(copy)
            finally:
                copy.close()
        finally:
            source.close()
        return target

    def integrity_check(self) -> str:
        with self.engine.connect() as connection:
            return connection.exec_driver_sql("PRAGMA integrity_check").scalar()

    # --- database-wide values -------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        with self.read() as session:
            return session.scalar(select(Meta.value).where(Meta.key == key))

    def ensure_meta(self, key: str, make_value) -> str:
        with self.write() as session:
            row = session.get(Meta, key)
            if row is None:
                row = Meta(key=key, value=make_value())
                session.add(row)
            return row.value
