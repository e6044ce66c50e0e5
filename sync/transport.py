"""HTTP to the sync server: requests with retries and pacing, TLS and token checks, errors, progress handles. Qt-free."""

from __future__ import annotations

import ipaddress
import json
import logging
import random
import ssl
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Callable, Self

import httpx
from pydantic import ValidationError

from app import __version__
from app.core.domain import utcnow
from app.core.errors import DynadeskError
from sync.protocol import API, MAX_PUSH_RECORDS, PROTOCOL_VERSION, ErrorBody, Me, RecordError

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


class Damaged(Interrupted):
    """A file kept arriving with the wrong sha256 (given up after the caller's ``damaged_attempts``):
    the copy on the server is most likely damaged, so trying again will not help."""


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


class Connection:
    """The HTTP side of a ``SyncClient``: one desk's connection to its server, retried and paced."""

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

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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


    def get_json(self, path: str, params: dict | None = None) -> dict:
        response = self._call("GET", f"{API}{path}", SyncHandle(), params=params)
        if response.status_code == 403:
            raise Refused(_errors(response).detail)
        _expect(response, 200)
        return response.json()



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
    seen: BaseException | None = exc
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

