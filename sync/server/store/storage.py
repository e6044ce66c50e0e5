"""Model files on the server: who keeps how much (per-person quotas) and the sweep of files nothing needs.

- Owners and leads upload files (``PUT /v1/blobs``); an upload counts against its uploader's quota: the
  bytes of the files they uploaded that the server still keeps. A file already stored costs nothing.
- A quota is the person's own (set by the owner with ``dynadesk serve quota``) or their role's default.
- A file is referenced while a published model record (a target or one of its faster forms) or an open or
  promoted proposal names it. The sweep removes unreferenced files older than the grace period (enough
  for a lead to upload a candidate and then propose it), and what killed uploads left behind; their
  bytes leave their uploader's use.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from app.core.domain import Role, utcnow
from app.core.errors import DynadeskError
from app.core.formatting import size_text
from sync.server.db import ServerDatabase
from sync.server.models import ModelRecord, Person, Proposal, StoredBlob
from sync.server.store.people import _find_person

if TYPE_CHECKING:
    from sync.server.blob_store import Blobs

log = logging.getLogger(__name__)

GiB = 2**30
DEFAULT_QUOTA: dict[str, int | None] = {Role.OWNER.value: None, Role.LEAD.value: 4 * GiB, Role.ANNOTATOR.value: 0}
UNLIMITED = -1  # stored as a person's quota: no limit, whatever their role's default
SWEEP_GRACE = timedelta(hours=24)
KEPT_STATES = ("open", "promoted")  # proposals whose files stay: a declined or superseded one is not promoted


class OverQuota(DynadeskError):
    """The upload would take its uploader over their quota (413); nothing was stored."""


@dataclass(frozen=True)
class Allowance:
    used: int
    files: int
    quota: int | None  # None: no limit

    def room(self) -> int | None:
        return None if self.quota is None else max(0, self.quota - self.used)


def quota_of(person: Person) -> int | None:
    if person.blob_quota is None:
        return DEFAULT_QUOTA.get(person.role, 0)
    return None if person.blob_quota == UNLIMITED else person.blob_quota


def _use(session: Session, person_id: Any) -> tuple[int, int]:
    size, files = session.execute(select(func.coalesce(func.sum(StoredBlob.size), 0), func.count())
                                  .where(StoredBlob.uploaded_by == person_id)).one()
    return int(size), int(files)


def allowance(db: ServerDatabase, person: Person) -> Allowance:
    with db.read() as session:
        used, files = _use(session, person.id)
    return Allowance(used, files, quota_of(person))


def over_quota_message(person: Person, used: int, quota: int, size: int) -> str:
    return (f"This file ({size_text(size)}) would take {person.display_name} over their quota for model files "
            f"on the server: {size_text(used)} of {size_text(quota)} in use. Nothing was stored. The owner can "
            "raise it (`dynadesk serve quota`); files no proposal or model needs any more leave the use when the "
            "server sweeps them.")


def record_upload(db: ServerDatabase, person: Person, sha256: str, size: int) -> None:
    """Count a verified upload against its uploader, or refuse it (``OverQuota``) before it is put in place."""
    def write(session: Session) -> None:
        # the uploader's row lock orders their concurrent uploads, so together they never pass the quota
        me = session.scalar(select(Person).where(Person.id == person.id).with_for_update())
        if me is None or session.get(StoredBlob, sha256) is not None:
            return
        quota = quota_of(me)
        used, _ = _use(session, me.id)
        if quota is not None and used + size > quota:
            raise OverQuota(over_quota_message(me, used, quota, size))
        session.add(StoredBlob(sha256=sha256, size=size, uploaded_by=me.id, created_at=utcnow()))

    db.write_retrying(write)


def forget_upload(db: ServerDatabase, sha256: str) -> None:
    """Undo ``record_upload`` when the file could not be put in place."""
    def write(session: Session) -> None:
        session.execute(delete(StoredBlob).where(StoredBlob.sha256 == sha256))

    db.write_retrying(write)


def person_named(db: ServerDatabase, who: str) -> Person:
    with db.read() as session:
        person = _find_person(session, who)
        session.expunge(person)
        return person


def set_quota(db: ServerDatabase, who: str, quota: int | None) -> Person:
    """``quota`` in bytes, ``UNLIMITED``, or None for the role's default."""
    if quota is not None and quota < 0 and quota != UNLIMITED:
        raise DynadeskError("A quota is a number of bytes, 'unlimited' or 'default'.")

    def write(session: Session) -> Person:
        person = _find_person(session, who)
        person.blob_quota = quota
        session.flush()
        session.expunge(person)
        return person

    return db.write_retrying(write)


def referenced(session: Session) -> set[str]:
    """The sha256 of every file a published model record or a kept proposal names."""
    names: set[str] = set()
    for files in session.scalars(select(ModelRecord.files).where(ModelRecord.files.is_not(None))):
        names.update(str(f.get("sha256")) for f in files or () if isinstance(f, dict))
    for files, comparison in session.execute(select(Proposal.files, Proposal.comparison)
                                             .where(Proposal.state.in_(KEPT_STATES))):
        names.update(str(f.get("sha256")) for f in files or () if isinstance(f, dict))
        if isinstance(comparison, dict):
            names.add(str(comparison.get("sha256")))
    return names


@dataclass(frozen=True)
class Swept:
    files: int
    bytes: int
    partial: int  # files of interrupted uploads


def sweep(db: ServerDatabase, blobs: Blobs, *, grace: timedelta = SWEEP_GRACE, now: datetime | None = None,
          dry_run: bool = False) -> Swept:
    """Remove the stored files nothing references that are older than ``grace``, and what interrupted uploads
    left behind; the rows of files that are gone go too. Runs outside any write transaction: one short one
    at the end drops the rows. Works on either blob store (``sync.server.blob_store``)."""
    now = now or utcnow()
    cutoff = now - grace
    with db.read() as session:
        keep = referenced(session)
        rows = {sha: created for sha, created in session.execute(select(StoredBlob.sha256, StoredBlob.created_at))}
    gone: list[str] = []
    size = 0
    present: set[str] = set()
    for sha, length, stored_at in list(blobs.stored()):
        present.add(sha)
        if sha in keep:
            continue
        born = _aware(rows.get(sha) or stored_at)
        if born > cutoff:
            continue
        gone.append(sha)
        size += length
        if not dry_run:
            blobs.remove(sha)
            present.discard(sha)
    partial = 0
    for key, written in list(blobs.partial()):
        if _aware(written) <= cutoff:
            partial += 1
            if not dry_run:
                blobs.remove_partial(key)
    if not dry_run:
        missing = [sha for sha in rows if sha not in present]
        if missing:
            def write(session: Session) -> None:
                for start in range(0, len(missing), 1000):
                    session.execute(delete(StoredBlob).where(StoredBlob.sha256.in_(missing[start:start + 1000])))

            db.write_retrying(write)
    if gone or partial:
        log.info("swept %d unreferenced model file(s) (%d bytes) and %d interrupted upload(s)", len(gone), size,
                 partial)
    return Swept(len(gone), size, partial)


def _aware(when: datetime) -> datetime:
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when
