"""Request limits every server process shares: counts in the database (``request_counts``), so two
server machines (or ``--workers K``) on one PostgreSQL let a client through as often as one server would.

A limit "N per period" is a sliding window over fixed windows of one period: a request passes while
``previous window's hits x (the part of it still inside the sliding window) + this window's hits`` is
below N. A burst of N passes at once, as with the in-memory token buckets (``sync.server.limits``), and
the steady rate is N per period. One transaction counts a request against all its keys with atomic upserts
(``INSERT ... ON CONFLICT DO UPDATE``): concurrent requests, on any machine, each see the others' counts.
A refused request is rolled back: it takes nothing, as with the buckets. The clock is the database's, so
machines whose clocks differ still count in the same windows.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

from sqlalchemy import delete, select, text
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session

from sync.server.db import ServerDatabase
from sync.server.limits import Rate
from sync.server.models import RequestCount

log = logging.getLogger(__name__)

PRUNE_EVERY = 2000  # requests counted by this process between removals of old windows
SHARED_LIMITS_ENV = "DYNADESK_SERVER_SHARED_LIMITS"


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

    def _now(self, session: Session) -> float:
        if self.db.dialect == "postgresql":
            return float(session.execute(text("SELECT extract(epoch FROM clock_timestamp())")).scalar_one())
        return time.time()

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
        now = self._now(session)
        wait = 0.0
        for key, rate in keys:
            period = max(1, int(rate.seconds))
            start = int(now // period) * period
            fraction = (now - start) / period
            statement = self.insert(RequestCount).values(key=key, window_start=start, hits=1)
            statement = statement.on_conflict_do_update(index_elements=[RequestCount.key, RequestCount.window_start],
                                                        set_={"hits": RequestCount.hits + 1})
            current = session.scalar(statement.returning(RequestCount.hits)) or 1
            previous = session.scalar(select(RequestCount.hits).where(RequestCount.key == key,
                                                                      RequestCount.window_start == start - period)) or 0
            # the request is counted already: it passes when the count without it left room for one more
            wait = max(wait, sliding_wait(rate, previous, current - 1, fraction))
        if wait > 0:
            raise Refused(wait)  # rolls back this request's counts

    def prune(self, longest_period: float) -> None:
        """Forget windows older than any limit looks back (two periods of the longest)."""
        def write(session: Session) -> None:
            now = self._now(session)
            session.execute(delete(RequestCount).where(RequestCount.window_start < now - 2 * longest_period))

        try:
            self.db.write_retrying(write)
        except Exception:  # pruning is housekeeping: a failure never fails a request
            log.warning("could not remove old request counts", exc_info=True)


def wait_text(wait: float) -> int:
    return max(1, math.ceil(wait))
