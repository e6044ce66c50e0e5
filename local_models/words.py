"""Words of the annotator's exact text, and how a model's tokens group onto them.

Offsets are Python string indices (code points) into the text as given; nothing is
normalised first, so every span maps back onto what the annotator typed.

A word is what a reader sees as one: a run of non-space characters, with two refinements.
- Emoji (with their joiners, variation selectors and skin-tone modifiers) stand apart from
  letters next to them: "I❤️you" is three words.
- Opening and closing punctuation is split off the ends ("(hello," gives "(", "hello", ","),
  but punctuation inside a word stays: leetspeak such as "sh!t", "@ss" or "h4t3" is one word.
Invisible characters (zero-width space and joiner, bidi marks, combining marks) never start a
word of their own; they belong to the word they sit in, so "n\u200bice" is one word.

Tokens group onto words, not the other way round: when one token covers parts of several
words (a tokenizer that turns "I❤️you" into a single unknown token), those words merge into
one unit, because the model cannot tell them apart.
"""

from __future__ import annotations

import bisect
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

# Punctuation that opens or closes a word rather than belonging to it.
_OPENING_EXTRA = set("'\"`¿¡")
_CLOSING_EXTRA = set("'\"`.,;:!?…،؛؟۔。、，！？：；")  # sentence punctuation of several scripts
_PICTOGRAPH_START = 0x2190  # below this, "symbol" characters are ©, °, ™ ... which belong to words
_SKIN_TONES = range(0x1F3FB, 0x1F400)


@dataclass(frozen=True)
class WordSpan:
    """A word of one input text: ``text == source[start:end]``."""

    text: str
    start: int
    end: int


def _is_attached(ch: str) -> bool:
    """Characters that never stand alone: marks, format characters (ZWJ, ZWSP, bidi marks)."""
    return unicodedata.category(ch) in ("Mn", "Mc", "Me", "Cf") or ord(ch) in _SKIN_TONES


def _is_pictograph(ch: str) -> bool:
    return ord(ch) >= _PICTOGRAPH_START and unicodedata.category(ch) == "So"


def _is_wordish(ch: str) -> bool:
    return unicodedata.category(ch)[0] in ("L", "N", "M")


def _is_opening(ch: str) -> bool:
    return ch in _OPENING_EXTRA or unicodedata.category(ch) in ("Ps", "Pi")


def _is_closing(ch: str) -> bool:
    return ch in _CLOSING_EXTRA or unicodedata.category(ch) in ("Pe", "Pf")


def split_words(text: str) -> list[WordSpan]:
    """The words of ``text`` with their character spans, in order."""
    spans: list[tuple[int, int]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        j = i
        while j < n and not text[j].isspace():
            j += 1
        spans.extend(_split_chunk(text, i, j))
        i = j
    return [WordSpan(text[s:e], s, e) for s, e in spans]


def _split_chunk(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split one whitespace-free chunk into emoji runs and text runs, then trim punctuation."""
    chunk = text[start:end]
    if chunk.isascii() and chunk.isalnum():  # the common case, and what the steps below make of it
        return [(start, end)]
    pieces: list[list[int]] = []  # [start, end, is_emoji]
    for k in range(start, end):
        ch = text[k]
        if _is_attached(ch) and pieces:
            pieces[-1][1] = k + 1
            continue
        emoji = _is_pictograph(ch)
        if pieces and pieces[-1][2] == emoji:
            pieces[-1][1] = k + 1
        elif pieces and _is_attached_only(text, pieces[-1][0], pieces[-1][1]):
            # a piece made only of invisible characters joins whatever follows it
            pieces[-1][1], pieces[-1][2] = k + 1, emoji
        else:
            pieces.append([k, k + 1, emoji])
    out: list[tuple[int, int]] = []
    for s, e, is_emoji in pieces:
        out.extend([(s, e)] if is_emoji else _trim_punctuation(text, s, e))
    return out


def _is_attached_only(text: str, start: int, end: int) -> bool:
    return all(_is_attached(ch) for ch in text[start:end])


def _trim_punctuation(text: str, start: int, end: int) -> list[tuple[int, int]]:
    if not any(_is_wordish(ch) for ch in text[start:end]):
        return [(start, end)]  # "!!!", "...", "--": punctuation on its own is one word
    s, e = start, end
    while s < e and _is_opening(text[s]):
        s += 1
    while e > s and (_is_closing(text[e - 1]) or (_is_attached(text[e - 1]) and _is_closing_run(text, s, e))):
        e -= 1
    if not any(_is_wordish(ch) for ch in text[s:e]):  # e.g. "'!'": nothing wordish survives
        return [(start, end)]
    out = []
    if s > start:
        out.append((start, s))
    out.append((s, e))
    if e < end:
        out.append((e, end))
    return out


def _is_closing_run(text: str, start: int, end: int) -> bool:
    """An invisible character at the end of a word goes with the punctuation it follows."""
    k = end - 1
    while k > start and _is_attached(text[k]):
        k -= 1
    return _is_closing(text[k])


@dataclass(frozen=True)
class WordUnit:
    """One or more adjacent words that a model's tokens cover, with those tokens' positions.

    ``segment`` is the index of the input text (0, or 1 for the second text of a pair).
    ``token_positions`` index the model's input sequence; it is empty when the model never
    saw the word (truncated, or made only of characters the tokenizer drops).
    """

    segment: int
    text: str
    start: int
    end: int
    token_positions: tuple[int, ...]

    @property
    def seen(self) -> bool:
        return bool(self.token_positions)


def group_tokens(text: str, segment: int, token_offsets: Sequence[tuple[int, int] | None]) -> list[WordUnit]:
    """Group the tokens of one segment onto the words of ``text``.

    ``token_offsets[p]`` is the character span in ``text`` of the token at input position p,
    or None for tokens of other segments and special tokens.
    """
    words = split_words(text)
    if not words:
        return []
    starts = [w.start for w in words]
    parent = list(range(len(words)))

    def find(k: int) -> int:
        while parent[k] != k:
            parent[k] = parent[parent[k]]
            k = parent[k]
        return k

    tokens_of: dict[int, list[int]] = {}
    for position, span in enumerate(token_offsets):
        if span is None or span[1] <= span[0]:
            continue
        first = max(bisect.bisect_right(starts, span[0]) - 1, 0)
        covered = []
        for k in range(first, len(words)):
            if words[k].start >= span[1]:
                break
            if words[k].end > span[0]:
                covered.append(k)
        if not covered:
            continue  # a token over characters outside every word (only whitespace): nothing to show
        root = find(covered[0])
        for k in covered[1:]:
            parent[find(k)] = root
        tokens_of.setdefault(covered[0], []).append(position)
    groups: dict[int, list[int]] = {}
    for k in range(len(words)):
        groups.setdefault(find(k), []).append(k)
    units = []
    for members in sorted(groups.values()):
        s, e = words[members[0]].start, words[members[-1]].end
        positions = sorted(p for k in members for p in tokens_of.get(k, []))
        units.append(WordUnit(segment, text[s:e], s, e, tuple(positions)))
    return units


def utf16_offset(text: str, index: int) -> int:
    """The UTF-16 position (what Qt text cursors count) of Python string index ``index``."""
    return index + sum(1 for ch in text[:index] if ord(ch) > 0xFFFF)
