"""The ``dynadesk`` group and the commands for the desk itself: init, import, export, stats, backups, tasks.

Without a command the desktop application starts.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from app.cli.base import Context, format_table, pass_context
from app.core import paths
from app.core.domain import MAX_ROUND_NUMBER
from app.core.errors import DynadeskError
from app.core.formatting import pct
from app.core.logs import setup_logging
from app.core.text import printable

if TYPE_CHECKING:
    from app.core.services.stats import Grouping


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from app.core.about import version_text

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
        from app.core.services.target_models import DEFAULT_TASK, adopt_default_model
        from local_models.progress import Progress

        record = adopt_default_model(desk, progress=Progress(on_message=lambda text: click.echo(text, err=True)))
        if record is not None:
            click.echo(f"Target:      {record.name} ({record.sha256[:12]}) for {DEFAULT_TASK} round 1")


@cli.command("import")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--format", "format_", required=True, help="hatecheck, anli, dynahate or jsonl.")
@click.option("--task", "task_code", help="Task to import into (each format has a default).")
@click.option("--round", "round_number", type=click.IntRange(1, MAX_ROUND_NUMBER),
              help="Round to import into (ANLI; default 1). With HateCheck: import the cases as examples of this "
                   "round, written against its target model(s), instead of as a test suite.")
@click.option("--group-column", help="Column whose value groups rows for the held-out split (e.g. templ_id): "
                                     "every row of a group falls on the same side.")
@click.option("--skip-bad-rows", is_flag=True, help="Import the good rows and list the bad ones, instead of importing nothing.")
@pass_context
def import_(obj: Context, file: str, format_: str, task_code: str | None, round_number: int | None,
            group_column: str | None, skip_bad_rows: bool) -> None:
    """Import a data set: a HateCheck suite, ANLI, the Dynamically Generated Hate Speech Dataset, or Dynadesk JSONL.

    The import is all or nothing: one bad row stops it, with every bad row listed by line,
    unless --skip-bad-rows is given. Importing the same file again adds nothing.
    """
    from app.core.io.importers import import_file

    report = import_file(obj.desk, Path(file), format_, task_code=task_code, round_number=round_number,
                         skip_bad_rows=skip_bad_rows, group_column=group_column)
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
    from app.core.io.exporters import export as run_export

    click.echo(run_export(obj.desk, Path(out), format_, task_code=task_code, keep_identities=keep_identities,
                          salt=salt).summary())


@cli.command()
@click.option("--by", "groupings", multiple=True, type=click.Choice(["round", "annotator", "model", "task"]),
              help="Group by (repeatable; default: all four).")
@click.option("--task", "task_code", help="Only this task.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@pass_context
def stats(obj: Context, groupings: tuple[Grouping, ...], task_code: str | None, as_json: bool) -> None:
    """MER (model error rate) and vMER (validated model error rate) tables."""
    from app.core.services.stats import GROUPINGS

    desk = obj.desk
    task_id = desk.tasks.task(task_code).id if task_code else None
    result = {by: desk.stats.figures(by, task_id=task_id) for by in (groupings or GROUPINGS)}
    if as_json:
        click.echo(json.dumps({by: [{"key": f.key, "name": f.name, "submitted": f.submitted, "fooled": f.fooled,
                                     "validated_fooling": f.validated_fooling, "mer": f.mer, "vmer": f.vmer,
                                     "imported": f.imported}
                                    for f in rows] for by, rows in result.items()}, indent=2))
        return
    for by, rows in result.items():
        click.echo(f"\nBy {by}")
        click.echo(format_table(
            ["", "submitted", "fooled", "MER", "validated fooling", "vMER", "imported"],
            [[f.name, f.submitted, f.fooled, pct(f.mer), f.validated_fooling, pct(f.vmer), f.imported] for f in rows],
        ))
    if desk.stats.suites(task_id):
        click.echo("\nHateCheck suites are test cases, not examples: `dynadesk eval --suite` scores a model on them; "
                   "they are not counted here.")
    if any(f.imported for rows in result.values() for f in rows):
        click.echo("\nImported examples were not written against the target model: MER and vMER count only "
                   "examples written on a desk.")


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

    from app.core.storage.db import automatic_backups
    from app.core.storage.db import restore_backup as restore

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
    from app.core.tasks.definition import builtin_tasks_dir, load_task_file

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
