"""``dynadesk rounds``: list, show, open, close and configure rounds; attach models; import contexts;
promote a trained candidate to the next round (``rounds next``).

Changes are made as the desk's current profile, which must be a lead or an owner.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import click

from app.cli.base import Context, format_table, pass_context
from app.cli.leaderboard import fill_after_round_change
from app.core.assist.arms import MODE_WORDS
from app.core.errors import DynadeskError
from app.core.formatting import pct
from app.core.services.rounds import POLICIES, parse_settings
from app.core.tasks import figures


def resolve_models(desk, references: tuple[str, ...]) -> list[uuid.UUID]:
    """Models named by id, by unique name, or by a sha256 prefix of at least 8 characters."""
    records = desk.models.all()
    chosen = []
    for reference in references:
        matches = [m for m in records if str(m.id) == reference or m.name == reference
                   or (len(reference) >= 8 and m.sha256.startswith(reference.lower()))]
        if len(matches) != 1:
            known = ", ".join(f"{m.name} ({m.sha256[:8]})" for m in records) or "none registered"
            problem = "matches no registered model" if not matches else "matches several models"
            raise DynadeskError(f"'{reference}' {problem}. Registered models: {known}.")
        chosen.append(matches[0].id)
    return chosen


def _round_id(desk, task: str, number: int | None) -> uuid.UUID:
    return desk.rounds.summary(task, number).id


@click.group()
def rounds() -> None:
    """Rounds of a task: their target models, goal settings and contexts."""


@rounds.command("list")
@click.option("--task", "task_code", help="Only this task.")
@pass_context
def rounds_list(obj: Context, task_code: str | None) -> None:
    """Every round with its state, models and progress."""
    desk = obj.desk
    codes = [task_code] if task_code else [t.code for t in desk.tasks.tasks()]
    rows = []
    for code in codes:
        for round_ in desk.tasks.rounds(code):
            s = desk.rounds.summary(code, round_.number)
            mer = pct(figures.mer(s.fooled, s.examples)) if s.examples else "-"  # the CLI's "-": an empty round
            rows.append([code, s.number, s.status, ", ".join(name for _, name, _ in s.models) or "(none)",
                         s.contexts, s.examples, mer])
    click.echo(format_table(["task", "round", "status", "target models", "contexts", "examples", "MER"], rows))


@rounds.command("show")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int, help="Default: the latest round.")
@click.option("--contexts", "context_rows", type=int, default=10, show_default=True,
              help="How many contexts to list (most used first).")
@pass_context
def rounds_show(obj: Context, task_code: str, number: int | None, context_rows: int) -> None:
    """A round's settings, target models and contexts with their use and fooling rates."""
    desk = obj.desk
    s = desk.rounds.summary(task_code, number)
    click.echo(f"{task_code} round {s.number} ({s.status})")
    click.echo(f"  description:   {s.description}")
    click.echo(f"  goal message:  {s.goal_message or '-'}")
    opened = f"{s.opened_at:%Y-%m-%d %H:%M}" if s.opened_at else "-"
    closed = f", closed {s.closed_at:%Y-%m-%d %H:%M}" if s.closed_at else ""
    click.echo(f"  opened:        {opened}{closed}")
    click.echo(f"  fooled rule:   {s.fooled_rule} (ensembles)")
    settings = s.settings
    start = settings.label_start + (f" ({settings.fixed_label})" if settings.label_start == "fixed" else "")
    click.echo(f"  goal label:    starts {start}; {'kept' if settings.keep_label_after_submit else 'reset'} after submit")
    click.echo(f"  contexts:      {s.contexts}, served by {settings.context_policy}"
               + (f" (tag {settings.context_tag})" if settings.context_tag else ""))
    click.echo(f"  assistant:     {MODE_WORDS[str(settings.assistant)]}")
    imported = f"; {s.imported} imported (not written against the target: outside MER)" if s.imported else ""
    click.echo(f"  examples:      {s.examples}, {s.fooled} fooled the model{imported}")
    click.echo("  target models: " + ("; ".join(f"{name} ({sha[:12]})" for _, name, sha in s.models) or "none"))
    stats = desk.rounds.context_stats(s.id, limit=context_rows)
    if stats:
        click.echo("")
        click.echo(format_table(
            ["context", "tag", "served", "examples", "fooling rate"],
            [[(" ".join(c.text.split()))[:60], c.tag, c.times_used, c.examples,
              "-" if c.fooling_rate is None else f"{100 * c.fooling_rate:.0f}%"] for c in stats]))


@rounds.command("open")
@click.option("--task", "task_code", required=True)
@click.option("--model", "models", multiple=True, required=True,
              help="Target model (id, name or sha256 prefix); repeat for an ensemble.")
@click.option("--description")
@click.option("--goal", "goal_message", help="The goal message annotators see.")
@click.option("--keep-previous-open", is_flag=True, help="Do not close the previous round.")
@pass_context
def rounds_open(obj: Context, task_code: str, models: tuple[str, ...], description: str | None,
                goal_message: str | None, keep_previous_open: bool) -> None:
    """Open the next round with new target models; its settings are copied from the previous one."""
    desk = obj.desk
    new = desk.rounds.open_next(task_code, desk.current_person().id, resolve_models(desk, models),
                                description=description, goal_message=goal_message,
                                close_previous=not keep_previous_open)
    click.echo(f"Opened {task_code} round {new.number}.")
    fill_after_round_change(desk, task_code)


@rounds.command("close")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int, help="Default: the latest round.")
@pass_context
def rounds_close(obj: Context, task_code: str, number: int | None) -> None:
    """Close a round: it takes no more examples; its data stays for validation and evaluation."""
    desk = obj.desk
    closed = desk.rounds.close(_round_id(desk, task_code, number), desk.current_person().id)
    click.echo(f"Closed {task_code} round {closed.number}.")
    fill_after_round_change(desk, task_code)


@rounds.command("attach")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int)
@click.option("--model", "models", multiple=True, required=True, help="Repeat for an ensemble, in order.")
@pass_context
def rounds_attach(obj: Context, task_code: str, number: int | None, models: tuple[str, ...]) -> None:
    """Make these models the round's targets (replacing the current ones)."""
    desk = obj.desk
    desk.rounds.set_models(_round_id(desk, task_code, number), desk.current_person().id, resolve_models(desk, models))
    click.echo(f"{task_code} round targets: {', '.join(models)}")


@rounds.command("set")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int)
@click.option("--description")
@click.option("--goal", "goal_message")
@click.option("--fooled-rule", type=click.Choice(["mean", "all", "any"]), help="How an ensemble decides 'fooled'.")
@click.option("--label-start", type=click.Choice(["blank", "fixed", "random"]))
@click.option("--fixed-label")
@click.option("--keep-label/--reset-label", default=None, help="Keep the goal label after a submit.")
@click.option("--policy", type=click.Choice(POLICIES), help="How the next context is chosen.")
@click.option("--context-tag", help="Serve only contexts with this tag ('' for all).")
@click.option("--assistant", type=click.Choice(list(MODE_WORDS)),
              help="The writing assistant: off, on, or ab (on for a random half of each writer's sessions).")
@pass_context
def rounds_set(obj: Context, task_code: str, number: int | None, description, goal_message, fooled_rule, label_start,
               fixed_label, keep_label, policy, context_tag, assistant) -> None:
    """Change a round's description, goal message and settings."""
    desk = obj.desk
    summary = desk.rounds.summary(task_code, number)
    settings = summary.settings.model_dump()
    for key, value in (("label_start", label_start), ("fixed_label", fixed_label), ("keep_label_after_submit", keep_label),
                       ("context_policy", policy), ("context_tag", context_tag), ("assistant", assistant)):
        if value is not None:
            settings[key] = value
    settings["context_tag"] = settings["context_tag"] or None  # '' clears the filter
    desk.rounds.update(summary.id, desk.current_person().id, description=description, goal_message=goal_message,
                       fooled_rule=fooled_rule, settings=parse_settings(settings))
    click.echo(f"Updated {task_code} round {summary.number}.")


@rounds.command("import-contexts")
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int)
@click.option("--format", "format_", type=click.Choice(["txt", "csv", "jsonl"]), help="Default: from the file name.")
@click.option("--column", help="CSV column (or JSONL field) holding the text.")
@click.option("--tag", default="", help="Tag for every imported context.")
@pass_context
def rounds_import_contexts(obj: Context, file: str, task_code: str, number: int | None, format_: str | None,
                           column: str | None, tag: str) -> None:
    """Import contexts or prompts: one per line, a CSV column, or JSONL. Duplicates are skipped."""
    desk = obj.desk
    report = desk.rounds.import_contexts(_round_id(desk, task_code, number), desk.current_person().id, Path(file),
                                         format=format_, column=column, tag=tag)
    click.echo(report.summary())


@rounds.command("next")
@click.option("--task", "task_code", required=True)
@click.option("--model", "model_dir", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="The folder `dynadesk train --out DIR` wrote.")
@click.option("--with-current", is_flag=True, help="Keep the current target(s) in an ensemble after the candidate.")
@click.option("--force", is_flag=True, help="Promote anyway when the promotion rule refuses the candidate; needs "
                                            "--reason (recorded with the figures in the lineage).")
@click.option("--reason", help="Why the candidate is promoted over the rule's refusal (with --force).")
@click.option("--manifest", type=click.Path(dir_okay=False, path_type=Path),
              help="The training manifest. Default: DIR/manifest.json when it is there.")
@click.option("--comparison", "comparison_file", type=click.Path(path_type=Path),
              help="A stored comparison report (its JSON file, or the folder holding comparison.json) "
                   "instead of comparing now.")
@pass_context
def rounds_next(obj: Context, task_code: str, model_dir: Path, with_current: bool, force: bool, reason: str | None,
                manifest: Path | None, comparison_file: Path | None) -> None:
    """Promote a trained candidate: close the open round and open the next with it as the target.

    The candidate is compared with the current target(s) on every split this desk has (each round's
    held-out examples as its training held them out, the base data's test split named in its manifest,
    every suite of the task), exported to ONNX and parity-checked like the default model. It is refused
    when a split with enough examples finds it worse, or when no split has enough examples
    (--force --reason "why" overrides; recorded). Leads and owners only. `dynadesk sync publish TASK
    --round N` then brings the round to the team.
    """
    from app.core.next_round.comparison import NothingToCompare, compare_candidate, read_report
    from app.core.next_round.promotion import check_promotable, promote_candidate
    from local_models.progress import Progress

    desk = obj.desk
    check_promotable(desk, model_dir, task_code=task_code)
    progress = Progress(on_message=lambda text: click.echo(text, err=True))
    try:
        comparison = (read_report(comparison_file) if comparison_file is not None
                      else compare_candidate(desk, task_code, model_dir, progress=progress))
    except NothingToCompare as exc:
        if not force:
            raise DynadeskError(f"{exc} Compare with `dynadesk rounds compare … --base-test/--suite` and pass "
                                "its report with --comparison, or promote without a comparison with --force "
                                "--reason \"why\".") from exc
        comparison = None
        click.echo(f"{exc} Promoting without a comparison (--force).", err=True)
    # A refusal is a DynadeskError: its message holds every split's figures and the --force hint; the exit status is 1.
    promotion = promote_candidate(desk, task_code, model_dir, with_current=with_current, force=force, reason=reason,
                                  comparison=comparison, manifest=manifest, progress=progress)
    if comparison is not None:
        click.echo("Comparison with the previous target(s):")
        for line in comparison.summary_lines():
            click.echo(f"  {line}")
    for line in promotion.summary_lines():
        click.echo(line)
    click.echo(f"Send it to the team with: dynadesk sync publish {task_code} --round {promotion.round_number}")
    fill_after_round_change(desk, task_code)  # after the promotion's own unit of work, never inside it
    from app.core.next_round.deferred_int8 import pending_int8

    if any(p.fp32_id == promotion.candidate.id for p in pending_int8(desk, task_code)):
        click.echo(f"The int8 form was deferred: the round runs the fp32 form now. Prepare the int8 form with "
                   f"`dynadesk rounds int8 --task {task_code}` (the desk's window does it in the background); the "
                   "round switches to it when it passes its check.")


@rounds.command("int8")
@click.option("--task", "task_code", help="Only this task's open rounds.")
@pass_context
def rounds_int8(obj: Context, task_code: str | None) -> None:
    """Prepare the int8 form of targets promoted with `dynadesk train --int8 later`, and switch to it.

    The int8 search runs on the texts training kept (minutes on two cores); when a form passes the
    parity rule, the open round runs it in place of the fp32 form. The desk's window does the same
    in the background on its own; this command does it now.
    """
    from app.cli.progress import staged_progress
    from app.core.next_round.deferred_int8 import pending_int8, prepare_int8_files, switch_to_int8

    desk = obj.desk
    waiting = pending_int8(desk, task_code)
    if not waiting:
        click.echo("No open round waits for an int8 form" + (f" in {task_code}." if task_code else "."))
        return
    for pending in waiting:
        click.echo(f"{pending.task_code} round {pending.round_number}: preparing the int8 form of {pending.name} ...")
        prepared = prepare_int8_files(desk, pending, progress=staged_progress(), in_child=False)
        click.echo(switch_to_int8(desk, pending, prepared).line(pending))

