"""CLI commands for this desk's sync: ``dynadesk sync ...`` (configure, sync now, status, what waits and
why, refused records, publishing). The server's commands are in app/cli/serve.py.

Failures end as ``DynadeskError`` messages, never as tracebacks.
"""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import click

from app.cli.base import format_table, pass_context
from app.core.errors import DynadeskError
from app.core.formatting import size_text
from app.core.text import printable


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
    desk, clients = ctx.obj.desk, ctx.obj.sync_clients
    if now:
        from sync.transport import Offline, SyncHandle

        with clients.configured() as client:
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
    _show_status(desk, clients)


def _show_status(desk, clients) -> None:
    from sync.client import person_id
    from sync.local import local_status, server_storage, versions

    status = local_status(desk.db, person_id(desk))
    mixed = versions(desk.db)
    url = desk.settings.server_url
    click.echo(f"Server:        {url or 'not set (dynadesk sync configure --url URL)'}")
    if desk.settings.server_ca_file:
        click.echo(f"Also trusts:   {desk.settings.server_ca_file} (certificate authority)")
    if url:
        click.echo(f"Token:         {'set, in ' + clients.tokens.where if clients.token(url) else 'not set'}")
    click.echo(f"Every:         {desk.settings.sync_interval_s} s (in the app)")
    last = status.last_success.astimezone().strftime("%Y-%m-%d %H:%M:%S") if status.last_success else "never"
    click.echo(f"Last success:  {last}")
    click.echo(f"Waiting:       {status.pending:,} record(s)")
    _show_waiting(status.waiting)
    if mixed.waiting:
        click.echo(f"Of those, {mixed.waiting:,} wait for the server's upgrade to {printable(mixed.upgrade)} "
                   "(they go at the first sync after it)")
    if mixed.held_back:
        click.echo(f"Not sent here: {mixed.held_back:,} change(s) need a newer Dynadesk; upgrade to see them")
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
    from sync.transport import AuthError, Offline, SyncError, refuse_token_in_clear, tls_context

    desk, clients = obj.desk, obj.sync_clients
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
    tokens = clients.tokens
    token = sys.stdin.readline().strip() if token_stdin else clients.token(url)
    if token_stdin and not token:
        raise DynadeskError("No token came on standard input.")
    # All or nothing: check and say everything first; only then adopt (token, profile, settings),
    # undoing what was adopted if a step fails, so a failure half-way leaves this desk as it was.
    with contextlib.ExitStack() as stack:
        client = stack.enter_context(clients.for_server(url, token, ca_file=ca_file or "")) \
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
    _show_status(desk, clients)


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
@click.option("--without-pytorch-form", "without_gradients", is_flag=True,
              help="Leave out the PyTorch form each ONNX target was exported from (team desks fetch it when their "
                   "assistant needs gradients; without it they offer no word substitution).")
@pass_context
def sync_publish(obj, task_code: str, rounds: tuple[int, ...], no_files: bool, without_gradients: bool) -> None:
    """Owners: publish a task, its rounds, contexts and target models to the server (with the PyTorch form
    each ONNX target was exported from, for word substitution on the team's desks)."""
    from sync.transport import SyncHandle

    with obj.sync_clients.configured() as client:
        response = client.publish(task_code, rounds or None, handle=SyncHandle(on_progress=_progress_printer()),
                                  with_files=not no_files, with_gradient_forms=not without_gradients)
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
    with obj.sync_clients.configured() as client:
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
    with obj.sync_clients.configured() as client:
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
