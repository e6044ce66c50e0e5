"""Model files on the server, stored by the sha256 of their content.

A file is written to a temporary name while its hash is computed, and renamed into place only
when the hash matches the name it was uploaded under: a stored blob is always complete and
always what its name says. Who uploaded what, the quotas and the sweep of unreferenced files are the
store's (``sync.server.store.storage``).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{64}$")


class BlobMismatch(Exception):
    pass


class BlobStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, sha256: str) -> Path:
        if not SHA.match(sha256):
            raise ValueError("not a sha256")
        return self.root / sha256[:2] / sha256

    def exists(self, sha256: str, size: int | None = None) -> bool:
        path = self.path(sha256)
        return path.is_file() and (size is None or path.stat().st_size == size)

    def writer(self, sha256: str) -> BlobWriter:
        return BlobWriter(self, sha256)

    def stored(self) -> Iterator[tuple[str, Path]]:
        """Every stored blob: (sha256, path)."""
        for shard in sorted(self.root.iterdir()):
            if shard.is_dir():
                for path in sorted(shard.iterdir()):
                    if SHA.match(path.name) and path.is_file():
                        yield path.name, path

    def partial(self) -> Iterator[Path]:
        """Files of uploads in progress, or of uploads a killed server left behind."""
        for shard in self.root.iterdir():
            if shard.is_dir():
                yield from (p for p in shard.iterdir() if p.name.startswith(".") and p.name.endswith(".part"))

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)
        try:
            path.parent.rmdir()
        except OSError:  # other blobs live there
            pass


class BlobWriter:
    def __init__(self, store: BlobStore, sha256: str):
        self.final = store.path(sha256)
        self.sha256 = sha256
        for attempt in range(3):
            self.final.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd, name = tempfile.mkstemp(dir=self.final.parent, prefix=f".{sha256[:12]}-", suffix=".part")
                break
            except FileNotFoundError:  # another upload's abort removed the empty shard just now
                if attempt == 2:
                    raise
        self.tmp = Path(name)
        self.handle = os.fdopen(fd, "wb")
        self.digest = hashlib.sha256()
        self.size = 0

    def write(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.handle.write(chunk)
        self.size += len(chunk)

    def commit(self) -> bool:
        """Move the file into place; False when an identical blob was already there."""
        self.finish()
        return self.place()

    def finish(self) -> None:
        """Flush the written file to disk and check its hash (``BlobMismatch`` when it is not its name)."""
        self.handle.flush()
        os.fsync(self.handle.fileno())
        self.handle.close()
        actual = self.digest.hexdigest()
        if actual != self.sha256:
            self.tmp.unlink(missing_ok=True)
            raise BlobMismatch(f"the content's sha256 is {actual}, not {self.sha256}")

    def place(self) -> bool:
        """Move the finished file into place; False when an identical blob was already there."""
        existed = self.final.exists()
        os.replace(self.tmp, self.final)
        return not existed

    def abort(self) -> None:
        """Drop what a failed upload wrote, and its shard folder if nothing else is in it."""
        if not self.handle.closed:
            self.handle.close()
        self.tmp.unlink(missing_ok=True)
        try:
            self.final.parent.rmdir()
        except OSError:  # not empty: other blobs or uploads live there
            pass
