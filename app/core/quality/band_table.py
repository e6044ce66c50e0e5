"""A compact banded LSH table: which rows share a band hash with a query.

datasketch's own ``MinHashLSH`` keeps a Python set per bucket; at 100,000 examples and 42 bands
that is over 400 MB. Here every (band, hash) is one uint64 key ``band << 32 | hash`` in a single
sorted array with the row ids beside it (12 bytes per row and band: ~50 MB at 100,000), so a
query is two vectorised ``np.searchsorted`` calls for all its bands at once. Rows added since the
last merge wait in a small dict, merged in when there are ``MERGE_AT`` of them (a linear insert,
not a re-sort). Rows are never removed here: the owner marks them dead and skips them (an example
whose text changed comes back under a new row).
"""

from __future__ import annotations

from typing import Final

import numpy as np

MERGE_AT: Final[int] = 4096


def _composite(bands: np.ndarray) -> np.ndarray:
    """(…, B) uint32 band hashes -> (…, B) uint64 keys ``band << 32 | hash``."""
    positions = np.arange(bands.shape[-1], dtype=np.uint64) << np.uint64(32)
    return positions | bands.astype(np.uint64)


class BandTable:
    def __init__(self, bands: int):
        self.bands = bands
        self._keys = np.zeros(0, dtype=np.uint64)
        self._rows = np.zeros(0, dtype=np.int32)
        self._pending: dict[int, list[int]] = {}
        self._pending_rows: list[int] = []
        self._pending_keys: list[np.ndarray] = []

    def __len__(self) -> int:
        return int(self._keys.size) // max(1, self.bands) + len(self._pending_rows)

    def build(self, rows: np.ndarray, bands: np.ndarray) -> None:
        """Replace the table with ``rows`` (int) and their band hashes (``(len(rows), bands)`` uint32)."""
        keys = _composite(bands).ravel()
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._rows = np.repeat(np.asarray(rows, dtype=np.int32), self.bands)[order]
        self._pending, self._pending_rows, self._pending_keys = {}, [], []

    def add(self, row: int, bands: np.ndarray) -> None:
        keys = _composite(np.asarray(bands, dtype=np.uint32))
        for key in keys.tolist():
            self._pending.setdefault(key, []).append(row)
        self._pending_rows.append(row)
        self._pending_keys.append(keys)
        if len(self._pending_rows) >= MERGE_AT:
            self._merge()

    def _merge(self) -> None:
        keys = np.concatenate(self._pending_keys)
        rows = np.repeat(np.asarray(self._pending_rows, dtype=np.int32), self.bands)
        order = np.argsort(keys, kind="stable")
        at = np.searchsorted(self._keys, keys[order], side="right")
        self._keys = np.insert(self._keys, at, keys[order])
        self._rows = np.insert(self._rows, at, rows[order])
        self._pending, self._pending_rows, self._pending_keys = {}, [], []

    def candidates(self, bands: np.ndarray) -> np.ndarray:
        """Rows sharing at least one band hash with ``bands`` (dead rows included; unique)."""
        keys = _composite(np.asarray(bands, dtype=np.uint32))
        low = np.searchsorted(self._keys, keys, side="left")
        high = np.searchsorted(self._keys, keys, side="right")
        parts = [self._rows[a:b] for a, b in zip(low.tolist(), high.tolist()) if b > a]
        if self._pending:
            parts.extend(np.asarray(found, dtype=np.int32) for key in keys.tolist()
                         if (found := self._pending.get(key)))
        if not parts:
            return np.zeros(0, dtype=np.int32)
        return np.unique(np.concatenate(parts))

    def pairs(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per band, the candidate pairs (a, b) of rows sharing that band's hash: each row with the
        first of its bucket (a star) and with the one before it (a chain), a < b; pairs repeat
        across bands. Big buckets cost linear, not quadratic, work."""
        if self._pending_rows:
            self._merge()
        out: list[tuple[np.ndarray, np.ndarray]] = []
        bounds = np.searchsorted(self._keys, np.arange(self.bands + 1, dtype=np.uint64) << np.uint64(32))
        for band in range(self.bands):
            keys, rows = self._keys[bounds[band]:bounds[band + 1]], self._rows[bounds[band]:bounds[band + 1]]
            if keys.size < 2:
                continue
            is_start = np.concatenate(([True], keys[1:] != keys[:-1]))
            positions = np.arange(keys.size)
            first_of = np.maximum.accumulate(np.where(is_start, positions, 0))
            member = ~is_start
            star_a, star_b = rows[first_of[member]], rows[member]
            chain_a, chain_b = rows[:-1][~is_start[1:]], rows[1:][~is_start[1:]]
            a = np.concatenate((star_a, chain_a))
            b = np.concatenate((star_b, chain_b))
            low, high = np.minimum(a, b), np.maximum(a, b)
            keep = low != high
            out.append((low[keep], high[keep]))
        return out
