"""CLI commands for the team's server: ``dynadesk serve ...`` (run it, its people and tokens, quotas, the
blob sweep, quarantined records). This desk's side is app/cli/sync.py.

Failures end as ``DynadeskError`` messages, never as tracebacks.
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from app.cli.base import format_table, pass_context
from app.core import paths
from app.core.errors import DynadeskError
from app.core.formatting import size_text
from app.core.text import printable
from sync.server.limits import DEFAULT_PER_ADDRESS, DEFAULT_PER_TOKEN, Rate

SERVER_DB_ENV = "DYNADESK_SERVER_DB"
SWEEP_GRACE_HOURS = 24.0
DEFAULT_PORT = 8765


def _server_dir(obj, data: str | None) -> Path:
    return Path(data).expanduser().resolve() if data else paths.data_dir(obj.data_dir) / "server"


SERVER_EXTRA = "pip install 'dynadesk[server]'"


def _server_db(obj, db: str | None, data: str | None):
    from sync.server.db import ServerDatabase

    folder = _server_dir(obj, data)
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return ServerDatabase(db or folder / "server.sqlite")
    except ModuleNotFoundError as exc:  # the desktop app and its bundle have no PostgreSQL driver
        if not (exc.name or "").startswith("psycopg"):
            raise
        raise DynadeskError(f"This installation has no PostgreSQL driver ({exc.name}); the team's "
                            f"server needs the server extra: {SERVER_EXTRA}.") from None


def _server_options(command):
    command = click.option("--data", type=click.Path(file_okay=False),
                           help="Server folder for model files (and the SQLite file) [default: DATA-DIR/server].")(command)
    return click.option("--db", envvar=SERVER_DB_ENV,
                        help="Database URL: a SQLite path (the default, in the server folder) or "
                             "postgresql+psycopg://user@host/db for teams [env: DYNADESK_SERVER_DB].")(command)


def _blobs_option(command):
    return click.option("--blobs", type=click.Choice(["auto", "database", "files"]), envvar="DYNADESK_SERVER_BLOBS",
                        default="auto", show_default=True,
                        help="Where model files live: 'database' (every server machine on the database sees them), "
                             "'files' (the server folder; one machine), 'auto': the database on PostgreSQL, files "
                             "on SQLite [env: DYNADESK_SERVER_BLOBS].")(command)


@click.group()
def serve() -> None:
    """The central sync server: run it, and manage who may use it."""


def _rate_option(_ctx, param, value: str) -> Rate:
    try:
        return Rate.parse(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param=param) from None


def _check_tls_pair(certfile: str, keyfile: str) -> None:
    """A clear sentence now rather than an SSL error from every worker."""
    import ssl

    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(certfile, keyfile)
    except ssl.SSLError as exc:
        raise DynadeskError(f"The certificate {certfile} and the key {keyfile} cannot be used together "
                            f"({exc.reason or 'not PEM, or a key that does not match'}).") from None
    except OSError as exc:
        raise DynadeskError(f"The file {exc.filename or certfile} cannot be read: {exc.strerror}.") from None


@serve.command("run")
@_server_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0 for all).")
@click.option("--port", type=int, default=DEFAULT_PORT, show_default=True)
@click.option("--workers", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Worker processes; use several (with PostgreSQL) for teams.")
@click.option("--fd", type=int, hidden=True, help="Serve on this already-open listening socket (socket activation).")
@click.option("--access-log", is_flag=True, help="Log every request.")
@click.option("--certfile", type=click.Path(exists=True, dir_okay=False),
              help="Serve HTTPS with this certificate (PEM, with its chain); needs --keyfile.")
@click.option("--keyfile", type=click.Path(exists=True, dir_okay=False), help="The certificate's private key (PEM).")
@click.option("--token-limit", envvar="DYNADESK_SERVER_TOKEN_LIMIT", default=DEFAULT_PER_TOKEN, show_default=True,
              callback=_rate_option, help="Requests per token, e.g. 20/s or 1200/min; 0 for none "
                                          "[env: DYNADESK_SERVER_TOKEN_LIMIT]. Counted in the database on "
                                          "PostgreSQL (shared by every server process), by each worker on SQLite.")
@click.option("--address-limit", envvar="DYNADESK_SERVER_ADDRESS_LIMIT", default=DEFAULT_PER_ADDRESS, show_default=True,
              callback=_rate_option, help="Requests per client address; 0 for none "
                                          "[env: DYNADESK_SERVER_ADDRESS_LIMIT]. Counted as --token-limit is.")
@_blobs_option
@pass_context
def serve_run(obj, db: str | None, data: str | None, host: str, port: int, workers: int, fd: int | None,
              access_log: bool, certfile: str | None, keyfile: str | None, token_limit, address_limit,
              blobs: str) -> None:
    """Upgrade the server database if needed, then serve until interrupted (Ctrl+C).

    Serve HTTPS with --certfile/--keyfile, or plain HTTP on loopback behind a reverse proxy that
    terminates TLS (docs/sync.md): tokens must never cross a network in clear."""
    try:  # the desktop app and its bundle leave the web server out
        import uvicorn

        from sync.server.app import ADDRESS_LIMIT_ENV, DATA_ENV, DB_ENV, TOKEN_LIMIT_ENV
        from sync.server.blob_store import BLOBS_ENV
        from sync.server.shared_limits import SHARED_LIMITS_ENV
    except ImportError as exc:
        raise DynadeskError(f"This installation cannot run the sync server ({exc.name} is not installed): "
                            f"install the server extra, {SERVER_EXTRA}.") from None

    if bool(certfile) != bool(keyfile):
        raise click.UsageError("--certfile and --keyfile go together.")
    if certfile and keyfile:
        _check_tls_pair(certfile, keyfile)
    database = _server_db(obj, db, data)
    try:
        database.upgrade(say=lambda message: click.echo(message, err=True))
        url = database.url
        shared = database.dialect == "postgresql"
        click.echo(f"Database: {database.describe()} (schema {database.current_revision()})", err=True)
        kind = _move_blobs(database, _server_dir(obj, data), blobs)
    finally:
        database.close()
    _sweep(_server_db(obj, db, data), _server_dir(obj, data), SWEEP_GRACE_HOURS, kind=kind)
    os.environ[DB_ENV] = url
    os.environ[DATA_ENV] = str(_server_dir(obj, data))
    os.environ[TOKEN_LIMIT_ENV], os.environ[ADDRESS_LIMIT_ENV] = str(token_limit), str(address_limit)
    os.environ[BLOBS_ENV], os.environ[SHARED_LIMITS_ENV] = kind, "on" if shared else "off"
    scheme = "https" if certfile else "http"
    where = f"file descriptor {fd} ({scheme})" if fd is not None else f"{scheme}://{host}:{port}"
    click.echo(f"Serving Dynadesk sync on {where} with {workers} worker(s); OpenAPI at /openapi.json; "
               f"limits: {token_limit.describe()} per token, {address_limit.describe()} per address, "
               f"{'shared in the database' if shared else 'counted by each worker'}; model files {kind_text(kind)}",
               err=True)
    uvicorn.run("sync.server.app:create_app_from_env", factory=True, host=host, port=port, fd=fd, workers=workers,
                access_log=access_log, log_level="info" if access_log else "warning", timeout_graceful_shutdown=10,
                ssl_certfile=certfile, ssl_keyfile=keyfile)


@serve.command("restore-backup")
@click.argument("backup", required=False)
@click.option("--list", "list_only", is_flag=True, help="List the copies made before upgrades, newest first.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@_server_options
@pass_context
def serve_restore_backup(obj, backup: str | None, list_only: bool, yes: bool, db: str | None, data: str | None) -> None:
    """Put back the copy `serve run` made before upgrading the database (default: the newest). Stop every
    server on the database first. What it replaces is kept aside (a file, or a schema), never deleted."""
    from sync.server import backups

    database = _server_db(obj, db, data)
    try:
        found = backups.listed(database)
        if list_only:
            click.echo(format_table(["backup", "schema", "made"],
                                    [[b.name, b.revision or "?", b.made.strftime("%Y-%m-%d %H:%M")] for b in found]))
            return
        if not found:
            raise DynadeskError(f"There is no copy of {database.describe()} made before an upgrade.")
        chosen = next((b for b in found if backup in {b.name, str(Path(b.name).resolve())}), None) if backup else found[0]
        if chosen is None:
            raise DynadeskError(f"{backup} is not one of the copies of {database.describe()}; "
                                "`dynadesk serve restore-backup --list` lists them.")
        if not yes:
            click.confirm(f"Replace {database.describe()} with {chosen.name} (schema {chosen.revision})? "
                          "What it replaces is kept aside.", abort=True)
        aside = backups.restore(database, chosen)
        click.echo(f"Restored {chosen.name} (schema {chosen.revision}) to {database.describe()}; what it replaced "
                   f"is kept at {aside}. Start the release that wrote it, or `serve run` to upgrade it again.")
    finally:
        database.close()


@serve.command("add-person")
@click.argument("name")
@click.option("--role", type=click.Choice(["annotator", "lead", "owner"]), required=True)
@click.option("--team", default="default", show_default=True, help="Annotators see only their team's work.")
@click.option("--id", "person_id", help="Give the person this id (their existing desk profile's id).")
@_server_options
@pass_context
def serve_add_person(obj, name: str, role: str, team: str, person_id: str | None, db: str | None,
                     data: str | None) -> None:
    """Add a person and print their API token (shown this once; only its hash is kept)."""
    import uuid

    from pydantic import TypeAdapter, ValidationError

    from sync.protocol import Team
    from sync.server import store

    try:
        TypeAdapter(Team).validate_python(team)
    except ValidationError:
        raise DynadeskError("A team name has 1 to 64 letters, digits, spaces, dots, dashes or underscores.") from None
    try:
        chosen = uuid.UUID(person_id) if person_id else None
    except ValueError:
        raise DynadeskError(f"--id '{person_id}' is not a UUID.") from None
    database = _server_db(obj, db, data)
    try:
        database.upgrade(say=lambda message: click.echo(message, err=True))
        person, token = store.add_person(database, name, role, team, chosen)
    finally:
        database.close()
    click.echo(f"Added {person.display_name} ({person.role}, team {person.team}), id {person.id}.", err=True)
    click.echo("Their token (shown only now; give it to them privately):", err=True)
    click.echo(token)


@serve.command("new-token")
@click.argument("who")
@_server_options
@pass_context
def serve_new_token(obj, who: str, db: str | None, data: str | None) -> None:
    """Replace a person's token (by name or id); the old token stops working at once."""
    from sync.server import store

    database = _server_db(obj, db, data)
    try:
        person, token = store.new_token_for(database, who)
    finally:
        database.close()
    click.echo(f"New token for {printable(person.display_name)} (shown only now):", err=True)
    click.echo(token)


@serve.command("revoke")
@click.argument("who")
@_server_options
@pass_context
def serve_revoke(obj, who: str, db: str | None, data: str | None) -> None:
    """Stop a person's token from working (their work stays); `new-token` lets them back in."""
    from sync.server import store

    database = _server_db(obj, db, data)
    try:
        person = store.set_active(database, who, False)
    finally:
        database.close()
    click.echo(f"{printable(person.display_name)}'s token no longer works.")


@serve.command("people")
@_server_options
@pass_context
def serve_people(obj, db: str | None, data: str | None) -> None:
    """Who may use this server (tokens are never shown again)."""
    from sync.negotiation import release_of
    from sync.server import store
    from sync.server.store import held_back

    database = _server_db(obj, db, data)
    try:
        database.check_schema()
        held = held_back.counts(database)
        rows = [[p.display_name, p.role, p.team, "yes" if p.active else "revoked", str(p.id)]
                for p in store.people(database)]
        notes = [f"{printable(p.display_name)}'s desk speaks sync protocol {held[p.id].protocol}: "
                 f"{held[p.id].changes} change(s) need {release_of(held[p.id].protocol + 1)} or later "
                 "(they are sent once the desk is upgraded)"
                 for p in store.people(database) if p.id in held and held[p.id].changes]
    finally:
        database.close()
    click.echo(format_table(["name", "role", "team", "active", "id"], rows))
    for line in notes:
        click.echo(line)


def kind_text(kind: str) -> str:
    return "in the database" if kind == "database" else "in the server folder"


def _move_blobs(database, folder: Path, kind: str) -> str:
    """The blob store's kind; a server that keeps them in the database now copies in the files its folder
    holds from before (checked, streamed; the files stay until the owner removes them)."""
    from sync.server.blob_store import DatabaseBlobs, copy_blobs, resolve_kind
    from sync.server.blobs import BlobStore

    chosen = resolve_kind(kind, database)
    if chosen == "database" and (folder / "blobs").is_dir():
        files, size = copy_blobs(BlobStore(folder / "blobs"), DatabaseBlobs(database))
        if files:
            click.echo(f"Copied {files:,} model file(s) ({size_text(size)}) from {folder / 'blobs'} into the "
                       "database; every server on it now serves them. The folder may be removed.", err=True)
    return chosen


def _sweep(database, folder: Path, grace_hours: float, dry_run: bool = False, kind: str = "auto"):
    from datetime import timedelta

    from sync.server.blob_store import open_blobs
    from sync.server.store import storage

    try:
        database.check_schema()
        swept = storage.sweep(database, open_blobs(kind, database, folder), grace=timedelta(hours=grace_hours),
                              dry_run=dry_run)
    finally:
        database.close()
    if swept.files or swept.partial or dry_run:
        click.echo(f"{'Would remove' if dry_run else 'Removed'} {swept.files:,} model file(s) nothing needs any more "
                   f"({size_text(swept.bytes)}) and {swept.partial:,} interrupted upload(s).", err=True)
    return swept


@serve.command("sweep-blobs")
@click.option("--grace-hours", type=click.FloatRange(0, 10_000), default=SWEEP_GRACE_HOURS, show_default=True,
              help="Keep unreferenced files younger than this (a lead uploads a candidate's files, then proposes it).")
@click.option("--dry-run", is_flag=True, help="Say what would go; remove nothing.")
@_server_options
@_blobs_option
@pass_context
def serve_sweep_blobs(obj, grace_hours: float, dry_run: bool, db: str | None, data: str | None, blobs: str) -> None:
    """Remove model files that no published model or open or promoted proposal names (`serve run` does this
    at every start, with the default grace period)."""
    _sweep(_server_db(obj, db, data), _server_dir(obj, data), grace_hours, dry_run, kind=blobs)


def _quota_value(_ctx, param, value: str | None):
    from sync.server.store.storage import UNLIMITED

    if value is None:
        return None
    text = value.strip().lower().replace(" ", "")
    if text == "default":
        return "default"
    if text in ("unlimited", "none"):
        return UNLIMITED
    units = {"gib": 2**30, "gb": 10**9, "mib": 2**20, "mb": 10**6, "kib": 1024, "kb": 1000, "b": 1}
    for unit, factor in units.items():
        if text.endswith(unit) and text[:-len(unit)].replace(".", "", 1).isdigit():
            return int(float(text[:-len(unit)]) * factor)
    if text.isdigit():
        return int(text)
    raise click.BadParameter(f"'{value}' is not a size (e.g. 500MiB, 4GiB), 'unlimited' or 'default'.", param=param)


@serve.command("quota")
@click.argument("who")
@click.argument("size", required=False, callback=_quota_value)
@_server_options
@pass_context
def serve_quota(obj, who: str, size, db: str | None, data: str | None) -> None:
    """Show or set how much model-file storage a person may use (e.g. `quota "Lee Lead" 8GiB`; `default`:
    their role's, which is 4 GiB for leads, none for owners; `unlimited`)."""
    from sync.server.store import storage

    database = _server_db(obj, db, data)
    try:
        database.check_schema()
        person = (storage.person_named(database, who) if size is None
                  else storage.set_quota(database, who, None if size == "default" else size))
        use = storage.allowance(database, person)
    finally:
        database.close()
    limit = "no limit" if use.quota is None else f"a quota of {size_text(use.quota)}"
    click.echo(f"{printable(person.display_name)} keeps {use.files:,} model file(s), {size_text(use.used)}, "
               f"on the server; {limit}.")


@serve.group("quarantine")
def serve_quarantine() -> None:
    """Stored records the change feed cannot send (nested too deep, too large): it leaves them out,
    so everyone else's sync goes on. List them, and drop the ones nobody needs."""


@serve_quarantine.command("list")
@_server_options
@pass_context
def serve_quarantine_list(obj, db: str | None, data: str | None) -> None:
    """The quarantined records, who sent them, and why they cannot be sent."""
    from sync.server import store

    database = _server_db(obj, db, data)
    try:
        database.check_schema()
        entries = store.quarantined(database)
    finally:
        database.close()
    if not entries:
        click.echo("Nothing is in quarantine.")
        return
    rows = [[e.kind, str(e.record_id), e.team or "(all)", e.sender or "?", f"{e.quarantined_at:%Y-%m-%d %H:%M}",
             e.reason[:160]] for e in entries]
    click.echo(format_table(["kind", "id", "team", "sent by", "since (UTC)", "why"], rows))
    click.echo("Drop one with: dynadesk serve quarantine drop ID")


@serve_quarantine.command("drop")
@click.argument("record_id")
@_server_options
@pass_context
def serve_quarantine_drop(obj, record_id: str, db: str | None, data: str | None) -> None:
    """Delete a quarantined record from the server for good (an example goes with its validations and reviews)."""
    import uuid

    from sync.server import store

    try:
        wanted = uuid.UUID(record_id.strip())
    except ValueError:
        raise DynadeskError(f"'{record_id}' is not a record id; 'dynadesk serve quarantine list' shows them.") from None
    database = _server_db(obj, db, data)
    try:
        database.check_schema()
        said = store.drop_quarantined(database, wanted)
    finally:
        database.close()
    click.echo(f"Dropped {said} from the server.")
