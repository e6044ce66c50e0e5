"""MinHash band signatures of normalised texts, for the near-duplicate index's candidate search.

A text's character 4-grams are MinHashed with datasketch (``affine32`` scheme, ``NUM_PERM``
permutations) and the signature is cut into ``BANDS`` bands of ``ROWS`` values; each band is
hashed to one 32-bit number. Two texts become candidates when any band hash agrees, which for a
Jaccard similarity ``s`` happens with probability ``1 - (1 - s**ROWS) ** BANDS``:

    s      0.05    0.2    0.3    0.4    0.5    0.6
    P      0.005   0.29   0.68   0.94   0.996  0.9999

so at the default threshold (0.5) a near-duplicate is missed about once in 250 pairs, while an
unrelated text (s ≈ 0.05) is a candidate once in 200 and costs one exact check. Candidates are
always confirmed with the exact Jaccard similarity (``app.core.quality.similarity``).

Only the band hashes are kept (``BANDS`` × 4 bytes per example), not the signature.
"""

from __future__ import annotations

import hashlib
from typing import Final, Sequence

import numpy as np
from datasketch import MinHash

from app.core.quality.similarity import NGRAM_SIZE, shingles

NUM_PERM: Final[int] = 126
BANDS: Final[int] = 42
ROWS: Final[int] = 3
#: The lowest similarity the index finds reliably (P ≥ 0.68 above); a lead's threshold cannot go lower.
SIMILARITY_FLOOR: Final[float] = 0.3
#: Names everything a stored signature depends on; a signature under another scheme is recomputed.
SCHEME: Final[str] = f"norm1-char{NGRAM_SIZE}-affine32-p{NUM_PERM}-b{BANDS}r{ROWS}"

_TEMPLATE = MinHash(num_perm=NUM_PERM, seed=1, scheme="affine32")
_MIX: Final[np.uint64] = np.uint64(0x9E3779B97F4A7C15)


def text_hash(text: str) -> str:
    """A short fingerprint of the raw text: a stored signature whose text changed is recomputed."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def _minhash(normalised: str) -> np.ndarray:
    sketch = MinHash(num_perm=NUM_PERM, seed=1, permutations=_TEMPLATE.permutations, scheme="affine32")
    sketch.update_batch([gram.encode("utf-8", "surrogatepass") for gram in shingles(normalised)])
    return np.asarray(sketch.hashvalues, dtype=np.uint64)


def _fold_bands(values: np.ndarray) -> np.ndarray:
    """(…, NUM_PERM) MinHash values -> (…, BANDS) uint32 band hashes."""
    rows = values[..., : BANDS * ROWS].reshape(*values.shape[:-1], BANDS, ROWS).astype(np.uint64)
    mixed = np.zeros(rows.shape[:-1], dtype=np.uint64)
    with np.errstate(over="ignore"):
        for column in range(ROWS):
            mixed = (mixed ^ rows[..., column]) * _MIX
    return ((mixed >> np.uint64(32)) ^ (mixed & np.uint64(0xFFFFFFFF))).astype(np.uint32)


def band_hashes(normalised: str) -> np.ndarray:
    """The ``BANDS`` band hashes (uint32) of one normalised text."""
    return _fold_bands(_minhash(normalised))


def band_hashes_many(normalised_texts: Sequence[str]) -> np.ndarray:
    """Band hashes of many normalised texts, one row each (shape ``(len, BANDS)``)."""
    if not normalised_texts:
        return np.zeros((0, BANDS), dtype=np.uint32)
    return _fold_bands(np.stack([_minhash(text) for text in normalised_texts]))


def to_bytes(bands: np.ndarray) -> bytes:
    return np.ascontiguousarray(bands, dtype="<u4").tobytes()


def from_bytes(blob: bytes) -> np.ndarray:
    return np.frombuffer(blob, dtype="<u4").astype(np.uint32)
