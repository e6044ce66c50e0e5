"""Changes held back from a desk that speaks an older sync protocol (``sync.negotiation``): counted per
person for the desk and the team's lead to see, and sent again once the desk speaks the newer protocol.

A desk's ``since`` says what it has stored. A desk that now speaks the newer protocol and asks for changes
after the first one it was not sent is answered with an empty page whose cursor goes back to just before
that change; the desk asks again from there (``more``) and is sent everything from it on, in full. Its
asking from before that change is what clears the count: an answer lost on the way is answered again.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable

from sqlalchemy import delete, select

from app.core.domain import utcnow
from sync.negotiation import release_of
from sync.server.db import ServerDatabase
from sync.server.models import Change, HeldBack, Person
from sync.server.store.rules import chunks

log = logging.getLogger(__name__)


def rewind_to(db: ServerDatabase, me: Person, speaks: int, since: int) -> int | None:
    """The cursor a desk that speaks ``speaks`` must go back to, to be sent again what it was not sent in an
    older protocol; None when it needs none (and what it was not sent goes to it now without going back)."""
    with db.read() as session:
        row = session.get(HeldBack, me.id)
        if row is None or row.protocol >= speaks:
            return None
        if since >= row.first_seq:
            return row.first_seq - 1

    def work(session) -> None:
        session.execute(delete(HeldBack).where(HeldBack.person_id == me.id, HeldBack.protocol < speaks,
                                               HeldBack.first_seq > since))

    db.write_retrying(work)
    return None


def note(db: ServerDatabase, me: Person, speaks: int, record_ids: Iterable[str]) -> int:
    """Count the changes of ``record_ids`` (changed records of one page, held back from a desk that speaks
    ``speaks``) for ``me``; the count of changes held back from them so far."""
    ids = [uuid.UUID(i) for i in dict.fromkeys(record_ids)]

    def work(session) -> int:
        seqs = sorted(seq for chunk in chunks(ids)
                      for seq in session.scalars(select(Change.seq).where(Change.record_id.in_(chunk))))
        row = session.get(HeldBack, me.id)
        if not seqs:
            return row.changes if row is not None and row.protocol == speaks else 0
        if row is None or row.protocol != speaks:
            if row is not None:
                session.delete(row)
                session.flush()
            row = HeldBack(person_id=me.id, protocol=speaks, first_seq=seqs[0], last_seq=seqs[0] - 1, changes=0)
            session.add(row)
        fresh = [seq for seq in seqs if seq > row.last_seq]  # a page asked for again is not counted twice
        row.changes += len(fresh)
        row.first_seq = min(row.first_seq, seqs[0])
        row.last_seq = max(row.last_seq, seqs[-1])
        row.updated_at = utcnow()
        return row.changes

    total = db.write_retrying(work)
    if ids:
        log.warning("%d change(s) held back from %s (team %s), whose desk speaks sync protocol %d: they need %s "
                    "(%d so far)", len(ids), me.display_name, me.team, speaks, release_of(speaks + 1), total)
    return total


def count(db: ServerDatabase, me: Person, speaks: int) -> int:
    with db.read() as session:
        row = session.get(HeldBack, me.id)
        return row.changes if row is not None and row.protocol == speaks else 0


def counts(db: ServerDatabase) -> dict[uuid.UUID, HeldBack]:
    """Every person's held-back changes (for ``dynadesk serve people``)."""
    with db.read() as session:
        return {row.person_id: row for row in session.scalars(select(HeldBack))}
