"""Request limits per token and per client address: a token bucket each, answered with 429 and
``Retry-After`` when empty.

A limit "N/min" lets N requests through at once and refills N per minute. The defaults are far
above what a busy desk sends (a whole sync is tens of requests); they stop one runaway client or
script from taking the server from everyone else. On SQLite (one machine) buckets live in the worker's
memory: with ``--workers K`` each worker keeps its own, so a client may get up to K times the limit. On
PostgreSQL the counts live in the database (``sync.server.shared_limits``): every worker and every server
machine on it shares them.

The limits are checked before authentication (no database work for a flood of bad tokens); a
token's bucket is keyed by a hash of the token, so an unknown token only drains its own.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from starlette.types import ASGIApp, Receive, Scope, Send


class SharedCounts(Protocol):
    """Counts shared between processes (``sync.server.shared_limits.DatabaseCounts``)."""

    def admit(self, keys: Sequence[tuple[str, Rate]]) -> float: ...

PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "min": 60.0, "minute": 60.0, "h": 3600.0, "hour": 3600.0}
DEFAULT_PER_TOKEN = "1200/min"
DEFAULT_PER_ADDRESS = "6000/min"  # a team behind one NAT address shares it
PRUNE_ABOVE = 10_000  # buckets kept before full ones are forgotten


@dataclass(frozen=True)
class Rate:
    """``requests`` per ``seconds``; 0 requests means no limit."""

    requests: int
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        """'1200/min', '20/s', '50000/hour', or '0' (no limit)."""
        value = str(text).strip().lower()
        if value in ("0", "off", "none"):
            return cls(0, 1.0)
        match = re.fullmatch(r"(\d{1,9})\s*/\s*([a-z]+)", value)
        if not match or match.group(2) not in PERIODS or int(match.group(1)) < 1:
            raise ValueError(f"'{text}' is not a request limit; write it like 1200/min, 20/s or 50000/hour (0: none).")
        return cls(int(match.group(1)), PERIODS[match.group(2)])

    @property
    def unlimited(self) -> bool:
        return self.requests <= 0

    def __str__(self) -> str:
        """The form :meth:`parse` reads."""
        if self.unlimited:
            return "0"
        unit = {1.0: "s", 60.0: "min", 3600.0: "hour"}[self.seconds]
        return f"{self.requests}/{unit}"

    def describe(self) -> str:
        return "no limit" if self.unlimited else str(self)


class Buckets:
    """Token buckets by key: each holds up to ``rate.requests`` and refills at the rate."""

    def __init__(self, rate: Rate, clock: Callable[[], float] = time.monotonic):
        self.rate = rate
        self.clock = clock
        self.capacity = float(rate.requests)
        self.per_second = rate.requests / rate.seconds if not rate.unlimited else 0.0
        self.levels: dict[str, tuple[float, float]] = {}  # key -> (tokens, when)
        self.prune_at = PRUNE_ABOVE

    def wait(self, key: str) -> float:
        """Seconds until ``key`` may make a request (0: now)."""
        if self.rate.unlimited:
            return 0.0
        tokens = self._level(key, self.clock())
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.per_second

    def take(self, key: str) -> None:
        if self.rate.unlimited:
            return
        now = self.clock()
        self.levels[key] = (self._level(key, now) - 1.0, now)
        if len(self.levels) > self.prune_at:
            self._prune(now)

    def _level(self, key: str, now: float) -> float:
        tokens, when = self.levels.get(key, (self.capacity, now))
        return min(self.capacity, tokens + (now - when) * self.per_second)

    def _prune(self, now: float) -> None:
        # A full bucket is the same as none. The next pass waits until the table has doubled, so a
        # flood of new keys costs O(1) per request, not a scan each.
        self.levels = {k: v for k, v in self.levels.items() if self._level(k, now) < self.capacity}
        self.prune_at = max(PRUNE_ABOVE, 2 * len(self.levels))


class RequestLimits:
    """ASGI middleware: requests under ``/v1`` over a limit get 429 with ``Retry-After`` (seconds)."""

    def __init__(self, app: ASGIApp, per_token: Rate, per_address: Rate, shared: SharedCounts | None = None):
        from sync.protocol import API

        self.app = app
        self.per_token, self.per_address, self.shared = per_token, per_address, shared
        self.prefix = API + "/"
        self.tokens = Buckets(per_token)
        self.addresses = Buckets(per_address)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(self.prefix):
            return await self.app(scope, receive, send)
        address = client_key((scope.get("client") or ("unknown", 0))[0])
        token = b""
        for name, value in scope["headers"]:
            if name.lower() == b"authorization":
                token = value
                break
        token_key = hashlib.sha256(token).hexdigest()[:32]
        if self.shared is not None:
            import anyio

            wait = await anyio.to_thread.run_sync(self.shared.admit, [
                (f"address:{address}", self.per_address), (f"token:{token_key}", self.per_token)])
            if wait > 0:
                return await _too_many(scope, receive, send, wait)
            return await self.app(scope, receive, send)
        wait = max(self.addresses.wait(address), self.tokens.wait(token_key))
        if wait > 0:
            return await _too_many(scope, receive, send, wait)
        self.addresses.take(address)
        self.tokens.take(token_key)
        await self.app(scope, receive, send)


def client_key(address: str) -> str:
    """The key of a client's address: IPv6 clients by their /64 (one host usually holds a whole /64)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if ip.version == 6:
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


async def _too_many(scope: Scope, receive: Receive, send: Send, wait: float) -> None:
    from fastapi.responses import JSONResponse

    from sync.protocol import ErrorBody

    seconds = max(1, math.ceil(wait))
    body = ErrorBody(detail=f"Too many requests; try again in {seconds} s.")
    response = JSONResponse(body.model_dump(mode="json"), status_code=429, headers={"Retry-After": str(seconds)})
    await response(scope, receive, send)
