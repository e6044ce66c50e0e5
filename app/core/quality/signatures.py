"""MinHash band signatures of normalised texts, for the near-duplicate index's candidate search.

A text's character 4-grams are MinHashed with datasketch (``affine32`` scheme, ``NUM_PERM``
permutations) and the signature is cut into ``BANDS`` bands of ``ROWS`` values; each band is
hashed to one 32-bit number. Two texts become candidates when any band hash agrees, which for a
Jaccard similarity ``s`` happens with probability ``1 - (1 - s**ROWS) ** BANDS``:

    s      0.05    0.2    0.3    0.4    0.5    0.6
    P      0.005   0.29   0.68   0.94   0.996  0.9999

so at the default threshold (0.5) a near-duplicate is missed about once in 250 pairs. Texts of
one topic share common n-grams (s of 0.1 to 0.2 is usual), so many candidates are not near: the
signature itself (``NUM_PERM`` uint32, 504 bytes, kept per example) estimates each candidate's
similarity in one vectorised comparison (standard error ≤ 0.045), and only candidates within
``ESTIMATE_MARGIN`` of the wanted similarity are confirmed with the exact Jaccard similarity
(``app.core.quality.similarity``), so a reported similarity is never an estimate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Final

import numpy as np
from datasketch import MinHash

from app.core.quality.similarity import NGRAM_SIZE, SIMILARITY_FLOOR, shingles

__all__ = ["BANDS", "ESTIMATE_MARGIN", "NUM_PERM", "ROWS", "SCHEME", "SIMILARITY_FLOOR", "band_hashes",
           "estimated_similarity", "from_bytes", "minhash", "minhash_many", "text_hash", "to_bytes"]

NUM_PERM: Final[int] = 126
BANDS: Final[int] = 42
ROWS: Final[int] = 3
#: A candidate whose estimated similarity is this far below the wanted one is not checked exactly:
#: 2.9 standard errors at s = 0.3, 7 at the default threshold.
ESTIMATE_MARGIN: Final[float] = 0.12
#: Names everything a stored signature depends on; a signature under another scheme is recomputed.
SCHEME: Final[str] = f"norm1-char{NGRAM_SIZE}-affine32-p{NUM_PERM}"

_TEMPLATE = MinHash(num_perm=NUM_PERM, seed=1, scheme="affine32")
_MIX: Final[np.uint64] = np.uint64(0x9E3779B97F4A7C15)


def text_hash(text: str) -> str:
    """A short fingerprint of the raw text: a stored signature whose text changed is recomputed."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def minhash(normalised: str) -> np.ndarray:
    """The MinHash signature (``NUM_PERM`` uint32) of a normalised text's character n-grams."""
    sketch = MinHash(num_perm=NUM_PERM, seed=1, permutations=_TEMPLATE.permutations, scheme="affine32")
    sketch.update_batch([gram.encode("utf-8", "surrogatepass") for gram in shingles(normalised)])
    return np.asarray(sketch.hashvalues, dtype=np.uint32)


def minhash_many(normalised_texts: Sequence[str]) -> np.ndarray:
    """Signatures of many normalised texts, one row each (shape ``(len, NUM_PERM)``)."""
    if not normalised_texts:
        return np.zeros((0, NUM_PERM), dtype=np.uint32)
    return np.stack([minhash(text) for text in normalised_texts])


def band_hashes(signatures: np.ndarray) -> np.ndarray:
    """(…, NUM_PERM) signatures -> (…, BANDS) uint32 band hashes."""
    rows = signatures[..., : BANDS * ROWS].reshape(*signatures.shape[:-1], BANDS, ROWS).astype(np.uint64)
    mixed = np.zeros(rows.shape[:-1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(ROWS):
            mixed = (mixed ^ rows[..., column]) * _MIX
    return ((mixed >> np.uint64(32)) ^ (mixed & np.uint64(0xFFFFFFFF))).astype(np.uint32)


def estimated_similarity(signature: np.ndarray, others: np.ndarray) -> np.ndarray:
    """The MinHash estimate of the Jaccard similarity of one signature to each row of ``others``."""
    return np.asarray((others == signature).mean(axis=-1), dtype=np.float64)


def to_bytes(signature: np.ndarray) -> bytes:
    return np.ascontiguousarray(signature, dtype="<u4").tobytes()


def from_bytes(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<u4").astype(np.uint32)
