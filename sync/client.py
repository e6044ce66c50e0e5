"""The sync client: push the outbox, pull changes, fetch target model files. Qt-free.

    clients = ClientFactory(desk)                # the one owner of the desk's tokens
    with clients.configured() as client:
        report = client.run(SyncHandle(on_progress=lambda phase, done, total: ...))

Features that talk to the server take a client and use its public ``request`` and ``download_blob``
(``sync.transport.Connection``), whose errors come from one map (``sync.transport.refusal``).

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

import uuid
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import select

from app.core.domain import ModelFormat, Role, RoundStatus, utcnow
from app.core.io.records import dump_context, dump_model, dump_round
from app.core.storage import outbox
from app.core.storage.models import Context, ModelRecord, Person, Round, RoundModel, Task
from sync import local
from sync.gradient_forms import published_gradient_forms
from sync.incoming import apply_page
from sync.model_files import ModelFiles
from sync.negotiation import release_of, shape_record
from sync.outgoing import pending_batch, settle, unfit_published
from sync.protocol import ChangesResponse, Me, PushResponse, RecordError, RecordResult, StorageUse, form_parents
from sync.transport import (
    Cancelled,
    NotAllowed,
    Offline,
    Refused,
    SyncError,
    SyncHandle,
    SyncReport,
    error_body,
    refusal,
)

if TYPE_CHECKING:
    from app.core.desk import Desk
    from sync.tokens import TokenStore


class SyncClient(ModelFiles):
    """Push the outbox, pull changes, publish; model files come from ``ModelFiles``, HTTP from ``Connection``."""

    def run(self, handle: SyncHandle | None = None, *, fetch_models: bool = True) -> SyncReport:
        """Push the outbox, pull changes, download the target models of open rounds."""
        self.db.ensure_intact()  # a damaged desk database must not take a pull's rows
        # what the run stores is told once, at its end: a view never sees a round without its model's files
        with self.db.changes.batch():
            return self._run(handle or SyncHandle(), fetch_models)

    def _run(self, handle: SyncHandle, fetch_models: bool) -> SyncReport:
        report = SyncReport()
        try:
            me = self.me(handle, report)
            self.adopt_identity(me)
            self.push(me, handle, report)
            on_server = self.pull(me, handle, report)
            if on_server is not None and me.role == Role.OWNER:
                self.publish_missing(on_server, handle, report)
            if self.unify_models(handle, report) or report.published:
                report.deferred = 0  # the push goes over every waiting record again and counts what still waits
                self.push(me, handle, report)  # examples re-pointed to the server's model, or now published, go now
            self.pull_policies(handle, report)
            if me.role in (Role.LEAD, Role.OWNER):
                self.pull_storage(handle, report)
            self.sync_wellbeing(me, handle, report)
            if fetch_models:
                self.fetch_models(handle, report)
            if self.recheck(me, handle, report):
                report.deferred = 0  # the push goes over every waiting record again and counts what still waits
                self.push(me, handle, report)
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

    def push(self, me: Me, handle: SyncHandle, report: SyncReport) -> None:
        total = local.local_status(self.db, me.id).pending
        done, after, size, refusals = 0, 0, self.batch_size, 0
        waiting: set[int] = set()  # outbox entries the server cannot take until it is upgraded
        handle.progress("push", 0, total)
        # The next batch is read from the outbox while the server works on this one.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="dynadesk-sync-read") as reader:
            upcoming = None
            while True:
                handle.check()
                batch = upcoming.result() if upcoming is not None else \
                    pending_batch(self.db, me.id, after=after, limit=size, protocol=self.protocol)
                upcoming = None
                waiting.update(e.seq for e in batch.waiting)
                if not batch.entries:
                    if batch.missing or batch.unfit:
                        settled = settle(self.db, batch, [])
                        report.rejected += settled.rejected
                        report.problems += settled.problems
                    if batch.missing or batch.unfit or batch.waiting:
                        after = batch.last_seq
                        continue
                    self._note_waiting(report, len(waiting))
                    break
                upcoming = reader.submit(pending_batch, self.db, me.id, after=batch.last_seq, limit=size,
                                         protocol=self.protocol)
                response = self.request("POST", "/push", handle, ok=(200, 403, 413, 422),
                                        body={"records": batch.records}, report=report)
                if response.status_code in (403, 413, 422):
                    upcoming.result()
                    upcoming = None  # this batch goes again (smaller, or without the records named)
                    if response.status_code == 413 and len(batch.entries) > 1:
                        size = max(1, len(batch.entries) // 2)
                        continue
                    errors = error_body(response)
                    named = [e for e in errors.errors if e.index is not None and e.index >= batch.people]
                    if response.status_code == 413:  # a single record larger than a request may be
                        named = [RecordError(index=batch.people,
                                             reason="larger than the server accepts in one request")]
                    refusals += 1
                    if not named or refusals > 50:
                        raise refusal(response, "the push")
                    settled = settle(self.db, batch, [], refused=named,
                                           refused_as="not allowed" if response.status_code == 403 else "rejected")
                    report.rejected += settled.rejected
                    report.problems += settled.problems
                    continue
                answer = PushResponse.model_validate_json(response.content)
                settled = settle(self.db, batch, answer.results, received_at=answer.server_time)
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

    def recheck(self, me: Me, handle: SyncHandle, report: SyncReport) -> int:
        """Examples written against this desk's own form of a round's target model, before a sync brought the
        team's target, re-checked against the team's (``sync.target_recheck``); returns how many."""
        from sync.target_recheck import recheck_against_targets

        done = recheck_against_targets(self.desk, me.id, handle.check)
        report.rechecked += done.rechecked
        report.no_longer_fooling += done.no_longer_fooling
        report.warnings += [p for p in done.problems if p not in report.warnings]
        if done.refused_before:  # refused by this sync's first push; they go again now, re-checked
            report.rejected -= len(done.refused_before)
            named = tuple(f"example {i}: " for i in done.refused_before)  # as sync.outgoing.settle names them
            report.problems = [p for p in report.problems if not p.startswith(named)]
        return done.rechecked

    def pull(self, me: Me, handle: SyncHandle, report: SyncReport) -> set[tuple[str, int]] | None:
        """Pull the change feed. On the first pull from this server (the whole feed), returns the
        rounds the server has, as (task code, number)."""
        key = local.cursor_key(self.url, me.id)
        with self.db.read() as session:
            cursor = int(local.get_meta(session, key) or 0)
        on_server: set[tuple[str, int]] | None = set() if cursor == 0 else None
        done = 0
        while True:
            handle.check()
            response = self.request("GET", "/changes", handle, params={"since": cursor, "limit": self.page_size},
                                    report=report)
            page = ChangesResponse.model_validate_json(response.content)
            report.held_back = page.held_back  # the server's count so far: the last page's stands
            if on_server is not None:
                on_server.update((r.task, r.number) for r in page.records if r.record == "round")
            if page.records or page.cursor != cursor:
                pulled = apply_page(self.db, page.records, page.referenced, key=key, cursor=page.cursor)
                report.pulled += sum(pulled.added.values()) + pulled.updated
                report.pages += 1
                report.warnings += [w for w in pulled.warnings if w not in report.warnings]
                report.problems += pulled.skipped
            done += len(page.records) - len(page.referenced)
            handle.progress("pull", done, done + page.remaining)
            if not page.more or page.cursor == cursor:
                break
            cursor = page.cursor
        local.note_versions(self.db, held_back=report.held_back)
        return on_server

    def _note_waiting(self, report: SyncReport, count: int) -> None:
        report.waiting_for_server = count
        report.server_upgrade = release_of(self.protocol + 1) if count else ""
        local.note_versions(self.db, waiting=count, upgrade=report.server_upgrade)

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
            if (code, number) not in on_server and not (number == 1 and self._stand_in_waits(code)):
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

    def _stand_in_waits(self, task_code: str) -> bool:
        """Round 1 is served by the first start's PyTorch stand-in until its ONNX form is ready: the team
        gets the round with its lasting target (a later sync), not a target that is about to change."""
        from app.core.services.default_model_forms import waiting_stand_in
        from app.core.services.target_models import DEFAULT_TASK

        return task_code == DEFAULT_TASK and waiting_stand_in(self.desk) is not None

    def publish(self, task_code: str, round_numbers: Sequence[int] | None = None, *, handle: SyncHandle | None = None,
                with_files: bool = True, with_gradient_forms: bool = True) -> PushResponse:
        """Publish a task, its rounds (all, or those numbered), their contexts and target models, with each
        target's faster forms and (``with_gradient_forms``) the PyTorch form it was exported from, which
        desks fetch when their assistant first needs gradients (``sync.gradient_forms``)."""
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
            # a target's prepared faster forms travel with it: other desks fetch them instead of exporting
            shas = {m.sha256 for m in models.values()}
            models |= {m.id: m for m in session.scalars(select(ModelRecord).where(
                ModelRecord.format == ModelFormat.ONNX.value, ModelRecord.task_id == task.id))
                if m.id not in models and m.path and form_parents(m.provenance or {}) & shas}
            # an imported data set's own model (ANLI's adversary): a record without files that its examples'
            # outputs name; the server defers those examples until it knows the model
            models |= {m.id: m for m in session.scalars(select(ModelRecord).where(
                ModelRecord.format == ModelFormat.IMPORTED.value, ModelRecord.task_id == task.id))}
            contexts = list(session.scalars(select(Context).where(Context.round_id.in_([r.id for r in rounds]))
                                            .order_by(Context.created_at)))
            numbers = {r.id: r.number for r in rounds}
        gradient_forms = published_gradient_forms(self.desk, [m for m in models.values() if m.id in {
            i for ids in targets.values() for i in ids}]) if with_gradient_forms else {}
        models |= gradient_forms
        # Checked before any request: a record no server takes would only fail the whole publish there.
        unfit = unfit_published(task, models.values(), rounds, contexts, numbers)
        if unfit:
            raise SyncError(f"Nothing was published: {len(unfit)} record(s) of task '{task_code}' exceed what a "
                            f"server takes: {'; '.join(unfit[:10])}{'; ...' if len(unfit) > 10 else ''}.")
        me = self.me(handle)
        if me.role not in (Role.OWNER, Role.LEAD):  # a lead's publish: the server checks the task lets leads promote
            raise NotAllowed(f"Only owners publish; {me.display_name} is a {me.role.value} on this server.")
        head = [{"record": "task", "id": str(task.id), "code": task.code, "name": task.name,
                 "definition": task.definition, "fingerprint": task.fingerprint, "created_at": task.created_at.isoformat(),
                 "updated_at": task.updated_at.isoformat(), "revision": task.revision}]
        for model in models.values():
            # a target's PyTorch form serves the task's target, whatever task it was registered with
            record = dump_model(model, task_code if model.task_id == task.id or model.id in gradient_forms else None)
            if with_files and model.format in (ModelFormat.HF_TORCH.value, ModelFormat.ONNX.value) \
                    and model.path and Path(model.path).exists():
                record["files"] = self._upload_model_files(model, handle)
            head.append(record)
        head += [dump_round(r, task_code, targets[r.id]) for r in rounds]
        tail = [{**dump_context(c), "task": task_code, "round_number": numbers[c.round_id]} for c in contexts]
        # An older server takes only what its protocol knows: the rest waits for its upgrade, said as deferred.
        results, sent = [], []
        for index, record in enumerate([*head, *tail]):
            shaped = shape_record(record, self.protocol)
            if shaped.record is None or shaped.lost:
                results.append(RecordResult(index=index, id=record["id"], record=record["record"], status="deferred",
                                            reason=f"waits for the server's upgrade to {release_of(self.protocol + 1)}"))
            else:
                sent.append((index, shaped.record))
        first = sum(1 for index, _ in sent if index < len(head))
        chunks = [sent[:first]] + [sent[i:i + 1000] for i in range(first, len(sent), 1000)]
        for n, chunk in enumerate(c for c in chunks if c):
            response = self.request("POST", "/publish", handle, what="to publish",
                                    body={"records": [record for _, record in chunk]})
            for result in PushResponse.model_validate_json(response.content).results:
                results.append(result.model_copy(update={"index": chunk[result.index][0]}))
            handle.progress("publish", n + 1, len(chunks))
        return PushResponse(results=sorted(results, key=lambda r: r.index), server_time=utcnow())

    def pull_policies(self, handle: SyncHandle, report: SyncReport) -> None:
        """Each task's "leads may promote", as the owner set it on the server (``sync.proposals``)."""
        from sync.proposals import pull_policies

        try:
            pull_policies(self.desk, self, handle)
        except Refused as exc:  # a sync is not spoiled by it; promoting asks the server again
            report.warnings.append(f"could not read who may promote: {exc}")

    def pull_storage(self, handle: SyncHandle, report: SyncReport) -> None:
        """How much of their quota for model files a lead or owner uses on the server (``dynadesk sync``)."""
        try:
            response = self.request("GET", "/storage", handle, ok=(200, 404))
            if response.status_code == 404:  # an older server: no quotas
                return
            local.note_storage(self.db, StorageUse.model_validate_json(response.content))
        except (Refused, ValueError) as exc:
            report.warnings.append(f"could not read this person's storage on the server: {exc}")

    def sync_wellbeing(self, me: Me, handle: SyncHandle, report: SyncReport) -> None:
        """Exposure and breaks (``sync.wellbeing``): a sync is not spoiled by them; they go next time."""
        from sync.wellbeing import sync_wellbeing

        try:
            done = sync_wellbeing(self.desk, self, me, handle)
        except Refused as exc:
            report.warnings.append(f"exposure and breaks were not synced: {exc}")
            return
        report.pushed += done.pushed
        report.already_stored += done.already
        report.pulled += done.pulled
        if done.conflicts:
            report.warnings.append(f"{len(done.conflicts)} exposure or break record(s) differ from the server's copy; "
                                   "the server's stands")

    def queue_imported(self, *, source: str | None = None, task_code: str | None = None) -> int:
        """Queue an imported data set for the next push (owners only: it goes out under its own authors)."""
        me = self.me()
        if me.role != Role.OWNER:
            raise NotAllowed("Only owners share imported data sets (they go out under the data set's own authors).")
        self.adopt_identity(me)
        with self.db.write() as session:
            task_id = None
            if task_code:
                task = session.scalar(select(Task).where(Task.code == task_code))
                if task is None:
                    raise SyncError(f"There is no task '{task_code}' on this desk.")
                task_id = task.id
            return outbox.queue_local(session, me.id, source=source, task_id=task_id)


class ClientFactory:
    """Where this desk's sync clients are made: the one owner of its token store, and of the options every
    client gets (a test's retry policy or transport). The GUI's sync controller holds one and lends it to
    what else talks to the server; each CLI command makes one (``Context.sync_clients``)."""

    def __init__(self, desk: Desk, *, tokens: TokenStore | None = None, **options: Any) -> None:
        from sync.tokens import TokenStore

        self.desk = desk
        self.tokens = tokens if tokens is not None else TokenStore(desk.root)
        self.options = options

    def token(self, url: str | None = None) -> str | None:
        """The token kept for ``url`` (default: the configured server); None without one. The keyring may
        be slow: not on the GUI thread."""
        url = url if url is not None else self.desk.settings.server_url
        return self.tokens.get(url) if url else None

    def configured(self) -> SyncClient:
        """A client for this desk's configured server, or a clear error when sync is not set up."""
        url = self.desk.settings.server_url
        if not url:
            raise SyncError("No sync server is set. Set one with `dynadesk sync configure --url URL` "
                            "or in Sync settings.")
        return self.for_server(url)

    def ready(self) -> SyncClient | None:
        """A client for the configured server when it and a token for it are set, else None (work that
        only takes the team's help when there is a team: a prepared form)."""
        if not self.token():
            return None
        return self.configured()

    def for_server(self, url: str, token: str | None = None, **options: Any) -> SyncClient:
        """A client for ``url`` with ``token`` (default: the one kept for it): checking a server and token
        before they are saved. ``options`` add to the factory's (``ca_file`` not yet saved)."""
        return SyncClient(self.desk, url, token or self.token(url) or "", **{**self.options, **options})


def person_id(desk: Desk) -> uuid.UUID | None:
    """The server identity this desk last synced as, if any."""
    value = desk.db.get_meta(local.PERSON)
    return uuid.UUID(value) if value else None
