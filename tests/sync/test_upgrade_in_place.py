"""Upgrading in place: a team's desks and its server database, written by the PREVIOUS release (its own
processes: its `serve run`, its Desk API and CLI, tests/sync/previous_release_team.py), are opened by this
release, which upgrades them. Every row of every table is still there with the same content, `stats` and the
server's team stats read the same, and the copy made before the migration is there and puts the database back
as it was. A server upgrade killed (SIGKILL) inside its first migration step leaves the database as it was;
the next start says so and completes it. The server database is SQLite, and PostgreSQL when
DYNADESK_TEST_PG_URL is set (a schema of its own)."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.engine import Engine

from app.cli import cli
from app.core.storage.db import head_revision as desk_head_revision
from app.core.storage.models import FTS_PREFIX
from sync.server import backups
from sync.server.db import PAUSE_IN_MIGRATION_ENV, VERSION_TABLE, ServerDatabase
from sync.server.db import head_revision as server_head_revision
from tests.previous_release import previous_release
from tests.sync.helpers import PG_ENV, ProcessServer, postgres_schema, wait_until

TEAM_SCRIPT = Path(__file__).with_name("previous_release_team.py")
BACKENDS = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
DESK_VERSION_TABLE = "alembic_version"
# Rows a desk rewrites whenever it opens (its planner statistics and their row count), not data.
DESK_BOOKKEEPING = {"sqlite_stat1", "sqlite_sequence"}
VOLATILE_META = {"analyzed_rows"}


def table_rows(engine: Engine, *, skip: set[str] = frozenset()) -> dict[str, dict]:
    """Every table's columns and rows (sorted), the database as it is; what is compared before and after."""
    out = {}
    with engine.connect() as connection:
        for table in sorted(inspect(connection).get_table_names()):
            if table in skip or table.startswith(FTS_PREFIX):  # the full-text index's shadow tables: derived
                continue
            columns = [c["name"] for c in inspect(connection).get_columns(table)]
            out[table] = {"columns": columns, "rows": rows_of(connection, table, columns)}
    return out


def rows_of(connection, table: str, columns: list[str]) -> list[tuple]:
    quoted = ", ".join(f'"{c}"' for c in columns)
    rows = [tuple(row) for row in connection.execute(text(f'SELECT {quoted} FROM "{table}"'))]
    if table == "meta":
        rows = [row for row in rows if row[0] not in VOLATILE_META]
    return sorted(rows, key=repr)


def still_there(before: dict[str, dict], engine: Engine) -> dict[str, str]:
    """What differs, per table of ``before``: its columns (a migration may add some) read again."""
    problems = {}
    with engine.connect() as connection:
        names = set(inspect(connection).get_table_names())
        for table, was in before.items():
            if table in (VERSION_TABLE, DESK_VERSION_TABLE):
                continue
            if table not in names:
                problems[table] = "the table is gone"
                continue
            now = rows_of(connection, table, was["columns"])
            if now != was["rows"]:
                missing = [r for r in was["rows"] if r not in now]
                problems[table] = f"{len(was['rows'])} rows before, {len(now)} after; {len(missing)} missing or " \
                                  f"changed, e.g. {missing[:2]}"
    return problems


def counts(rows: dict[str, dict]) -> dict[str, int]:
    return {table: len(value["rows"]) for table, value in rows.items()}


def revision_of(engine: Engine, table: str) -> str | None:
    with engine.connect() as connection:
        if table not in inspect(connection).get_table_names():
            return None
        return connection.execute(text(f'SELECT version_num FROM "{table}"')).scalar()


def desk_engine(folder: Path) -> Engine:
    return create_engine(f"sqlite:///{folder / 'dynadesk.sqlite'}")


def run(data_dir: Path, *args: str) -> str:
    result = CliRunner().invoke(cli, ["--data-dir", str(data_dir), *args])
    assert result.exit_code == 0, (args, result.output, result.exception)
    return result.output


def team_stats(url: str, token: str) -> dict:
    out = {}
    for by in ("round", "annotator"):
        response = httpx.get(f"{url}/v1/team/stats", params={"by": by}, timeout=60,
                             headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200, response.text
        out[by] = response.json()
    return out


@dataclass
class Written:
    """What the previous release left: the server database (at rest), the desks, and what it showed."""

    backend: str
    db_url: str
    folder: Path
    desks: dict[str, Path]
    accounts: dict[str, dict]
    stats: dict[str, dict[str, str]]
    team_stats: dict
    sync_status: dict[str, str]
    server_rows: dict[str, dict]
    desk_rows: dict[str, dict[str, dict]]
    server_revision: str | None
    desk_revisions: dict[str, str | None]
    blobs: dict[str, str]  # a published model's files: name -> sha256
    timings: dict[str, float] = field(default_factory=dict)


@pytest.fixture(scope="module")
def release():
    return previous_release()


@pytest.fixture(scope="module", params=BACKENDS)
def written(request, tmp_path_factory, release):
    import time

    folder = tmp_path_factory.mktemp(f"upgrade-{request.param}")
    holder = None
    if request.param == "sqlite":
        db_url = f"sqlite:///{folder / 'server' / 'server.sqlite'}"
    else:
        base = os.environ.get(PG_ENV)
        if not base:
            pytest.skip(f"{PG_ENV} is not set; .ci/run starts PostgreSQL 15 on loopback for these tests")
        holder = postgres_schema(base)
        db_url = holder.__enter__()
    started = time.monotonic()
    server = ProcessServer(db_url, folder / "server", release=release)
    try:
        server.start()
        shown = json.loads(release.script(TEAM_SCRIPT.read_text(), json.dumps(
            {"server": server.url, "db": db_url, "folder": str(folder)}), timeout=300).splitlines()[-1])
    finally:
        server.stop()
    built = time.monotonic() - started
    server_engine = ServerDatabase(db_url).engine
    desks = {key: Path(path) for key, path in shown["desks"].items()}
    written = Written(
        request.param, db_url, folder, desks, shown["accounts"], shown["stats"], shown["team_stats"],
        shown["sync_status"], table_rows(server_engine),
        {key: table_rows(desk_engine(path), skip=DESK_BOOKKEEPING) for key, path in desks.items()},
        revision_of(server_engine, VERSION_TABLE),
        {key: revision_of(desk_engine(path), DESK_VERSION_TABLE) for key, path in desks.items()}, shown["blobs"],
        {"previous release wrote the team's data": built})
    server_engine.dispose()
    yield written
    if holder is not None:
        drop_backup_schemas(db_url)
        holder.__exit__(None, None, None)


def drop_backup_schemas(db_url: str) -> None:
    """The copies the upgrade made (and what a restore set aside) live beside the test's schema."""
    engine = ServerDatabase(db_url).engine
    with engine.begin() as connection:
        live = connection.execute(text("SELECT current_schema()")).scalar_one()
        for schema in connection.execute(text("SELECT nspname FROM pg_namespace WHERE starts_with(nspname, :p)"),
                                         {"p": f"{live[:backups.PREFIX_CHARS]}_"}).scalars().all():
            if schema != live:
                connection.exec_driver_sql(f'DROP SCHEMA "{schema}" CASCADE')
    engine.dispose()


def test_the_previous_release_wrote_every_kind_and_nothing_waits(written):
    owner = written.desk_rows["owner"]
    examples = owner["examples"]["rows"]
    column = {name: i for i, name in enumerate(owner["examples"]["columns"])}
    statuses = {row[column["status"]] for row in examples}
    sources = {row[column["source"]] for row in examples}
    print(json.dumps({"statuses": sorted(statuses), "sources": sorted(map(str, sources)),
                      "desk counts": {k: counts(v) for k, v in written.desk_rows.items()},
                      "server counts": counts(written.server_rows), "timings": written.timings}, indent=1))
    assert {"submitted", "retracted"} <= statuses
    for status in written.sync_status.values():
        assert "Waiting:       0 record(s)" in status, status
    assert {"hatecheck", "dynahate", "anli"} <= sources  # and a JSONL import, written elsewhere
    assert written.server_revision is not None and all(written.desk_revisions.values())
    for table in ("validations", "example_reviews", "task_settings", "rounds", "examples"):
        assert written.server_rows[table]["rows"], table
    for table in ("validations", "example_reviews", "suite_cases", "rounds", "sync_outbox"):
        assert owner[table]["rows"] or written.desk_rows["lead"][table]["rows"], table


@dataclass
class ServerUpgrade:
    killed_log: str  # what the server said before it was killed inside the first migration step
    between: dict  # the database after the kill
    resumed_log: str  # what the next start said
    team_stats: dict  # what the upgraded server serves
    downloaded: dict[str, str]  # the sha256 of each model file it serves
    rows_after: dict[str, dict]
    revision_after: str | None
    seconds: float


@pytest.fixture(scope="module")
def server_upgrade(written) -> ServerUpgrade:
    """This release's `serve run` on the previous release's database: killed (SIGKILL) inside its first migration
    step, then started again, upgrading and serving."""
    import time

    assert written.server_revision != server_head_revision(), (
        f"this release has no server migration after the previous release's {written.server_revision}: "
        "a killed upgrade would test nothing")
    started = time.monotonic()
    marker = written.folder / "paused-in-first-migration-step"
    server = ProcessServer(written.db_url, written.folder / "server", env={PAUSE_IN_MIGRATION_ENV: str(marker)})
    try:
        server.start(wait=False)
        wait_until(lambda: marker.exists() or server.process.poll() is not None, timeout=120,
                   what="the upgrade to reach its first migration step")
        assert marker.exists(), server.log.read_text()
        server.kill()
        killed_log = server.log.read_text()
        db = ServerDatabase(written.db_url)
        between = {"revision": db.current_revision(), "problems": still_there(written.server_rows, db.engine),
                   "tables": set(inspect(db.engine).get_table_names()), "backups": backups.listed(db)}
        db.close()
        server.extra_env = {}
        server.start()
        resumed_log = server.log.read_text()[len(killed_log):]
        served = team_stats(server.url, written.accounts["lead"]["token"])
        downloaded = {}
        for name, sha in written.blobs.items():
            response = httpx.get(f"{server.url}/v1/blobs/{sha}", timeout=60,
                                 headers={"Authorization": f"Bearer {written.accounts['ann']['token']}"})
            assert response.status_code == 200, response.text
            downloaded[name] = hashlib.sha256(response.content).hexdigest()
    finally:
        server.stop()
    db = ServerDatabase(written.db_url)
    upgrade = ServerUpgrade(killed_log, between, resumed_log, served, downloaded, table_rows(db.engine), db.current_revision(),
                            time.monotonic() - started)
    db.close()
    return upgrade


def test_a_server_upgrade_killed_midway_leaves_the_database_as_it_was_and_says_where_its_copy_is(written,
                                                                                              server_upgrade):
    between = server_upgrade.between
    assert between["revision"] == written.server_revision
    assert between["problems"] == {}
    assert between["tables"] == set(written.server_rows)  # nothing of the first step was kept
    assert "Upgrading" in server_upgrade.killed_log and f"from schema {written.server_revision}" in \
        server_upgrade.killed_log, server_upgrade.killed_log
    [copy] = between["backups"]
    assert copy.revision == written.server_revision and copy.name in server_upgrade.killed_log


def test_the_next_start_says_the_upgrade_did_not_complete_and_completes_it_with_every_record(written,
                                                                                        server_upgrade):
    log = server_upgrade.resumed_log
    assert "An earlier upgrade" in log and "did not complete" in log and \
        f"the database is still at {written.server_revision}" in log, log
    assert server_upgrade.revision_after == server_head_revision()
    db = ServerDatabase(written.db_url)
    try:
        assert still_there(written.server_rows, db.engine) == {}
    finally:
        db.close()
    assert {t: n for t, n in counts(server_upgrade.rows_after).items() if t in written.server_rows} == \
        counts(written.server_rows)
    assert server_upgrade.team_stats == written.team_stats
    assert server_upgrade.downloaded == written.blobs  # the model files, whole, wherever this release keeps them
    print(json.dumps({"backend": written.backend, "server tables before": counts(written.server_rows),
                      "after": counts(server_upgrade.rows_after), "upgrade s": round(server_upgrade.seconds, 1),
                      "before": written.server_revision, "after revision": server_upgrade.revision_after}))


def test_the_copy_made_before_the_server_upgrade_puts_the_previous_releases_database_back(written, server_upgrade,
                                                                                          release):
    data = str(written.folder / "server")
    listed = run(written.folder, "serve", "restore-backup", "--list", "--db", written.db_url, "--data", data)
    assert written.server_revision in listed
    unknown = CliRunner().invoke(cli, ["--data-dir", str(written.folder), "serve", "restore-backup", "no-such-copy",
                                       "--yes", "--db", written.db_url, "--data", data])
    assert unknown.exit_code != 0 and "is not one of the copies" in str(unknown.exception), unknown.output
    restored = run(written.folder, "serve", "restore-backup", "--yes", "--db", written.db_url, "--data", data)
    assert "Restored" in restored and "kept at" in restored, restored
    db = ServerDatabase(written.db_url)
    try:
        assert db.current_revision() == written.server_revision
        assert table_rows(db.engine) == written.server_rows
    finally:
        db.close()
    previous = ProcessServer(written.db_url, written.folder / "server", release=release)
    try:  # and the previous release serves it again, as it did
        previous.start()
        assert team_stats(previous.url, written.accounts["lead"]["token"]) == written.team_stats
        for sha in written.blobs.values():
            response = httpx.get(f"{previous.url}/v1/blobs/{sha}", timeout=60,
                                 headers={"Authorization": f"Bearer {written.accounts['ann']['token']}"})
            assert hashlib.sha256(response.content).hexdigest() == sha
    finally:
        previous.stop()


def test_restore_backup_without_a_copy_or_with_a_name_it_does_not_know_says_so_and_changes_nothing(tmp_path):
    data = str(tmp_path / "server")
    db = ServerDatabase(tmp_path / "server" / "server.sqlite")
    db.upgrade()
    db.close()
    for args, said in ((["--yes"], "There is no copy of"), (["elsewhere.sqlite", "--yes"], "There is no copy of")):
        result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "serve", "restore-backup", *args, "--data", data])
        assert result.exit_code != 0 and said in str(result.exception), (result.output, result.exception)
    assert sorted(p.name for p in (tmp_path / "server").iterdir()) == ["server.sqlite"] + \
        sorted(p.name for p in (tmp_path / "server").glob("server.sqlite-*"))


@dataclass
class DeskUpgrade:
    stats: dict[str, dict[str, str]]
    rows_after: dict[str, dict[str, dict]]
    revisions_after: dict[str, str | None]
    seconds: float


@pytest.fixture(scope="module")
def desk_upgrade(written) -> DeskUpgrade:
    """This release opens each desk the previous release wrote (its first command, `stats`, upgrades it; `init`
    would also make the default model round 1's target, a change of its own)."""
    import time

    started = time.monotonic()
    stats = {}
    for key, folder in written.desks.items():
        stats[key] = {"text": run(folder, "stats"), "json": run(folder, "stats", "--json")}
    return DeskUpgrade(stats, {k: table_rows(desk_engine(p), skip=DESK_BOOKKEEPING) for k, p in written.desks.items()},
                       {k: revision_of(desk_engine(p), DESK_VERSION_TABLE) for k, p in written.desks.items()},
                       time.monotonic() - started)


def test_every_desk_keeps_every_record_and_reads_the_same_figures(written, desk_upgrade):
    for key, folder in written.desks.items():
        assert desk_upgrade.revisions_after[key] == desk_head_revision()
        assert still_there(written.desk_rows[key], desk_engine(folder)) == {}, key
        assert json.loads(desk_upgrade.stats[key]["json"]) == json.loads(written.stats[key]["json"]), key
        assert desk_upgrade.stats[key]["text"] == written.stats[key]["text"], key


def test_a_desk_upgrade_keeps_a_copy_that_restore_backup_puts_back(written, desk_upgrade):
    """A desk whose schema had to change has its copy from before, and `restore-backup` puts it back; a desk
    already at this release's schema is not copied (nothing was migrated) and is left as it was."""
    for key, folder in written.desks.items():
        copies = sorted(folder.glob(f"dynadesk.before-upgrade-{written.desk_revisions[key]}.*.sqlite"))
        if written.desk_revisions[key] == desk_head_revision():
            assert copies == [] and desk_upgrade.revisions_after[key] == written.desk_revisions[key]
            continue
        [copy] = copies
        run(folder, "restore-backup", str(copy), "--yes")
        assert table_rows(desk_engine(folder), skip=DESK_BOOKKEEPING) == written.desk_rows[key]
