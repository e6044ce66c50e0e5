"""What each committed write changed, told to whoever listens (the GUI shell routes it to its views).

The database's write sessions are watched: the rows a unit of work adds, alters or removes (and the
tables its ORM bulk statements touch) are collected as it flushes, and told as one
:class:`app.core.changes.Changes` once it commits; a rollback tells nothing. A write that changes no
row tells nothing either, so a view that re-reads after a change cannot set off another one.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event, inspect
from sqlalchemy.orm import ORMExecuteState, Session, sessionmaker

from app.core.changes import Changes, Data
from app.core.domain import ExampleStatus

log = logging.getLogger(__name__)

Listener = Callable[[Changes], None]

# Every table of the desk's database, by the kind of data its rows are (a test checks none is missing).
TABLE_DATA: dict[str, Data] = {
    "examples": Data.EXAMPLES,  # drafts are told apart row by row (_row_data)
    "model_outputs": Data.EXAMPLES,
    "example_facets": Data.EXAMPLES,
    "validations": Data.VALIDATIONS,
    "example_reviews": Data.REVIEWS,
    "rounds": Data.ROUNDS,
    "round_models": Data.ROUNDS,
    "contexts": Data.CONTEXTS,
    "model_records": Data.MODELS,
    "people": Data.PEOPLE,
    "tasks": Data.TASKS,
    "meta": Data.TASK_SETTINGS,  # told apart by key (META_PREFIXES)
    "sync_outbox": Data.SYNC,
    "exposure_spans": Data.WELLBEING,
    "wellbeing_breaks": Data.WELLBEING,
    "suites": Data.EVALUATION,
    "suite_cases": Data.EVALUATION,
    "leaderboard_cells": Data.EVALUATION,
    # derived from the examples, kept by the near-duplicate index itself: no view reads them
    "example_signatures": Data.NONE,
    "example_changes": Data.NONE,
}
# The meta table holds a task's lead settings and some bookkeeping; a key no prefix names counts as a
# setting (a view that looks again for nothing costs less than one that shows an old setting).
META_PREFIXES: tuple[tuple[str, Data], ...] = (
    ("sync.", Data.SYNC),
    ("wellbeing.", Data.WELLBEING),
    ("export_salt", Data.NONE),
    ("analyzed_rows", Data.NONE),
)
# An example's columns that other kinds of data keep in step (a verdict updates the example's summary);
# a change to these alone is that kind's, not a new or edited example.
EXAMPLE_COLUMN_DATA: dict[str, Data] = {
    **dict.fromkeys(("validation_state", "validation_count", "flag_count", "disagreement_count", "objection_count",
                     "decided_verdict", "decided_label"), Data.VALIDATIONS),
    **dict.fromkeys(("review_state", "review_comment", "reviewed_at"), Data.REVIEWS),
    "sync_state": Data.SYNC,
    "updated_at": Data.NONE,
    "revision": Data.NONE,
}
ROW_BY_ROW = frozenset({"examples", "meta"})  # tables whose rows are told apart by their columns
_PENDING = "dynadesk_changes"  # the key of a session's collected changes in ``Session.info``


def meta_data(key: str) -> Data:
    return next((data for prefix, data in META_PREFIXES if key.startswith(prefix)), Data.TASK_SETTINGS)


def _row_data(row: Any, *, altered: bool = False) -> Data:
    """The kind of data of a row added or removed, or (``altered``) of the columns changed in it."""
    state = inspect(row)
    table = state.mapper.local_table.name
    if table == "examples" and row.status == ExampleStatus.DRAFT:
        return Data.DRAFTS
    if table == "examples" and altered:
        data = Data.NONE
        for key in state.committed_state:  # the attributes set since the row was read, and only those
            if key in state.mapper.columns and state.attrs[key].history.has_changes():
                data |= EXAMPLE_COLUMN_DATA.get(key, Data.EXAMPLES)
        return data
    if table == "meta":
        return meta_data(row.key)
    return TABLE_DATA.get(table, Data.EXAMPLES)  # an unlisted table: the widest common guess


class ChangeLog:
    """Watches one database's write sessions; ``subscribe`` to be told each commit's changes.

    Listeners run on the thread that committed, after the commit: they must hand the change over
    to their own thread (the GUI shell queues it to the GUI thread). A listener that fails is
    logged; the write it follows stays committed and its caller is not told of the failure."""

    def __init__(self) -> None:
        self._listeners: list[Listener] = []
        self._lock = threading.Lock()
        self._batches = threading.local()  # per thread: how deep in batch(), and what it gathered

    @contextmanager
    def batch(self) -> Iterator[None]:
        """One store made of many commits (a sync, an import): what they change is told once, when the
        block ends, also when it fails part way (what was committed stays). A view that looked in the
        middle would see half of it: a round pulled before its target model's files."""
        batches = self._batches
        depth = getattr(batches, "depth", 0)
        if depth == 0:
            batches.gathered = Data.NONE
        batches.depth = depth + 1
        try:
            yield
        finally:
            batches.depth = depth
            if depth == 0:
                gathered, batches.gathered = batches.gathered, Data.NONE
                self.publish(Changes(gathered))

    def watch(self, sessions: sessionmaker[Session]) -> None:
        event.listen(sessions, "after_flush", self._flushed)
        event.listen(sessions, "do_orm_execute", self._executed)
        event.listen(sessions, "after_commit", self._committed)
        event.listen(sessions, "after_soft_rollback", self._rolled_back)

    def subscribe(self, listener: Listener) -> None:
        with self._lock:
            self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        with self._lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    def publish(self, changes: Changes) -> None:
        """Tell every listener (a change kept outside the database, such as the working profile)."""
        if not changes:
            return
        with self._lock:
            listeners = list(self._listeners)
        for listener in listeners:
            try:
                listener(changes)
            except Exception:  # noqa: BLE001 - the write is committed; a listener's failure is only logged
                log.exception("a listener of database changes failed on %s", changes)

    @staticmethod
    def _add(session: Session, data: Data) -> None:
        session.info[_PENDING] = session.info.get(_PENDING, Data.NONE) | data

    def _flushed(self, session: Session, _context) -> None:
        if not self._listeners:
            return  # nobody shows the data (the CLI, the server, a bench): nothing to work out
        data = Data.NONE
        for row in session.new:
            data |= _row_data(row)
        for row in session.deleted:
            data |= _row_data(row)
        for row in session.dirty:
            table = inspect(row).mapper.local_table.name
            if table not in ROW_BY_ROW and TABLE_DATA.get(table, Data.EXAMPLES) in data:
                continue  # its kind is told already
            if session.is_modified(row, include_collections=False):
                data |= _row_data(row, altered=True)
        self._add(session, data)

    def _executed(self, state: ORMExecuteState) -> None:
        if not (state.is_insert or state.is_update or state.is_delete):
            return
        mapper = state.bind_mapper
        table = getattr(mapper.local_table, "name", None) if mapper is not None else None
        self._add(state.session, TABLE_DATA.get(table, Data.EXAMPLES) if table else Data.EXAMPLES)

    def _committed(self, session: Session) -> None:
        data = session.info.pop(_PENDING, Data.NONE)
        if getattr(self._batches, "depth", 0):
            self._batches.gathered |= data
        else:
            self.publish(Changes(data))

    @staticmethod
    def _rolled_back(session: Session, previous_transaction) -> None:
        if previous_transaction.parent is None:  # the outer transaction: nothing it did is kept
            session.info.pop(_PENDING, None)
