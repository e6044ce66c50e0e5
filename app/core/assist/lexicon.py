"""The word lists the assistant's rules use: shipped per task in ``resources/assist/<task_code>/``
(plus ``resources/assist/common/`` for every task), extended by a task's leads on their desk.

A list file is YAML: ``kind`` (``words``: one phrase per entry; ``pairs``: ``[a, b]`` per entry),
``description`` (what an entry means, shown to leads) and ``entries``. A task folder may also hold
``rules.yaml``: ``family`` (which rules apply: hate_speech, sentiment or nli) and ``labels``, the
task's label for each role those rules speak of (e.g. ``hateful: hate``).

A lead's additions and removals (``WordChanges``) are one of the task's lead settings
(``app.core.task_settings.TaskSettings.assist_words``), which travel to the team;
``Lexicon.with_changes`` applies them.
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import yaml

from app.core.domain import StrEnum
from app.core.errors import DynadeskError

COMMON: Final[str] = "common"
RULES_FILE: Final[str] = "rules.yaml"
# Tables of other generators that live beside the lists (they have their own loaders).
OTHER_FILES: Final[frozenset[str]] = frozenset({RULES_FILE, "obfuscation.yaml"})
FAMILIES: Final[tuple[str, ...]] = ("hate_speech", "sentiment", "nli")
#: Bounds on what a lead may add, so one bad import cannot bloat every desk of the team.
MAX_PHRASE_CHARS: Final[int] = 80
MAX_CHANGES_PER_LIST: Final[int] = 500
MAX_LISTS: Final[int] = 64


class InvalidLexicon(DynadeskError):
    pass


class ListKind(StrEnum):
    WORDS = "words"
    PAIRS = "pairs"


Entry = tuple[str, ...]  # one phrase (words) or two (pairs)


@dataclass(frozen=True)
class WordList:
    name: str
    kind: ListKind
    description: str
    entries: tuple[Entry, ...]

    @property
    def width(self) -> int:
        return 1 if self.kind is ListKind.WORDS else 2


@dataclass(frozen=True)
class WordChanges:
    """A lead's changes to a task's lists: entries added and (shipped or added) entries removed."""

    added: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)
    removed: Mapping[str, tuple[Entry, ...]] = field(default_factory=dict)

    def is_empty(self) -> bool:
        return not any(self.added.values()) and not any(self.removed.values())

    def to_json(self) -> dict[str, dict[str, list[Any]]]:
        def side(values: Mapping[str, tuple[Entry, ...]]) -> dict[str, list[Any]]:
            return {name: [entry[0] if len(entry) == 1 else list(entry) for entry in entries]
                    for name, entries in sorted(values.items()) if entries}
        return {"added": side(self.added), "removed": side(self.removed)}

    @classmethod
    def from_json(cls, data: Any) -> WordChanges:
        """Changes from their JSON form, checked (shape and sizes; not against the shipped lists)."""
        if not data:
            return cls()
        if not isinstance(data, dict) or set(data) - {"added", "removed"}:
            raise InvalidLexicon("Word changes must be an object with 'added' and 'removed'.")
        sides: list[dict[str, tuple[Entry, ...]]] = []
        for key in ("added", "removed"):
            value = data.get(key) or {}
            if not isinstance(value, dict) or len(value) > MAX_LISTS:
                raise InvalidLexicon(f"'{key}' must map at most {MAX_LISTS} list names to entries.")
            side: dict[str, tuple[Entry, ...]] = {}
            for name, entries in value.items():
                if not isinstance(entries, list) or len(entries) > MAX_CHANGES_PER_LIST:
                    raise InvalidLexicon(f"'{key}.{name}' must be a list of at most {MAX_CHANGES_PER_LIST} entries.")
                side[_list_name(name, f"'{key}'")] = tuple(
                    _entry(item, None, f"'{key}.{name}' entry {i + 1}") for i, item in enumerate(entries))
            sides.append(side)
        return cls(added=sides[0], removed=sides[1])

    def fingerprint(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, ensure_ascii=False)


@dataclass(frozen=True)
class Lexicon:
    task_code: str
    family: str | None  # which rules apply (None: no rules.yaml, so only the shared lists)
    labels: Mapping[str, str]  # role (hateful, positive, entailment…) → the task's label
    lists: Mapping[str, WordList]

    def words(self, name: str) -> tuple[str, ...]:
        found = self.lists.get(name)
        return tuple(e[0] for e in found.entries) if found is not None and found.kind is ListKind.WORDS else ()

    def pairs(self, name: str) -> tuple[tuple[str, str], ...]:
        found = self.lists.get(name)
        return tuple((e[0], e[1]) for e in found.entries) if found is not None and found.kind is ListKind.PAIRS else ()

    def label(self, role: str) -> str | None:
        return self.labels.get(role)

    def word_list(self, name: str) -> WordList:
        """The list called ``name``; an unknown name is refused with the lists there are."""
        found = self.lists.get(name)
        if found is None:
            raise InvalidLexicon(f"{self.task_code} has no word list '{name}'. Its lists: "
                                 f"{', '.join(sorted(self.lists)) or 'none'}.")
        return found

    def check_changes(self, changes: WordChanges) -> None:
        """Refuse changes that name an unknown list or have the wrong shape for it."""
        for side in (changes.added, changes.removed):
            for name, entries in side.items():
                target = self.word_list(name)
                for entry in entries:
                    if len(entry) != target.width:
                        shape = "one phrase" if target.width == 1 else "a pair written A=B"
                        raise InvalidLexicon(f"'{name}' holds {target.kind.value}: each entry is {shape}; "
                                             f"got {' = '.join(entry)!r}.")

    def with_changes(self, changes: WordChanges) -> Lexicon:
        """The lists with a lead's changes applied: additions first, then the shipped entries, less
        the removed ones (by case-insensitive match; a removal beats an addition). Changes naming a list this desk does not ship are ignored
        (a newer desk's lead may have named one)."""
        if changes.is_empty():
            return self
        lists = dict(self.lists)
        for name, current in self.lists.items():
            gone = {entry_key(e) for e in changes.removed.get(name, ()) if len(e) == current.width}
            kept: list[Entry] = []
            seen: set[tuple[str, ...]] = set()
            # the lead's additions first: rules offer a list's first entries, and these are the team's focus
            for entry in (*changes.added.get(name, ()), *current.entries):
                if len(entry) == current.width and entry_key(entry) not in seen and entry_key(entry) not in gone:
                    kept.append(entry)
                    seen.add(entry_key(entry))
            lists[name] = WordList(name, current.kind, current.description, tuple(kept))
        return Lexicon(self.task_code, self.family, self.labels, lists)


def entry_key(entry: Entry) -> tuple[str, ...]:
    """What makes two entries the same (case-insensitive)."""
    return tuple(part.casefold() for part in entry)


def _list_name(name: Any, where: str) -> str:
    if not isinstance(name, str) or not name.replace("_", "").isalnum() or not name.isascii() or len(name) > 64:
        raise InvalidLexicon(f"{where}: a list name is letters, digits and underscores; got {name!r}.")
    return name


def _phrase(value: Any, where: str) -> str:
    if isinstance(value, bool):
        raise InvalidLexicon(f"{where}: got {value!r}: YAML reads an unquoted no, yes, on, off, true or false "
                             f"as true/false; put the word in quotes (\"no\").")
    if not isinstance(value, str):
        raise InvalidLexicon(f"{where}: expected text, got {value!r}.")
    text = " ".join(unicodedata.normalize("NFC", value).split())
    if not text and value != "":
        raise InvalidLexicon(f"{where}: a phrase cannot be only spaces.")
    if len(text) > MAX_PHRASE_CHARS:
        raise InvalidLexicon(f"{where}: a phrase is at most {MAX_PHRASE_CHARS} characters; got {len(text)}.")
    if any(unicodedata.category(c) == "Cc" for c in text):
        raise InvalidLexicon(f"{where}: a phrase cannot hold control characters.")
    return text


def _entry(value: Any, width: int | None, where: str) -> Entry:
    """One entry: a phrase, or a pair given as [a, b] (or 'a=b' from the command line)."""
    if isinstance(value, str) and width != 2 and "=" not in value:
        entry: Entry = (_phrase(value, where),)
    elif isinstance(value, str):
        left, _, right = value.partition("=")
        entry = (_phrase(left, where), _phrase(right, where))
    elif isinstance(value, list) and len(value) == 2:
        entry = (_phrase(value[0], where), _phrase(value[1], where))
    else:
        raise InvalidLexicon(f"{where}: expected a phrase or a pair [A, B]; got {value!r}.")
    if width is not None and len(entry) != width:
        raise InvalidLexicon(f"{where}: expected {'a phrase' if width == 1 else 'a pair [A, B]'}; got {value!r}.")
    if len(entry) == 2 and not entry[0]:
        raise InvalidLexicon(f"{where}: the first phrase of a pair cannot be empty; got {value!r}.")
    if len(entry) == 1 and not entry[0]:
        raise InvalidLexicon(f"{where}: an entry cannot be empty.")
    return entry


def parse_entry(value: str, kind: ListKind) -> Entry:
    """An entry typed by a lead: a phrase, or ``A=B`` for a pair."""
    if kind is ListKind.PAIRS and "=" not in value:
        raise InvalidLexicon(f"This list holds pairs: write them as A=B (e.g. 'good=bad'); got {value!r}.")
    return _entry(value, 1 if kind is ListKind.WORDS else 2, f"'{value}'")


def load_list(path: Path) -> WordList:
    """One list file, checked; every problem names the file and the place."""
    where = str(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidLexicon(f"{where}: cannot read it ({exc}).") from exc
    except yaml.YAMLError as exc:
        raise InvalidLexicon(f"{where}: not valid YAML ({exc}).") from exc
    if not isinstance(data, dict):
        raise InvalidLexicon(f"{where}: expected keys kind, description and entries.")
    unknown = sorted(set(data) - {"kind", "description", "entries"})
    if unknown:
        raise InvalidLexicon(f"{where}: unknown key(s) {', '.join(unknown)}; known: kind, description, entries.")
    try:
        kind = ListKind(str(data.get("kind")))  # a missing or unknown kind is a ValueError
    except ValueError:
        raise InvalidLexicon(f"{where}: 'kind' must be 'words' or 'pairs'; got {data.get('kind')!r}.") from None
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise InvalidLexicon(f"{where}: 'description' must say what an entry means.")
    entries = data.get("entries")
    if not isinstance(entries, list) or not entries:
        raise InvalidLexicon(f"{where}: 'entries' must be a non-empty list.")
    width = 1 if kind is ListKind.WORDS else 2
    parsed = tuple(_entry(item, width, f"{where}: entry {i + 1}") for i, item in enumerate(entries))
    return WordList(_list_name(path.stem, where), kind, " ".join(description.split()), parsed)


def _load_rules(path: Path) -> tuple[str | None, dict[str, str]]:
    if not path.exists():
        return None, {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise InvalidLexicon(f"{path}: cannot read it ({exc}).") from exc
    if not isinstance(data, dict) or data.get("family") not in FAMILIES or not isinstance(data.get("labels"), dict) \
            or not all(isinstance(k, str) and isinstance(v, str) for k, v in data["labels"].items()):
        raise InvalidLexicon(f"{path}: expected 'family' (one of {', '.join(FAMILIES)}) and 'labels' "
                             f"(role: the task's label).")
    return str(data["family"]), dict(data["labels"])


def assist_root() -> Path:
    import resources

    return resources.ROOT / "assist"


def load_lexicon(task_code: str, root: Path | None = None, labels: Iterable[str] | None = None) -> Lexicon:
    """The shipped lists for a task: ``common/`` then the task's own folder (a task file of the
    same name replaces the common one). ``labels``, when given, are the task's labels: a
    ``rules.yaml`` naming another is refused."""
    base = root if root is not None else assist_root()
    lists: dict[str, WordList] = {}
    for folder in (base / COMMON, base / task_code):
        if folder.is_dir():
            for path in sorted(folder.glob("*.yaml")):
                if path.name not in OTHER_FILES:
                    lists[path.stem] = load_list(path)
    family, roles = _load_rules(base / task_code / RULES_FILE)
    if labels is not None:
        known = set(labels)
        wrong = sorted(v for v in roles.values() if v not in known)
        if wrong:
            raise InvalidLexicon(f"{base / task_code / RULES_FILE}: label(s) {', '.join(wrong)} are not labels "
                                 f"of {task_code} ({', '.join(sorted(known))}).")
    return Lexicon(task_code, family, roles, lists)


@lru_cache(maxsize=32)
def shipped_lexicon(task_code: str) -> Lexicon:
    """The shipped lists (cached: resources do not change while the desk runs)."""
    return load_lexicon(task_code)
