"""The ``dynadesk`` command: the GUI by default, subcommands for work at the command line.

Every failure ends with a readable message and a non-zero exit status; tracebacks go to the
log file, never to the terminal.
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import click

from app import paths
from app.domain import MAX_ROUND_NUMBER
from app.errors import DynadeskError
from app.formatting import pct
from app.logs import log_file, setup_logging
from app.text import printable

log = logging.getLogger("dynadesk")


class Context:
    def __init__(self, data_dir: str | None):
        self.data_dir = data_dir
        self._desk = None
        self.lists_task_problems = False  # `tasks list` shows bad task files itself, instead of a warning

    @property
    def desk(self):
        if self._desk is None:
            from app.desk import Desk

            self._desk = Desk(self.data_dir)
            self._desk.db.checked()
            if not self.lists_task_problems:
                for problem in self._desk.catalog.problems:
                    click.echo(f"Warning: {problem}; the file was skipped (`dynadesk tasks list` shows it).", err=True)
        return self._desk

    def close(self) -> None:
        if self._desk is not None:
            self._desk.close()


pass_context = click.make_pass_decorator(Context)


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from app.about import version_text

    click.echo(version_text())
    ctx.exit()


@click.group(invoke_without_command=True, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--data-dir", type=click.Path(file_okay=False), envvar=paths.DATA_DIR_ENV,
              help=f"Folder for the database and settings (default: your user data folder; or ${paths.DATA_DIR_ENV}).")
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version, the git revision, the runtimes' versions and the default model's checksum.")
@click.pass_context
def cli(ctx: click.Context, data_dir: str | None) -> None:
    """Dynadesk: write examples that fool a model, validate them, review and sync them.

    Without a command, the desktop application starts.
    """
    setup_logging(paths.data_dir(data_dir))
    ctx.obj = Context(data_dir)
    ctx.call_on_close(ctx.obj.close)
    if ctx.invoked_subcommand is None:
        from app.gui.main import run_gui

        ctx.exit(run_gui(data_dir))


@cli.command()
@click.option("--name", help="Display name of this desk's first profile (default: your login name).")
@click.option("--role", type=click.Choice(["annotator", "lead", "owner"]), default="annotator", show_default=True)
@click.option("--without-default-model", is_flag=True,
              help="Do not prepare the bundled model as hate-speech round 1's target (it takes about 20 s once).")
@pass_context
def init(obj: Context, name: str | None, role: str, without_default_model: bool) -> None:
    """Create (or upgrade) the database, load the task definitions and open round 1 of each task.

    On a fresh desk, the bundled default model becomes the target of the hate-speech task's
    round 1, as the app does on its first start.
    """
    desk = obj.desk
    if name:
        person = desk.people.by_name(name) or desk.people.create(name, role)
        desk.switch_person(person.id)
    else:
        person = desk.current_person()
    click.echo(f"Data folder: {desk.root}")
    click.echo(f"Database:    {desk.db.path} (schema {desk.db.current_revision()})")
    if desk.db.backup_path:
        click.echo(f"Upgraded; the previous database was kept at {desk.db.backup_path}")
    click.echo(f"Tasks:       {', '.join(t.code for t in desk.tasks.tasks())}")
    click.echo(f"Profile:     {printable(person.display_name)} ({person.role})")
    if not without_default_model:
        from app.services.target_models import DEFAULT_TASK, adopt_default_model
        from local_models.progress import Progress

        record = adopt_default_model(desk, progress=Progress(on_message=lambda text: click.echo(text, err=True)))
        if record is not None:
            click.echo(f"Target:      {record.name} ({record.sha256[:12]}) for {DEFAULT_TASK} round 1")


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "format_", required=True, help="hatecheck, anli, dynahate or jsonl.")
@click.option("--task", "task_code", help="Task to import into (each format has a default).")
@click.option("--round", "round_number", type=click.IntRange(1, MAX_ROUND_NUMBER),
              help="Round to import into (ANLI; default 1).")
@click.option("--skip-bad-rows", is_flag=True, help="Import the good rows and list the bad ones, instead of importing nothing.")
@pass_context
def import_(obj: Context, file: str, format_: str, task_code: str | None, round_number: int | None, skip_bad_rows: bool) -> None:
    """Import a data set: a HateCheck suite, ANLI, the Dynamically Generated Hate Speech Dataset, or Dynadesk JSONL.

    The import is all or nothing: one bad row stops it, with every bad row listed by line,
    unless --skip-bad-rows is given. Importing the same file again adds nothing.
    """
    from app.io.importers import import_file

    report = import_file(obj.desk, Path(file), format_, task_code=task_code, round_number=round_number,
                         skip_bad_rows=skip_bad_rows)
    click.echo(report.summary())


@cli.command()
@click.argument("out", type=click.Path())
@click.option("--format", "format_", type=click.Choice(["jsonl", "csv", "hf"]), default="jsonl", show_default=True,
              help="jsonl imports back into Dynadesk; csv is flat; hf is a Hugging Face datasets folder.")
@click.option("--task", "task_code", help="Only this task (required for csv and hf).")
@click.option("--keep-identities", is_flag=True, help="Keep people's names and ids (for moving work between your own desks).")
@click.option("--salt", help="Secret for the pseudonyms; share it to get the same pseudonyms on several desks.")
@pass_context
def export(obj: Context, out: str, format_: str, task_code: str | None, keep_identities: bool, salt: str | None) -> None:
    """Export submitted examples, their validations and what they refer to."""
    from app.io.exporters import export as run_export

    click.echo(run_export(obj.desk, Path(out), format_, task_code=task_code, keep_identities=keep_identities,
                          salt=salt).summary())


@cli.command()
@click.option("--by", "groupings", multiple=True, type=click.Choice(["round", "annotator", "model", "task"]),
              help="Group by (repeatable; default: all four).")
@click.option("--task", "task_code", help="Only this task.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@pass_context
def stats(obj: Context, groupings: tuple[str, ...], task_code: str | None, as_json: bool) -> None:
    """MER (model error rate) and vMER (validated model error rate) tables."""
    from app.services.stats import GROUPINGS

    desk = obj.desk
    task_id = desk.tasks.task(task_code).id if task_code else None
    result = {by: desk.stats.figures(by, task_id=task_id) for by in (groupings or GROUPINGS)}
    if as_json:
        click.echo(json.dumps({by: [{"key": f.key, "name": f.name, "submitted": f.submitted, "fooled": f.fooled,
                                     "validated_fooling": f.validated_fooling, "mer": f.mer, "vmer": f.vmer}
                                    for f in rows] for by, rows in result.items()}, indent=2))
        return
    for by, rows in result.items():
        click.echo(f"\nBy {by}")
        click.echo(format_table(
            ["", "submitted", "fooled", "MER", "validated fooling", "vMER"],
            [[f.name, f.submitted, f.fooled, pct(f.mer), f.validated_fooling, pct(f.vmer)] for f in rows],
        ))


@cli.command("restore-backup")
@click.argument("backup", required=False, type=click.Path(dir_okay=False, exists=True))
@click.option("--list", "list_only", is_flag=True, help="List the automatic backups, newest first, and change nothing.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@pass_context
def restore_backup(obj: Context, backup: str | None, list_only: bool, yes: bool) -> None:
    """Replace the database with a backup (default: the newest automatic one). Close Dynadesk first.

    Dynadesk copies the database every day (in backups/ in the data folder) and before every
    upgrade. The file it replaces is kept aside, never deleted.
    """
    from datetime import datetime

    from app.storage.db import automatic_backups
    from app.storage.db import restore_backup as restore

    database = paths.database_path(paths.data_dir(obj.data_dir))
    backups = automatic_backups(database)
    if list_only:
        click.echo(format_table(["backup", "made"], [
            [str(b), datetime.fromtimestamp(b.stat().st_mtime).strftime("%Y-%m-%d %H:%M")] for b in backups]))
        return
    if backup is None and not backups:
        raise DynadeskError(f"There is no automatic backup of {database}; name a copy of your own: "
                            "dynadesk restore-backup FILE")
    chosen = Path(backup) if backup else backups[0]
    if not yes:
        click.confirm(f"Replace {database} with {chosen}? The current file is kept aside.", abort=True)
    aside = restore(database, chosen)
    click.echo(f"Restored {chosen} to {database}.")
    if aside.exists():
        click.echo(f"The file it replaced is kept at {aside}.")


@cli.group()
def tasks() -> None:
    """List task definitions, or check YAML files before adding them."""


@tasks.command("list")
@pass_context
def tasks_list(obj: Context) -> None:
    """The tasks on this desk, where each is defined, and their rounds."""
    obj.lists_task_problems = True
    desk = obj.desk
    rows = []
    for definition in desk.catalog:
        rounds = desk.tasks.rounds(definition.code)
        labels = ", ".join(definition.labels) if definition.labels else "answer span"
        rows.append([definition.code, definition.name, labels,
                     ", ".join(f"{r.number} ({r.status})" for r in rounds), str(desk.catalog.sources[definition.code])])
    click.echo(format_table(["code", "name", "labels", "rounds", "defined in"], rows))
    if desk.catalog.problems:
        click.echo(f"\n{len(desk.catalog.problems)} task file(s) could not be used; fix them, then check with "
                   "`dynadesk tasks validate`:")
        for problem in desk.catalog.problems:
            click.echo(f"  {problem}")
    click.echo(f"\nAdd a task by putting a YAML file in {paths.user_tasks_dir(desk.root)}")


@tasks.command("validate")
@click.argument("files", nargs=-1, type=click.Path(dir_okay=False))
@pass_context
def tasks_validate(obj: Context, files: tuple[str, ...]) -> None:
    """Check task definition files (default: every definition this desk loads)."""
    from app.tasks.definition import builtin_tasks_dir, load_task_file

    targets = [Path(f) for f in files] or sorted(
        [*builtin_tasks_dir().glob("*.y*ml"), *paths.user_tasks_dir(paths.data_dir(obj.data_dir)).glob("*.y*ml")]
    )
    failures = 0
    for target in targets:
        try:
            definition = load_task_file(target)
            click.echo(f"ok    {target}: {definition.code} ({definition.name})")
        except DynadeskError as exc:
            failures += 1
            click.echo(f"error {exc}")
    if failures:
        raise DynadeskError(f"{failures} of {len(targets)} definition(s) have problems.")


def format_table(headers: list[str], rows: list[list]) -> str:
    cells = [[printable(str(c)) for c in row] for row in [headers, *rows]]  # a cell cannot steer the terminal
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) if rows else "\n".join(lines) + "\n(none)"


def main(argv: list[str] | None = None) -> None:
    try:
        code = cli.main(args=argv, prog_name="dynadesk", standalone_mode=False)
    except click.ClickException as exc:
        exc.show()
        code = exc.exit_code
    except click.Abort:
        click.echo("Aborted.", err=True)
        code = 1
    except DynadeskError as exc:
        log.info("command failed: %s", exc)
        click.echo(f"Error: {exc}", err=True)
        code = 1
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # the last line of defence: a message, never a traceback
        log.exception("unexpected error")
        where = log_file()
        click.echo(f"Unexpected error: {exc.__class__.__name__}: {exc}\n"
                   f"Nothing was left half-written. Details are in {where}.", err=True)
        code = 2
    sys.exit(code if isinstance(code, int) else 0)


from app.cli_models import models, train  # noqa: E402

cli.add_command(models)
cli.add_command(train)

from app.cli_rounds import rounds  # noqa: E402

cli.add_command(rounds)

from app.cli_sync import serve, sync  # noqa: E402

cli.add_command(serve)
cli.add_command(sync)

from app.cli_smoke import smoke_test  # noqa: E402

cli.add_command(smoke_test)

from app.cli_eval import eval_  # noqa: E402

cli.add_command(eval_)
