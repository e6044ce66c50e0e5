"""CLI commands for sync: ``dynadesk serve ...`` (the server) and ``dynadesk sync ...`` (this desk).

Registered on the main ``dynadesk`` group at the bottom of app/cli.py. Failures end as
``DynadeskError`` messages, never as tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
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


def _server_db(obj, db: str | None, data: str | None):
    from sync.server.db import ServerDatabase

    folder = _server_dir(obj, data)
    folder.mkdir(parents=True, exist_ok=True)
    return ServerDatabase(db or folder / "server.sqlite")


def _server_options(command):
    command = click.option("--data", type=click.Path(file_okay=False),
                           help="Server folder for model files (and the SQLite file) [default: DATA-DIR/server].")(command)
    return click.option("--db", envvar=SERVER_DB_ENV,
                        help="Database URL: a SQLite path (the default, in the server folder) or "
                             "postgresql+psycopg://user@host/db for teams [env: DYNADESK_SERVER_DB].")(command)


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
                                          "[env: DYNADESK_SERVER_TOKEN_LIMIT]. Each worker counts on its own.")
@click.option("--address-limit", envvar="DYNADESK_SERVER_ADDRESS_LIMIT", default=DEFAULT_PER_ADDRESS, show_default=True,
              callback=_rate_option, help="Requests per client address; 0 for none "
                                          "[env: DYNADESK_SERVER_ADDRESS_LIMIT]. Each worker counts on its own.")
@pass_context
def serve_run(obj, db: str | None, data: str | None, host: str, port: int, workers: int, fd: int | None,
              access_log: bool, certfile: str | None, keyfile: str | None, token_limit, address_limit) -> None:
    """Upgrade the server database if needed, then serve until interrupted (Ctrl+C).

    Serve HTTPS with --certfile/--keyfile, or plain HTTP on loopback behind a reverse proxy that
    terminates TLS (docs/sync.md): tokens must never cross a network in clear."""
    import uvicorn

    from sync.server.app import ADDRESS_LIMIT_ENV, DATA_ENV, DB_ENV, TOKEN_LIMIT_ENV

    if bool(certfile) != bool(keyfile):
        raise click.UsageError("--certfile and --keyfile go together.")
    if certfile:
        _check_tls_pair(certfile, keyfile)
    database = _server_db(obj, db, data)
    try:
        database.upgrade()
        url = database.url
        click.echo(f"Database: {database.describe()} (schema {database.current_revision()})", err=True)
    finally:
        database.close()
    _sweep(_server_db(obj, db, data), _server_dir(obj, data), SWEEP_GRACE_HOURS)
    os.environ[DB_ENV] = url
    os.environ[DATA_ENV] = str(_server_dir(obj, data))
    os.environ[TOKEN_LIMIT_ENV], os.environ[ADDRESS_LIMIT_ENV] = str(token_limit), str(address_limit)
    scheme = "https" if certfile else "http"
    where = f"file descriptor {fd} ({scheme})" if fd is not None else f"{scheme}://{host}:{port}"
    click.echo(f"Serving Dynadesk sync on {where} with {workers} worker(s); OpenAPI at /openapi.json; "
               f"limits: {token_limit.describe()} per token, {address_limit.describe()} per address, "
               "counted by each worker", err=True)
    uvicorn.run("sync.server.app:create_app_from_env", factory=True, host=host, port=port, fd=fd, workers=workers,
                access_log=access_log, log_level="info" if access_log else "warning", timeout_graceful_shutdown=10,
                ssl_certfile=certfile, ssl_keyfile=keyfile)


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

    from sync.protocol import Team
    from sync.server import store
    from pydantic import TypeAdapter, ValidationError

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
        database.upgrade()
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
    from sync.server import store

    database = _server_db(obj, db, data)
    try:
        database.check_schema()
        rows = [[p.display_name, p.role, p.team, "yes" if p.active else "revoked", str(p.id)]
                for p in store.people(database)]
    finally:
        database.close()
    click.echo(format_table(["name", "role", "team", "active", "id"], rows))


def _sweep(database, folder: Path, grace_hours: float, dry_run: bool = False):
    from datetime import timedelta

    from sync.server.blobs import BlobStore
    from sync.server.store import storage

    try:
        database.check_schema()
        swept = storage.sweep(database, BlobStore(folder / "blobs"), grace=timedelta(hours=grace_hours),
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
@pass_context
def serve_sweep_blobs(obj, grace_hours: float, dry_run: bool, db: str | None, data: str | None) -> None:
    """Remove model files that no published model or open or promoted proposal names (`serve run` does this
    at every start, with the default grace period)."""
    _sweep(_server_db(obj, db, data), _server_dir(obj, data), grace_hours, dry_run)


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


def _tokens(desk):
    from sync.tokens import TokenStore

    return TokenStore(desk.root)


def _client(desk, **kwargs):
    from sync.client import new_client

    return new_client(desk, _tokens(desk), **kwargs)


def _progress_printer():
    last = [0.0]

    def show(phase: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - last[0] >= 0.5 or done >= total:
            last[0] = now
            click.echo(f"  {phase}: {done:,} / {total:,}", err=True)

    return show


@click.group(invoke_without_command=True)
@click.option("--now", is_flag=True, help="Sync now: push what is waiting, pull what is new.")
@click.pass_context
def sync(ctx: click.Context, now: bool) -> None:
    """Sync with the team's server. Without a command: show where sync stands."""
    if ctx.invoked_subcommand is not None:
        if now:
            raise click.UsageError("--now goes alone: `dynadesk sync --now`.")
        return
    desk = ctx.obj.desk
    if now:
        from sync.transport import Offline, SyncHandle

        with _client(desk) as client:
            try:
                report = client.run(SyncHandle(on_progress=_progress_printer()))
            except Offline as exc:
                click.echo(str(exc))
                ctx.exit(3)
        click.echo(printable(report.summary()))
        for line in report.warnings:
            click.echo(f"Warning: {printable(line)}")
        for line in report.problems[:20]:
            click.echo(f"  {printable(line)}")
    _show_status(desk)


def _show_status(desk) -> None:
    from sync.client import person_id
    from sync.local import local_status, server_storage

    status = local_status(desk.db, person_id(desk))
    url = desk.settings.server_url
    click.echo(f"Server:        {url or 'not set (dynadesk sync configure --url URL)'}")
    if desk.settings.server_ca_file:
        click.echo(f"Also trusts:   {desk.settings.server_ca_file} (certificate authority)")
    if url:
        click.echo(f"Token:         {'set, in ' + _tokens(desk).where if _tokens(desk).get(url) else 'not set'}")
    click.echo(f"Every:         {desk.settings.sync_interval_s} s (in the app)")
    last = status.last_success.astimezone().strftime("%Y-%m-%d %H:%M:%S") if status.last_success else "never"
    click.echo(f"Last success:  {last}")
    click.echo(f"Waiting:       {status.pending:,} record(s)")
    _show_waiting(status.waiting)
    use = server_storage(desk.db)
    if use is not None:  # leads and owners: their uploads count against a quota
        limit = ("no limit" if use.quota is None
                 else f"{use.used * 100 // max(use.quota, 1)}% of your {size_text(use.quota)}")
        click.echo(f"Model files:   {size_text(use.used)} in {use.files:,} file(s) on the server ({limit}; "
                   "as of the last sync)")
    if status.held:
        click.echo(f"Other profiles: {status.held:,} record(s) that sync with their own token")
    if status.rejected or status.conflicts:
        click.echo(f"Need attention: {status.rejected:,} refused, {status.conflicts:,} conflicts "
                   "(dynadesk sync problems)")
    if status.last_error:
        click.echo(f"Last error:    {printable(status.last_error)}")


def _show_waiting(waiting) -> None:
    """Why the server put records off, grouped, and what fixes each reason."""
    if not waiting:
        return
    click.echo(f"Of those, {sum(w.count for w in waiting):,} wait for something the server does not have yet:")
    for reason in waiting:
        click.echo(f"  {reason.count:,} because {printable(reason.reason)}")
        click.echo(f"      fix: {printable(reason.fix)}")


@sync.command("configure")
@click.option("--url", help="The sync server, e.g. https://sync.example.org")
@click.option("--token-stdin", is_flag=True, help="Read the token from standard input (keeps it out of shell history).")
@click.option("--interval", type=click.IntRange(30, 86_400), help="Seconds between background syncs in the app.")
@click.option("--no-test", is_flag=True, help="Save without asking the server whether the token works.")
@click.option("--ca-file", type=click.Path(dir_okay=False),
              help="Also trust this certificate authority (PEM) for the server's HTTPS certificate: "
                   "for teams with their own CA or a self-signed certificate. '' for none.")
@click.option("--insecure", is_flag=True,
              help="Allow plain http:// to another machine (the token then crosses the network unencrypted).")
@pass_context
def sync_configure(obj, url: str | None, token_stdin: bool, interval: int | None, no_test: bool,
                   ca_file: str | None, insecure: bool) -> None:
    """Set the server, the token (kept in the system keyring, or a file only you can read) and the interval."""
    from sync.client import SyncClient
    from sync.transport import AuthError, Offline, SyncError, refuse_token_in_clear, tls_context

    desk = obj.desk
    url = (url or desk.settings.server_url or "").strip().rstrip("/")
    if not url:
        raise DynadeskError("Give the server with --url.")
    if not url.startswith(("http://", "https://")):
        raise DynadeskError(f"The server URL must start with http:// or https:// (got '{url}').")
    if not insecure:
        try:
            refuse_token_in_clear(url)
        except SyncError as exc:
            raise SyncError(f"{exc} Or add --insecure if you accept that risk. Nothing was saved.") from None
    if ca_file is not None:
        ca_file = str(Path(ca_file).expanduser().resolve()) if ca_file.strip() else None
        tls_context(ca_file)  # a clear message now for a file that is missing or not a certificate
    else:
        ca_file = desk.settings.server_ca_file
    tokens = _tokens(desk)
    token = sys.stdin.readline().strip() if token_stdin else tokens.get(url)
    if token_stdin and not token:
        raise DynadeskError("No token came on standard input.")
    # All or nothing: check and say everything first; only then adopt (token, profile, settings),
    # undoing what was adopted if a step fails, so a failure half-way leaves this desk as it was.
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(SyncClient(desk, url, token, ca_file=ca_file or "")) \
            if token and not no_test else None
        me = None
        if client is not None:
            try:
                me = client.me()
            except AuthError:
                raise
            except Offline as exc:
                click.echo(f"Saved without a check: {exc}", err=True)
        if me is not None:
            name = printable(me.display_name)
            click.echo(f"The server knows this token as {name} ({me.role.value}, team {me.team}).")
            if desk.settings.current_person_id != str(me.id):
                click.echo(f"This desk now works as {name}.")
        stored_in = _adopt_configuration(desk, tokens, client, url, ca_file, token if token_stdin else None,
                                         interval, me)
    if stored_in:
        click.echo(f"Token stored in {stored_in}.")
    _show_status(desk)


def _adopt_configuration(desk, tokens, client, url: str, ca_file: str | None, new_token: str | None,
                         interval: int | None, me) -> str | None:
    """Store the token, make the token's holder this desk's profile and save the settings, or,
    if any step fails, put back what was there before and re-raise. Returns where the token went."""
    from sync import local

    settings_before = desk.settings.model_copy(deep=True)
    token_before = tokens.get(url) if new_token else None
    synced_as_before = desk.db.get_meta(local.PERSON)
    stored_in = None
    try:
        if new_token:
            stored_in = tokens.set(url, new_token)
        if me is not None:
            client.adopt_identity(me)
            if desk.settings.current_person_id != str(me.id):
                desk.switch_person(me.id)  # new work is written as the person the server knows
        desk.settings.server_url = url
        desk.settings.server_ca_file = ca_file
        if interval is not None:
            desk.settings.sync_interval_s = interval
        desk.save_settings()
        return stored_in
    except BaseException:
        desk.settings = settings_before
        desk.save_settings()
        with desk.db.write() as session:  # the profile row it may have added is harmless; who syncs is not
            local.set_meta(session, local.PERSON, synced_as_before or "")
        if new_token:
            if token_before:
                tokens.set(url, token_before)
            else:
                tokens.delete(url)
        raise


@sync.command("problems")
@click.option("--retry", is_flag=True, help="Put every refused record back in line for the next sync.")
@pass_context
def sync_problems(obj, retry: bool) -> None:
    """Records the server refused or found in conflict, with its reasons."""
    from sync.local import problems, retry_problems

    desk = obj.desk
    if retry:
        click.echo(f"{retry_problems(desk.db)} record(s) will be sent again at the next sync.")
        return
    rows = [[e.kind, str(e.record_id), e.state, e.attempts, (e.last_error or "")[:120]] for e in problems(desk.db)]
    click.echo(format_table(["record", "id", "state", "tries", "reason"], rows))
    from sync.client import person_id
    from sync.local import local_status

    _show_waiting(local_status(desk.db, person_id(desk)).waiting)


@sync.command("publish")
@click.argument("task_code")
@click.option("--round", "rounds", type=int, multiple=True, help="Only this round (repeatable; default: all).")
@click.option("--no-files", is_flag=True, help="Publish model records without uploading their files.")
@pass_context
def sync_publish(obj, task_code: str, rounds: tuple[int, ...], no_files: bool) -> None:
    """Owners: publish a task, its rounds, contexts and target models to the server."""
    from sync.transport import SyncHandle

    with _client(obj.desk) as client:
        response = client.publish(task_code, rounds or None, handle=SyncHandle(on_progress=_progress_printer()),
                                  with_files=not no_files)
    counts = {status: response.count(status) for status in ("stored", "already_stored", "deferred", "rejected")}
    click.echo(", ".join(f"{n} {status.replace('_', ' ')}" for status, n in counts.items()))
    for result in response.results:
        if result.status in ("deferred", "rejected"):
            click.echo(f"  {result.record} {result.id}: {result.status}: {printable(result.reason or '')}")


@sync.command("share-imported")
@click.option("--source", help="Only this import format (hatecheck, anli, dynahate, jsonl).")
@click.option("--task", "task_code", help="Only this task.")
@pass_context
def sync_share_imported(obj, source: str | None, task_code: str | None) -> None:
    """Owners: queue imported data sets for the next sync (they never go out unless asked)."""
    with _client(obj.desk) as client:
        n = client.queue_imported(source=source, task_code=task_code)
    click.echo(f"{n:,} imported record(s) will go out at the next sync (dynadesk sync --now).")


def _first_writer(duplicate: dict) -> str:
    if duplicate.get("original_author") is None:
        return "another team"
    return duplicate["original_author"] + (" (another team)" if duplicate.get("other_team") else "")


@sync.command("team")
@click.option("--by", type=click.Choice(["round", "annotator"]), default="round", show_default=True)
@click.option("--team", help="Another team (owners).")
@click.option("--duplicates", "show_duplicates", is_flag=True, help="List duplicate texts instead.")
@click.option("--assistant", "show_assistant", is_flag=True,
              help="The writing assistant's split: assisted vs unassisted, by the arm of the writing session.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@pass_context
def sync_team(obj, by: str, team: str | None, show_duplicates: bool, show_assistant: bool, as_json: bool) -> None:
    """Leads: the team's figures on the server (MER, vMER, duplicates), its duplicate texts, or the
    writing assistant's split."""
    from app.core.formatting import pct

    params = {"team": team} if team else {}
    with _client(obj.desk) as client:
        if show_duplicates:
            data = client.get_json("/team/duplicates", params)
        elif show_assistant:
            data = client.get_json("/team/assistant", {**params, "by": by})
        else:
            data = client.get_json("/team/stats", {**params, "by": by})
    if as_json:
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    elif show_duplicates:
        click.echo(format_table(["task", "round", "author", "first written by", "text"],
                                [[d["task"], d["round_number"], d["author"], _first_writer(d), d["text"][:60]]
                                 for d in data["duplicates"]]))
    elif show_assistant:
        click.echo(f"Team {data['team']}, by {by}: assisted vs unassisted by the session's arm; "
                   f"{data['outside']:,} example(s) without an arm are outside the split")
        seconds = lambda s: "-" if s is None else f"{s:.0f} s"  # noqa: E731
        click.echo(format_table(["", "arm", "submitted", "applied", "MER", "vMER", "rejected", "time / example"],
                                [[r["name"], r["arm"], r["submitted"], r["applied"] if r["arm"] == "assisted" else "-",
                                  pct(r["mer"]), pct(r["vmer"]), pct(r["rejection_rate"]),
                                  seconds(r["median_seconds"])] for r in data["rows"]]))
    else:
        click.echo(f"Team {data['team']}, by {by}")
        click.echo(format_table(["", "submitted", "fooled", "MER", "validated fooling", "vMER", "duplicates"],
                                [[r["name"], r["submitted"], r["fooled"], pct(r["mer"]), r["validated_fooling"],
                                  pct(r["vmer"]), r["duplicates"]] for r in data["rows"]]))
