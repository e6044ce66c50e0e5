"""The sync client: push the outbox, pull changes, fetch target model files. Qt-free.

    with SyncClient(desk, "http://127.0.0.1:8765", token) as client:
        report = client.run(SyncHandle(on_progress=lambda phase, done, total: ...))

Long work takes a :class:`SyncHandle` (progress and cancel, DESIGN.md §4.3); the GUI runs
``run`` on a worker thread and cancels through the handle.

Failure handling:
- Offline is a normal state: when the server cannot be reached at all, ``run`` raises
  :class:`Offline` after ``RetryPolicy.connect_attempts`` quick tries and changes nothing.
- Once the server has answered, every request is retried with exponential backoff and jitter
  on connection failures, timeouts and 500/502/503/504, up to ``RetryPolicy.attempts``.
  Retrying a push is safe: the server answers a resent record with ``already_stored``.
- A 429 (the server's request limit) is the server pacing this desk, not a failure: the client
  waits as long as ``Retry-After`` says (at most ``RetryPolicy.max_pace`` at a time and
  ``RetryPolicy.max_paced`` in all for one request) and asks again, using up no attempt.
- HTTPS is verified against the usual authorities (or ``SSL_CERT_FILE``) and, when the desk's
  settings name one, the team's own authority (``server_ca_file``).
- Nothing is kept in memory between batches: each pushed batch is settled in the outbox, and
  each pulled page is stored together with the cursor after it, in one unit of work. A sync
  that stops (cancelled, interrupted, the machine switched off) resumes where it stopped.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import random
import shutil
import ssl
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Callable, Sequence

import httpx
from pydantic import ValidationError
from sqlalchemy import select

from app import __version__, paths
from app.domain import ModelFormat, Role, RoundStatus, utcnow
from app.errors import DynadeskError
from app.io.records import dump_context, dump_model, dump_round
from app.storage import outbox
from app.storage.models import Context, ModelRecord, Person, Round, RoundModel, Task
from local_models.files import file_sha256
from sync import local
from sync.protocol import (
    API,
    MAX_PUSH_RECORDS,
    PROTOCOL_VERSION,
    ChangesResponse,
    ErrorBody,
    Me,
    ModelRecordWire,
    PushResponse,
    RecordError,
    manifest_sha256,
)

log = logging.getLogger(__name__)

RETRY_STATUS = {500, 502, 503, 504}  # 429 is pacing, not a failure: see SyncClient._pace
CHUNK = 1 << 20


class SyncError(DynadeskError):
    """A sync that could not finish; what was done before it stays done."""


class Offline(SyncError):
    """The server cannot be reached. Work stays in the outbox; nothing is wrong with it."""


class AuthError(SyncError):
    pass


class Refused(SyncError):
    pass


class Interrupted(SyncError):
    """The server stopped answering part-way; the next sync resumes where this one stopped."""


class Cancelled(SyncError):
    pass


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8  # per request, once the server has answered
    first_delay: float = 0.25  # seconds; doubles each time, with jitter
    max_delay: float = 10.0
    connect_attempts: int = 2  # before the first answer of a run: how soon "offline" is declared
    timeout: float = 120.0  # a push of a large batch to a busy server may take a while
    connect_timeout: float = 5.0
    max_pace: float = 60.0  # the longest wait a 429's Retry-After gets at a time
    max_paced: float = 600.0  # and in all, for one request, before the sync stops (and resumes next time)

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        if retry_after and retry_after.isdigit():
            return min(self.max_delay, float(retry_after))
        base = min(self.max_delay, self.first_delay * 2 ** (attempt - 1))
        return base * random.uniform(0.5, 1.0)  # jitter: many desks never retry in lockstep


class SyncHandle:
    """Progress and cancellation for one sync. ``on_progress(phase, done, total)`` is called
    from the thread running the sync."""

    def __init__(self, on_progress: Callable[[str, int, int], None] | None = None):
        self._cancelled = threading.Event()
        self._on_progress = on_progress

    def cancel(self) -> None:
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def check(self) -> None:
        if self._cancelled.is_set():
            raise Cancelled("The sync was cancelled; it resumes where it stopped next time.")

    def progress(self, phase: str, done: int, total: int) -> None:
        if self._on_progress is not None:
            self._on_progress(phase, done, total)

    def sleep(self, seconds: float) -> None:
        if self._cancelled.wait(seconds):
            self.check()


@dataclass
class SyncReport:
    started: datetime = field(default_factory=utcnow)
    finished: datetime | None = None
    pushed: int = 0
    already_stored: int = 0
    conflicts: int = 0
    rejected: int = 0
    deferred: int = 0
    pulled: int = 0  # records added or updated on this desk
    pages: int = 0
    retries: int = 0
    paced: int = 0  # times the server's request limit asked this desk to wait (429); not failures
    models: list[str] = field(default_factory=list)
    published: list[str] = field(default_factory=list)  # what an owner's first sync published (publish_missing)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        parts = [f"Pushed {self.pushed} new record(s)"]
        if self.already_stored:
            parts.append(f"{self.already_stored} already on the server")
        parts.append(f"pulled {self.pulled}")
        text = ", ".join(parts) + "."
        if self.conflicts or self.rejected:
            text += f" {self.conflicts} conflict(s) and {self.rejected} refused record(s) need attention."
        if self.deferred:
            text += f" {self.deferred} wait for something the server does not have yet."
        if self.models:
            text += f" Downloaded {', '.join(self.models)}."
        if self.published:
            text += f" Published {'; '.join(self.published)} (this owner's first sync with the server)."
        return text


class SyncClient:
    def __init__(self, desk, server_url: str, token: str, *, batch_size: int = 500, page_size: int = 500,
                 policy: RetryPolicy | None = None, transport: httpx.BaseTransport | None = None,
                 ca_file: str | Path | None = None):
        if not server_url or not server_url.startswith(("http://", "https://")):
            raise SyncError(f"The server URL must start with http:// or https:// (got '{server_url}').")
        if not token:
            raise AuthError("No sync token is set; enter the token your team's owner gave you.")
        self.desk = desk
        self.db = desk.db
        self.url = server_url.rstrip("/")
        self.batch_size = max(1, min(batch_size, MAX_PUSH_RECORDS - 100))
        self.page_size = page_size
        self.policy = policy or RetryPolicy()
        ca_file = ca_file if ca_file is not None else desk.settings.server_ca_file
        self.http = httpx.Client(
            base_url=self.url, transport=transport, verify=tls_context(ca_file),
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"dynadesk/{__version__}"},
            timeout=httpx.Timeout(self.policy.timeout, connect=self.policy.connect_timeout),
        )
        self._answered = False  # has the server answered in this client's life?
        self.retries = 0  # over this client's life, for reports and benchmarks
        self.paced = 0  # 429s waited out, over this client's life

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> "SyncClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # --- requests with retries ---------------------------------------------------------------

    def _call(self, method: str, path: str, handle: SyncHandle, *, body: object = None, params: dict | None = None,
              content=None, headers: dict | None = None, report: SyncReport | None = None) -> httpx.Response:
        if body is not None:
            content = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
            headers = {**(headers or {}), "Content-Type": "application/json"}
        last = ""
        attempt = 0
        paced = 0.0  # seconds waited on the server's request limit for this request
        while True:
            handle.check()
            retry_after = None
            try:
                response = self.http.request(method, path, content=content, params=params, headers=headers)
            except httpx.TransportError as exc:
                attempt += 1
                untrusted = _certificate_problem(exc)
                if untrusted:
                    raise SyncError(untrusted) from exc
                last = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
                if not self._answered and (isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                                           and attempt >= self.policy.connect_attempts):
                    raise Offline(f"The sync server at {self.url} cannot be reached ({last}). "
                                  "Your work stays queued and goes out at the next sync.") from exc
            else:
                self._answered = True
                if response.status_code == 429:
                    paced += self._pace(response, handle, report, paced)
                    continue
                if response.status_code not in RETRY_STATUS:
                    if response.status_code == 401:
                        raise AuthError(f"The server refused the sync token: {_detail(response)} "
                                        "Check the token in the sync settings.")
                    return response
                attempt += 1
                last = f"HTTP {response.status_code}: {_detail(response)}"
                retry_after = response.headers.get("Retry-After")
            if attempt >= self.policy.attempts:
                raise Interrupted(f"The sync stopped after {attempt} attempts ({last}); "
                                  "the next sync resumes where this one stopped.")
            self.retries += 1
            if report is not None:
                report.retries += 1
            log.info("%s %s failed (%s); retrying", method, path, last)
            handle.sleep(self.policy.delay(attempt, retry_after))

    def _pace(self, response: httpx.Response, handle: SyncHandle, report: SyncReport | None, paced: float) -> float:
        """Wait as the server's request limit asks (429 + Retry-After); returns the seconds waited."""
        seconds = max(0.25, min(self.policy.max_pace, _retry_after_seconds(response.headers.get("Retry-After"))))
        if paced + seconds > self.policy.max_paced:
            raise Interrupted(f"The server asked this desk to slow down for over {self.policy.max_paced:.0f} s "
                              "(its request limit); the next sync resumes where this one stopped.")
        self.paced += 1
        if report is not None:
            report.paced += 1
        log.info("the server's request limit asks to wait %.1f s", seconds)
        handle.sleep(seconds * random.uniform(1.0, 1.1))  # desks paced together do not come back in lockstep
        return seconds

    def me(self, handle: SyncHandle | None = None, report: SyncReport | None = None) -> Me:
        response = self._call("GET", f"{API}/me", handle or SyncHandle(), report=report)
        _expect(response, 200)
        me = Me.model_validate_json(response.content)
        if me.protocol != PROTOCOL_VERSION:
            raise SyncError(f"The server speaks sync protocol {me.protocol}; this Dynadesk speaks {PROTOCOL_VERSION}. "
                            "Update whichever is older.")
        return me

    # --- a whole sync ---------------------------------------------------------------------------

    def run(self, handle: SyncHandle | None = None, *, fetch_models: bool = True) -> SyncReport:
        """Push the outbox, pull changes, download the target models of open rounds."""
        self.db.ensure_intact()  # a damaged desk database must not take a pull's rows
        handle = handle or SyncHandle()
        report = SyncReport()
        try:
            me = self.me(handle, report)
            self.adopt_identity(me)
            self.push(me, handle, report)
            on_server = self.pull(me, handle, report)
            if on_server is not None and me.role == Role.OWNER:
                self.publish_missing(on_server, handle, report)
            if self.unify_models(handle, report) or report.published:
                self.push(me, handle, report)  # examples re-pointed to the server's model, or now published, go now
            if fetch_models:
                self.fetch_models(handle, report)
        except (Offline, Cancelled):
            raise
        except SyncError as exc:
            local.note(self.db, error=str(exc))
            raise
        report.finished = utcnow()
        local.note(self.db, success=report.finished)
        return report

    def adopt_identity(self, me: Me) -> None:
        """Make sure this desk has the token holder's profile (the id the server knows them by)."""
        with self.db.write() as session:
            person = session.get(Person, me.id)
            if person is None:
                session.add(Person(id=me.id, display_name=me.display_name, role=me.role.value))
            elif person.role != me.role.value:
                person.role = me.role.value  # the server decides what this person may do
            local.set_meta(session, local.PERSON, str(me.id))

    # --- push -------------------------------------------------------------------------------------

    def push(self, me: Me, handle: SyncHandle, report: SyncReport) -> None:
        total = local.local_status(self.db, me.id).pending
        done, after, size, refusals = 0, 0, self.batch_size, 0
        handle.progress("push", 0, total)
        # The next batch is read from the outbox while the server works on this one.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dynadesk-sync-read") as reader:
            upcoming = None
            while True:
                handle.check()
                batch = upcoming.result() if upcoming is not None else \
                    local.pending_batch(self.db, me.id, after=after, limit=size)
                upcoming = None
                if not batch.entries:
                    if batch.missing or batch.unfit:
                        settled = local.settle(self.db, batch, [])
                        report.rejected += settled.rejected
                        report.problems += settled.problems
                        after = batch.last_seq
                        continue
                    break
                upcoming = reader.submit(local.pending_batch, self.db, me.id, after=batch.last_seq, limit=size)
                response = self._call("POST", f"{API}/push", handle, body={"records": batch.records}, report=report)
                if response.status_code in (403, 413, 422):
                    upcoming.result()
                    upcoming = None  # this batch goes again (smaller, or without the records named)
                    if response.status_code == 413 and len(batch.entries) > 1:
                        size = max(1, len(batch.entries) // 2)
                        continue
                    errors = _errors(response)
                    named = [e for e in errors.errors if e.index is not None and e.index >= batch.people]
                    if response.status_code == 413:  # a single record larger than a request may be
                        named = [_record_error(batch.people, "larger than the server accepts in one request")]
                    refusals += 1
                    if not named or refusals > 50:
                        raise Refused(f"The server refused the push: {errors.detail}")
                    settled = local.settle(self.db, batch, [], refused=named,
                                           refused_as="not allowed" if response.status_code == 403 else "rejected")
                    report.rejected += settled.rejected
                    report.problems += settled.problems
                    continue
                _expect(response, 200)
                answer = PushResponse.model_validate_json(response.content)
                settled = local.settle(self.db, batch, answer.results, received_at=answer.server_time)
                refusals = 0
                report.pushed += settled.stored
                report.already_stored += settled.already
                report.conflicts += settled.conflicts
                report.rejected += settled.rejected
                report.deferred += settled.deferred
                report.problems += settled.problems
                after = batch.last_seq
                done += len(batch.entries)
                handle.progress("push", done, max(total, done))

    # --- pull -------------------------------------------------------------------------------------

    def pull(self, me: Me, handle: SyncHandle, report: SyncReport) -> set[tuple[str, int]] | None:
        """Pull the change feed. On the first pull from this server (the whole feed), returns the
        rounds the server has, as (task code, number)."""
        key = local.cursor_key(self.url, me.id)
        with self.db.read() as session:
            cursor = int(local.get_meta(session, key) or 0)
        on_server = set() if cursor == 0 else None
        done = 0
        while True:
            handle.check()
            response = self._call("GET", f"{API}/changes", handle, params={"since": cursor, "limit": self.page_size},
                                  report=report)
            _expect(response, 200)
            page = ChangesResponse.model_validate_json(response.content)
            if on_server is not None:
                on_server.update((r.task, r.number) for r in page.records if r.record == "round")
            if page.records or page.cursor != cursor:
                pulled = local.apply_page(self.db, page.records, page.referenced, key=key, cursor=page.cursor)
                report.pulled += sum(pulled.added.values()) + pulled.updated
                report.pages += 1
                report.warnings += [w for w in pulled.warnings if w not in report.warnings]
                report.problems += pulled.skipped
            done += len(page.records) - len(page.referenced)
            handle.progress("pull", done, done + page.remaining)
            if not page.more or page.cursor == cursor:
                break
            cursor = page.cursor
        return on_server

    def publish_missing(self, on_server: set[tuple[str, int]], handle: SyncHandle, report: SyncReport) -> None:
        """An owner's first sync with a server publishes this desk's open rounds that have target
        models and that the server lacks (for a fresh team: the bundled task, round 1 and the
        default model), so that nobody's work waits for a hidden `sync publish`. Later rounds are
        published on purpose, with `dynadesk sync publish`."""
        with self.db.read() as session:
            rows = session.execute(select(Task.code, Round.number).join(Round, Round.task_id == Task.id)
                                   .where(Round.status == RoundStatus.OPEN.value,
                                          select(RoundModel.model_id).where(RoundModel.round_id == Round.id).exists())
                                   .order_by(Task.code, Round.number)).all()
        missing: dict[str, list[int]] = {}
        for code, number in rows:
            if (code, number) not in on_server:
                missing.setdefault(code, []).append(number)
        for code, numbers in missing.items():
            try:
                response = self.publish(code, numbers, handle=handle)
            except (Offline, Cancelled):
                raise
            except SyncError as exc:
                report.warnings.append(f"could not publish '{code}' (dynadesk sync publish {code}): {exc}")
                continue
            refused = [r for r in response.results if r.status in ("rejected", "conflict", "deferred")]
            report.warnings += [f"publishing '{code}': {r.record} {r.id}: {r.status}: {r.reason or ''}"
                                for r in refused]
            report.published.append(f"'{code}' round {', '.join(map(str, numbers))}")

    # --- one model, one identity --------------------------------------------------------------------

    def unify_models(self, handle: SyncHandle, report: SyncReport) -> int:
        """Records of one model under two checksums (exports by older versions differed by the
        exporting desk's paths) become one: the checksum the server knows wins, and the desk's
        predictions move to it, so examples written against the other are no longer put off.
        Returns how many records were merged."""
        from app.services.models import export_twin_key, merge_model_records

        with self.db.read() as session:
            groups: dict[tuple, list[ModelRecord]] = {}
            for record in session.scalars(select(ModelRecord).order_by(ModelRecord.created_at)):
                key = export_twin_key(record)
                if key is not None:
                    groups.setdefault(key, []).append(record)
            targets = set(session.scalars(select(RoundModel.model_id)))
        merged = 0
        for records in (g for g in groups.values() if len(g) > 1):
            known = [r for r in records
                     if self._call("GET", f"{API}/models/{r.sha256}", handle, report=report).status_code == 200]
            known.sort(key=lambda r: r.id not in targets)  # the one the server's rounds name, when both are known
            keep = (known or [r for r in records if r.path and Path(r.path).exists()] or records)[0]
            with self.db.write() as session:
                kept = session.get(ModelRecord, keep.id)
                for twin in records:
                    if twin.id != keep.id:
                        merge_model_records(session, kept, session.get(ModelRecord, twin.id))
                        merged += 1
            log.info("%s: %d other checksum(s) of it now name %s…", keep.name, len(records) - 1, keep.sha256[:12])
        return merged

    # --- model files ------------------------------------------------------------------------------

    def fetch_models(self, handle: SyncHandle, report: SyncReport) -> None:
        """Download the files of open rounds' target models that this desk does not have."""
        with self.db.read() as session:
            wanted = list(session.scalars(
                select(ModelRecord).join(RoundModel, RoundModel.model_id == ModelRecord.id)
                .join(Round, Round.id == RoundModel.round_id)
                .where(Round.status == RoundStatus.OPEN.value,
                       ModelRecord.format.in_([ModelFormat.HF_TORCH.value, ModelFormat.ONNX.value])).distinct()))
        for record in wanted:
            if record.path and Path(record.path).exists():
                continue
            response = self._call("GET", f"{API}/models/{record.sha256}", handle, report=report)
            if response.status_code == 404:
                continue
            _expect(response, 200)
            manifest = ModelRecordWire.model_validate_json(response.content)
            if manifest.files:
                self.download_model(record, manifest, handle, report)

    def download_model(self, record: ModelRecord, manifest: ModelRecordWire, handle: SyncHandle,
                       report: SyncReport) -> Path:
        """Fetch a model's files into the model cache, each checked against its sha256 and the whole
        against the model's checksum, and point the desk's record at them."""
        files = manifest.files or []
        if manifest_sha256((f.name, f.sha256) for f in files) != record.sha256:
            raise SyncError(f"The server's file list for {record.name} does not add up to its checksum; "
                            "nothing was downloaded.")
        cache = paths.models_cache_dir(self.desk.root)
        final = cache / f"sync-{record.sha256[:16]}"
        staging = cache / f".sync-{record.sha256[:16]}.partial"
        if not (final / ".complete").is_file():
            staging.mkdir(parents=True, exist_ok=True)
            total, done = sum(f.size for f in files), 0
            for f in files:
                target = staging / _local_name(f.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not (target.is_file() and target.stat().st_size == f.size and file_sha256(target) == f.sha256):
                    self._download_blob(f.sha256, target, handle, report)  # resumes file by file
                done += f.size
                handle.progress("models", done, total)
            (staging / ".complete").write_text(record.sha256)
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
        tokenizer = final / "tokenizer"
        with self.db.write() as session:
            row = session.get(ModelRecord, record.id)
            provenance = dict(row.provenance or {})
            runtime = dict(provenance.get("runtime") or {})
            runtime["tokenizer_dir"] = str(tokenizer) if tokenizer.is_dir() else None
            provenance["runtime"] = runtime
            row.path, row.provenance = str(final), provenance
        report.models.append(record.name)
        return final

    def _download_blob(self, sha256: str, target: Path, handle: SyncHandle, report: SyncReport) -> None:
        part = target.with_name(target.name + ".part")
        last = ""
        attempt, paced = 0, 0.0
        while attempt < self.policy.attempts:
            handle.check()
            digest = hashlib.sha256()
            limited = None
            try:
                with self.http.stream("GET", f"{API}/blobs/{sha256}") as response:
                    if response.status_code == 404:
                        raise SyncError(f"The server has no file {sha256}; ask an owner to publish the model again.")
                    if response.status_code == 429:
                        limited = response
                    elif response.status_code in RETRY_STATUS:
                        last = f"HTTP {response.status_code}"
                    else:
                        _expect(response, 200)
                        with open(part, "wb") as out:
                            for chunk in response.iter_bytes(CHUNK):
                                handle.check()
                                digest.update(chunk)
                                out.write(chunk)
                            out.flush()
                            os.fsync(out.fileno())
                        if digest.hexdigest() == sha256:
                            os.replace(part, target)
                            return
                        last = "the file arrived damaged (its sha256 does not match)"
            except httpx.TransportError as exc:
                last = f"{exc.__class__.__name__}: {exc}"
            if limited is not None:
                paced += self._pace(limited, handle, report, paced)
                continue
            attempt += 1
            part.unlink(missing_ok=True)
            self.retries += 1
            report.retries += 1
            handle.sleep(self.policy.delay(attempt))
        raise Interrupted(f"A model file could not be downloaded ({last}); the next sync tries again.")

    # --- owners: publishing ------------------------------------------------------------------------

    def publish(self, task_code: str, round_numbers: Sequence[int] | None = None, *, handle: SyncHandle | None = None,
                with_files: bool = True) -> PushResponse:
        """Publish a task, its rounds (all, or those numbered), their contexts and target models."""
        handle = handle or SyncHandle()
        with self.db.read() as session:
            task = session.scalar(select(Task).where(Task.code == task_code))
            if task is None:
                raise SyncError(f"There is no task '{task_code}' on this desk.")
            query = select(Round).where(Round.task_id == task.id).order_by(Round.number)
            if round_numbers:
                query = query.where(Round.number.in_(list(round_numbers)))
            rounds = list(session.scalars(query))
            if round_numbers and len(rounds) != len(set(round_numbers)):
                missing = sorted(set(round_numbers) - {r.number for r in rounds})
                raise SyncError(f"Task '{task_code}' has no round(s) {missing} on this desk.")
            targets = {r.id: list(session.scalars(select(RoundModel.model_id).where(RoundModel.round_id == r.id)
                                                  .order_by(RoundModel.position))) for r in rounds}
            models = {m.id: m for m in session.scalars(select(ModelRecord).where(
                ModelRecord.id.in_({m for ids in targets.values() for m in ids})))}
            contexts = list(session.scalars(select(Context).where(Context.round_id.in_([r.id for r in rounds]))
                                            .order_by(Context.created_at)))
            numbers = {r.id: r.number for r in rounds}
        # Checked before any request: a record no server takes would only fail the whole publish there.
        unfit = local.unfit_published(task, models.values(), rounds, contexts, numbers)
        if unfit:
            raise SyncError(f"Nothing was published: {len(unfit)} record(s) of task '{task_code}' exceed what a "
                            f"server takes: {'; '.join(unfit[:10])}{'; ...' if len(unfit) > 10 else ''}.")
        me = self.me(handle)
        if me.role != Role.OWNER:
            raise Refused(f"Only owners publish; {me.display_name} is a {me.role.value} on this server.")
        head = [{"record": "task", "id": str(task.id), "code": task.code, "name": task.name,
                 "definition": task.definition, "fingerprint": task.fingerprint, "created_at": task.created_at.isoformat(),
                 "updated_at": task.updated_at.isoformat(), "revision": task.revision}]
        for model in models.values():
            record = dump_model(model, task_code if model.task_id == task.id else None)
            if with_files and model.format in (ModelFormat.HF_TORCH.value, ModelFormat.ONNX.value) \
                    and model.path and Path(model.path).exists():
                record["files"] = self._upload_model_files(model, handle)
            head.append(record)
        head += [dump_round(r, task_code, targets[r.id]) for r in rounds]
        tail = [{**dump_context(c), "task": task_code, "round_number": numbers[c.round_id]} for c in contexts]
        results = []
        chunks = [head] + [tail[i:i + 1000] for i in range(0, len(tail), 1000)]
        offset = 0
        for n, chunk in enumerate(chunks):
            response = self._call("POST", f"{API}/publish", handle, body={"records": chunk})
            if response.status_code != 200:
                raise Refused(f"The server refused to publish: {_errors(response).detail}")
            for result in PushResponse.model_validate_json(response.content).results:
                results.append(result.model_copy(update={"index": result.index + offset}))
            offset += len(chunk)
            handle.progress("publish", n + 1, len(chunks))
        return PushResponse(results=results, server_time=utcnow())

    def _upload_model_files(self, model: ModelRecord, handle: SyncHandle) -> list[dict]:
        from local_models.engine import backend_named  # heavy; only owners publishing models need it

        runtime = (model.provenance or {}).get("runtime") or {}
        tokenizer = runtime.get("tokenizer_dir")
        named = backend_named(model.format).model_files(Path(model.path), Path(tokenizer) if tokenizer else None)
        files = [{"name": name, "sha256": file_sha256(path), "size": path.stat().st_size} for name, path in named]
        if manifest_sha256((f["name"], f["sha256"]) for f in files) != model.sha256:
            raise SyncError(f"The files of {model.name} changed since it was registered; register it again.")
        for (name, path), f in zip(named, files):
            head = self._call("HEAD", f"{API}/blobs/{f['sha256']}", handle)
            if head.status_code == 200:
                continue
            with open(path, "rb") as stream:
                response = self._call("PUT", f"{API}/blobs/{f['sha256']}", handle, content=stream.read(),
                                      headers={"Content-Type": "application/octet-stream"})
            if response.status_code not in (200, 201):
                raise Refused(f"The server refused {name} of {model.name}: {_errors(response).detail}")
        return files

    # --- imported data sets -----------------------------------------------------------------------

    def queue_imported(self, *, source: str | None = None, task_code: str | None = None) -> int:
        """Queue an imported data set for the next push (owners only: it goes out under its own authors)."""
        me = self.me()
        if me.role != Role.OWNER:
            raise Refused("Only owners share imported data sets (they go out under the data set's own authors).")
        self.adopt_identity(me)
        with self.db.write() as session:
            task_id = None
            if task_code:
                task = session.scalar(select(Task).where(Task.code == task_code))
                if task is None:
                    raise SyncError(f"There is no task '{task_code}' on this desk.")
                task_id = task.id
            return outbox.queue_local(session, me.id, source=source, task_id=task_id)

    # --- lead views --------------------------------------------------------------------------------

    def get_json(self, path: str, params: dict | None = None) -> dict:
        response = self._call("GET", f"{API}{path}", SyncHandle(), params=params)
        if response.status_code == 403:
            raise Refused(_errors(response).detail)
        _expect(response, 200)
        return response.json()


# --- helpers ------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or address, IPv6 with or without brackets) is this machine."""
    host = host.strip().strip("[]").lower().rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_in_clear(url: str) -> bool:
    """Whether a sync URL would carry the bearer token unencrypted over a network: plain
    ``http://`` to anything but this machine."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return False  # the URL's own check says what is wrong with it
    return parsed.scheme == "http" and not is_loopback(parsed.host)


def refuse_token_in_clear(url: str) -> None:
    """A clear refusal for a URL that would carry the token unencrypted over a network."""
    if token_in_clear(url):
        raise SyncError(f"{url} is plain http:// to another machine: every sync would send your token across the "
                        "network unencrypted, and anyone on the way could copy it and sync as you. Use the "
                        "server's https:// address (docs/sync.md shows how to serve HTTPS).")


def tls_context(ca_file: str | Path | None) -> ssl.SSLContext | bool:
    """What HTTPS connections trust: the usual authorities (or ``SSL_CERT_FILE``), and also the
    authority in ``ca_file`` when one is given."""
    if not ca_file:
        return True
    context = httpx.create_ssl_context()
    try:
        context.load_verify_locations(cafile=str(ca_file))
    except ssl.SSLError:  # (an OSError too: first)
        raise SyncError(f"The file {ca_file} is not a PEM certificate, so it cannot be the team's certificate "
                        "authority. Give the authority's certificate (-----BEGIN CERTIFICATE-----).") from None
    except OSError as exc:
        raise SyncError(f"The certificate authority file {ca_file} cannot be read ({exc.strerror or exc}). "
                        "Fix it with `dynadesk sync configure --ca-file FILE` (or --ca-file '' for none).") from None
    return context


def _certificate_problem(exc: BaseException) -> str | None:
    """A clear sentence when a connection failed because the server's certificate is not trusted."""
    seen = exc
    while seen is not None:
        if isinstance(seen, ssl.SSLCertVerificationError):
            reason = seen.verify_message or seen.reason or "not trusted"
            return (f"The sync server's certificate is not trusted ({reason}). If your team runs its own "
                    "certificate authority, give its certificate with `dynadesk sync configure --ca-file FILE`.")
        seen = seen.__cause__ or seen.__context__
    return None


def _retry_after_seconds(value: str | None) -> float:
    """``Retry-After`` as seconds: a number of seconds or an HTTP date; 1 s when absent or unreadable."""
    if value:
        value = value.strip()
        if value.isdigit():
            return max(0.0, float(value))
        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return 1.0
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        return max(0.0, (when - datetime.now(timezone.utc)).total_seconds())
    return 1.0


def _local_name(name: str) -> str:
    """Where a file named in a model's checksum goes in its folder: model files at the top,
    tokenizer files in ``tokenizer/`` (passed as the tokenizer folder)."""
    role, _, base = name.partition("/")
    return base if role == "model" else f"tokenizer/{base}"


def _detail(response: httpx.Response) -> str:
    try:
        return ErrorBody.model_validate_json(response.content).detail
    except (ValidationError, ValueError):
        return response.text[:200] or response.reason_phrase


def _errors(response: httpx.Response) -> ErrorBody:
    try:
        return ErrorBody.model_validate_json(response.content)
    except (ValidationError, ValueError):
        return ErrorBody(detail=f"HTTP {response.status_code}: {response.text[:200]}")


def _record_error(index: int, reason: str) -> RecordError:
    return RecordError(index=index, reason=reason)


def _expect(response: httpx.Response, status: int) -> None:
    if response.status_code != status:
        raise Refused(f"The server answered HTTP {response.status_code}: {_detail(response)}")


def new_client(desk, tokens, **kwargs) -> SyncClient:
    """A client for this desk's configured server, or a clear error when sync is not set up."""
    url = desk.settings.server_url
    if not url:
        raise SyncError("No sync server is set. Set one with `dynadesk sync configure --url URL` "
                        "or in Sync settings.")
    return SyncClient(desk, url, tokens.get(url) or "", **kwargs)


def person_id(desk) -> uuid.UUID | None:
    """The server identity this desk last synced as, if any."""
    value = desk.db.get_meta(local.PERSON)
    return uuid.UUID(value) if value else None
