"""Obfuscation of the words that carry the prediction: HateCheck's spelling variations.

The words with the highest attribution toward the model's label are respelt so that a person
reads the same word and the model may not: character swaps and deletions ("haet", "hatrd"),
leetspeak ("h4te"), homoglyphs (Cyrillic "е" for Latin "e"), added or removed spaces
("h a t e", "Ihate") and an emoji for the word. The meaning is kept by construction, so this
generator works for the "fool" goal only. Tables ship in resources/assist/common/obfuscation.yaml.

Only letters are touched: emoji, zero-width joiners and right-to-left marks inside a word stay
where they are, so a text that mixes scripts is never broken into invalid pieces.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping

from app.core.assist.base import GeneratorUnavailable, makes
from app.core.assist.types import Candidate, GenerationContext, Generator, Goal, Unavailable
from app.core.spellings import load_tables
from app.core.text import WordScore

EDIT_TYPES = ("char_swap", "char_delete", "leetspeak", "homoglyph", "space_added", "space_removed", "emoji")
TOP_WORDS = 4  # the most attributed words respelt; each gives one variant per edit type (two for some)
MIN_LETTERS = 3  # shorter words ("a", "is") carry little and their respellings read as typos


def _letters(word: str) -> list[int]:
    """Positions of the letters that can be changed alone: a letter carrying combining marks
    ("e\u0301") is left as it is, so that no mark ends up on another letter."""
    return [i for i, ch in enumerate(word)
            if ch.isalpha() and not (i + 1 < len(word) and unicodedata.combining(word[i + 1]))]


def _replace(word: str, index: int, new: str) -> str:
    return word[:index] + new + word[index + 1:]


def _middle_first(positions: list[int]) -> list[int]:
    """Positions ordered from the middle of their range outwards: a change there keeps the word
    readable (its first letter stays) and breaks its tokenisation most."""
    if not positions:
        return []
    centre = (min(positions) + max(positions)) / 2
    return sorted(positions, key=lambda k: (abs(k - centre), k))


def char_swaps(word: str) -> Iterator[str]:
    """Two neighbouring letters swapped, the first letter kept ("hate" → "haet", "htae")."""
    letters = _letters(word)
    pairs = [k for k in range(1, len(letters) - 1) if letters[k + 1] == letters[k] + 1
             and word[letters[k]] != word[letters[k + 1]]]
    for k in _middle_first(pairs):
        i = letters[k]
        yield word[:i] + word[i + 1] + word[i] + word[i + 2:]


def char_deletions(word: str) -> Iterator[str]:
    """One inner letter left out, vowels first ("hatred" → "hatrd")."""
    letters = _letters(word)
    inner = letters[1:-1]
    vowels = [i for i in inner if word[i].lower() in "aeiouy"]
    for i in [*reversed(vowels), *(i for i in _middle_first(inner) if i not in vowels)]:
        yield word[:i] + word[i + 1:]


def leetspeak(word: str, leet: Mapping[str, str]) -> Iterator[str]:
    """One letter in leetspeak, a vowel where there is one ("hate" → "h4te"), then every mappable letter ("h473")."""
    mappable = [i for i in _letters(word) if word[i].lower() in leet]
    vowels = [i for i in mappable if word[i].lower() in "aeiou"]  # as HateCheck respells: "h4te", "1diots"
    for i in (_middle_first(vowels) or _middle_first(mappable))[:1]:
        yield _replace(word, i, leet[word[i].lower()])
    if len(mappable) > 1:
        yield "".join(leet[ch.lower()] if i in mappable else ch for i, ch in enumerate(word))


def homoglyph_variants(word: str, homoglyphs: Mapping[str, str]) -> Iterator[str]:
    """One letter replaced by a look-alike of another script, then every one that has one."""
    mappable = [i for i in _letters(word) if word[i] in homoglyphs]
    for i in _middle_first(mappable)[:1]:
        yield _replace(word, i, homoglyphs[word[i]])
    if len(mappable) > 1:
        yield "".join(homoglyphs[ch] if i in mappable else ch for i, ch in enumerate(word))


def spaces_added(word: str) -> Iterator[str]:
    """A space between every letter ("h a t e", as HateCheck), then one in the middle ("ha te")."""
    letters = _letters(word)
    if len(letters) != len(word):  # marks, joiners or digits inside: spacing would split them off
        return
    yield " ".join(word)
    yield word[:len(word) // 2] + " " + word[len(word) // 2:]


def emoji_for(word: str, emoji: Mapping[str, str]) -> str | None:
    lower = word.lower()
    for form in (lower, lower[:-1] if lower.endswith("s") else None,
                 lower[:-3] if lower.endswith("ing") else None, lower[:-2] if lower.endswith("ed") else None,
                 lower[:-1] if lower.endswith("d") else None):
        if form and form in emoji:
            return emoji[form]
    return None


def _chosen_words(context: GenerationContext) -> list[WordScore]:
    """The words with the highest attribution toward the model's label, that can be respelt: those
    that push toward it first, then (when fewer than TOP_WORDS do) the next highest, since a
    respelling also changes how the model reads its neighbours and the check decides anyway."""
    text = context.text
    usable = [w for w in context.words
              if 0 <= w.start < w.end <= len(text) and text[w.start:w.end] == w.word
              and len(_letters(w.word)) >= MIN_LETTERS]
    return sorted(usable, key=lambda w: -w.score)[:TOP_WORDS]


def _candidate(context: GenerationContext, start: int, end: int, new: str, edit_type: str, old: str) -> Candidate:
    text = context.text[:start] + new + context.text[end:]
    return Candidate(text, Generator.OBFUSCATION, edit_type, note=f"'{old}' → '{new}'")


def _space_removals(context: GenerationContext, word: WordScore) -> Iterator[tuple[int, int, str]]:
    """The word joined to its neighbour ("I hate" → "Ihate"): to the word before it, else to the
    one after it. Yields (start, end, new) spanning both words."""
    text = context.text
    before = word.start
    while before > 0 and text[before - 1] in " \t":
        before -= 1
    if 0 < before < word.start and not text[before - 1].isspace():
        first = before
        while first > 0 and not text[first - 1].isspace():
            first -= 1
        yield first, word.end, text[first:before] + word.word
        return
    after = word.end
    while after < len(text) and text[after] in " \t":
        after += 1
    if word.end < after < len(text) and not text[after].isspace():
        last = after
        while last < len(text) and not text[last].isspace():
            last += 1
        yield word.start, last, word.word + text[after:last]


@makes(Generator.OBFUSCATION)
def generate(context: GenerationContext) -> list[Candidate]:
    """Respellings of the most attributed words, best word first, one edit type after another."""
    if context.goal != Goal.FOOL:
        raise GeneratorUnavailable(Unavailable.NOT_FOR_GOAL)
    if not context.words:
        raise GeneratorUnavailable(Unavailable.NO_ATTRIBUTIONS)
    chosen = _chosen_words(context)
    if not chosen:
        raise GeneratorUnavailable(Unavailable.NO_WORDS)
    tables = load_tables()
    out: list[Candidate] = []
    for w in chosen:
        variants: list[tuple[str, str]] = []
        variants += [("leetspeak", v) for v in leetspeak(w.word, tables.leet)]
        variants += [("char_swap", v) for v in list(char_swaps(w.word))[:2]]
        variants += [("char_delete", v) for v in list(char_deletions(w.word))[:2]]
        variants += [("homoglyph", v) for v in homoglyph_variants(w.word, tables.homoglyphs)]
        variants += [("space_added", v) for v in spaces_added(w.word)]
        picture = emoji_for(w.word, tables.emoji)
        if picture:
            variants.append(("emoji", picture))
        out += [_candidate(context, w.start, w.end, new, kind, w.word) for kind, new in variants if new != w.word]
        for start, end, joined in _space_removals(context, w):
            out.append(_candidate(context, start, end, joined, "space_removed", context.text[start:end]))
    return out
