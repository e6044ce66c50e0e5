"""A compact banded LSH table: which rows share a band hash with a query.

datasketch's own ``MinHashLSH`` keeps a Python set per bucket; at 100,000 examples and 42 bands
that is over 400 MB. Here each band is a sorted uint32 array of band hashes with the row ids
beside it (8 bytes per row and band: ~34 MB at 100,000), searched with ``np.searchsorted``; rows
added since the last merge wait in small per-band dicts, merged in when there are ``MERGE_AT``
of them (a linear insert, not a re-sort). Rows are never removed here: the owner marks them dead
and skips them (an example whose text changed comes back under a new row).
"""

from __future__ import annotations

from typing import Final

import numpy as np

MERGE_AT: Final[int] = 4096


class BandTable:
    def __init__(self, bands: int):
        self.bands = bands
        self._keys = [np.zeros(0, dtype=np.uint32) for _ in range(bands)]
        self._rows = [np.zeros(0, dtype=np.int32) for _ in range(bands)]
        self._pending: list[dict[int, list[int]]] = [{} for _ in range(bands)]
        self._pending_rows: list[int] = []
        self._pending_bands: list[np.ndarray] = []

    def __len__(self) -> int:
        return int(self._keys[0].size) + len(self._pending_rows) if self.bands else 0

    def build(self, rows: np.ndarray, bands: np.ndarray) -> None:
        """Replace the table with ``rows`` (int) and their band hashes (``(len(rows), bands)`` uint32)."""
        rows = np.asarray(rows, dtype=np.int32)
        for band in range(self.bands):
            order = np.argsort(bands[:, band], kind="stable")
            self._keys[band] = np.ascontiguousarray(bands[order, band], dtype=np.uint32)
            self._rows[band] = rows[order]
        self._pending = [{} for _ in range(self.bands)]
        self._pending_rows, self._pending_bands = [], []

    def add(self, row: int, bands: np.ndarray) -> None:
        for band in range(self.bands):
            self._pending[band].setdefault(int(bands[band]), []).append(row)
        self._pending_rows.append(row)
        self._pending_bands.append(np.asarray(bands, dtype=np.uint32))
        if len(self._pending_rows) >= MERGE_AT:
            self._merge()

    def _merge(self) -> None:
        rows = np.asarray(self._pending_rows, dtype=np.int32)
        bands = np.stack(self._pending_bands)
        for band in range(self.bands):
            order = np.argsort(bands[:, band], kind="stable")
            new_keys, new_rows = bands[order, band], rows[order]
            at = np.searchsorted(self._keys[band], new_keys, side="right")
            self._keys[band] = np.insert(self._keys[band], at, new_keys)
            self._rows[band] = np.insert(self._rows[band], at, new_rows)
        self._pending = [{} for _ in range(self.bands)]
        self._pending_rows, self._pending_bands = [], []

    def candidates(self, bands: np.ndarray) -> set[int]:
        """Rows sharing at least one band hash with ``bands`` (dead rows included)."""
        found: set[int] = set()
        for band in range(self.bands):
            key = int(bands[band])
            keys = self._keys[band]
            if keys.size:
                lo = int(np.searchsorted(keys, key, side="left"))
                hi = int(np.searchsorted(keys, key, side="right"))
                if hi > lo:
                    found.update(self._rows[band][lo:hi].tolist())
            pending = self._pending[band].get(key)
            if pending:
                found.update(pending)
        return found

    def buckets(self) -> list[np.ndarray]:
        """Every group of two or more rows sharing a band hash (rows with several shared bands recur)."""
        if self._pending_rows:
            self._merge()
        groups: list[np.ndarray] = []
        for band in range(self.bands):
            keys = self._keys[band]
            if keys.size < 2:
                continue
            starts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            sizes = np.diff(np.append(starts, keys.size))
            for start, size in zip(starts[sizes > 1].tolist(), sizes[sizes > 1].tolist()):
                groups.append(self._rows[band][start : start + size])
        return groups
