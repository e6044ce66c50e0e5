"""The spelling variants that keep a word readable to a person: leetspeak ("h4te"), look-alike letters of
other scripts (Cyrillic "е" for Latin "e") and an emoji for a word. Shipped in
resources/assist/common/obfuscation.yaml; the assistant respells with them, the reading blur reads through them.

    tables = load_tables()   # tables.leet["e"] == "3"
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml


@dataclass(frozen=True)
class SpellingTables:
    leet: Mapping[str, str]
    homoglyphs: Mapping[str, str]
    emoji: Mapping[str, str]


def tables_file() -> Path:
    import resources

    return resources.ROOT / "assist" / "common" / "obfuscation.yaml"


@functools.lru_cache(maxsize=4)
def load_tables(path: Path | None = None) -> SpellingTables:
    """The leet, homoglyph and emoji tables (a lead's extended copy when ``path`` is given)."""
    path = path or tables_file()
    data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping with leet, homoglyphs and emoji")

    def table(name: str) -> dict[str, str]:
        raw = data.get(name) or {}
        if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in raw.items()):
            raise ValueError(f"{path}: '{name}' must map strings to strings")
        return dict(raw)

    return SpellingTables(table("leet"), table("homoglyphs"), {k.lower(): v for k, v in table("emoji").items()})
