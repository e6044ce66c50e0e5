"""The one definition of "near" for the data-quality guard.

Two texts are *near-duplicates* when their normalised forms are equal, or when the Jaccard
similarity of their character n-gram sets (n = ``NGRAM_SIZE``) reaches the task's threshold
(``DEFAULT_NEAR_THRESHOLD`` unless the lead sets another).

Normalisation (``normalise``) folds away what a writer can change without changing the text:
NFKC (full-width letters, ligatures, styled "𝐡𝐚𝐭𝐞", Arabic presentation forms), case
(``casefold``), accents and other combining marks (so Arabic harakat, Hebrew niqqud and "café"
fold), format characters (zero-width space/joiner, BOM, bidi marks and embeddings: invisible in
RTL and LTR text alike), emoji variation selectors and skin tones, common leetspeak inside words
("h4te", "b!tch", "$hit"), runs of one repeated character ("soooo" = "soo"), and finally all
whitespace and punctuation ("h a t e" = "hate" = "hate!!!"). Emoji and other symbols are kept:
they carry meaning, and "I hate 🐍" is not "I hate 🌻".

Similarity is the exact Jaccard similarity of character n-gram sets of the normalised form. For
the index (``app.core.quality.near_duplicates``) candidates come from MinHash LSH (datasketch)
and are confirmed exactly here, so the reported similarity is never an estimate.

Why datasketch and not rapidfuzz: rapidfuzz's ratios are pairwise edit-distance scores, so
finding the nearest of 100,000 examples means scoring all of them on every submit (a rescan);
MinHash signatures are computed once per example, stored, and an LSH index answers "which
examples could be near" from a few hash-table look-ups, updated one example at a time.
datasketch is the well-kept implementation of both (MinHash, MinHashLSH).

Why these numbers: see ``NGRAM_SIZE`` and ``DEFAULT_NEAR_THRESHOLD``.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Final

#: Character n-gram size. Chosen on real pairs: all pairs within each HateCheck template, 20,000
#: random HateCheck pairs from different templates, and each of 1,500 Davidson tweets against its
#: nearest other tweet. At threshold 0.5 (share of pairs at or above it):
#:
#:     n  within a template  across templates  Davidson nearest
#:     3        0.87              0.0012            0.006
#:     4        0.79              0.0008            0.006
#:     5        0.72              0.0006            0.004
#:
#: The Davidson pairs that 4-grams put at 0.5 or more are the same tweet retweeted or the same
#: lyric quoted; 3-grams also pull up pairs sharing only "bitch" and a handle at 0.4 to 0.5, and
#: 5-grams lose a template's siblings whose identity word differs ("I hate women." / "I hate
#: gay people.") faster than they gain precision.
NGRAM_SIZE: Final[int] = 4

#: The default near-duplicate threshold on the Jaccard similarity of 4-gram sets (see above):
#: four in five pairs of HateCheck template siblings reach it, fewer than one in a thousand
#: unrelated pairs do. A lead may set another per task (``QualitySettings``).
DEFAULT_NEAR_THRESHOLD: Final[float] = 0.5

#: The lowest similarity the index finds reliably (``signatures``: a pair at 0.3 is a candidate
#: with probability 0.68, at 0.5 with 0.996); a lead's threshold cannot go lower.
SIMILARITY_FLOOR: Final[float] = 0.3

#: Leetspeak substitutions, applied only inside a word that also has letters ("h4te" -> "hate",
#: while "2024" and "3 people" stay numbers).
LEET_MAP: Final[dict[str, str]] = {
    "0": "o",
    "1": "i",
    "3": "e",
    "4": "a",
    "5": "s",
    "7": "t",
    "8": "b",
    "9": "g",
    "@": "a",
    "$": "s",
    "!": "i",
    "|": "i",
    "+": "t",
}

# Punctuation a word may start or end with that is not part of the word ("hate!", "(h4te)").
_EDGE_PUNCTUATION: Final[str] = ".,;:!?\"'`()[]{}<>«»“”‘’…-_*~"

# Variation selectors (emoji/text presentation) and emoji skin-tone modifiers: the same emoji.
_INVISIBLE_MODIFIERS: Final[frozenset[int]] = frozenset(
    [*range(0xFE00, 0xFE10), *range(0xE0100, 0xE01F0), *range(0x1F3FB, 0x1F400)]
)

# Unicode categories dropped from the comparison form: combining marks, punctuation,
# separators (whitespace), control/format/unassigned characters and modifier symbols.
_DROPPED_CATEGORIES: Final[frozenset[str]] = frozenset(
    ["Mn", "Me", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Zs", "Zl", "Zp", "Cc", "Cf", "Cs", "Co", "Cn", "Sk"]
)

_ARABIC_TATWEEL: Final[str] = "\u0640"  # kashida: stretches a letter, never changes the word


def _unleet_word(word: str) -> str:
    start, end = 0, len(word)
    while start < end and word[start] in _EDGE_PUNCTUATION:
        start += 1
    while end > start and word[end - 1] in _EDGE_PUNCTUATION:
        end -= 1
    core = word[start:end]
    if not any(ch.isalpha() for ch in core) or not any(ch in LEET_MAP for ch in core):
        return word
    return word[:start] + "".join(LEET_MAP.get(ch, ch) for ch in core) + word[end:]


def _squeeze_runs(text: str, keep: int = 2) -> str:
    out: list[str] = []
    run = 0
    for ch in text:
        run = run + 1 if out and out[-1] == ch else 1
        if run <= keep:
            out.append(ch)
    return "".join(out)


def normalise(text: str) -> str:
    """The comparison form of ``text``: equal forms mean the same text to a reader.

    Never empty for a text with any visible character: a text of punctuation only keeps its
    punctuation (casefolded, whitespace removed), so "???" and "!!!" stay different.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    folded = "".join(ch for ch in folded if ord(ch) not in _INVISIBLE_MODIFIERS and ch != _ARABIC_TATWEEL)
    # Format characters go before splitting words, so "h\u200b4te" is one word to un-leet.
    folded = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    unleeted = " ".join(_unleet_word(word) for word in folded.split())
    decomposed = unicodedata.normalize("NFD", unleeted)
    kept = "".join(ch for ch in decomposed if unicodedata.category(ch) not in _DROPPED_CATEGORIES)
    compact = _squeeze_runs(unicodedata.normalize("NFC", kept))
    if compact:
        return compact
    return "".join(ch for ch in folded if not ch.isspace())


def shingles(normalised: str, n: int = NGRAM_SIZE) -> frozenset[str]:
    """The set of character n-grams of a normalised text (the whole text when shorter than n)."""
    if len(normalised) <= n:
        return frozenset([normalised]) if normalised else frozenset()
    return frozenset(normalised[i : i + n] for i in range(len(normalised) - n + 1))


def jaccard(first: frozenset[str], second: frozenset[str]) -> float:
    """|A ∩ B| / |A ∪ B|; two empty sets are identical (1.0)."""
    if not first and not second:
        return 1.0
    common = len(first & second)
    return common / (len(first) + len(second) - common)


def similarity(first_text: str, second_text: str, n: int = NGRAM_SIZE) -> float:
    """How near two raw texts are, in [0, 1]: 1.0 when their normalised forms are equal."""
    first, second = normalise(first_text), normalise(second_text)
    if first == second:
        return 1.0
    return jaccard(shingles(first, n), shingles(second, n))


def is_near(score: float, threshold: float = DEFAULT_NEAR_THRESHOLD) -> bool:
    """Whether a similarity makes two texts near-duplicates at ``threshold`` (inclusive)."""
    return score >= threshold


@dataclass(frozen=True)
class Fingerprint:
    """What the index keeps per text: its normalised form and that form's n-gram set."""

    normalised: str
    grams: frozenset[str]

    @classmethod
    def of(cls, text: str) -> Fingerprint:
        form = normalise(text)
        return cls(form, shingles(form))

    def similarity(self, other: Fingerprint) -> float:
        if self.normalised == other.normalised:
            return 1.0
        return jaccard(self.grams, other.grams)
