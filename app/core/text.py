"""Words with their character offsets (and a score, where a model gave them one), the function words,
and minimal word-level edits between two texts.

A word is what ``local_models.words.split_words`` says it is, the one definition shared with the
heatmap's grouping of tokens: a run of non-space characters, with emoji (and their joiners) apart
from letters and opening/closing punctuation split off its ends, so that obfuscated words such as
"sh!t", "f*ck" or "n1gga" stay one word and zero-width characters stay inside the word they sit in.
Offsets index the original string, so results map back onto the annotator's exact text.
"""

from __future__ import annotations

import functools
import hashlib
import re
import unicodedata
from dataclasses import dataclass
from typing import Final

from rapidfuzz.distance import Levenshtein

from local_models.words import WordSpan as Word
from local_models.words import split_words

# Function words: the words that carry a sentence's grammar, not what it says about anyone. The
# assistant never swaps them, and the blur never masks them on the model's word alone.
STOPWORDS: Final[frozenset[str]] = frozenset("""
a an the and or but if then so than that this these those there here of to in on at by for with from into
onto over under about as is am are was were be been being do does did have has had having it its itself
i me my mine we us our ours you your yours he him his she her hers they them their theirs what which who
whom whose when where why how all any both each few more most other some such no nor not only own same
too very can will just should would could may might must shall s t don ll re ve d m o y
""".split())

# Zero-width characters that are invisible but meaningful (joiners, marks); kept inside words.
ZERO_WIDTH = {"\u200b", "\u200c", "\u200d", "\u2060", "\ufeff"}


def words(text: str) -> list[Word]:
    """The words of ``text`` (``Word``: text, start, end), as the heatmap groups them."""
    return split_words(text)


def clean_text(text: str) -> str:
    """Normalise what an annotator typed without changing what it says: NFC, and Unix line ends."""
    return unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))


# Characters that steer a terminal or reorder the text around them instead of showing:
# C0 and C1 controls, DEL, and the bidirectional embeddings, overrides and isolates.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def control_characters(text: str) -> list[str]:
    """The control characters in ``text``, each written as an escape (for messages)."""
    return sorted({_escape(c) for c in _CONTROL.findall(text)})


def printable(text: str) -> str:
    """``text`` with its control characters written as escapes (``\\x1b``): printing it cannot
    move the cursor, clear the screen or reorder a terminal line."""
    return _CONTROL.sub(lambda m: _escape(m.group()), text)


def content_hash(text: str) -> str:
    """Identity of a context: the same words with different spacing are the same context."""
    return hashlib.sha256(" ".join(text.split()).encode()).hexdigest()


@dataclass(frozen=True)
class WordScore:
    """One word of the text (character span) and its attribution toward the model's label."""

    word: str
    start: int
    end: int
    score: float


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


def word_distance(original: str, edited: str, *, max_chars: int) -> int | None:
    """The word edit distance between two texts (the figure of :func:`word_edits`), or None
    (unknown) when either text is longer than ``max_chars``: the cost stays bounded by the caller's
    limit, whatever the texts. Linear memory (rapidfuzz over the words as integers), never a matrix."""
    if len(original) > max_chars or len(edited) > max_chars:
        return None
    ids: dict[str, int] = {}
    a = [ids.setdefault(w.text, len(ids)) for w in words(original)]
    b = [ids.setdefault(w.text, len(ids)) for w in words(edited)]
    return int(Levenshtein.distance(a, b))


def _alignment(a: list[str], b: list[str], *, pair_tail: bool = True) -> tuple[list[tuple[str, int, int]], int]:
    """Levenshtein alignment of two word lists: steps (kind, i, j) in order, and the distance.
    ``pair_tail=False`` fills the whole matrix (the same steps, slower: the bench's and tests' reference).

    A full matrix: for the diff views of texts a task's ``max_chars`` bounds (on the desk), never
    for a figure computed from what another desk sent (see :func:`word_distance`).

    ``equal``/``replace`` pair a[i] with b[j]; ``delete`` removes a[i] before b[j]; ``insert``
    adds b[j] before a[i].
    """
    # A common last word is always paired (D(a+x, b+x) = D(a, b), and the trace below takes
    # "equal" first), so a common tail is paired without filling its part of the matrix: the same
    # steps, at the cost of the part before it (an edit in mid-sentence: about half)
    tail = 0
    while pair_tail and tail < min(len(a), len(b)) and a[len(a) - 1 - tail] == b[len(b) - 1 - tail]:
        tail += 1
    n, m = len(a) - tail, len(b) - tail
    paired_tail = [("equal", n + k, m + k) for k in range(tail)]
    dist = [[0] * (m + 1) for _ in range(n + 1)]
    for i in range(n + 1):
        dist[i][0] = i
    for j in range(m + 1):
        dist[0][j] = j
    for i in range(1, n + 1):
        row, prev = dist[i], dist[i - 1]
        for j in range(1, m + 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1]))
    steps: list[tuple[str, int, int]] = []
    i, j = n, m
    # On ties, keep equal words paired and prefer deleting and inserting to substituting: the
    # distance is the same, and "do not like it" → "like it" reads as a deletion, not three swaps.
    while i > 0 or j > 0:
        if i > 0 and j > 0 and a[i - 1] == b[j - 1] and dist[i][j] == dist[i - 1][j - 1]:
            steps.append(("equal", i - 1, j - 1))
            i, j = i - 1, j - 1
        elif i > 0 and dist[i][j] == dist[i - 1][j] + 1:
            steps.append(("delete", i - 1, j))
            i -= 1
        elif j > 0 and dist[i][j] == dist[i][j - 1] + 1:
            steps.append(("insert", i, j - 1))
            j -= 1
        else:
            steps.append(("replace", i - 1, j - 1))
            i, j = i - 1, j - 1
    steps.reverse()
    return steps + paired_tail, dist[n][m]


@functools.lru_cache(maxsize=256)
def _word_texts(text: str) -> tuple[str, ...]:
    """The words of ``text`` (kept for a few texts: the assistant compares one text with 64 edits of it)."""
    return tuple(w.text for w in words(text))


def word_edits(original: str, edited: str) -> tuple[list[EditOp], int]:
    """Minimal word-level edit operations (Levenshtein, grouped into runs) and the edit distance."""
    a, b = list(_word_texts(original)), list(_word_texts(edited))
    steps, distance = _alignment(a, b)
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
    return ops, distance


def diff_pieces(original: str, edited: str) -> list[dict]:
    """The edit for display: the edited text in order, with removed words put back where they
    were, as pieces {kind: equal|delete|insert, text}."""
    a, b = words(original), words(edited)
    ops, _ = word_edits(original, edited)
    pieces: list[dict] = []
    position = 0  # in ``edited``
    for op in ops:
        anchor = b[op.b_start].start if op.b_start < len(b) else len(edited)
        if anchor > position:
            pieces.append({"kind": "equal", "text": edited[position:anchor]})
        if op.a_end > op.a_start:
            pieces.append({"kind": "delete", "text": original[a[op.a_start].start:a[op.a_end - 1].end]})
        if op.b_end > op.b_start:
            end = b[op.b_end - 1].end
            pieces.append({"kind": "insert", "text": edited[anchor:end]})
            position = end
        else:
            position = anchor
            if position < len(edited) and not edited[position].isspace():
                pieces.append({"kind": "equal", "text": " "})  # keep the removed words apart from the next
    if position < len(edited):
        pieces.append({"kind": "equal", "text": edited[position:]})
    return pieces


def word_alignment(before: list[tuple[str, float]], after: list[tuple[str, float]]) -> list[tuple[str, float | None, float | None]]:
    """Per-word values of two texts lined up by the word edit: (word, before, after); a word that
    exists in only one text has None on the other side."""
    steps, _ = _alignment([w for w, _ in before], [w for w, _ in after])
    out: list[tuple[str, float | None, float | None]] = []
    for kind, i, j in steps:
        if kind == "equal":
            out.append((before[i][0], before[i][1], after[j][1]))
        elif kind == "replace":
            out.append((before[i][0], before[i][1], None))
            out.append((after[j][0], None, after[j][1]))
        elif kind == "delete":
            out.append((before[i][0], before[i][1], None))
        else:
            out.append((after[j][0], None, after[j][1]))
    return out
