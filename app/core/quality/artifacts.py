"""Annotation artifacts: the words and bigrams whose presence gives a label away.

Writers who find one trick repeat it (the same identity word, the same negation), and the data
fills with terms that predict the label by themselves (Gururangan et al. 2018). For every term
and label this module counts the examples that contain the term (``count``), how many of them
carry the label (``with_label``), the conditional label share ``p̂ = with_label / count``, and
compares it with the label's base rate ``p0`` in the same examples by a z-score:

    z = (p̂ − p0) / sqrt(p0 (1 − p0) / count)

Why the z-score, not PMI: it is the statistic of Gardner et al. (2021, "Competency problems"),
a one-sample test of the share against the base rate. It grows with the evidence (a term seen
5 times, always with one label, scores lower than one seen 500 times at 95 %), so rare terms
do not crowd the top as they do under PMI, which needs an arbitrary smoothing constant to tame
them; and it has a natural line: under "the term says nothing about the label", z exceeds the
one-sided Bonferroni bound for every term and label tested with probability ``alpha``. Terms
seen fewer than ``min_count`` times are not tested (a z-score of 3 examples means nothing).

A term is a word as the desk reads words (whitespace-separated, opening and closing punctuation
taken off its ends, so "women." is "women" and "sh!t" stays whole; casefolded) or two adjacent
words ("are not"). Presence counts once per example. Emoji glued to a word stay part of it
here (local_models.words splits them off, at a cost per character the 2-second budget for
100,000 examples does not allow).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from statistics import NormalDist

import numpy as np

MIN_COUNT = 5  # fewer examples with a term: not tested
TOP = 25  # rows of a table
ALPHA = 0.01  # family-wise error of the "significant" mark (Bonferroni over the pairs tested)
# What comes off a word's ends: ASCII punctuation and the usual typographic quotes, dashes and ellipses.
_EDGE_PUNCTUATION = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~“”‘’«»„‚…–—¡¿،؛؟。、，！？：；"


def words_of(text: str) -> list[str]:
    """The casefolded words of ``text``, edge punctuation off (see the module's docstring)."""
    stripped = (word.strip(_EDGE_PUNCTUATION) for word in text.casefold().split())
    return [word for word in stripped if word]


_SEPARATOR = "\x00"  # between examples in the one string that is split (no text keeps one: see build)


@dataclass
class TermMatrix:
    """Which terms each example contains: one (example, term) pair per distinct term of an example.

    Built once for a set of examples (100,000 short texts in about half a second: the texts are
    split as one string, words become integer ids through one dict, and bigrams, their
    distinct pairs and the vocabulary are numpy work). Counts for any subset of the examples
    (a round, an annotator) are then a ``bincount``.
    """

    words: list[str]  # word id -> word
    term_keys: np.ndarray  # term id -> its key: a word id, or V + first * V + second for a bigram
    docs: np.ndarray  # example index of each (example, term) pair
    terms: np.ndarray  # term id of each pair
    n_docs: int
    word_docs: np.ndarray  # example index of each running word (for distinct-n)
    word_ids: np.ndarray  # word id of each running word

    @classmethod
    def build(cls, texts: Sequence[str]) -> TermMatrix:
        joined = f" {_SEPARATOR} ".join(texts)
        if joined.count(_SEPARATOR) != max(len(texts) - 1, 0):  # a text that holds the separator itself
            joined = f" {_SEPARATOR} ".join(text.replace(_SEPARATOR, " ") for text in texts)
        raw = joined.casefold().split()
        # Python touches each distinct token once; the running text maps through dicts in C (map over
        # a bound __getitem__), about 20 times faster than stripping and looking up every word.
        distinct_raw = list(dict.fromkeys(raw))
        raw_index = {token: i for i, token in enumerate(distinct_raw)}
        index: dict[str, int] = {_SEPARATOR: 0, "": 1}
        add = index.setdefault
        word_of_raw = np.fromiter((add(token.strip(_EDGE_PUNCTUATION), len(index)) for token in distinct_raw),
                                  dtype=np.int64, count=len(distinct_raw))
        ids = word_of_raw[np.fromiter(map(raw_index.__getitem__, raw), dtype=np.int64, count=len(raw))]
        boundary = ids == 0
        doc_of = np.cumsum(boundary)  # the separator belongs to the next example; it is dropped below
        real = ids > 1
        word_docs, word_ids = doc_of[real], ids[real]
        vocabulary = len(index)
        same_doc = word_docs[1:] == word_docs[:-1]
        bigram_docs = word_docs[1:][same_doc]
        bigram_keys = vocabulary + word_ids[:-1][same_doc] * vocabulary + word_ids[1:][same_doc]
        # a word's term id is its word id; bigrams get the ids after the words, in the order of their keys
        distinct_bigrams, bigram_terms = _distinct_inverse(bigram_keys)
        term_keys = np.concatenate([np.arange(vocabulary, dtype=np.int64), distinct_bigrams])
        docs = np.concatenate([word_docs, bigram_docs])
        terms = np.concatenate([word_ids, bigram_terms + vocabulary])
        pairs = _distinct(docs * len(term_keys) + terms)  # each term once per example
        return cls(list(index), term_keys, (pairs // len(term_keys)).astype(np.int32),
                   (pairs % len(term_keys)).astype(np.int32), len(texts),
                   word_docs.astype(np.int32), word_ids)

    def term(self, term_id: int) -> str:
        key = int(self.term_keys[term_id])
        vocabulary = len(self.words)
        if key < vocabulary:
            return self.words[key]
        first, second = divmod(key - vocabulary, vocabulary)
        return f"{self.words[first]} {self.words[second]}"

    def term_id(self, term: str) -> int | None:
        """The id of a word or "a b" (read as the desk reads words), None when no example has it."""
        found = words_of(term)
        lookup = {word: i for i, word in enumerate(self.words)}
        if not found or len(found) > 2 or any(word not in lookup for word in found):
            return None
        vocabulary = len(self.words)
        key = lookup[found[0]] if len(found) == 1 else vocabulary + lookup[found[0]] * vocabulary + lookup[found[1]]
        position = int(np.searchsorted(self.term_keys, key))
        return position if position < len(self.term_keys) and self.term_keys[position] == key else None

    def examples_with(self, term: str) -> np.ndarray:
        """Indexes of the examples that contain ``term`` (a word or "a b"), in order."""
        wanted = self.term_id(term)
        if wanted is None:
            return np.zeros(0, dtype=np.int32)
        return np.unique(self.docs[self.terms == wanted])


def _distinct_inverse(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sorted distinct values, and each value's position among them (np.unique's inverse)."""
    order = np.argsort(values)
    ordered = values[order]
    starts = np.ones(len(ordered), dtype=np.bool_)
    starts[1:] = ordered[1:] != ordered[:-1]
    inverse = np.empty(len(values), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return ordered[starts], inverse


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values (np.unique does the same, ~50 times slower on this numpy for 2M integers)."""
    ordered = np.sort(values)
    keep = np.ones(len(ordered), dtype=np.bool_)
    keep[1:] = ordered[1:] != ordered[:-1]
    return ordered[keep]


@dataclass(frozen=True)
class Artifact:
    term: str
    label: str
    count: int  # examples containing the term
    with_label: int  # of them, labelled ``label``
    share: float  # with_label / count: the conditional label share
    base_rate: float  # the label's share of all the examples counted
    z: float
    significant: bool  # z above the Bonferroni bound (see ArtifactTable.critical_z)
    rounds: tuple[int, ...] = ()  # the rounds whose tables list this term with this label (mark_recurring)

    @property
    def recurring(self) -> bool:
        return len(self.rounds) > 1


@dataclass(frozen=True)
class ArtifactTable:
    examples: int
    base_rates: dict[str, float]  # label -> share of the examples
    tested: int  # (term, label) pairs tested: terms with at least min_count examples, times labels
    critical_z: float  # the one-sided Bonferroni bound at ALPHA over ``tested`` pairs (inf when none)
    min_count: int
    rows: tuple[Artifact, ...]  # strongest first

    def row(self, term: str) -> Artifact | None:
        return next((r for r in self.rows if r.term == term), None)


def critical_z(tested: int, alpha: float = ALPHA) -> float:
    """The z a term must pass to be called significant, testing ``tested`` pairs at family-wise ``alpha``."""
    if tested <= 0:
        return math.inf
    return NormalDist().inv_cdf(1 - alpha / tested)


def label_share_z(with_label: np.ndarray, count: np.ndarray, base_rate: np.ndarray) -> np.ndarray:
    """z of the conditional shares ``with_label / count`` against ``base_rate`` (NaN where the base
    rate is 0 or 1, or the count 0: nothing to compare)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = with_label / count
        z = (share - base_rate) / np.sqrt(base_rate * (1 - base_rate) / count)
    z[~np.isfinite(z)] = np.nan
    return z


def _label_codes(labels: Sequence[str] | np.ndarray,
                 label_names: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
    if label_names is None:
        names = sorted({str(label) for label in labels})
        code_of = {name: i for i, name in enumerate(names)}
        return np.fromiter((code_of[str(label)] for label in labels), dtype=np.int64, count=len(labels)), names
    return np.asarray(labels, dtype=np.int64), list(label_names)


def artifact_table(matrix: TermMatrix, labels: Sequence[str] | np.ndarray, *,
                   mask: np.ndarray | None = None, label_names: Sequence[str] | None = None,
                   min_count: int = MIN_COUNT, top: int = TOP, alpha: float = ALPHA) -> ArtifactTable:
    """The terms that predict a label most strongly among the examples in ``mask`` (all by default).

    ``labels``: each example's label, as names or as codes into ``label_names``. Each term is
    listed once, with the label it is most over-represented in; terms are ranked by z.
    """
    groups = np.ones(matrix.n_docs, dtype=np.int64) - 1 if mask is None else \
        np.where(np.asarray(mask, dtype=np.bool_), 0, -1)
    return artifact_tables(matrix, labels, groups, 1, label_names=label_names, min_count=min_count, top=top,
                           alpha=alpha)[0]


def artifact_tables(matrix: TermMatrix, labels: Sequence[str] | np.ndarray, groups: np.ndarray, n_groups: int, *,
                    label_names: Sequence[str] | None = None, min_count: int = MIN_COUNT, top: int = TOP,
                    alpha: float = ALPHA) -> list[ArtifactTable]:
    """One table per group (``groups``: each example's group, 0 .. n_groups - 1, or -1 for none), from
    one count over the examples: the tables of a round's 40 annotators cost about what one does."""
    codes, names = _label_codes(labels, label_names)
    n_labels = len(names)
    groups = np.where(codes >= 0, np.asarray(groups, dtype=np.int64), -1)
    per_label = np.zeros((n_groups, n_labels), dtype=np.int64)
    counted = groups >= 0
    np.add.at(per_label, (groups[counted], codes[counted]), 1)
    pairs = groups[matrix.docs] >= 0
    pair_docs = matrix.docs[pairs]
    pair_terms = matrix.terms[pairs].astype(np.int64)
    # only terms seen min_count times in all the groups together can reach it in one group
    seen = np.bincount(pair_terms, minlength=len(matrix.term_keys))
    candidates = np.nonzero(seen >= min_count)[0]
    position = np.full(len(matrix.term_keys), -1, dtype=np.int64)
    position[candidates] = np.arange(len(candidates))
    kept = position[pair_terms] >= 0
    size = n_groups * len(candidates) * n_labels
    cells = (groups[pair_docs[kept]] * len(candidates) + position[pair_terms[kept]]) * n_labels + codes[pair_docs[kept]]
    counts = np.bincount(cells, minlength=size)[:size].reshape(n_groups, len(candidates), n_labels)
    return [_table(counts[g], candidates, per_label[g], names, matrix, min_count, top, alpha) for g in range(n_groups)]


def _table(counts: np.ndarray, term_ids: np.ndarray, per_label: np.ndarray, names: list[str], matrix: TermMatrix,
           min_count: int, top: int, alpha: float) -> ArtifactTable:
    """The table of one group from its counts: [candidate term, label] examples containing the term."""
    examples = int(per_label.sum())
    base = per_label / examples if examples else np.zeros(len(names))
    base_rates = {name: float(rate) for name, rate, n in zip(names, base, per_label) if n}
    totals = counts.sum(axis=1)
    frequent = np.nonzero(totals >= min_count)[0]
    # a label no example has, or every example has, cannot be given away by a term
    informative = (base > 0) & (base < 1)
    tested = len(frequent) * int(informative.sum())
    bound = critical_z(tested, alpha)
    if not len(frequent) or not informative.any():
        return ArtifactTable(examples, base_rates, tested, bound, min_count, ())
    z = label_share_z(counts[frequent].astype(np.float64), totals[frequent, None].astype(np.float64), base[None, :])
    z[:, ~informative] = np.nan
    best_label = np.nanargmax(np.where(np.isnan(z), -np.inf, z), axis=1)
    best_z = z[np.arange(len(frequent)), best_label]
    keep = np.nonzero(best_z > 0)[0]
    if len(keep) > 4 * top:  # the strongest few, before the exact order (names break ties)
        keep = keep[np.argpartition(-best_z[keep], 4 * top)[:4 * top]]
    # strongest first; ties by count (more evidence), then alphabetically for a stable order
    order = sorted(keep.tolist(), key=lambda i: (-best_z[i], -totals[frequent[i]],
                                                 matrix.term(int(term_ids[frequent[i]]))))
    rows = []
    for i in order[:top]:
        row, label = int(frequent[i]), int(best_label[i])
        count, hits = int(totals[row]), int(counts[row, label])
        rows.append(Artifact(matrix.term(int(term_ids[row])), names[label], count, hits, hits / count,
                             float(base[label]), float(best_z[i]), bool(best_z[i] >= bound)))
    return ArtifactTable(examples, base_rates, tested, bound, min_count, tuple(rows))


def mark_recurring(tables: dict[int, ArtifactTable]) -> dict[int, ArtifactTable]:
    """Each row gets the rounds (the keys of ``tables``) whose table lists the same term with the
    same label: a term a lead has seen in several rounds is a trick the writers keep using."""
    seen: dict[tuple[str, str], list[int]] = {}
    for number, table in sorted(tables.items()):
        for row in table.rows:
            seen.setdefault((row.term, row.label), []).append(number)
    return {number: replace(table, rows=tuple(replace(row, rounds=tuple(seen[(row.term, row.label)]))
                                               for row in table.rows))
            for number, table in tables.items()}
