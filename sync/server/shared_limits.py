"""Request limits every server process shares: counts in the database (``request_counts``), so two
server machines (or ``--workers K``) on one PostgreSQL let a client through as often as one server would.

A limit "N per period" is a sliding window over fixed windows of one period: a request passes while
``previous window's hits x (the part of it still inside the sliding window) + this window's hits`` is
below N. A burst of N passes at once, as with the in-memory token buckets (``sync.server.limits``), and
the steady rate is N per period. One transaction counts a request against all its keys with atomic upserts
(``INSERT ... ON CONFLICT DO UPDATE``): concurrent requests, on any machine, each see the others' counts.
A refused request is rolled back: it takes nothing, as with the buckets. The clock is the database's (each
process learns its offset once a minute), so machines whose clocks differ still count in the same windows.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from sqlalchemy import and_, delete, or_, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from sync.server.db import ServerDatabase
from sync.server.limits import Rate
from sync.server.models import RequestCount

log = logging.getLogger(__name__)

PRUNE_EVERY = 2000  # requests counted by this process between removals of old windows
SHARED_LIMITS_ENV = "DYNADESK_SERVER_SHARED_LIMITS"
CLOCK_REFRESH_S = 60.0


class Refused(Exception):
    def __init__(self, wait: float):
        super().__init__(wait)
        self.wait = wait


def sliding_wait(rate: Rate, previous: int, current: int, fraction: float) -> float:
    """Seconds until one more request fits (0: now), given the previous and the current window's hits and
    how far into the current window (0..1) it is."""
    allowed = rate.requests
    if previous * (1.0 - fraction) + current + 1 <= allowed:
        return 0.0
    period = rate.seconds
    if current + 1 <= allowed and previous > 0:
        # the previous window's weight falls as this one goes on
        needed = 1.0 - (allowed - current - 1) / previous
        if needed < 1.0:
            return max(0.001, (needed - fraction) * period)
    # only in the next window: then this window's hits are the previous ones
    later = 1.0 - (allowed - 1) / current if current > 0 else 0.0
    return (1.0 - fraction) * period + max(0.0, later) * period


class DatabaseCounts:
    """Counts requests by key in the database; ``admit`` lets a request through or says how long to wait."""

    def __init__(self, db: ServerDatabase):
        self.db = db
        self.insert = pg_insert if db.dialect == "postgresql" else sqlite_insert
        self.counted = 0
        self.lock = threading.Lock()
        self.offset, self.offset_at = 0.0, float("-inf")

    def _now(self) -> float:
        """Seconds since the epoch on the database's clock (its offset from ours, refreshed each minute)."""
        local = time.time()
        if self.db.dialect != "postgresql":
            return local
        if local - self.offset_at > CLOCK_REFRESH_S:
            with self.db.read() as session:
                before = time.time()
                theirs = float(session.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
                self.offset = theirs - (before + time.time()) / 2
            self.offset_at = local
        return local + self.offset

    def admit(self, keys: Sequence[tuple[str, Rate]]) -> float:
        """Count a request against every (key, rate) and return 0, or count nothing and return the seconds to
        wait before it would pass."""
        limited = sorted((key, rate) for key, rate in keys if not rate.unlimited)  # one lock order: no deadlocks
        if not limited:
            return 0.0
        try:
            self.db.write_retrying(lambda session: self._count(session, limited))
        except Refused as refused:
            return refused.wait
        with self.lock:
            self.counted += 1
            prune = self.counted % PRUNE_EVERY == 0
        if prune:
            self.prune(max(rate.seconds for _, rate in limited))
        return 0.0

    def _count(self, session: Session, keys: Sequence[tuple[str, Rate]]) -> None:
        if self.db.dialect == "postgresql":
            # a count lost to a database crash costs nothing; waiting for the disk would cost every request
            session.execute(text("SET LOCAL synchronous_commit TO OFF"))
        now = self._now()
        windows = []
        for key, rate in keys:
            period = max(1, int(rate.seconds))
            windows.append((key, rate, period, int(now // period) * period))
        # one upsert for all keys (in key order: concurrent requests lock rows in the same order)
        statement = self.insert(RequestCount).values([{"key": key, "window_start": start, "hits": 1}
                                                      for key, _, _, start in windows])
        statement = statement.on_conflict_do_update(index_elements=[RequestCount.key, RequestCount.window_start],
                                                    set_={"hits": RequestCount.hits + 1})
        current: dict[str, int] = {key: hits for key, hits in session.execute(
            statement.returning(RequestCount.key, RequestCount.hits))}
        previous: dict[str, int] = {key: hits for key, hits in session.execute(
            select(RequestCount.key, RequestCount.hits).where(or_(*(
                and_(RequestCount.key == key, RequestCount.window_start == start - period)
                for key, _, period, start in windows))))}
        wait = 0.0
        for key, rate, period, start in windows:
            # the request is counted already: it passes when the count without it left room for one more
            wait = max(wait, sliding_wait(rate, previous.get(key, 0), current[key] - 1, (now - start) / period))
        if wait > 0:
            raise Refused(wait)  # rolls back this request's counts

    def prune(self, longest_period: float) -> None:
        """Forget windows older than any limit looks back (two periods of the longest)."""
        now = self._now()

        def write(session: Session) -> None:
            session.execute(delete(RequestCount).where(RequestCount.window_start < now - 2 * longest_period))

        try:
            self.db.write_retrying(write)
        except Exception:  # pruning is housekeeping: a failure never fails a request
            log.warning("could not remove old request counts", exc_info=True)


def shares_limits(setting: str | None, db: ServerDatabase) -> bool:
    """``on``/``off`` as ``serve run`` sets it; otherwise (``auto``, unset): on PostgreSQL only."""
    chosen = (setting or "auto").strip().lower()
    return chosen == "on" or (chosen == "auto" and db.dialect == "postgresql")
