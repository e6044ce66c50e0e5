"""A task's blur word list: the words bundled in ``resources/wellbeing/<task code>/words.txt`` and
the ones the team's leads added.

A lead's words are one of the task's lead settings (``app.core.task_settings.TaskSettings.blur_words``,
checked by ``clean_words``), which travel to the team in one ``task_setting`` record. This module is
free of storage, so view-models may use it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import Final

from app.core.errors import DynadeskError
from app.core.text import control_characters, printable
from app.core.wellbeing.blur import LEET, normalise_entry

MAX_ENTRY_CHARS: Final[int] = 60
MAX_LEAD_WORDS: Final[int] = 2000
# Besides letters, combining marks and digits, what a word or phrase may be written with: the
# leetspeak signs, and the marks inside words ("o'brien", "half-breed", "n.i.g").
_WORD_SIGNS: Final[frozenset[str]] = frozenset(LEET) | frozenset(" '’-.")


class InvalidWordList(DynadeskError):
    pass


def _folder() -> Path:
    import resources

    return resources.ROOT / "wellbeing"


def parse_lines(lines: Iterable[str]) -> list[str]:
    """The entries of a word list file: one a line, ``#`` starts a comment, blank lines skipped."""
    entries = []
    for line in lines:
        entry = line.split("#", 1)[0].strip()
        if entry:
            entries.append(entry)
    return entries


@lru_cache(maxsize=32)
def bundled_words(task_code: str) -> tuple[str, ...]:
    """The words shipped for the task (none for a task without a list)."""
    path = _folder() / task_code / "words.txt"
    if not path.is_file():
        return ()
    return tuple(parse_lines(path.read_text(encoding="utf-8").splitlines()))


def entry_problem(entry: str, matched: str | None = None) -> str | None:
    """Why ``entry`` (spaces already collapsed; ``matched``: its ``normalise_entry`` when known)
    cannot be a blur word, or None. The one rule for a lead's entries: the desk that sets them and
    the server that stores them both ask it."""
    shown = printable(entry if len(entry) <= 20 else entry[:20] + "…")
    if len(entry) > MAX_ENTRY_CHARS:
        return f"'{shown}' is longer than {MAX_ENTRY_CHARS} characters"
    controls = control_characters(entry)
    if controls:
        return f"'{shown}' holds control characters ({', '.join(controls)})"
    body = entry[:-1] if entry.endswith("*") else entry
    odd = sorted({c for c in body if not (c.isalnum() or unicodedata.category(c).startswith("M") or c in _WORD_SIGNS)})
    if odd:
        return f"'{shown}' holds characters no word is written with ({' '.join(odd)})"
    matched = normalise_entry(entry) if matched is None else matched
    if len(matched.rstrip("*").replace(" ", "")) < 2:
        return f"'{shown}' has fewer than two letters to match"
    return None


def clean_words(words: Iterable[str]) -> tuple[str, ...]:
    """A lead's entries, checked and de-duplicated (by their matched form), in the order given.
    Raises ``InvalidWordList`` naming every entry that cannot be matched, and why."""
    seen: set[str] = set()
    out: list[str] = []
    problems: list[str] = []
    for raw in words:
        entry = " ".join(str(raw).split())
        if not entry:
            continue
        matched = normalise_entry(entry)
        problem = entry_problem(entry, matched)
        if problem:
            problems.append(problem)
            continue
        if matched not in seen:
            seen.add(matched)
            out.append(entry)
    if problems:
        raise InvalidWordList("These blur words cannot be used: " + "; ".join(problems[:20])
                              + (f"; and {len(problems) - 20} more" if len(problems) > 20 else "")
                              + ". Give whole words or phrases (an ending '*' covers every word they start); "
                              "nothing was changed.")
    if len(out) > MAX_LEAD_WORDS:
        raise InvalidWordList(f"A task's added blur words are at most {MAX_LEAD_WORDS}; {len(out)} were given.")
    return tuple(out)


def task_words(task_code: str, lead_words: Iterable[str] = ()) -> tuple[str, ...]:
    """Everything blurred for the task: the bundled list and the leads' words."""
    return bundled_words(task_code) + tuple(lead_words)
