"""The change counter: every stored change gets the next number, taken last in its transaction."""

from __future__ import annotations

import uuid
from collections.abc import Collection
from typing import cast

from sqlalchemy import Table, bindparam, delete, insert, update
from sqlalchemy.orm import Session

from sync.server.models import CHANGE_SEQ, Change, Counter, Quarantined
from sync.server.store.rules import chunks


def take_numbers(session: Session, n: int) -> list[int]:
    """The next ``n`` change numbers. The counter row stays locked until commit, so whatever
    follows in this transaction happens after every earlier writer committed."""
    top = session.execute(update(Counter).where(Counter.name == CHANGE_SEQ).values(value=Counter.value + n)
                          .returning(Counter.value)).scalar_one()
    return list(range(top - n + 1, top + 1))


def write_changes(session: Session, changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]],
                   seqs: list[int], updated: Collection[uuid.UUID]) -> None:
    fresh = [{"record_id": rid, "kind": kind, "seq": seq, "team": team, "owner_id": owner}
             for (rid, kind, team, owner), seq in zip(changes, seqs) if rid not in updated]
    if fresh:
        session.execute(insert(Change), fresh)
    moved = [{"b_id": rid, "b_seq": seq} for (rid, *_), seq in zip(changes, seqs) if rid in updated]
    if moved:
        table = cast(Table, Change.__table__)
        session.execute(table.update().where(table.c.record_id == bindparam("b_id")).values(seq=bindparam("b_seq")),
                        moved)
        # A changed record gets another chance in the feed (a round published again with fixed settings).
        for chunk in chunks([m["b_id"] for m in moved]):
            session.execute(delete(Quarantined).where(Quarantined.record_id.in_(chunk)))


def record_changes(session: Session, changes: list[tuple[uuid.UUID, str, str | None, uuid.UUID | None]],
                    updated: Collection[uuid.UUID] = frozenset()) -> list[int]:
    """Give each change the next number (in order) and point its record's change row at it.
    Must be the last thing a write does."""
    seqs = take_numbers(session, len(changes))
    write_changes(session, changes, seqs, updated)
    return seqs
