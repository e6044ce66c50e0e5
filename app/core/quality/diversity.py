"""How varied a round's examples are: distinct n-gram ratios and the spread of their sentence embeddings.

- **distinct-n** (Li et al. 2016): distinct word n-grams ÷ all word n-grams of the examples, n = 1, 2
  (words as :mod:`app.core.quality.artifacts` reads them; bigrams do not cross examples). The ratio
  falls as a corpus grows, whatever its variety, so rounds are compared on samples of the same
  size: at most ``DISTINCT_SAMPLE`` examples, drawn with a fixed seed (a round with fewer is
  taken whole, and its figure says so by its sample size).
- **embedding spread**: the mean cosine distance ``1 − cos(u, v)`` over all pairs of a seeded
  sample of at most ``SPREAD_SAMPLE`` examples, in the round's target model's sentence-embedding
  space (mean-pooled last hidden state, ``InferenceEngine.embed``). Computed from the sum of the
  unit vectors: the sum of cos over all ordered pairs is ``|Σu|² − n``, so no n × n matrix.
  0 means every example says the same thing; unrelated texts sit around 0.5–0.9 for the usual
  encoders. Zero vectors (nothing to point anywhere) are left out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.core.quality.artifacts import TermMatrix

DISTINCT_SAMPLE = 1000
SPREAD_SAMPLE = 300  # 44,850 pairs: the mean's standard error is far below the differences that matter
SAMPLE_SEED = 21


def sample_indexes(candidates: np.ndarray, size: int, seed: int = SAMPLE_SEED) -> np.ndarray:
    """At most ``size`` of the example indexes ``candidates``, drawn without replacement with a fixed
    seed, in ascending order: the same examples every time for the same round."""
    candidates = np.asarray(candidates)
    if len(candidates) <= size:
        return np.sort(candidates)
    chosen = np.random.default_rng(seed).choice(len(candidates), size=size, replace=False)
    return np.sort(candidates[chosen])


@dataclass(frozen=True)
class DistinctN:
    distinct_1: float | None  # None: no words at all
    distinct_2: float | None  # None: no example has two words
    sample: int  # examples counted


def distinct_n(matrix: TermMatrix, examples: np.ndarray) -> DistinctN:
    """distinct-1 and distinct-2 over the given example indexes of ``matrix``."""
    chosen = np.zeros(matrix.n_docs, dtype=np.bool_)
    chosen[np.asarray(examples, dtype=np.int64)] = True
    mine = chosen[matrix.word_docs]
    docs, words = matrix.word_docs[mine], matrix.word_ids[mine]
    unigrams = len(np.unique(words)) / len(words) if len(words) else None
    same = docs[1:] == docs[:-1]
    vocabulary = len(matrix.words)
    pairs = words[:-1][same] * vocabulary + words[1:][same]
    bigrams = len(np.unique(pairs)) / len(pairs) if len(pairs) else None
    return DistinctN(unigrams, bigrams, len(np.unique(np.asarray(examples))))


def embedding_spread(vectors: np.ndarray) -> float | None:
    """Mean pairwise cosine distance of the rows of ``vectors`` (None with fewer than two usable rows)."""
    vectors = np.asarray(vectors, dtype=np.float64)
    if vectors.ndim != 2:
        raise ValueError(f"embedding_spread takes a matrix of row vectors, not an array of shape {vectors.shape}")
    norms = np.linalg.norm(vectors, axis=1)
    usable = norms > 0
    n = int(usable.sum())
    if n < 2:
        return None
    units = vectors[usable] / norms[usable, None]
    total = units.sum(axis=0)
    mean_cosine = (float(total @ total) - n) / (n * (n - 1))
    return 1.0 - mean_cosine
