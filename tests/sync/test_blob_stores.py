"""The server's two blob stores (``sync.server.blob_store``): model files in the server folder (one
machine) or in the database (every server machine on it), behind one interface. Both write and read
in chunks, check the sha256 before a blob is served, never serve a half-written one (a killed server,
a dropped upload), and let the sweep clear what interrupted uploads left; a server moving to the
database copies its folder's files in. Request counts in the database are one limit for every server
process on it."""

from __future__ import annotations

import hashlib
import random
import threading
import tracemalloc
from datetime import timedelta

import httpx
import pytest

from app.core.domain import utcnow
from sync.server.blob_store import DatabaseBlobs, copy_blobs, database_use, open_blobs, resolve_kind
from sync.server.blobs import BlobMismatch, BlobStore
from sync.server.db import ServerDatabase
from sync.server.limits import Rate
from sync.server.shared_limits import DatabaseCounts, sliding_wait
from sync.server.store import storage
from tests.sync.helpers import ThreadServer, add_account

CHUNK = 4096


@pytest.fixture(params=["files", "database"])
def blobs(request, server_db, tmp_path):
    if request.param == "files":
        return BlobStore(tmp_path / "server" / "blobs")
    return DatabaseBlobs(server_db, chunk_size=CHUNK)


def upload(blobs, content: bytes, piece: int = 1000, sha: str | None = None) -> bool:
    writer = blobs.writer(sha or hashlib.sha256(content).hexdigest())
    try:
        for start in range(0, len(content), piece):
            writer.write(content[start:start + piece])
        writer.finish()
        return writer.place()
    finally:
        writer.abort()


def test_a_blob_is_written_and_read_in_chunks_and_served_only_once_whole_and_checked(blobs):
    content = random.Random(1).randbytes(10 * CHUNK + 17)
    sha = hashlib.sha256(content).hexdigest()
    writer = blobs.writer(sha)
    for start in range(0, len(content), 1000):
        writer.write(content[start:start + 1000])
    assert not blobs.exists(sha) and blobs.size_of(sha) is None and list(blobs.stored()) == []
    assert len(list(blobs.partial())) == 1  # written, not yet checked: never served
    writer.finish()
    assert not blobs.exists(sha)  # checked, not yet placed
    assert writer.place() is True
    writer.abort()  # after place: keeps the blob
    assert blobs.exists(sha) and blobs.exists(sha, size=len(content)) and not blobs.exists(sha, size=1)
    assert blobs.size_of(sha) == len(content) and list(blobs.partial()) == []
    pieces = list(blobs.chunks(sha))
    assert b"".join(pieces) == content
    if blobs.kind == "database":
        assert [len(p) for p in pieces] == [CHUNK] * 10 + [17]
        assert blobs.local_path(sha) is None
    else:
        assert blobs.local_path(sha).read_bytes() == content
    assert [(s, n) for s, n, _ in blobs.stored()] == [(sha, len(content))]

    assert upload(blobs, content) is False  # an identical upload: stored once, nothing left behind
    assert list(blobs.partial()) == [] and len(list(blobs.stored())) == 1
    with pytest.raises(BlobMismatch, match="sha256"):
        upload(blobs, b"not what the name says", sha="cd" * 32)
    assert not blobs.exists("cd" * 32) and list(blobs.partial()) == []
    assert upload(blobs, b"") is True and b"".join(blobs.chunks(hashlib.sha256(b"").hexdigest())) == b""
    if blobs.kind == "database":
        exact = random.Random(2).randbytes(3 * CHUNK)  # a whole number of chunks: no empty last one
        assert upload(blobs, exact, piece=CHUNK) and [len(p) for p in blobs.chunks(hashlib.sha256(exact).hexdigest())] == [CHUNK] * 3
    blobs.remove(sha)
    assert not blobs.exists(sha) and list(blobs.partial()) == []
    if blobs.kind == "database":
        assert database_use(blobs.db) == 3 * CHUNK  # the removed blob's chunks went with it


def test_an_upload_cut_off_midway_is_never_served_and_is_swept(blobs, server_db):
    content = random.Random(3).randbytes(5 * CHUNK)
    sha = hashlib.sha256(content).hexdigest()
    killed = blobs.writer(sha)  # the server dies after writing some chunks: no finish, no abort
    killed.write(content[: 3 * CHUNK])
    again = open_blobs(blobs.kind, server_db, blobs.root.parent) if blobs.kind == "files" else DatabaseBlobs(server_db)
    assert not again.exists(sha) and list(again.stored()) == []
    with pytest.raises(FileNotFoundError):
        list(again.chunks(sha))
    assert upload(again, content) is True  # the same file uploaded again in full
    assert b"".join(again.chunks(sha)) == content
    assert storage.sweep(server_db, again) == storage.Swept(0, 0, 0)  # within the grace period
    later = utcnow() + timedelta(hours=25)
    assert storage.sweep(server_db, again, now=later, dry_run=True).partial == 1
    swept = storage.sweep(server_db, again, now=later)
    assert swept.partial == 1 and swept.files == 1  # the cut-off upload, and the blob nothing references
    assert list(again.partial()) == [] and not again.exists(sha)


def test_identical_uploads_at_the_same_time_store_one_blob(server_db):
    blobs = DatabaseBlobs(server_db, chunk_size=CHUNK)
    content = random.Random(4).randbytes(8 * CHUNK)
    start = threading.Barrier(4)
    results: list = []

    def send() -> None:
        start.wait(timeout=30)
        results.append(upload(blobs, content))

    threads = [threading.Thread(target=send) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(results) == [False, False, False, True]
    assert len(list(blobs.stored())) == 1 and list(blobs.partial()) == []
    assert database_use(server_db) == len(content)


@pytest.mark.parametrize("kind", ["files", "database"])
def test_a_large_model_file_streams_through_the_server_without_being_held_in_memory(server_db, tmp_path, kind):
    size = 48 * 2**20
    owner = add_account(server_db, "Olga Owner", "owner", "A")
    server = ThreadServer(server_db, tmp_path / "server", blobs=kind)
    headers = {"Authorization": f"Bearer {owner.token}"}
    rng = random.Random(5)
    piece = rng.randbytes(2**20)
    digest = hashlib.sha256()
    for n in range(size // len(piece)):
        digest.update(bytes([n]) + piece[1:])
    sha = digest.hexdigest()

    def body():
        for n in range(size // len(piece)):
            yield bytes([n]) + piece[1:]

    tracemalloc.start()
    try:
        stored = httpx.put(f"{server.url}/v1/blobs/{sha}", content=body(), headers=headers, timeout=300)
        assert stored.status_code == 201, stored.text
        received = hashlib.sha256()
        with httpx.stream("GET", f"{server.url}/v1/blobs/{sha}", headers=headers, timeout=300) as response:
            assert response.status_code == 200 and response.headers["content-length"] == str(size)
            for chunk in response.iter_bytes():
                received.update(chunk)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
        server.stop()
    assert received.hexdigest() == sha
    print(f"{kind}: peak {peak / 2**20:.1f} MiB traced for a {size / 2**20:.0f} MiB upload and download")
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.0f} MiB file"


def test_a_server_moving_to_the_database_copies_in_its_folders_files_checked(server_db, tmp_path):
    folder = BlobStore(tmp_path / "blobs")
    good = [random.Random(n).randbytes(CHUNK + n) for n in range(3)]
    for content in good:
        upload(folder, content)
    damaged = hashlib.sha256(b"what it was").hexdigest()
    folder.path(damaged).parent.mkdir(parents=True, exist_ok=True)
    folder.path(damaged).write_bytes(b"what the disk made of it")
    target = DatabaseBlobs(server_db, chunk_size=CHUNK)
    assert upload(target, good[0]) is True  # already there: not copied again
    assert copy_blobs(folder, target) == (2, len(good[1]) + len(good[2]))
    assert copy_blobs(folder, target) == (0, 0)
    for content in good:
        assert b"".join(target.chunks(hashlib.sha256(content).hexdigest())) == content
    assert not target.exists(damaged) and list(target.partial()) == []
    assert folder.path(damaged).exists() and len(list(folder.stored())) == 4  # the folder is left as it was


def test_the_blob_store_is_the_database_on_postgresql_unless_told(server_db):
    expected = "database" if server_db.dialect == "postgresql" else "files"
    assert resolve_kind(None, server_db) == resolve_kind("auto", server_db) == expected
    assert resolve_kind("files", server_db) == "files" and resolve_kind("Database", server_db) == "database"
    with pytest.raises(Exception, match="not a place for model files"):
        resolve_kind("s3", server_db)


def test_sliding_window_waits():
    hour = Rate(10, 3600.0)
    assert sliding_wait(hour, 0, 9, 0.5) == 0  # the tenth request of the hour passes
    assert sliding_wait(hour, 0, 10, 0.5) == pytest.approx(1800 + 360)  # next window, once 10% of it is gone
    assert sliding_wait(hour, 10, 0, 0.0) == pytest.approx(360)  # the last window's weight must fall below 9
    assert sliding_wait(hour, 10, 0, 0.2) == 0
    # one a minute, taken at 0:15: the estimate spreads it over its window, so the next passes at 2:00
    assert sliding_wait(Rate(1, 60.0), 0, 1, 0.25) == pytest.approx(45 + 60)


def test_request_counts_in_the_database_are_one_limit_for_every_process(server_db):
    # two engines with their own connection pools, as two server processes (or machines) have
    processes = [ServerDatabase(server_db.url) for _ in range(2)]
    counters = [DatabaseCounts(db) for db in processes]
    limit, other = Rate(30, 3600.0), Rate(1000, 60.0)
    start = threading.Barrier(8)
    passed: list[int] = []
    waits: list[float] = []

    def hammer(n: int) -> None:
        start.wait(timeout=30)
        for _ in range(10):
            wait = counters[n % 2].admit([("token:probe", limit), (f"address:{n % 2}", other)])
            (passed.append(n) if wait == 0 else waits.append(wait))

    try:
        threads = [threading.Thread(target=hammer, args=(n,)) for n in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert len(passed) == 30 and len(waits) == 50 and all(0 < w <= 3600 for w in waits)
        # refused requests took nothing: a key with room left counted only the requests that passed
        assert counters[0].admit([("address:0", other)]) == 0
        from sqlalchemy import select

        from sync.server.models import RequestCount

        with processes[0].read() as session:
            hits = dict(session.execute(select(RequestCount.key, RequestCount.hits)).all())
        assert hits["token:probe"] == 30
        assert hits["address:0"] + hits["address:1"] == 31
        assert counters[1].admit([("token:probe", Rate(0, 1.0))]) == 0  # no limit: nothing counted
    finally:
        for db in processes:
            db.close()


def test_two_servers_on_one_database_share_a_tokens_limit(server_db, tmp_path):
    ann = add_account(server_db, "Ann Annotator", "annotator", "A")
    servers = [ThreadServer(server_db, tmp_path / f"server-{n}", per_token=Rate(6, 3600.0), per_address=Rate(0, 1.0),
                            shared_limits=True) for n in range(2)]
    try:
        codes = [httpx.get(f"{servers[n % 2].url}/v1/me", headers={"Authorization": f"Bearer {ann.token}"}).status_code
                 for n in range(8)]
    finally:
        for server in servers:
            server.stop()
    assert codes == [200] * 6 + [429, 429]


def test_the_health_check_says_whether_a_server_can_serve(server_db, tmp_path):
    from sync.server.db import VERSION_TABLE, head_revision

    server = ThreadServer(server_db, tmp_path / "server", blobs="database")
    try:
        answer = httpx.get(f"{server.url}/health")  # no token: load balancers have none
        assert answer.status_code == 200
        assert answer.json() == {"status": "ok", "database": server_db.dialect, "schema": head_revision(),
                                 "blobs": "database"}
        with server_db.engine.begin() as connection:  # another release migrated the shared database
            connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
        answer = httpx.get(f"{server.url}/health")
        assert answer.status_code == 503
        assert answer.json()["reason"] == f"the database is at schema 9999, this server expects {head_revision()}"
    finally:
        with server_db.engine.begin() as connection:
            connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '{head_revision()}'")
        server.stop()
