"""Words with their character offsets, and minimal word-level edits between two texts.

A word is a run of letters/digits (with inner apostrophes, as in "don't"), or a run of other
visible characters (punctuation, emoji with their joiners). Offsets index the original string,
so results map back onto the annotator's exact text.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from dataclasses import dataclass

_WORD = re.compile(r"\w+(?:['’]\w+)*|[^\w\s]+", re.UNICODE)
# Zero-width characters that are invisible but meaningful (joiners, marks); kept inside words.
ZERO_WIDTH = {"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"}


@dataclass(frozen=True)
class Word:
    text: str
    start: int
    end: int


def words(text: str) -> list[Word]:
    return [Word(m.group(), m.start(), m.end()) for m in _WORD.finditer(text)]


def clean_text(text: str) -> str:
    """Normalise what an annotator typed without changing what it says: NFC, and Unix line ends."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


def content_hash(text: str) -> str:
    """Identity of a context: the same words with different spacing are the same context."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


@dataclass(frozen=True)
class EditOp:
    """Replace words ``a[a_start:a_end]`` of the original with ``b[b_start:b_end]`` of the edit."""

    op: str  # "replace", "insert" or "delete"
    a_start: int
    a_end: int
    b_start: int
    b_end: int
    old: str
    new: str

    def to_json(self) -> dict:
        return self.__dict__.copy()


def word_edits(original: str, edited: str) -> tuple[list[EditOp], int]:
    """Minimal word-level edit operations (Levenshtein, grouped into runs) and the edit distance."""
    a = [w.text for w in words(original)]
    b = [w.text for w in words(edited)]
    n, m = len(a), len(b)
    dist = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        dist[i][0] = i
    for j in range(m + 1):
        dist[0][j] = j
    for i in range(1, n + 1):
        row, prev = dist[i], dist[i - 1]
        for j in range(1, m + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
    # Walk back, then merge neighbouring single-word steps into runs.
    steps: list[tuple[str, int, int]] = []  # (kind, i, j) for the word pair ending at i, j
    i, j = n, m
    while i > 0 or j > 0:
        if i > 0 and j > 0 and dist[i][j] == dist[i - 1][j - 1] + (a[i - 1] != b[j - 1]):
            steps.append(("equal" if a[i - 1] == b[j - 1] else "replace", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and dist[i][j] == dist[i - 1][j] + 1:
            steps.append(("delete", i - 1, j))
            i -= 1
        else:
            steps.append(("insert", i, j - 1))
            j -= 1
    steps.reverse()
    ops: list[EditOp] = []
    run: list[tuple[str, int, int]] = []

    def flush() -> None:
        if not run:
            return
        a_idx = [s[1] for s in run if s[0] in ("replace", "delete")]
        b_idx = [s[2] for s in run if s[0] in ("replace", "insert")]
        a_start = a_idx[0] if a_idx else run[0][1]
        b_start = b_idx[0] if b_idx else run[0][2]
        a_end = a_idx[-1] + 1 if a_idx else a_start
        b_end = b_idx[-1] + 1 if b_idx else b_start
        kind = "replace" if a_idx and b_idx else ("delete" if a_idx else "insert")
        ops.append(EditOp(kind, a_start, a_end, b_start, b_end, " ".join(a[a_start:a_end]), " ".join(b[b_start:b_end])))
        run.clear()

    for step in steps:
        if step[0] == "equal":
            flush()
        else:
            run.append(step)
    flush()
    return ops, dist[n][m]
