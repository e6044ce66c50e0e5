"""Which characters of a text a reading view masks: the task's word list, and the words the target
model attributes most to hate.

Matching runs on a normalised copy of the text that remembers, for each of its characters, the
character of the original it came from, so a match maps back to exact spans of what the reader sees:

- invisible characters (zero-width joiners and spaces, bidi marks, soft hyphens, combining marks,
  the Arabic tatweel) are dropped, so ``ver\u200bmin`` reads as ``vermin``;
- case is folded, compatibility forms are unfolded (fullwidth, ligatures) and diacritics stripped;
- the leetspeak digits and signs the word list is spelled around (``v3rm1n``, ``$lut``, ``@``) match
  the letters they stand for;
- a word spelled out letter by letter with separators (``v e r m i n``, ``v.e.r.m.i.n``) matches;
- any other run of non-letters (spaces, punctuation, emoji) is a word boundary.

Entries match whole words and their plurals; an entry ending in ``*`` matches every word it starts.
Spans come with their UTF-16 offsets as well, the unit Qt's text positions count in (an emoji
outside the Basic Multilingual Plane is two of them).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Final, Literal

from app.core.assist.types import WordScore

# What a leetspeak character may stand for (only letters a word list entry is spelled with).
LEET: Final[dict[str, str]] = {
    "0": "o", "1": "il", "!": "i", "|": "il", "3": "e", "4": "a", "@": "a", "5": "s", "$": "s",
    "7": "t", "+": "t", "8": "b", "9": "g", "6": "bg", "2": "z", "(": "c", "€": "e", "£": "l",
}
# Dropped without leaving a gap: they change nothing a reader sees in the word.
_INVISIBLE_CATEGORIES: Final = frozenset({"Mn", "Me", "Cf"})
_INVISIBLE_EXTRA: Final = frozenset({"\u0640"})  # Arabic tatweel stretches a word, it does not break it
GAP: Final[str] = " "

Source = Literal["word list", "model"]


@dataclass(frozen=True, slots=True)
class MaskSpan:
    """Characters ``start``–``end`` of the text (Python indices, end exclusive) to mask, the same in
    UTF-16 code units for Qt (``utf16_start``–``utf16_end``), and why."""

    start: int
    end: int
    utf16_start: int
    utf16_end: int
    source: Source
    entry: str  # the word list entry, or the model's word


@dataclass(frozen=True, slots=True)
class Normalised:
    """The text as matched: ``text`` (letters, leetspeak signs and single-space gaps) and, for each
    of its characters, the index of the original character it came from."""

    text: str
    origin: tuple[int, ...]


def _fold(char: str) -> str:
    """One original character as the matcher sees it: "" (invisible), GAP, or one or more letters."""
    if char in _INVISIBLE_EXTRA or unicodedata.category(char) in _INVISIBLE_CATEGORIES:
        return ""
    if char in LEET:
        return char
    out = []
    for part in unicodedata.normalize("NFKD", char).casefold():
        if unicodedata.category(part) in _INVISIBLE_CATEGORIES:
            continue
        out.append(part if part.isalnum() or part in LEET else GAP)
    folded = "".join(out)
    return GAP if GAP in folded and not folded.strip() else folded.replace(GAP, "") or ""


def normalise(text: str) -> Normalised:
    """``text`` folded for matching, runs of boundaries collapsed to one GAP, with each character's origin."""
    chars: list[str] = []
    origin: list[int] = []
    for index, char in enumerate(text):
        for part in _fold(char):
            if part == GAP and (not chars or chars[-1] == GAP):
                continue
            chars.append(part)
            origin.append(index)
    return Normalised("".join(chars), tuple(origin))


def normalise_entry(entry: str) -> str:
    """A word list entry in the matcher's letters: folded, leetspeak read as letters, the words of a
    phrase ("porch monkey") one GAP apart."""
    prefix = entry.strip().endswith("*")
    letters: list[str] = []
    for char in entry.strip().rstrip("*"):
        for part in _fold(char):
            if part == GAP:
                if letters and letters[-1] != GAP:
                    letters.append(GAP)
                continue
            letters.append(LEET[part][0] if part in LEET and not part.isalnum() else part)
    return "".join(letters).strip(GAP) + ("*" if prefix else "")


def _letter_class(letter: str) -> str:
    """The characters of a normalised text that may stand for ``letter``."""
    signs = [sign for sign, letters in LEET.items() if letter in letters]
    return "[" + re.escape(letter) + "".join(re.escape(s) for s in signs) + "]"


def _entry_pattern(entry: str) -> str:
    prefix = entry.endswith("*")
    letters = [GAP if c == GAP else _letter_class(c) for c in entry.rstrip("*")]
    plain = "".join(letters) + (r"[\w@$!|+(€£]*" if prefix else f"(?:{_letter_class('e')}?{_letter_class('s')})?")
    # one letter per token ("v e r m i n", "p a r a s i t e s"), for single words
    plural = (rf"(?:{GAP}[^\W_])*" if prefix  # the rest of the word, spelled out too
              else f"(?:(?:{GAP}{_letter_class('e')})?{GAP}{_letter_class('s')})?")
    spelled = f"|{GAP.join(letters)}{plural}" if GAP not in entry else ""
    # a leetspeak sign is not a word character, so the boundary is checked against letters and digits
    return rf"(?<![^\W_])(?:{plain}{spelled})(?![^\W_])"


@lru_cache(maxsize=64)
def _compiled(entries: tuple[str, ...]) -> tuple[re.Pattern[str], tuple[str, ...]] | None:
    """One pattern for a word list, longest entries first, each in a named group by position."""
    normalised = sorted({n for n in (normalise_entry(e) for e in entries) if len(n.rstrip("*")) >= 2},
                        key=lambda n: (-len(n), n))
    if not normalised:
        return None
    pattern = "|".join(f"(?P<e{i}>{_entry_pattern(entry)})" for i, entry in enumerate(normalised))
    return re.compile(pattern), tuple(normalised)


def utf16_offsets(text: str) -> list[int]:
    """``offsets[i]``: the UTF-16 position of character ``i`` (and ``offsets[len(text)]`` its length)."""
    offsets = [0]
    for char in text:
        offsets.append(offsets[-1] + (2 if ord(char) > 0xFFFF else 1))
    return offsets


def lexicon_spans(text: str, entries: Iterable[str]) -> list[tuple[int, int, str]]:
    """(start, end, entry) of every word list match in ``text``, in original character indices."""
    compiled = _compiled(tuple(sorted(set(entries))))
    if compiled is None or not text:
        return []
    pattern, normalised_entries = compiled
    folded = normalise(text)
    spans = []
    for match in pattern.finditer(folded.text):
        group = match.lastgroup or ""
        start, end = match.span()
        spans.append((folded.origin[start], folded.origin[end - 1] + 1, normalised_entries[int(group[1:])]))
    return spans


def model_spans(text: str, scores: Sequence[WordScore], *, top: int = 3,
                least_share: float = 0.3) -> list[tuple[int, int, str]]:
    """The words the model attributes most toward hate: at most ``top`` of them, each with at least
    ``least_share`` of the strongest positive score (weak attributions are noise, not slurs)."""
    positive = sorted((s for s in scores if s.score > 0 and 0 <= s.start < s.end <= len(text)),
                      key=lambda s: -s.score)
    if not positive:
        return []
    floor = positive[0].score * least_share
    return [(s.start, s.end, s.word) for s in positive[:top] if s.score >= floor]


def mask_spans(text: str, entries: Iterable[str] = (), scores: Sequence[WordScore] = ()) -> tuple[MaskSpan, ...]:
    """What to mask in ``text``: word list matches and the model's top words, merged where they
    overlap (a word list match wins the label), in reading order."""
    found: list[tuple[int, int, Source, str]] = [(s, e, "word list", w) for s, e, w in lexicon_spans(text, entries)]
    found += [(s, e, "model", w) for s, e, w in model_spans(text, scores)]
    found.sort(key=lambda f: (f[0], f[2] != "word list", -f[1]))
    merged: list[list] = []
    for start, end, source, entry in found:
        if merged and start < merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
            continue
        merged.append([start, end, source, entry])
    offsets = utf16_offsets(text)
    return tuple(MaskSpan(s, e, offsets[s], offsets[e], source, entry) for s, e, source, entry in merged)


def masked_text(text: str, spans: Sequence[MaskSpan], mask: str = "•") -> str:
    """``text`` with each masked character replaced by ``mask`` (invisible ones dropped), for plain-text
    views and exports where no blur can be drawn."""
    out, last = [], 0
    for span in spans:
        out.append(text[last:span.start])
        out.append("".join(mask for c in text[span.start:span.end] if _fold(c) != ""))
        last = span.end
    out.append(text[last:])
    return "".join(out)
