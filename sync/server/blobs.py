"""Model files on the server's own disk, stored by the sha256 of their content (the embedded default:
one machine; ``sync.server.blob_store`` says what every store offers and keeps them in the database for
servers on several machines).

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
from datetime import UTC, datetime
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{64}$")
READ_CHUNK = 1 << 20


class BlobMismatch(Exception):
    pass


def check_sha(sha256: str) -> str:
    if not SHA.match(sha256):
        raise ValueError("not a sha256")
    return sha256


class BlobStore:
    """Blobs as files under ``root``: ``root/ab/abcd...``; uploads in progress as ``.abcd...-xyz.part``."""

    kind = "files"

    def __init__(self, root: Path):
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def describe(self) -> str:
        return f"files in {self.root}"

    def path(self, sha256: str) -> Path:
        check_sha(sha256)
        return self.root / sha256[:2] / sha256

    def local_path(self, sha256: str) -> Path | None:
        """The file itself, for a zero-copy download (None when not stored)."""
        path = self.path(sha256)
        return path if path.is_file() else None

    def exists(self, sha256: str, size: int | None = None) -> bool:
        path = self.path(sha256)
        return path.is_file() and (size is None or path.stat().st_size == size)

    def size_of(self, sha256: str) -> int | None:
        path = self.path(sha256)
        return path.stat().st_size if path.is_file() else None

    def chunks(self, sha256: str) -> Iterator[bytes]:
        with open(self.path(sha256), "rb") as handle:
            while chunk := handle.read(READ_CHUNK):
                yield chunk

    def writer(self, sha256: str) -> BlobWriter:
        return BlobWriter(self, sha256)

    def stored(self) -> Iterator[tuple[str, int, datetime]]:
        """Every stored blob: (sha256, size, when it was stored)."""
        for shard in sorted(self.root.iterdir()):
            if shard.is_dir():
                for path in sorted(shard.iterdir()):
                    if SHA.match(path.name) and path.is_file():
                        stat = path.stat()
                        yield path.name, stat.st_size, datetime.fromtimestamp(stat.st_mtime, UTC)

    def partial(self) -> Iterator[tuple[str, datetime]]:
        """Uploads in progress, or left behind by a killed server: (key for ``remove_partial``, last written)."""
        for shard in list(self.root.iterdir()):
            if shard.is_dir():
                for path in list(shard.iterdir()):
                    if path.name.startswith(".") and path.name.endswith(".part"):
                        try:
                            yield str(path), datetime.fromtimestamp(path.stat().st_mtime, UTC)
                        except FileNotFoundError:  # its upload ended just now
                            continue

    def remove(self, sha256: str) -> None:
        self._unlink(self.path(sha256))

    def remove_partial(self, key: str) -> None:
        path = Path(key)
        if path.parent.parent != self.root or not path.name.endswith(".part"):
            raise ValueError(f"{key} is not an upload of this store")
        self._unlink(path)

    @staticmethod
    def _unlink(path: Path) -> None:
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
        """Drop what a failed upload wrote, and its shard folder if nothing else is in it (after ``place``:
        nothing to drop)."""
        if not self.handle.closed:
            self.handle.close()
        self.tmp.unlink(missing_ok=True)
        try:
            self.final.parent.rmdir()
        except OSError:  # not empty: other blobs or uploads live there
            pass
