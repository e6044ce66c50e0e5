"""The sync outbox on the desk's side: what the sync client will push, and nothing about how.

Services call :func:`enqueue` inside their own unit of work, right after the change, so a
submitted example, a retraction, a validation or a lead's review (accept/return) is committed
together with its outbox entry or not at all. The client (``sync.client``) drains the outbox; this module stays free of it.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.core.domain import ExampleStatus, SyncState
from app.core.limits import FreeFormTooLarge, record_problems
from app.core.storage.models import Example, ExampleReview, OutboxEntry, Validation

PENDING, REJECTED, CONFLICT = "pending", "rejected", "conflict"


def enqueue(session: Session, record: Example | Validation | ExampleReview, *,
            sender: uuid.UUID | None = None) -> None:
    """Queue ``record`` (at its current revision) for the next push.

    ``sender`` is whose token pushes it: by default its author, validator or reviewing lead.
    Records that stay on this desk (drafts, imported data sets) are never queued here. An example
    submitted that no server would take (a free-form field nested too deep or too large) is refused
    here, at once; retracting or flagging one kept from before goes through (the push names it).
    """
    submitted = isinstance(record, Example) and record.status == ExampleStatus.SUBMITTED.value
    problems = record_problems("example", record) if submitted else []
    if problems:
        raise FreeFormTooLarge(f"This example cannot be sent: {'; '.join(problems)}.")
    enqueue_all(session, [record], sender=sender)


def enqueue_all(session: Session, records: Sequence[Example | Validation | ExampleReview], *,
                sender: uuid.UUID | None = None) -> None:
    """:func:`enqueue` for many records at once, with one look-up for their entries (a lead
    accepting a whole round of someone's work writes thousands of reviews in one unit of work)."""
    wanted: list[tuple[Example | Validation | ExampleReview, str, uuid.UUID]] = []
    for record in records:
        if record.sync_state != SyncState.PENDING.value:
            continue
        if isinstance(record, Example):
            if record.status == ExampleStatus.DRAFT.value:
                continue
            wanted.append((record, "example", record.author_id))
        elif isinstance(record, ExampleReview):
            wanted.append((record, "example_review", record.lead_id))
        else:
            wanted.append((record, "validation", record.validator_id))
    if not wanted:
        return
    if any(record.id is None or record.revision is None for record, _, _ in wanted):
        session.flush()  # ids and revisions are assigned at insert
    ids = [record.id for record, _, _ in wanted]
    entries: dict[uuid.UUID, OutboxEntry] = {}
    for start in range(0, len(ids), 900):
        entries.update((e.record_id, e) for e in session.scalars(
            select(OutboxEntry).where(OutboxEntry.record_id.in_(ids[start:start + 900]))))
    for record, kind, person in wanted:
        entry = entries.get(record.id)
        if entry is None:
            entries[record.id] = entry = OutboxEntry(kind=kind, record_id=record.id, person_id=sender or person,
                                                     revision=record.revision, state=PENDING, attempts=0)
            session.add(entry)
        else:  # changed again before it was sent (or after it was refused): send the newest revision
            entry.revision = record.revision
            entry.state = PENDING
            entry.last_error = None
            if sender is not None:
                entry.person_id = sender


def queue_local(session: Session, sender: uuid.UUID, *, source: str | None = None,
                task_id: uuid.UUID | None = None) -> int:
    """Queue records that were kept on this desk (imported data sets) because the user asked:
    the examples, their verdicts and their leads' reviews.

    Returns how many records were queued. Drafts never leave the desk.
    """
    query = select(Example).where(Example.sync_state == SyncState.LOCAL.value,
                                  Example.status != ExampleStatus.DRAFT.value)
    if source is not None:
        query = query.where(Example.source == source)
    if task_id is not None:
        query = query.where(Example.task_id == task_id)
    examples = list(session.scalars(query.order_by(Example.submitted_at, Example.id)))
    queued = 0
    for start in range(0, len(examples), 500):
        chunk = examples[start:start + 500]
        queued += _queue(session, Example, chunk, sender)
        validations = list(session.scalars(
            select(Validation).where(Validation.example_id.in_([e.id for e in chunk]),
                                     Validation.sync_state == SyncState.LOCAL.value).order_by(Validation.created_at)))
        queued += _queue(session, Validation, validations, sender)
        reviews = list(session.scalars(
            select(ExampleReview).where(ExampleReview.example_id.in_([e.id for e in chunk]),
                                        ExampleReview.sync_state == SyncState.LOCAL.value)
            .order_by(ExampleReview.created_at)))
        queued += _queue(session, ExampleReview, reviews, None)  # a review goes with its lead's token: only leads may push one
    return queued


def _queue(session: Session, model: type[Example] | type[Validation] | type[ExampleReview],
           records: Sequence[Example | Validation | ExampleReview], sender: uuid.UUID | None) -> int:
    if not records:
        return 0
    # updated_at stays as it was: it is part of the record as the server will store it.
    session.execute(update(model).where(model.id.in_([r.id for r in records]))
                    .values(sync_state=SyncState.PENDING.value, updated_at=model.updated_at)
                    .execution_options(synchronize_session=False))
    for record in records:
        set_committed_value(record, "sync_state", SyncState.PENDING.value)
    enqueue_all(session, records, sender=sender)
    return len(records)


def counts(session: Session, person_id: uuid.UUID | None = None) -> dict[str, int]:
    """Outbox entries by state. With ``person_id``, pending entries are split into this person's
    (``pending``; of which ``deferred`` wait for something the server does not have yet) and
    other profiles' (``held``)."""
    mine = OutboxEntry.person_id == person_id
    waiting = OutboxEntry.last_error.is_not(None)
    rows = session.execute(select(OutboxEntry.state, mine, waiting, func.count())
                           .group_by(OutboxEntry.state, mine, waiting)).all()
    out = {PENDING: 0, REJECTED: 0, CONFLICT: 0, "held": 0, "deferred": 0}
    for state, is_mine, deferred, n in rows:
        if state == PENDING and person_id is not None and not is_mine:
            out["held"] += n
            continue
        out[state] = out.get(state, 0) + n
        if state == PENDING and deferred:
            out["deferred"] += n
    return out
