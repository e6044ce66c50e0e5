"""Which characters of a text a reading view masks: the task's word list, and the words the target
model attributes most to hate.

Matching runs on a normalised copy of the text that remembers, for each of its characters, the
character of the original it came from, so a match maps back to exact spans of what the reader sees:

- invisible characters (zero-width joiners and spaces, bidi marks, soft hyphens, combining marks,
  the Arabic tatweel) are dropped, so ``ver\u200bmin`` reads as ``vermin``;
- case is folded, compatibility forms are unfolded (fullwidth, ligatures) and diacritics stripped;
- the leetspeak digits and signs the word list is spelled around (``v3rm1n``, ``$lut``, ``@``) match
  the letters they stand for, and look-alike letters of other scripts (Cyrillic ``о`` for ``o``) are
  read as the Latin ones (both from the assistant's obfuscation tables, plus the signs below);
- a word spelled out letter by letter with separators (``v e r m i n``, ``v.e.r.m.i.n``) matches;
- any other run of non-letters (spaces, punctuation, emoji) is a word boundary.

Entries match whole words and their plurals; an entry ending in ``*`` matches every word it starts.
The list is compiled once into a trie that is walked from each word start, so masking costs about
the length of the text whatever the size of the list (a regex alternation of 2,000 entries took
seconds on a long text).
Spans come with their UTF-16 offsets as well, the unit Qt's text positions count in (an emoji
outside the Basic Multilingual Plane is two of them).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
from typing import Final, Literal

from app.core.spellings import load_tables
from app.core.text import STOPWORDS, WordScore

# Signs beyond the obfuscation table's leetspeak digits, and what each may stand for.
_MORE_LEET: Final[dict[str, str]] = {
    "!": "i", "|": "il", "@": "a", "$": "s", "+": "t", "6": "bg", "(": "c", "€": "e", "£": "l",
}


def _leet() -> dict[str, str]:
    """What a leetspeak character may stand for (only letters a word list entry is spelled with)."""
    out = dict(_MORE_LEET)
    for letter, sign in load_tables().leet.items():
        out[sign] = "".join(sorted(set(out.get(sign, "")) | {letter.lower()}))
    return out


LEET: Final[dict[str, str]] = _leet()
# Look-alike letters of other scripts, read as the Latin letter they imitate.
LOOK_ALIKES: Final[dict[str, str]] = {glyph: letter.lower() for letter, glyph in load_tables().homoglyphs.items()}
# Dropped without leaving a gap: they change nothing a reader sees in the word.
_INVISIBLE_CATEGORIES: Final = frozenset({"Mn", "Me", "Cf"})
_INVISIBLE_EXTRA: Final = frozenset({"\u0640"})  # Arabic tatweel stretches a word, it does not break it
GAP: Final[str] = " "

Source = Literal["word list", "model"]
# Never masked on the model's word alone: function words, and the plain word for people, carry what a
# sentence says about someone, not a slur ("Those ▮ ▮ all go back" hides the sentence, not the insult).
_NOT_MODEL_MASKED: Final[frozenset[str]] = STOPWORDS | {"people", "person", "persons", "folk", "folks"}


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


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """One original character as the matcher sees it: "" (invisible), GAP, or one or more letters."""
    if char in LOOK_ALIKES:
        return LOOK_ALIKES[char]
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
    gap = True  # a boundary at the start is dropped too
    for index, folded in enumerate(map(_fold, text)):  # "", GAP, or letters (no GAP among them)
        if folded == GAP:
            if gap:
                continue
            gap = True
        elif not folded:
            continue
        else:
            gap = False
        chars.append(folded)
        origin.extend([index] * len(folded))
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


# A trie node: letter → child; these keys mark where an entry ends (whole word, or word start).
_WORD: Final = "="
_START: Final = "*"
_S: Final = frozenset("s" + "".join(sign for sign, letters in LEET.items() if "s" in letters))
_E: Final = frozenset("e" + "".join(sign for sign, letters in LEET.items() if "e" in letters))


# The letters a character of the normalised text may be read as: itself, and a sign's letters.
_READS_AS: Final[dict[str, str]] = {sign: sign + letters for sign, letters in LEET.items()}


@lru_cache(maxsize=64)
def _compiled(entries: tuple[str, ...]) -> dict | None:
    """The word list as a trie of its matched forms (a phrase's words one GAP apart)."""
    root: dict = {}
    for entry in sorted({n for n in (normalise_entry(e) for e in entries) if len(n.rstrip("*")) >= 2}):
        node = root
        for letter in entry.rstrip("*"):
            node = node.setdefault(letter, {})
        node[_START if entry.endswith("*") else _WORD] = entry
    return root or None


def _ends(text: str, node: dict, end: int, spelled: bool) -> list[int]:
    """Where a match that reached ``node`` at ``end`` may stop: its plural (``-s``, ``-es``), or the
    rest of a word it starts, read the same way the entry was (letter by letter when ``spelled``)."""
    n, step = len(text), 2 if spelled else 1
    out = []

    def at(i: int, letters: frozenset[str]) -> bool:
        return i < n and text[i] in letters and (not spelled or text[i - 1] == GAP)

    if _WORD in node:
        out.append(end)
        last = end + step - 1
        if at(last, _S):
            out.append(last + 1)
        if at(last, _E) and at(last + step, _S):
            out.append(last + step + 1)
    if _START in node:
        stop = end
        if spelled:
            while stop + 1 < n and text[stop] == GAP and text[stop + 1].isalnum() and _ends_word(text, stop + 2):
                stop += 2
        else:
            while stop < n and text[stop] != GAP:
                stop += 1
        out.append(stop)
    return [e for e in out if _ends_word(text, e)]


def _ends_word(text: str, i: int) -> bool:
    return i >= len(text) or not text[i].isalnum()


# Readings tried from one word start: each is at most an entry long, so a text costs at most this
# many entries' length per word, whatever a list of look-alike spellings ("1" as i or l) makes of it.
_MAX_READINGS: Final[int] = 64


def _longest(text: str, root: dict, start: int) -> tuple[int, str] | None:
    """The longest entry that matches from ``start``: (end, entry). Read as written ("v3rm1n",
    "porch monkey") or spelled out letter by letter ("v e r m i n", single words only)."""
    best: tuple[int, str] | None = None
    n = len(text)
    spelled_out = start + 1 < n and text[start + 1] == GAP
    for spelled in (False, True) if spelled_out else (False,):
        step = 2 if spelled else 1
        stack = [(root, start)]
        readings_left = _MAX_READINGS
        while stack and readings_left:
            readings_left -= 1
            node, i = stack.pop()
            while True:  # one path down the trie; a sign that reads as several letters forks it
                if i > start and (_WORD in node or _START in node):  # read so far: up to i (spelled: its gap)
                    for end in _ends(text, node, i - step + 1, spelled):
                        if best is None or end > best[0]:
                            best = (end, node.get(_WORD) or node[_START])
                if i >= n or (spelled and i > start and text[i - 1] != GAP):
                    break
                char = text[i]
                readings = _READS_AS.get(char)
                if readings is None:
                    node = node.get(char)
                    if node is None or (spelled and char == GAP):
                        break
                    i += step
                    continue
                stack.extend((node[letter], i + step) for letter in readings if letter in node)
                break
    return best


def utf16_offsets(text: str) -> list[int]:
    """``offsets[i]``: the UTF-16 position of character ``i`` (and ``offsets[len(text)]`` its length)."""
    if not text or max(text) <= "\uffff":
        return list(range(len(text) + 1))
    return [0, *accumulate(2 if ord(char) > 0xFFFF else 1 for char in text)]


def lexicon_spans(text: str, entries: Iterable[str]) -> list[tuple[int, int, str]]:
    """(start, end, entry) of every word list match in ``text``, in original character indices:
    from each word start, the longest entry, then on after it."""
    root = _compiled(tuple(entries))
    if root is None or not text:
        return []
    folded = normalise(text)
    letters, spans, after = folded.text, [], 0
    for start, char in enumerate(letters):
        if start < after or char == GAP or (start and letters[start - 1].isalnum()):
            continue
        found = _longest(letters, root, start)
        if found is not None:
            end, entry = found
            spans.append((folded.origin[start], folded.origin[end - 1] + 1, entry))
            after = end
    return spans


def model_spans(text: str, scores: Sequence[WordScore], *, top: int = 3,
                least_share: float = 0.3) -> list[tuple[int, int, str]]:
    """The words the model attributes most toward hate: at most ``top`` of them, each with at least
    ``least_share`` of the strongest positive score (weak attributions are noise, not slurs). Function
    words ("our", "should") are never masked: hiding them hides what the sentence says, not a slur."""
    positive = sorted((s for s in scores if s.score > 0 and 0 <= s.start < s.end <= len(text)
                       and text[s.start:s.end].strip().casefold() not in _NOT_MODEL_MASKED),
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


def blurred(text: str, blur_words: Sequence[str]) -> str:
    """``text`` as a reader with blur on sees it where no blur can be drawn (table cells, lists,
    messages, report pages): the word list's matches masked. No words: the text as it is (blur off)."""
    return masked_text(text, mask_spans(text, blur_words)) if blur_words and text else text
