"""Real servers on loopback, databases, bulk test data and fault injectors for the sync tests
(and the sync benchmarks, which reuse them at a larger size).

Only loopback addresses; every loop is bounded; fault injectors are seeded.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import httpx
from sqlalchemy import create_engine, insert, select
from sqlalchemy.engine import make_url

from app.core.desk import Desk
from app.core.domain import utcnow
from app.core.io.records import dump_example
from app.core.storage.models import Context, Example, ExampleFacet, ModelOutputRow, OutboxEntry, Round, Task
from sync.protocol import ExampleRecord
from sync.server import models as server_models
from sync.server import store
from sync.server.app import create_app
from sync.server.db import ServerDatabase

ROOT = Path(__file__).resolve().parents[2]
PG_ENV = "DYNADESK_TEST_PG_URL"
MODEL_SHA = "ab" * 32
TYPES = ["animosity", "derogation", "dehumanization", "threatening language", "support for hateful entities"]
GROUPS = ["women", "trans people", "gay people", "black people", "Muslims", "Jewish people", "immigrants"]
WORDS = ("they people women immigrants country should never always love hate work family city night music vermin "
         "lazy brilliant kind rude vote school church mosque synagogue really honestly maybe 😀 🙄 مرحبا שלום café "
         "naïve Zürich 'quoted' \"double\" back\\slash").split()


def wait_until(condition, *, timeout: float = 30.0, interval: float = 0.02, what: str = "condition") -> None:
    """Wait on a condition (bounded), never on a bare sleep."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(interval)


def run_in_threads(work, count: int, *, timeout: float = 600.0) -> list[threading.Thread]:
    """``work(i)`` for i in 0..count-1, each on a thread of its own, all at once; the threads, once all are
    done (or ``timeout`` passed for each)."""
    threads = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout)
    return threads


@contextmanager
def postgres_schema(base_url: str) -> Iterator[str]:
    """A URL whose connections see only a fresh schema, dropped afterwards."""
    schema = f"dynadesk_test_{uuid.uuid4().hex[:12]}"
    engine = create_engine(base_url)
    with engine.begin() as connection:
        connection.exec_driver_sql(f"CREATE SCHEMA {schema}")
    url = make_url(base_url).update_query_dict({"options": f"-csearch_path={schema}"})
    try:
        yield url.render_as_string(hide_password=False)
    finally:
        with engine.begin() as connection:
            # Connections of a killed server may linger a moment; drop them with the schema.
            connection.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        engine.dispose()


def server_database(url: str) -> ServerDatabase:
    db = ServerDatabase(url)
    db.upgrade()
    return db


def _listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


class ThreadServer:
    """uvicorn serving the app in a thread of the test process; ``wrap`` puts an ASGI fault
    injector in front of it; ``app_options`` go to ``create_app`` (e.g. request limits)."""

    def __init__(self, db: ServerDatabase, data_dir: Path, wrap=None, **app_options):
        import uvicorn

        self.db = db
        self.data_dir = Path(data_dir)
        self.app = create_app(db, data_dir, **app_options)
        self.sock = _listening_socket()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        app = wrap(self.app) if wrap else self.app
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="error", access_log=False, lifespan="off",
                                                    timeout_keep_alive=30))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True,
                                       name="test-sync-server")
        self.thread.start()
        wait_until(lambda: self.server.started or not self.thread.is_alive(), what="the server to start")
        assert self.server.started, "the test server did not start"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
        self.sock.close()


class ProcessServer:
    """``dynadesk serve run`` in a child process, on a listening socket the test keeps open:
    a killed server's port stays open, and a restarted one takes the queued connections.
    ``tls`` (certificate, key) serves HTTPS, which ``ca_file`` vouches for. ``release`` runs another
    release's server (a ``tests.previous_release.PreviousRelease``) instead of this checkout's; ``env`` is
    added to the process's environment."""

    def __init__(self, db_url: str, data_dir: Path, *, workers: int = 1, tls: tuple[Path, Path] | None = None,
                 ca_file: Path | None = None, release=None, env: dict[str, str] | None = None):
        self.db_url, self.data_dir, self.workers = db_url, Path(data_dir), workers
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.sock = _listening_socket()
        self.tls, self.ca_file = tls, ca_file
        self.url = f"{'https' if tls else 'http'}://127.0.0.1:{self.sock.getsockname()[1]}"
        self.process: subprocess.Popen | None = None
        self.log = self.data_dir / "server.log"
        self.starts = 0
        self.kills = 0
        self.release, self.extra_env = release, dict(env or {})

    def start(self, *, wait: bool = True) -> None:
        fd = self.sock.fileno()
        if self.release is None:
            command, cwd, env = [sys.executable, "-m", "app"], None, {**os.environ, "PYTHONPATH": str(ROOT)}
        else:
            command, cwd, env = self.release.cli(), self.release.source, self.release.env()
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [*command, "--data-dir", str(self.data_dir), "serve", "run", "--db", self.db_url,
                 "--data", str(self.data_dir), "--fd", str(fd), "--workers", str(self.workers),
                 *(["--certfile", str(self.tls[0]), "--keyfile", str(self.tls[1])] if self.tls else [])],
                pass_fds=(fd,), stdout=log, stderr=subprocess.STDOUT, env={**env, **self.extra_env}, cwd=cwd,
                start_new_session=True)
        self.starts += 1
        if wait:
            self.wait_ready()

    def wait_ready(self, token: str | None = None) -> None:
        import ssl

        verify = ssl.create_default_context(cafile=str(self.ca_file)) if self.ca_file else True

        def up() -> bool:
            if self.process.poll() is not None:
                raise AssertionError(f"the server exited: {self.log.read_text()[-2000:]}")
            try:
                return httpx.get(f"{self.url}/openapi.json", timeout=2, verify=verify).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(up, timeout=60, interval=0.05, what="the server process to answer")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; whatever it had not committed is gone."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=30)
            self.kills += 1

    def halt(self) -> None:
        """Shut the server down as its operator would (SIGTERM); the port stays open for the next start."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()

    def stop(self) -> None:
        self.halt()
        self.sock.close()


@dataclass
class Account:
    id: uuid.UUID
    name: str
    role: str
    team: str
    token: str


def add_account(db: ServerDatabase, name: str, role: str, team: str = "A", person_id: uuid.UUID | None = None) -> Account:
    person, token = store.add_person(db, name, role, team, person_id)
    return Account(person.id, person.display_name, role, team, token)


_PUBLISH_CACHE: dict[str, list] = {}


def basics_records(tmp_root: Path) -> list[dict]:
    """What an owner publishes for the tests: the hate-speech task, one target model, rounds 1 and 2."""
    if "basics" not in _PUBLISH_CACHE:
        from app.core.io.records import dump_model, dump_round

        with Desk(tmp_root / "publisher-template") as desk:
            task = desk.tasks.task("hate_speech")
            model = desk.models.register("test hate model", "hf-torch", MODEL_SHA, task_id=task.id,
                                         label_map={"0": "not hate", "1": "hate"})
            rounds = [desk.tasks.get_or_create_round("hate_speech", n) for n in (1, 2)]
            records = [{"record": "task", "id": str(task.id), "code": task.code, "name": task.name,
                        "definition": task.definition, "fingerprint": task.fingerprint,
                        "created_at": task.created_at.isoformat(), "updated_at": task.updated_at.isoformat(),
                        "revision": 1},
                       dump_model(model, "hate_speech")]
            records += [dump_round(r, "hate_speech", [model.id]) for r in rounds]
        _PUBLISH_CACHE["basics"] = records
    return _PUBLISH_CACHE["basics"]


def publish_basics(url: str, owner: Account, tmp_root: Path, verify=True) -> None:
    response = httpx.post(f"{url}/v1/publish", json={"records": basics_records(tmp_root)},
                          headers={"Authorization": f"Bearer {owner.token}"}, timeout=60, verify=verify)
    assert response.status_code == 200, response.text
    assert {r["status"] for r in response.json()["results"]} <= {"stored", "already_stored"}, response.text


def prepare_desk(path: Path, person: Account) -> Desk:
    """A desk whose profile is ``person``, with round 2 and the test model."""
    desk = Desk(path)
    if desk.people.by_name(person.name) is None:
        desk.people.create(person.name, person.role, person_id=person.id)
    desk.switch_person(person.id)
    task = desk.tasks.task("hate_speech")
    desk.models.register("test hate model", "hf-torch", MODEL_SHA, task_id=task.id,
                         label_map={"0": "not hate", "1": "hate"})
    desk.tasks.get_or_create_round("hate_speech", 2)
    return desk


def fill_outbox(desk: Desk, author_id: uuid.UUID, n: int, *, seed: int, rounds: tuple[int, ...] = (1, 2),
                shared: list[tuple[int, str]] = (), tag: str = "") -> dict[int, int]:
    """Insert ``n`` submitted examples by ``author_id`` with their outbox entries, in one unit of
    work (as ``n`` submissions would leave them). ``shared`` are (round, text) pairs written
    first, identical across desks. Returns how many went into each round."""
    rng = random.Random(seed)
    task = desk.tasks.task("hate_speech")
    round_ids = {n_: desk.tasks.round("hate_speech", n_).id for n_ in rounds}
    model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
    start = utcnow() - timedelta(days=3)
    examples, outputs, facets, entries = [], [], [], []
    per_round = {n_: 0 for n_ in rounds}
    for i in range(n):
        example_id = uuid.uuid4()
        if i < len(shared):
            number, text = shared[i]
        else:
            number = rng.choice(rounds)
            text = f"{tag}{i} " + " ".join(rng.choices(WORDS, k=rng.randint(4, 30)))
        label = "hate" if rng.random() < 0.45 else "not hate"
        predicted = label if rng.random() < 0.6 else ("not hate" if label == "hate" else "hate")
        meta = {"label_explanation": rng.choice(["because it says so", "irony; see the second clause", "slur ✓"])}
        if label == "hate":
            meta["hate_type"] = rng.choice(TYPES)
            meta["target_groups"] = sorted(rng.sample(GROUPS, rng.choice((1, 1, 2))))
            facets.append({"example_id": example_id, "field": "hate_type", "value": meta["hate_type"]})
            facets.extend({"example_id": example_id, "field": "target_groups", "value": g} for g in meta["target_groups"])
        when = start + timedelta(seconds=i * 7, microseconds=rng.randint(0, 999_999))
        p = rng.random()  # the predicted label is the more probable one, as from a real model
        hate = round(0.51 + 0.48 * p if predicted == "hate" else 0.49 - 0.48 * p, 6)
        examples.append({
            "id": example_id, "task_id": task.id, "round_id": round_ids[number], "author_id": author_id,
            "inputs": {"text": text}, "text": text, "true_label": label, "model_fooled": predicted != label,
            "fooled_rule": "mean", "meta": meta, "origin": {"kind": "scratch"}, "status": "submitted",
            "time_spent_ms": rng.randint(1_000, 600_000), "submitted_at": when, "created_at": when, "updated_at": when,
            "sync_state": "pending", "revision": 1,
        })
        outputs.append({"id": uuid.uuid4(), "example_id": example_id, "model_id": model.id, "position": 0,
                        "model_sha256": model.sha256, "label": predicted,
                        "probabilities": {"hate": hate, "not hate": round(1 - hate, 6)}, "latency_ms": rng.uniform(1, 9),
                        "fooled": predicted != label})
        entries.append({"kind": "example", "record_id": example_id, "person_id": author_id, "revision": 1,
                        "state": "pending", "attempts": 0})
        per_round[number] += 1
    with desk.db.write() as session:
        session.execute(insert(Example), examples)
        session.execute(insert(ModelOutputRow), outputs)
        if facets:
            session.execute(insert(ExampleFacet), facets)
        session.execute(insert(OutboxEntry), entries)
    return per_round


def copy_desk(template: Path, target: Path) -> Desk:
    shutil.copytree(template, target)
    return Desk(target)


def open_desks(work: Path, people: list, opened: list) -> None:
    """One desk per person, copied from one prepared template, appended to ``opened`` (closed by the caller)."""
    template = prepare_desk(work / "template", people[0])
    template.close()
    for i, person in enumerate(people):
        desk = copy_desk(work / "template", work / f"desk-{i:02d}")
        if i:
            desk.people.create(person.name, "annotator", person_id=person.id)
        opened.append(desk)


def desk_records(desk: Desk, author_id: uuid.UUID | None = None) -> dict[str, dict]:
    """The desk's submitted examples (``author_id``'s, or all) in comparable wire form."""
    from sqlalchemy.orm import selectinload

    with desk.db.read() as session:
        codes = dict(session.execute(select(Task.id, Task.code)).all())
        numbers = dict(session.execute(select(Round.id, Round.number)).all())
        hashes = dict(session.execute(select(Context.id, Context.content_hash)).all())
        query = select(Example).where(Example.status != "draft").options(selectinload(Example.outputs))
        if author_id is not None:
            query = query.where(Example.author_id == author_id)
        out = {}
        for example in session.scalars(query):
            record = dump_example(example, codes[example.task_id])
            record.update(round_number=numbers[example.round_id], context_hash=hashes.get(example.context_id))
            wire = ExampleRecord.model_validate(record).model_dump(mode="json")
            out[wire["id"]] = store.comparable_example(wire)
    return out


def server_records(db: ServerDatabase, author_id: uuid.UUID | None = None) -> dict[str, dict]:
    with db.read() as session:
        codes = dict(session.execute(select(server_models.Task.id, server_models.Task.code)).all())
        numbers = dict(session.execute(select(server_models.Round.id, server_models.Round.number)).all())
        hashes = dict(session.execute(select(server_models.Context.id, server_models.Context.content_hash)).all())
        query = select(server_models.Example)
        if author_id is not None:
            query = query.where(server_models.Example.author_id == author_id)
        out = {}
        for example in session.scalars(query):
            wire = store.example_wire(example, codes[example.task_id], numbers[example.round_id],
                                      hashes.get(example.context_id)).model_dump(mode="json")
            out[wire["id"]] = store.comparable_example(wire)
    return out


def server_counts(db: ServerDatabase) -> dict[str, int]:
    from sqlalchemy import func

    with db.read() as session:
        return {
            "examples": session.scalar(select(func.count()).select_from(server_models.Example)),
            "validations": session.scalar(select(func.count()).select_from(server_models.Validation)),
            "example changes": session.scalar(select(func.count()).select_from(server_models.Change)
                                              .where(server_models.Change.kind == "example")),
            "people": session.scalar(select(func.count()).select_from(server_models.Person)),
        }


class CuttingProxy:
    """A TCP proxy on loopback that cuts connections part-way through requests and responses.

    Cuts follow a seeded schedule over the chunks that pass in each direction: after a cut, the
    next one comes a random number of chunks later (``spacing``), at a random byte of that chunk. The client sees
    a connection reset mid-request (the server never gets the whole body) or mid-response (the
    server has committed, the client does not know).
    """

    def __init__(self, upstream_port: int, *, seed: int, spacing: dict[str, tuple[int, int]] | None = None):
        self.upstream = ("127.0.0.1", upstream_port)
        self.rng = random.Random(seed)
        # Requests of a large batch span ~10 chunks, responses one or two: space cuts accordingly.
        self.spacing = spacing or {"request": (12, 40), "response": (2, 8)}
        self.lock = threading.Lock()
        self.next_cut = {"request": self._gap("request"), "response": self._gap("response")}
        self.chunks = {"request": 0, "response": 0}
        self.cuts = {"request": 0, "response": 0}
        self.connections = 0
        self.enabled = True
        self.sock = _listening_socket()
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.acceptor = threading.Thread(target=self._accept, daemon=True, name="cutting-proxy")
        self.acceptor.start()

    def _gap(self, direction: str) -> int:
        return self.rng.randint(*self.spacing[direction])

    def _accept(self) -> None:
        self.sock.settimeout(0.2)
        while not self._stop.is_set():
            try:
                client, _ = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            self.connections += 1
            pair = (client, upstream)
            for src, dst, direction in ((client, upstream, "request"), (upstream, client, "response")):
                thread = threading.Thread(target=self._pump, args=(src, dst, direction, pair), daemon=True)
                thread.start()
                self._threads.append(thread)

    def _decide(self, direction: str, size: int) -> int | None:
        """Where to cut this chunk (a byte offset), or None to pass it whole."""
        with self.lock:
            if not self.enabled:
                return None
            self.chunks[direction] += 1
            self.next_cut[direction] -= 1
            if self.next_cut[direction] > 0:
                return None
            self.next_cut[direction] = self._gap(direction)
            self.cuts[direction] += 1
            return self.rng.randint(0, max(0, size - 1))

    def _pump(self, src: socket.socket, dst: socket.socket, direction: str, pair) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                cut = self._decide(direction, len(data))
                if cut is None:
                    dst.sendall(data)
                    continue
                if cut:
                    dst.sendall(data[:cut])
                break
        except OSError:
            pass
        for sock in pair:  # a cut (or an end) closes both sides, as a dropped link would
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def stop(self) -> None:
        self._stop.set()
        self.acceptor.join(timeout=5)
        self.sock.close()


class FlakyResponses:
    """ASGI wrapper: some requests get a 503 before the app sees them; some are fully processed
    (and committed) and then answered with a 500."""

    def __init__(self, app, *, seed: int, p503: float = 0.15, p500: float = 0.15):
        self.app = app
        self.rng = random.Random(seed)
        self.p503, self.p500 = p503, p500
        self.injected = {"503 before": 0, "500 after": 0}
        self.requests = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or not scope["path"].startswith("/v1/") or scope["path"] == "/v1/me":
            return await self.app(scope, receive, send)
        self.requests += 1
        roll = self.rng.random()
        if roll < self.p503:
            self.injected["503 before"] += 1
            return await _send_json(send, 503, {"detail": "injected: service unavailable", "errors": []})
        if roll < self.p503 + self.p500:
            async def swallow(message):
                pass

            await self.app(scope, receive, swallow)
            self.injected["500 after"] += 1
            return await _send_json(send, 500, {"detail": "injected: failed after commit", "errors": []})
        return await self.app(scope, receive, send)


class DuplicateDeliveries:
    """ASGI wrapper: some pushes are delivered to the app twice at the same moment (as a
    retransmitting network or a double-clicking client would); the client gets one answer."""

    def __init__(self, app, *, seed: int, p: float = 0.4):
        self.app = app
        self.rng = random.Random(seed)
        self.p = p
        self.duplicated = 0

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST" or self.rng.random() >= self.p:
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        body = b"".join(chunks)
        captured: list[list] = [[], []]

        def replay():
            sent = False

            async def receive_copy():
                nonlocal sent
                if not sent:
                    sent = True
                    return {"type": "http.request", "body": body, "more_body": False}
                await asyncio.sleep(3600)  # no disconnect while the copy runs

            return receive_copy

        def capture(index):
            async def send_copy(message):
                captured[index].append(message)

            return send_copy

        copies = [self.app({**scope, "state": {}}, replay(), capture(i)) for i in range(2)]
        await asyncio.gather(*copies)
        self.duplicated += 1
        for message in captured[0]:
            await send(message)


async def _send_json(send, status: int, body: dict) -> None:
    payload = json.dumps(body).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]})
    await send({"type": "http.response.body", "body": payload})


@dataclass
class PushOutcome:
    runs: int = 0
    failures: list[str] = field(default_factory=list)
    retries: int = 0
    seconds: float = 0.0


def sync_until_done(client, desk: Desk, person_id: uuid.UUID, *, max_runs: int = 30, handle=None) -> PushOutcome:
    """Run syncs until the outbox is empty (bounded), as the app's timer would."""
    from sync.local import local_status
    from sync.transport import SyncError

    outcome = PushOutcome()
    started = time.perf_counter()
    for _ in range(max_runs):
        outcome.runs += 1
        try:
            client.run(handle, fetch_models=False)
        except SyncError as exc:
            outcome.failures.append(f"{exc.__class__.__name__}: {exc}")
            continue
        status = local_status(desk.db, person_id)
        if status.pending == 0:
            break
    outcome.seconds = time.perf_counter() - started
    outcome.retries = client.retries
    return outcome
