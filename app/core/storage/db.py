"""The local SQLite database: connection settings, migrations on open, and the unit of work.

Every write goes through :meth:`Database.write`: one writer at a time in this process (a lock)
and across processes (``BEGIN IMMEDIATE`` plus a busy timeout), so a write is either fully
committed or absent. Reads take a consistent snapshot and never wait for writers (WAL).

A damaged file must not take more writes: SQLite's ``quick_check`` runs on a background thread
at open (it takes ~0.6 s at 100k examples, too long for the start-up budget) and before every
import or sync (:meth:`Database.ensure_intact`); once damage is seen, writes are refused with a
message that names the newest automatic backup. A healthy database gets a rolling daily copy.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, event, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DatabaseError as SADatabaseError
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.core.errors import DatabaseError
from app.core.storage.change_log import ChangeLog
from app.core.storage.models import FTS_PREFIX, Meta

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
BUSY_TIMEOUT_MS = 30_000
CACHE_KIB = 64 * 1024  # per connection; review scans over 100k examples stay in memory
WRITE_OPTION = "dynadesk_write"  # execution option of write sessions: BEGIN IMMEDIATE
# The test suite sets this (as CI's PostgreSQL runs with fsync=off): files stay real and a killed process still
# loses nothing, since the OS holds what was written; only a power cut could, which no test makes.
NO_FSYNC_FOR_TESTS = "DYNADESK_TEST_NO_FSYNC"
BACKUPS_DIR = "backups"  # next to the database: the rolling daily copies
DAILY_LABEL = "daily"
DAILY_BACKUPS_KEPT = 3  # each is a full copy (~370 MB at 100k examples)
DAILY_BACKUP_AGE_S = 24 * 3600
SET_ASIDE_LABEL = "set-aside"  # a file replaced by restore_backup: kept, but never offered as a backup
# What SQLite says about a damaged file, and about one it may not write.
DAMAGE_MARKERS = ("malformed", "file is not a database", "database corruption")
READ_ONLY_MARKERS = ("readonly database", "read-only", "unable to open database file")


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
        # acknowledged work must survive a power cut
        cursor.execute("PRAGMA synchronous = " + ("OFF" if os.environ.get(NO_FSYNC_FOR_TESTS) == "1" else "FULL"))
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
    head = ScriptDirectory.from_config(alembic_config(migrations=migrations)).get_current_head()
    assert head is not None  # the migrations folder always holds the initial schema
    return head


class Database:
    """One SQLite file. Use :meth:`read` for queries and :meth:`write` for the unit of work."""

    def __init__(self, path: Path, *, upgrade: bool = True):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = sqlite_engine(f"sqlite:///{self.path}", cache_kib=CACHE_KIB)
        self._readers = sessionmaker(self.engine, expire_on_commit=False)
        self._writers = sessionmaker(self.engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False)
        self.changes = ChangeLog()  # what each committed write changed, for whoever shows the data
        self.changes.watch(self._writers)
        self._write_lock = threading.RLock()
        self.backup_path: Path | None = None  # set when an upgrade kept a copy of the old file
        self.damage: DatabaseError | None = None  # set once SQLite reports the file damaged
        self.damage_found = ""  # what SQLite said
        self._closing = threading.Event()
        self._damage_listeners: list = []
        self._health_thread: threading.Thread | None = None
        event.listen(self.engine, "handle_error", self._explain_error)
        try:
            self._check_readable()
            if upgrade:
                existed = self.current_revision() is not None
                self.upgrade()
                self.refresh_statistics()
                self._health_thread = threading.Thread(target=self._check_in_background, args=(existed,),
                                                       name="dynadesk-db-check", daemon=True)
                self._health_thread.start()
        except BaseException:
            self.engine.dispose()
            raise

    @contextmanager
    def read(self) -> Iterator[Session]:
        with self._readers() as session:
            yield session

    @contextmanager
    def write(self) -> Iterator[Session]:
        """A unit of work: everything done in the block commits together, or not at all."""
        self._refuse_if_damaged()
        with self._write_lock:
            with self._writers() as session:
                with session.begin():
                    yield session

    def close(self) -> None:
        self._closing.set()  # interrupts a check or a copy in progress
        if self._health_thread is not None and self._health_thread is not threading.current_thread():
            self._health_thread.join(timeout=10)
        self.engine.dispose()

    def refresh_statistics(self, *, force: bool = False) -> bool:
        """Give SQLite's planner fresh statistics when the examples table has grown by a quarter.

        Without them it sorts 100k rows where an index would serve a page in a millisecond.
        The full-text index's shadow tables are left out: statistics taken while they were small
        mislead FTS5's own queries, and inserts become some ten times slower.
        Returns whether statistics were gathered.
        """
        with self._write_lock, self.engine.connect() as connection:
            rows = connection.exec_driver_sql("SELECT count(*) FROM examples").scalar_one()
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

    def _check_readable(self) -> None:
        try:
            with self.engine.connect() as connection:
                connection.exec_driver_sql("SELECT count(*) FROM sqlite_master").scalar()
        except (SADatabaseError, OperationalError) as exc:
            problem = str(exc.orig)
        except DatabaseError:
            if self.damage is None:
                raise  # read-only: already said
            problem = self.damage_found
        else:
            return
        raise DatabaseError(f"{self.path} cannot be opened as a Dynadesk database: {problem}. "
                            f"If it is damaged, restore a backup. {restore_advice(self.path)}")

    def _explain_error(self, context) -> None:
        """SQLAlchemy's error hook: a damaged or read-only file becomes a message for the person at
        the desk (raw SQL and parameters never reach them), and a damaged one takes no more writes."""
        problem = str(context.original_exception)
        lowered = problem.lower()
        if any(marker in lowered for marker in DAMAGE_MARKERS):
            self._damaged(problem)
            self._refuse_if_damaged()
        if any(marker in lowered for marker in READ_ONLY_MARKERS):
            raise self._read_only(problem) from context.original_exception

    def _damaged(self, problem: str) -> None:
        if self.damage is None:
            log.error("%s is damaged: %s", self.path, problem)
            self.damage_found = problem
            self.damage = DatabaseError(damage_message(self.path, problem))
            for listener in list(self._damage_listeners):
                try:
                    listener(self.damage)
                except Exception:  # e.g. a window already closed: the refusal itself still stands
                    log.exception("a listener for database damage failed")

    def _refuse_if_damaged(self) -> None:
        if self.damage is not None:
            raise DatabaseError(str(self.damage))  # a fresh error per refusal: threads may share none

    def _read_only(self, problem: str) -> DatabaseError:
        folder = self.path.parent
        if not _folder_writable(folder):
            return DatabaseError(f"the data folder {folder} is read-only; Dynadesk keeps its database there and "
                                 "needs to write to it. Make the folder writable, or choose another with --data-dir.")
        return DatabaseError(f"the database file {self.path} is read-only; Dynadesk needs to write to it. "
                             "Make the file writable, or choose another data folder with --data-dir.")

    def on_damage(self, listener) -> None:
        """Call ``listener(error)`` once when damage is found (possibly on the background thread)."""
        self._damage_listeners.append(listener)
        if self.damage is not None:
            listener(self.damage)

    def quick_check(self) -> str | None:
        """SQLite's ``quick_check`` (pages and records, not index contents): ``None`` when the file
        is sound, otherwise what SQLite found. Interrupted (``None``) when the database is closing."""
        try:
            connection = sqlite3.connect(self.path, check_same_thread=False)
        except sqlite3.Error as exc:
            return str(exc)
        try:
            connection.set_progress_handler(self._closing.is_set, 10_000)
            rows = connection.execute("PRAGMA quick_check(5)").fetchall()
        except sqlite3.Error as exc:
            return None if self._closing.is_set() else str(exc)
        finally:
            connection.close()
        problems = [row[0] for row in rows if row[0] != "ok"]
        return "; ".join(problems) if problems else None

    def ensure_intact(self) -> None:
        """Raise the "restore a backup" error unless the file passes ``quick_check`` (before imports
        and syncs: a damaged file must not receive a batch of rows)."""
        if self.damage is None:
            problem = self.quick_check()
            if problem is not None:
                self._damaged(problem)
        self._refuse_if_damaged()

    def wait_for_check(self, timeout: float | None = None) -> None:
        """Wait for the check (and daily copy) started at open; for tools and tests, never the GUI thread."""
        if self._health_thread is not None:
            self._health_thread.join(timeout)

    def checked(self) -> None:
        """Wait for the check started at open and raise the "restore a backup" error if it found damage:
        a one-shot command must not report from a damaged file whatever its queries happen to read."""
        self.wait_for_check()
        self._refuse_if_damaged()

    def _check_in_background(self, make_daily_copy: bool) -> None:
        try:
            problem = self.quick_check()
            if self._closing.is_set():
                return
            if problem is not None:
                self._damaged(problem)
            elif make_daily_copy:
                self.daily_backup()
        except Exception:  # a failed copy must not disturb the desk; the next start tries again
            log.exception("the background check or daily copy of %s failed", self.path)

    def daily_backup(self, *, now: float | None = None) -> Path | None:
        """Copy the database to backups/ when the newest daily copy is a day old (or there is none),
        keeping the last few. Only a file that passed ``quick_check`` should be copied."""
        now = time.time() if now is None else now
        folder = self.path.parent / BACKUPS_DIR
        copies = daily_backups(self.path)
        if copies and now - copies[-1].stat().st_mtime < DAILY_BACKUP_AGE_S:
            return None
        folder.mkdir(exist_ok=True)
        target = self.backup(DAILY_LABEL, folder=folder, interruptible=True)
        if target is None:
            return None
        for old in daily_backups(self.path)[:-DAILY_BACKUPS_KEPT]:
            old.unlink(missing_ok=True)
        log.info("daily copy of %s made at %s", self.path, target)
        return target

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
                driver: Any = connection.connection.driver_connection  # a sqlite3 connection
                driver.execute("PRAGMA foreign_keys = OFF")
                with connection.begin():
                    command.upgrade(alembic_config(connection), revision)
                    problems = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if problems:
                        raise DatabaseError(f"the upgrade would break {len(problems)} reference(s); nothing was changed")
                driver.execute("PRAGMA foreign_keys = ON")

    def backup(self, label: str, *, folder: Path | None = None, interruptible: bool = False) -> Path | None:
        """A consistent copy of the database file, made with SQLite's online backup. An
        interruptible copy (the background one) stops when the database closes: ``None``."""
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S-%f")
        target = (folder or self.path.parent) / f"{self.path.stem}.{label}.{stamp}{self.path.suffix}"

        def progress(_status, _remaining, _total) -> None:
            if interruptible and self._closing.is_set():
                raise InterruptedError("the database is closing")

        try:
            copy_database_file(self.path, target, pages=4096 if interruptible else -1, progress=progress)
        except InterruptedError:
            return None
        return target

    def integrity_check(self) -> str:
        with self.engine.connect() as connection:
            return connection.exec_driver_sql("PRAGMA integrity_check").scalar_one()

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


def copy_database_file(database: Path, target: Path, *, pages: int = -1, progress=None) -> None:
    """A consistent copy of a SQLite file at ``target`` (SQLite's online backup), made under another name
    first so that a half-made copy is never taken for a finished one; a failure (or ``progress`` raising)
    leaves no copy."""
    partial = target.with_name(target.name + ".partial")
    source = sqlite3.connect(database)
    try:
        copy = sqlite3.connect(partial)
        try:
            source.backup(copy, pages=pages, progress=progress)
        finally:
            copy.close()
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        source.close()
    os.replace(partial, target)


def daily_backups(database: Path) -> list[Path]:
    """The rolling daily copies of ``database``, oldest first."""
    folder = database.parent / BACKUPS_DIR
    return sorted(folder.glob(f"{database.stem}.{DAILY_LABEL}.*{database.suffix}"), key=lambda p: p.stat().st_mtime)


def automatic_backups(database: Path) -> list[Path]:
    """Every copy Dynadesk made of ``database`` (daily, and before upgrades), newest first."""
    pattern = f"{database.stem}.*{database.suffix}"
    found = [*database.parent.glob(pattern), *(database.parent / BACKUPS_DIR).glob(pattern)]
    return sorted((p for p in found if p != database and f".{SET_ASIDE_LABEL}." not in p.name),
                  key=lambda p: p.stat().st_mtime, reverse=True)


def restore_advice(database: Path) -> str:
    backups = automatic_backups(database)
    if not backups:
        return "There is no automatic backup of it yet: restore a copy of your own, or move the file aside to start afresh."
    newest = backups[0]
    made = datetime.fromtimestamp(newest.stat().st_mtime).strftime("%Y-%m-%d %H:%M")
    return (f"The newest automatic backup is {newest} (made {made}); `dynadesk restore-backup` puts it in place "
            "and keeps the damaged file aside.")


def damage_message(database: Path, problem: str) -> str:
    return (f"the database file {database} is damaged ({problem}); nothing more is written to it. "
            f"Restore a backup. {restore_advice(database)}")


def _folder_writable(folder: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def restore_backup(database: Path, backup: Path) -> Path:
    """Put ``backup`` in place of ``database`` (which must not be open), after checking the copy.
    The file it replaces, with its WAL, is kept aside; returns where."""
    database, backup = Path(database), Path(backup)
    partial = database.with_name(database.name + ".restoring")
    try:
        source = sqlite3.connect(f"{backup.resolve().as_uri()}?mode=ro", uri=True)  # never changes the backup
        try:
            problems = [row[0] for row in source.execute("PRAGMA quick_check(5)").fetchall() if row[0] != "ok"]
            if not problems:
                copy = sqlite3.connect(partial)
                try:
                    source.backup(copy)
                finally:
                    copy.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        problems = [str(exc)]
    if problems:
        partial.unlink(missing_ok=True)
        raise DatabaseError(f"the backup {backup} cannot be used: it is damaged ({'; '.join(problems)}). "
                            "Nothing was changed; choose another backup.")
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    aside = database.with_name(f"{database.stem}.{SET_ASIDE_LABEL}.{stamp}{database.suffix}")
    for suffix in ("-wal", "-shm", ""):  # the WAL belongs to the old file: it must not replay onto the copy
        old = database.with_name(database.name + suffix)
        if old.exists():
            os.replace(old, aside.with_name(aside.name + suffix))
    os.replace(partial, database)
    return aside
