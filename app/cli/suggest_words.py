"""``dynadesk suggest-words``: a lead's changes to the assistant's word lists for a task (groups,
slurs, hedges, antonyms…). Stored on the desk and sent to the team with the task's settings at the
next sync; the shipped lists in resources/ are never edited."""

from __future__ import annotations

from pathlib import Path

import click

from app.cli.base import Context, format_table, pass_context
from app.core.assist.lexicon import entry_key
from app.core.errors import DynadeskError


def _show(entry: tuple[str, ...]) -> str:
    return entry[0] if len(entry) == 1 else f"{entry[0]} = {entry[1]}"


def _save(obj: Context, task_code: str, changes) -> None:
    desk = obj.desk
    desk.set_task_settings(desk.current_person().id, task_code, assist_words=changes)


@click.group("suggest-words")
@click.option("--task", "task_code", required=True)
@click.pass_context
def suggest_words(ctx: click.Context, task_code: str) -> None:
    """A lead's additions to (and removals from) the assistant's word lists of a task. They reach
    the team's desks with the task's settings at the next `dynadesk sync`.

    \b
    dynadesk suggest-words --task hate_speech list
    dynadesk suggest-words --task hate_speech add protected_groups "Sikhs=Sikh"
    dynadesk suggest-words --task sentiment add antonyms superb=abysmal
    dynadesk suggest-words --task hate_speech remove non_protected_groups "vegans=vegan"
    dynadesk suggest-words --task hate_speech import words.yaml
    """
    ctx.obj.assist_task = task_code


@suggest_words.command("list")
@click.argument("list_name", required=False)
@pass_context
def words_list(obj: Context, list_name: str | None) -> None:
    """The task's lists (or one list's entries): + marks a lead's addition; removed entries are named."""
    task_code = obj.assist_task
    desk = obj.desk
    changes = desk.tasks.settings(task_code).assist_words
    lexicon = desk.tasks.assist_lexicon(task_code)
    if list_name is None:
        click.echo(f"{task_code}: the assistant's word lists (family: {lexicon.family or 'none'})")
        click.echo(format_table(["list", "kind", "entries", "added", "removed", "what an entry is"], [
            [name, w.kind.value, len(w.entries), len(changes.added.get(name, ())), len(changes.removed.get(name, ())),
             w.description[:70] + ("…" if len(w.description) > 70 else "")]
            for name, w in sorted(lexicon.lists.items())]))
        return
    found = lexicon.word_list(list_name)
    added = {entry_key(e) for e in changes.added.get(list_name, ())}
    click.echo(f"{list_name} ({found.kind.value}): {found.description}")
    for entry in found.entries:
        click.echo(f"{'+' if entry_key(entry) in added else ' '} {_show(entry)}")
    for entry in changes.removed.get(list_name, ()):
        click.echo(f"- {_show(entry)}  (removed)")


def _edit(obj: Context, list_name: str, values: tuple[str, ...]):
    """What `add` and `remove` start from: the lead's current changes, VALUES parsed as entries of
    LIST_NAME, and the (casefolded) entries the list has now."""
    from app.core.assist.lexicon import parse_entry

    tasks = obj.desk.tasks
    lexicon = tasks.assist_lexicon(obj.assist_task)
    found = lexicon.word_list(list_name)
    parsed = [parse_entry(v, found.kind) for v in values]
    return tasks.settings(obj.assist_task).assist_words, parsed, {entry_key(e) for e in found.entries}


@suggest_words.command("add")
@click.argument("list_name")
@click.argument("entries", nargs=-1, required=True)
@pass_context
def words_add(obj: Context, list_name: str, entries: tuple[str, ...]) -> None:
    """Add ENTRIES to LIST_NAME: phrases, or A=B for a list of pairs."""
    from app.core.assist.lexicon import WordChanges

    task_code = obj.assist_task
    changes, new, present = _edit(obj, list_name, entries)
    fresh = [e for e in new if entry_key(e) not in present]
    keys = {entry_key(e) for e in new}
    added = {**changes.added, list_name: (*changes.added.get(list_name, ()), *fresh)}
    removed = {**changes.removed, list_name: tuple(e for e in changes.removed.get(list_name, ()) if entry_key(e) not in keys)}
    _save(obj, task_code, WordChanges(added=added, removed=removed))
    skipped = len(new) - len(fresh)
    click.echo(f"{list_name}: {len(fresh)} added" + (f", {skipped} already there" if skipped else "")
               + ". The team gets them at the next sync.")


@suggest_words.command("remove")
@click.argument("list_name")
@click.argument("entries", nargs=-1, required=True)
@pass_context
def words_remove(obj: Context, list_name: str, entries: tuple[str, ...]) -> None:
    """Remove ENTRIES from LIST_NAME (a lead's addition, or a shipped entry)."""
    from app.core.assist.lexicon import WordChanges

    task_code = obj.assist_task
    changes, gone, present = _edit(obj, list_name, entries)
    missing = [_show(e) for e in gone if entry_key(e) not in present]
    if missing:
        raise DynadeskError(f"'{list_name}' has no {', '.join(repr(m) for m in missing)}; "
                            f"see `dynadesk suggest-words --task {task_code} list {list_name}`.")
    keys = {entry_key(e) for e in gone}
    was_added = {entry_key(e) for e in changes.added.get(list_name, ())}
    added = {**changes.added, list_name: tuple(e for e in changes.added.get(list_name, ()) if entry_key(e) not in keys)}
    shipped_gone = tuple(e for e in gone if entry_key(e) not in was_added)
    removed = {**changes.removed, list_name: (*changes.removed.get(list_name, ()), *shipped_gone)}
    _save(obj, task_code, WordChanges(added=added, removed=removed))
    click.echo(f"{list_name}: {len(gone)} removed. The team gets the change at the next sync.")


@suggest_words.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("--replace", is_flag=True, help="Replace the lead's current changes instead of adding to them.")
@pass_context
def words_import(obj: Context, file: str, replace: bool) -> None:
    """Changes from a YAML or JSON FILE: {added: {LIST: [phrase or [A, B], ...]}, removed: {...}}
    (what `export` writes)."""
    import yaml

    from app.core.assist.lexicon import InvalidLexicon, WordChanges

    task_code = obj.assist_task
    desk = obj.desk
    try:
        data = yaml.safe_load(Path(file).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise DynadeskError(f"{file}: cannot read it as YAML or JSON ({exc}).") from exc
    try:
        incoming = WordChanges.from_json(data)
    except InvalidLexicon as exc:
        raise DynadeskError(f"{file}: {exc}") from exc
    desk.tasks.assist_lexicon(task_code).check_changes(incoming)
    if not replace:
        current = desk.tasks.settings(task_code).assist_words

        def merged(a, b):
            out = {name: list(entries) for name, entries in a.items()}
            for name, entries in b.items():
                seen = {entry_key(e) for e in out.get(name, [])}
                out.setdefault(name, []).extend(e for e in entries if entry_key(e) not in seen)
            return {name: tuple(entries) for name, entries in out.items()}

        incoming = WordChanges(added=merged(current.added, incoming.added),
                               removed=merged(current.removed, incoming.removed))
    _save(obj, task_code, incoming)
    counts = incoming.to_json()
    click.echo(f"{task_code}: {sum(map(len, counts['added'].values()))} additions and "
               f"{sum(map(len, counts['removed'].values()))} removals in force. The team gets them at the next sync.")


@suggest_words.command("export")
@pass_context
def words_export(obj: Context) -> None:
    """Print the lead's current changes as YAML (for `import` on another task or desk)."""
    import yaml

    click.echo(yaml.safe_dump(obj.desk.tasks.settings(obj.assist_task).assist_words.to_json(), allow_unicode=True,
                              sort_keys=True), nl=False)
