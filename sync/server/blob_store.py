"""Where the server keeps model files (blobs): one interface, two stores.

- ``files`` (``sync.server.blobs.BlobStore``): the server folder's ``blobs/`` on local disk. The embedded
  default: one machine, SQLite.
- ``database``: chunks in the server database (``blob_uploads``, ``blob_chunks``, ``blob_contents``), on
  PostgreSQL or SQLite. Every server process on the database sees every blob: servers on several machines.

``dynadesk serve run --blobs auto`` (the default) takes ``database`` on PostgreSQL and ``files`` on SQLite;
``DYNADESK_SERVER_BLOBS`` says the same. Both stores write in chunks and read in chunks (a multi-GB file is
never held in memory), check the sha256 before a blob is served, and never serve a half-written one.
"""

from __future__ import annotations

import hashlib
import logging
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy import delete, func, insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.core.domain import utcnow
from app.core.errors import DynadeskError
from sync.server.blobs import BlobMismatch, BlobStore, check_sha
from sync.server.db import ServerDatabase
from sync.server.models import BlobChunk, BlobContent, BlobUpload

log = logging.getLogger(__name__)

BLOBS_ENV = "DYNADESK_SERVER_BLOBS"
KINDS = ("auto", "database", "files")
DB_CHUNK = 1 << 20  # bytes per row: large enough for few rows, small enough for a short transaction each


class BlobWriting(Protocol):
    size: int

    def write(self, chunk: bytes) -> None: ...
    def finish(self) -> None: ...
    def place(self) -> bool: ...
    def abort(self) -> None: ...


class Blobs(Protocol):
    """What the server needs of a blob store (``BlobStore`` and ``DatabaseBlobs`` implement it)."""

    kind: str

    def describe(self) -> str: ...
    def exists(self, sha256: str, size: int | None = None) -> bool: ...
    def size_of(self, sha256: str) -> int | None: ...
    def local_path(self, sha256: str) -> Path | None: ...
    def chunks(self, sha256: str) -> Iterator[bytes]: ...
    def writer(self, sha256: str) -> BlobWriting: ...
    def stored(self) -> Iterator[tuple[str, int, datetime]]: ...
    def partial(self) -> Iterator[tuple[str, datetime]]: ...
    def remove(self, sha256: str) -> None: ...
    def remove_partial(self, key: str) -> None: ...


class DatabaseBlobs:
    """Blobs as chunks in the server database."""

    kind = "database"

    def __init__(self, db: ServerDatabase, chunk_size: int = DB_CHUNK):
        self.db = db
        self.chunk_size = chunk_size

    def describe(self) -> str:
        return f"in the database {self.db.describe()}"

    def _content(self, session: Session, sha256: str) -> BlobContent | None:
        return session.get(BlobContent, check_sha(sha256))

    def exists(self, sha256: str, size: int | None = None) -> bool:
        found = self.size_of(sha256)
        return found is not None and (size is None or found == size)

    def size_of(self, sha256: str) -> int | None:
        with self.db.read() as session:
            content = self._content(session, sha256)
            return None if content is None else content.size

    def local_path(self, sha256: str) -> Path | None:
        return None

    def chunks(self, sha256: str) -> Iterator[bytes]:
        """The content, one chunk per short read (no connection is held while the client takes its time)."""
        with self.db.read() as session:
            content = self._content(session, sha256)
            if content is None:
                raise FileNotFoundError(f"no blob {sha256}")
            upload, count = content.upload_id, content.chunks
        for seq in range(count):
            with self.db.read() as session:
                data = session.scalar(select(BlobChunk.data).where(BlobChunk.upload_id == upload, BlobChunk.seq == seq))
            if data is None:  # swept while being read: the client's sha256 check refuses the short file
                raise FileNotFoundError(f"blob {sha256} was removed while it was read")
            yield bytes(data)

    def writer(self, sha256: str) -> DatabaseBlobWriter:
        return DatabaseBlobWriter(self, check_sha(sha256))

    def stored(self) -> Iterator[tuple[str, int, datetime]]:
        with self.db.read() as session:
            rows = session.execute(select(BlobContent.sha256, BlobContent.size, BlobContent.created_at)
                                   .order_by(BlobContent.sha256)).all()
        for sha, size, created in rows:
            yield sha, size, created

    def partial(self) -> Iterator[tuple[str, datetime]]:
        """Uploads no content names: in progress, or cut off. Keyed by upload id; dated by their start."""
        with self.db.read() as session:
            rows = session.execute(select(BlobUpload.id, BlobUpload.started_at)
                                   .where(BlobUpload.id.not_in(select(BlobContent.upload_id)))).all()
        for upload, started in rows:
            yield str(upload), started

    def remove(self, sha256: str) -> None:
        def write(session: Session) -> None:
            content = self._content(session, sha256)
            if content is not None:
                upload = content.upload_id
                session.delete(content)
                session.flush()
                _drop_upload(session, upload)

        self.db.write_retrying(write)

    def remove_partial(self, key: str) -> None:
        upload = uuid.UUID(key)

        def write(session: Session) -> None:
            if session.scalar(select(BlobContent.sha256).where(BlobContent.upload_id == upload)) is None:
                _drop_upload(session, upload)

        self.db.write_retrying(write)


def _drop_upload(session: Session, upload: uuid.UUID) -> None:
    session.execute(delete(BlobChunk).where(BlobChunk.upload_id == upload))
    session.execute(delete(BlobUpload).where(BlobUpload.id == upload))


class DatabaseBlobWriter:
    """Writes an upload's chunks as they come (one short transaction each); ``place`` makes it the blob."""

    def __init__(self, store: DatabaseBlobs, sha256: str):
        self.store, self.db, self.sha256 = store, store.db, sha256
        self.upload = uuid.uuid4()
        self.digest = hashlib.sha256()
        self.size = 0
        self.seq = 0
        self.buffer = bytearray()
        self.placed = False
        self.db.write_retrying(lambda s: s.execute(insert(BlobUpload).values(id=self.upload, sha256=sha256,
                                                                               started_at=utcnow())))

    def write(self, chunk: bytes) -> None:
        self.digest.update(chunk)
        self.size += len(chunk)
        self.buffer += chunk
        while len(self.buffer) >= self.store.chunk_size:
            self._flush(bytes(self.buffer[:self.store.chunk_size]))
            del self.buffer[:self.store.chunk_size]

    def _flush(self, data: bytes) -> None:
        seq = self.seq
        self.db.write_retrying(lambda s: s.execute(insert(BlobChunk).values(upload_id=self.upload, seq=seq, data=data)))
        self.seq += 1

    def finish(self) -> None:
        """Write the last chunk and check the hash (``BlobMismatch``, and the chunks dropped, when it is not its name)."""
        if self.buffer or self.seq == 0:
            self._flush(bytes(self.buffer))
            self.buffer.clear()
        actual = self.digest.hexdigest()
        if actual != self.sha256:
            self.abort()
            raise BlobMismatch(f"the content's sha256 is {actual}, not {self.sha256}")

    def place(self) -> bool:
        """Make the finished upload the blob; False when an identical blob was already there (this one goes)."""
        def write(session: Session) -> bool:
            if session.get(BlobContent, self.sha256) is not None:
                return False
            session.add(BlobContent(sha256=self.sha256, upload_id=self.upload, size=self.size, chunks=self.seq,
                                    created_at=utcnow()))
            session.flush()
            return True

        try:
            created = self.db.write_retrying(write)  # a concurrent identical upload: the retry sees it stored
        except IntegrityError:
            created = False
        self.placed = created
        if not created:
            self.abort()
        return created

    def abort(self) -> None:
        """Drop what this upload wrote, unless it became the blob."""
        if self.placed:
            return
        self.buffer.clear()
        self.db.write_retrying(lambda s: _drop_upload(s, self.upload))


def resolve_kind(kind: str | None, db: ServerDatabase) -> str:
    """``auto`` (or nothing): the database on PostgreSQL, files on SQLite."""
    chosen = (kind or "auto").strip().lower()
    if chosen not in KINDS:
        raise DynadeskError(f"'{kind}' is not a place for model files; use one of: {', '.join(KINDS)}.")
    if chosen == "auto":
        return "database" if db.dialect == "postgresql" else "files"
    return chosen


def open_blobs(kind: str | None, db: ServerDatabase, data_dir: Path) -> Blobs:
    if resolve_kind(kind, db) == "database":
        return DatabaseBlobs(db)
    return BlobStore(Path(data_dir) / "blobs")


def copy_blobs(source: Blobs, target: Blobs) -> tuple[int, int]:
    """Copy every blob ``target`` lacks from ``source``, streamed and checked (a server that moves its files
    into the database keeps them all). Returns (files, bytes) copied; ``source`` is left as it was."""
    files = size = 0
    for sha, _, _ in list(source.stored()):
        if target.exists(sha):
            continue
        writer = target.writer(sha)
        try:
            for chunk in source.chunks(sha):
                writer.write(chunk)
            writer.finish()
            if writer.place():
                files, size = files + 1, size + writer.size
        except BlobMismatch as exc:  # a damaged file on disk: left where it is, named in the log
            log.warning("model file %s was not copied: %s", sha, exc)
        finally:
            writer.abort()
    return files, size


def count_stored(blobs: Blobs) -> tuple[int, int]:
    files = size = 0
    for _, length, _ in blobs.stored():
        files, size = files + 1, size + length
    return files, size


def database_use(db: ServerDatabase) -> int:
    """Bytes of chunks in the database, placed or not (for operators and tests)."""
    with db.read() as session:
        return int(session.scalar(select(func.coalesce(func.sum(func.length(BlobChunk.data)), 0))) or 0)
