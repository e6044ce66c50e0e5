"""``dynadesk suite``: the task's adaptive suite (the validated variants of what fooled its targets) as a
HateCheck-format CSV, and ``dynadesk suite grow``: label-keeping variants of its seeds, checked against the open
round's target, into the Validate queue."""

from __future__ import annotations

import uuid
from pathlib import Path

import click

from app.cli.base import Context, format_table, pass_context
from app.core.errors import DynadeskError


@click.group("suite", invoke_without_command=True)
@click.option("--task", "task_code", help="The task whose suite to export.")
@click.option("--out", "out_file", type=click.Path(dir_okay=False), help="The CSV file to write (HateCheck's columns).")
@click.pass_context
def suite(click_ctx: click.Context, task_code: str | None, out_file: str | None) -> None:
    """Export the task's adaptive suite: every validated variant, grouped by its seed.

    \b
    dynadesk suite --task hate_speech --out suite.csv
    dynadesk suite grow --task hate_speech --per-seed 20

    The CSV has HateCheck's columns: functionality is the topic's edit type, case_id the variant, templ_id its
    seed, label_gold "hateful"/"non-hateful" (the task's label for other tasks). `dynadesk eval --suite FILE`
    reads it back."""
    if click_ctx.invoked_subcommand is not None:
        if task_code or out_file:
            raise DynadeskError("--task and --out before a subcommand export the suite; give the subcommand its "
                                "own options, as in `dynadesk suite grow --task hate_speech`.")
        return
    if not task_code or not out_file:
        raise DynadeskError("Name the task and the file: dynadesk suite --task hate_speech --out suite.csv "
                            "(or `dynadesk suite grow --task ...` to grow it).")
    obj = click_ctx.find_object(Context)
    assert obj is not None  # the root command made it
    desk = obj.desk
    path = Path(out_file).expanduser()
    if not path.parent.is_dir():
        raise DynadeskError(f"The folder {path.parent} does not exist; create it or choose another --out.")
    written = desk.adaptive_suite.export_csv(task_code, path)
    topics = {c.seed_id for c in desk.adaptive_suite.cases(task_code)} if written else set()
    click.echo(f"Wrote {written} validated variant(s) of {len(topics)} seed(s) to {path}.")
    if not written:
        click.echo(f"The suite of {task_code} is empty: grow variants of its seeds (`dynadesk suite grow --task "
                   f"{task_code}`) and validate them in the Validate queue.", err=True)


@suite.command("grow")
@click.option("--task", "task_code", required=True)
@click.option("--per-seed", type=click.IntRange(1, 200), help="At most this many variants per seed "
              "(default: the lead's setting, variants_per_seed).")
@click.option("--seed", "seeds", multiple=True, metavar="ID", help="Grow only this seed (an example id; repeat "
              "for more). Default: every seed of the task.")
@pass_context
def grow(obj: Context, task_code: str, per_seed: int | None, seeds: tuple[str, ...]) -> None:
    """Generate label-keeping variants of the task's seeds, checked against the open round's target.

    A seed is a validated example that fooled its round's target, or a perturbation that flipped it. The
    variants go to the open round as the desk's profile's (a lead's) and wait in the Validate queue; only
    validated ones join the suite."""
    from app.cli.progress import staged_progress
    from app.core.domain import ModelFormat
    from app.core.services.target_models import load_ensemble

    chosen = []
    for given in seeds:
        try:
            chosen.append(uuid.UUID(given.strip()))
        except ValueError:
            raise DynadeskError(f"--seed {given!r} is not an example id (a UUID such as "
                                f"{uuid.UUID(int=0)}).") from None
    desk = obj.desk
    person = desk.current_person()
    desk.lead.require_lead(person.id)
    round_ = desk.tasks.round(task_code)  # the open round: the variants go there, its target checks them
    records = desk.models.round_models(round_.id)
    if not records:
        raise DynadeskError(f"Round {round_.number} of {task_code} has no target model to check variants against; "
                            f"attach one with `dynadesk rounds attach --task {task_code} --round {round_.number} "
                            "--model NAME`.")
    imported = [r.name for r in records if r.format == ModelFormat.IMPORTED.value]
    if imported:
        raise DynadeskError(f"Round {round_.number}'s target {', '.join(imported)} is known only by predictions "
                            "recorded elsewhere; it cannot check variants here.")
    models = load_ensemble(records)
    try:
        report = desk.adaptive_suite.grow(task_code, models, seeds=chosen or None, per_seed=per_seed,
                                          generated_by=person.id, progress=staged_progress())
    finally:
        models.close()
    if report.seeds:
        rows = [[str(s.seed_id)[:8], s.drafted, s.added, s.fooling, s.folded, s.reason or ""] for s in report.seeds]
        click.echo(format_table(["seed", "drafted", "added", "fooling", "folded", "why none"], rows))
    else:
        click.echo(f"{task_code} has no seeds yet: validated examples that fooled their round's target, or "
                   "perturbations that flipped it.")
    click.echo(report.summary())
