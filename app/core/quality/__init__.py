"""The data-quality guard: near-duplicates (``similarity``, ``near_duplicates``), its settings.

``similarity`` holds the one definition of "near" every part of the guard uses.
"""

from app.core.quality.similarity import (
    DEFAULT_NEAR_THRESHOLD,
    NGRAM_SIZE,
    SIMILARITY_FLOOR,
    Fingerprint,
    is_near,
    jaccard,
    normalise,
    shingles,
    similarity,
)

__all__ = [
    "DEFAULT_NEAR_THRESHOLD",
    "NGRAM_SIZE",
    "SIMILARITY_FLOOR",
    "Fingerprint",
    "is_near",
    "jaccard",
    "normalise",
    "shingles",
    "similarity",
]
