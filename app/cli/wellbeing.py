"""``dynadesk wellbeing words``: a task's blur word list (analyst wellbeing). Everyone may
list it; the desk's working profile, when a lead, adds and removes the team's words, which travel
to the team with the task settings at the next sync."""

from __future__ import annotations

import json

import click

from app.cli.base import Context, pass_context


@click.group("wellbeing")
def wellbeing() -> None:
    """Analyst wellbeing: the words reading views blur."""


@wellbeing.group("words")
def words() -> None:
    """A task's blur words: the bundled list (resources/wellbeing/<task>/words.txt) and the leads' words."""


@words.command("list")
@click.option("--task", "task_code", required=True)
@click.option("--json", "as_json", is_flag=True, help="Print them as JSON.")
@pass_context
def list_words(obj: Context, task_code: str, as_json: bool) -> None:
    """The words blurred for the task: bundled, then the leads'."""
    from app.core.wellbeing.word_list import bundled_words

    desk = obj.desk
    desk.tasks.task(task_code)
    bundled, added = bundled_words(task_code), desk.tasks.settings(task_code).blur_words
    if as_json:
        click.echo(json.dumps({"task": task_code, "bundled": list(bundled), "added": list(added)},
                              ensure_ascii=False, indent=2))
        return
    click.echo(f"{task_code}: {len(bundled)} bundled word(s), {len(added)} added by leads.")
    for word in added:
        click.echo(f"  + {word}")


def _change(obj: Context, task_code: str, given: tuple[str, ...], adding: bool) -> None:
    desk = obj.desk
    desk.tasks.task(task_code)
    current = list(desk.tasks.settings(task_code).blur_words)
    if adding:
        chosen = current + list(given)
    else:
        unknown = [w for w in given if w.casefold() not in {c.casefold() for c in current}]
        if unknown:
            raise click.ClickException(f"Not among the leads' words of {task_code}: {', '.join(unknown)}. "
                                       f"`dynadesk wellbeing words list --task {task_code}` shows them "
                                       "(bundled words cannot be removed).")
        gone = {w.casefold() for w in given}
        chosen = [c for c in current if c.casefold() not in gone]
    stored = desk.set_task_settings(desk.current_person_id, task_code, blur_words=chosen).settings.blur_words
    click.echo(f"{task_code}: {len(stored)} word(s) added by leads; they reach the team at the next sync.")


@words.command("add")
@click.option("--task", "task_code", required=True)
@click.argument("entries", nargs=-1, required=True)
@pass_context
def add_words(obj: Context, task_code: str, entries: tuple[str, ...]) -> None:
    """Add words or phrases (quote a phrase; an ending '*' covers every word it starts). Leads only."""
    _change(obj, task_code, entries, adding=True)


@words.command("remove")
@click.option("--task", "task_code", required=True)
@click.argument("entries", nargs=-1, required=True)
@pass_context
def remove_words(obj: Context, task_code: str, entries: tuple[str, ...]) -> None:
    """Remove words the leads added. Leads only."""
    _change(obj, task_code, entries, adding=False)
