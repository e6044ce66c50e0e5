"""HTTP to the sync server: requests with retries and pacing, TLS and token checks, errors, progress handles. Qt-free."""

from __future__ import annotations

import hashlib
import ipaddress
import json
import logging
import os
import random
import ssl
import threading
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Any, Self

import httpx
from pydantic import ValidationError

from app import __version__
from app.core.domain import utcnow
from app.core.errors import DynadeskError
from sync import wire_versions
from sync.negotiation import Unreadable, common, desk_refusal, our_headers, said
from sync.protocol import API, MAX_PUSH_RECORDS, ErrorBody, Me

log = logging.getLogger(__name__)

RETRY_STATUS = {500, 502, 503, 504}  # 429 is pacing, not a failure: see Connection._pace
CHUNK = 1 << 20


class SyncError(DynadeskError):
    """A sync that could not finish; what was done before it stays done."""


class Offline(SyncError):
    """The server cannot be reached. Work stays in the outbox; nothing is wrong with it."""


class Untrusted(SyncError):
    """The server's certificate is not trusted: trying again will not help, naming its authority will."""


class AuthError(SyncError):
    """The server refused the token (HTTP 401), or there is none."""


class Refused(SyncError):
    """The server answered and refused what was asked; the message gives its reason."""


class Rejected(Refused):
    """What was sent does not pass the server's checks (HTTP 400, 422)."""


class NotAllowed(Refused):
    """This person may not do this on the server (HTTP 403)."""


class NotOnServer(Refused):
    """The server has no such thing (HTTP 404); an older server lacks whole endpoints."""


class Conflict(Refused):
    """The server's copy says otherwise (HTTP 409): decided already, taken by another, not the next one."""


class TooLarge(Refused):
    """Larger than the server takes (HTTP 413): in one request, or in this person's quota."""


class Unsupported(Refused):
    """The server and this desk speak sync protocols too far apart (HTTP 426, or what ``/me`` says)."""


class Interrupted(SyncError):
    """The server stopped answering part-way; the next sync resumes where this one stopped."""

    def __init__(self, message: str, *, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason  # what the last attempt ran into, for a caller that words its own message


class Damaged(Interrupted):
    """A file kept arriving with the wrong sha256 (given up after the caller's ``damaged_attempts``):
    the copy on the server is most likely damaged, so trying again will not help."""


class Cancelled(SyncError):
    pass


# The one map from an answer a request cannot take to the error it raises (``refusal``). 429 and the
# RETRY_STATUS are never refusals: the connection waits them out or retries, then stops (``Interrupted``).
REFUSALS: dict[int, type[SyncError]] = {400: Rejected, 401: AuthError, 403: NotAllowed, 404: NotOnServer,
                                        409: Conflict, 413: TooLarge, 422: Rejected, 426: Unsupported}

# And from what a request that got no answer ran into, for people (the library's own words follow):
# the first class that matches names it. An untrusted certificate is ``Untrusted`` (``_certificate_problem``).
NO_ANSWER: tuple[tuple[type[httpx.TransportError], str], ...] = (
    (httpx.ConnectTimeout, "no connection within the time allowed"),
    (httpx.ConnectError, "no connection"),
    (httpx.TimeoutException, "no answer within the time allowed"),
    (httpx.RemoteProtocolError, "the connection dropped"),
    (httpx.ReadError, "the connection dropped"),
    (httpx.WriteError, "the connection dropped"),
    (httpx.ProxyError, "the proxy refused the connection"),
)


def refusal(response: httpx.Response, what: str | None = None) -> SyncError:
    """The error for an answer the caller cannot take: its type from ``REFUSALS`` (``Refused`` for any
    other status), its message the server's own reason when it gave one, else the status and what came.
    ``what`` names the request ("to publish", "the push"): "The server refused <what>: <reason>"."""
    status = response.status_code
    reason = _detail(response)
    kind = REFUSALS.get(status, Refused)
    if kind is AuthError:
        return AuthError(f"The server refused the sync token: {reason} Check the token in the sync settings.")
    if kind is Refused or not _gave_reason(response):  # a proxy's page, a route an older server lacks
        return kind(f"The server answered HTTP {status}: {reason}")
    return kind(f"The server refused {what}: {reason}" if what else reason)


def no_answer(exc: httpx.TransportError) -> str:
    """What a request that got no answer ran into (``NO_ANSWER``), with the library's words."""
    said = f"{exc.__class__.__name__}: {exc}" if str(exc) else exc.__class__.__name__
    kind = next((text for cls, text in NO_ANSWER if isinstance(exc, cls)), None)
    return f"{kind} ({said})" if kind else said


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
    # Mixed versions (sync.negotiation): this desk's records an older server cannot take yet, and the release
    # they wait for; changes a newer server did not send to this desk (it needs upgrading to see them).
    waiting_for_server: int = 0
    server_upgrade: str = ""
    held_back: int = 0
    # examples written against this desk's own form of a round's target, re-checked against the team's target
    # (sync.target_recheck), and how many of them the team's target is not fooled by
    rechecked: int = 0
    no_longer_fooling: int = 0

    def recheck_note(self) -> str:
        if not self.rechecked:
            return ""
        return (f"{self.rechecked} example(s) written against this desk's own form of the round's model were "
                f"re-checked against the team's target; {self.no_longer_fooling} of them no longer fool it.")

    def notices(self) -> list[str]:
        """What the person should read after this sync beside its counts (the status bar shows it)."""
        return [n for n in (self.recheck_note(),) if n] + self.warnings

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
        if self.rechecked:
            text += f" {self.recheck_note()}"
        if self.models:
            text += f" Downloaded {', '.join(self.models)}."
        if self.published:
            text += f" Published {'; '.join(self.published)} (this owner's first sync with the server)."
        if self.waiting_for_server:
            text += f" {self.waiting_for_server} change(s) wait for the server's upgrade to {self.server_upgrade}."
        if self.held_back:
            text += f" {self.held_back} change(s) need a newer Dynadesk; upgrade to see them."
        return text


class Connection:
    """The HTTP side of a ``SyncClient``: one desk's connection to its server, retried and paced.

    ``request`` is how every feature talks to the server (``sync.proposals``, ``sync.wellbeing``,
    ``sync.prepared_forms`` as much as the client itself), ``download_blob`` how a stored file comes down;
    both raise the errors of one map (``refusal``, ``no_answer``)."""

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
            headers={"Authorization": f"Bearer {token}", "User-Agent": f"dynadesk/{__version__}", **our_headers()},
            timeout=httpx.Timeout(self.policy.timeout, connect=self.policy.connect_timeout),
        )
        # The protocol of this exchange: the highest this desk and the server speak (set by ``me``).
        self.protocol = wire_versions.PROTOCOL_VERSION
        self.server_release = ""
        self._answered = False  # has the server answered in this client's life?
        self.retries = 0  # over this client's life, for reports and benchmarks
        self.paced = 0  # 429s waited out, over this client's life

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def request(self, method: str, path: str, handle: SyncHandle | None = None, *, ok: Collection[int] = (200,),
                what: str | None = None, body: object = None, params: Mapping[str, Any] | None = None,
                content: bytes | None = None, headers: Mapping[str, str] | None = None,
                report: SyncReport | None = None) -> httpx.Response:
        """``method`` on ``path`` under the API root (``"/push"``), with ``body`` as JSON or ``content`` as
        it is; retried and paced as the module says. Returns the answer when its status is one of ``ok``
        (the statuses the caller handles); any other raises the error ``refusal`` maps it to, with ``what``
        naming the request in its message. A server that cannot be reached before it first answered raises
        ``Offline``; an untrusted certificate ``Untrusted``; retries used up ``Interrupted``."""
        handle = handle or SyncHandle()
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
                response = self.http.request(method, f"{API}{path}", content=content, params=params,
                                             headers=headers)
            except httpx.TransportError as exc:
                attempt += 1
                last = self._no_answer(exc, attempt)
            else:
                self._answered = True
                if response.status_code == 429:
                    paced += self._pace(response, handle, report, paced)
                    continue
                if response.status_code not in RETRY_STATUS:
                    if response.status_code not in ok:
                        raise refusal(response, what)
                    return response
                attempt += 1
                last = f"HTTP {response.status_code}: {_detail(response)}"
                retry_after = response.headers.get("Retry-After")
            if attempt >= self.policy.attempts:
                raise Interrupted(f"The sync stopped after {attempt} attempts ({last}); "
                                  "the next sync resumes where this one stopped.")
            self._retrying(report)
            log.info("%s %s failed (%s); retrying", method, path, last)
            handle.sleep(self.policy.delay(attempt, retry_after))

    def download_blob(self, sha256: str, target: Path, handle: SyncHandle | None = None,
                      report: SyncReport | None = None, *, damaged_attempts: int | None = None,
                      on_bytes: Callable[[int], None] | None = None) -> None:
        """Fetch the stored file ``sha256`` into ``target``, its sha256 checked; a damaged arrival is fetched
        again, up to the retry policy's attempts (or ``damaged_attempts`` damaged arrivals: then ``Damaged``),
        then ``Interrupted``. A status other than 200 raises what ``refusal`` maps it to (404: ``NotOnServer``).

        What arrived before a dropped connection stays in ``target.part`` and the next attempt (or the next
        call) asks only for the rest (an HTTP range); a server that sends the whole file instead is read from
        the start. ``on_bytes(n)``: the bytes of this file here so far, as they arrive."""
        handle = handle or SyncHandle()
        part = target.with_name(target.name + ".part")
        last = ""
        attempt, paced, damaged = 0, 0.0, 0
        while attempt < self.policy.attempts:
            handle.check()
            have = part.stat().st_size if part.is_file() else 0
            limited = None
            try:
                headers = {"Range": f"bytes={have}-"} if have else None
                with self.http.stream("GET", f"{API}/blobs/{sha256}", headers=headers) as response:
                    self._answered = True
                    if response.status_code == 429:
                        limited = response
                    elif response.status_code in RETRY_STATUS:
                        last = f"HTTP {response.status_code}"
                    elif response.status_code == 416:  # more kept than the file has: not this file's start
                        part.unlink(missing_ok=True)
                        last = "the part kept from before did not fit the file"
                    elif response.status_code not in (200, 206):
                        response.read()
                        raise refusal(response)
                    elif response.status_code == 206 and _range_start(response) != have:
                        part.unlink(missing_ok=True)
                        last = "the server sent another part of the file than the one asked for"
                    else:
                        start = have if response.status_code == 206 else 0  # 200: the whole file, from its start
                        if self._receive(response, part, sha256, start, handle, on_bytes):
                            os.replace(part, target)
                            return
                        last = "the file arrived damaged (its sha256 does not match)"
                        damaged += 1
                        part.unlink(missing_ok=True)  # what was kept is no part of this file
            except httpx.TransportError as exc:
                last = self._no_answer(exc, attempt + 1)  # what arrived stays in the part, for the next attempt
            if limited is not None:
                paced += self._pace(limited, handle, report, paced)
                continue
            attempt += 1
            if damaged_attempts is not None and damaged >= damaged_attempts:
                part.unlink(missing_ok=True)
                raise Damaged(f"A file could not be downloaded ({last}); the next sync tries again.", reason=last)
            self._retrying(report)
            handle.sleep(self.policy.delay(attempt))
        raise Interrupted(f"A file could not be downloaded ({last}); the next sync tries again.", reason=last)

    @staticmethod
    def _receive(response: httpx.Response, part: Path, sha256: str, start: int, handle: SyncHandle,
                 on_bytes: Callable[[int], None] | None) -> bool:
        """Write the answer into ``part`` after its first ``start`` bytes; whether the whole has ``sha256``."""
        digest = hashlib.sha256()
        if start:
            with open(part, "rb") as kept:
                for chunk in iter(lambda: kept.read(CHUNK), b""):
                    digest.update(chunk)
        received = start
        with open(part, "r+b" if start else "wb") as out:
            out.seek(start)
            out.truncate()
            try:
                for chunk in response.iter_bytes():  # as they come: a buffer would lose them when the connection drops
                    handle.check()
                    digest.update(chunk)
                    out.write(chunk)
                    received += len(chunk)
                    if on_bytes is not None:
                        on_bytes(received)
            finally:  # a dropped connection keeps what arrived, on disk
                out.flush()
                os.fsync(out.fileno())
        return digest.hexdigest() == sha256

    def _no_answer(self, exc: httpx.TransportError, attempt: int) -> str:
        """A request that got no answer: an untrusted certificate ends it (``Untrusted``), and so does a server
        that cannot be reached before it ever answered (``Offline``); anything else is said, to be retried."""
        untrusted = _certificate_problem(exc)
        if untrusted:
            raise Untrusted(untrusted) from exc
        last = no_answer(exc)
        if not self._answered and (isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout))
                                   and attempt >= self.policy.connect_attempts):
            raise Offline(f"The sync server at {self.url} cannot be reached ({last}). "
                          "Your work stays queued and goes out at the next sync.") from exc
        return last

    def _retrying(self, report: SyncReport | None) -> None:
        self.retries += 1
        if report is not None:
            report.retries += 1

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
        """Who the token is, and the protocol of this exchange: the highest both sides speak. A server that
        says no protocol headers speaks only what its ``/me`` says (release 0.1: protocol 1); one outside this
        desk's window is refused in one sentence that names both versions (``Unsupported``)."""
        response = self.request("GET", "/me", handle, report=report)
        me = Me.model_validate_json(response.content)
        try:
            speaks, lowest = said(response.headers, fallback=me.protocol)
        except Unreadable as exc:
            raise SyncError(f"The server's answer cannot be read: {exc}.") from None
        version = common(speaks, lowest)
        if version is None:
            raise Unsupported(desk_refusal(speaks, lowest, me.server_version))
        self.protocol, self.server_release = version, me.server_version
        return me

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.request("GET", path, params=params).json()


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
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    return 1.0


def _range_start(response: httpx.Response) -> int | None:
    """Where a partial answer (206) starts: ``Content-Range: bytes START-END/SIZE``."""
    value = response.headers.get("Content-Range", "")
    unit, _, spec = value.partition(" ")
    start = spec.partition("-")[0]
    return int(start) if unit == "bytes" and start.isdigit() else None


def _detail(response: httpx.Response) -> str:
    try:
        return ErrorBody.model_validate_json(response.content).detail
    except (ValidationError, ValueError):
        return response.text[:200] or response.reason_phrase


def _gave_reason(response: httpx.Response) -> bool:
    """Whether the server said why in its own words (not only its status's name, as for a route it lacks)."""
    try:
        detail = ErrorBody.model_validate_json(response.content).detail
    except (ValidationError, ValueError):
        return False
    return bool(detail.strip()) and detail.strip().lower() != response.reason_phrase.lower()


def error_body(response: httpx.Response) -> ErrorBody:
    """The server's error answer (its reason and the records it names); a page that is not one, as its text."""
    try:
        return ErrorBody.model_validate_json(response.content)
    except (ValidationError, ValueError):
        return ErrorBody(detail=f"HTTP {response.status_code}: {response.text[:200]}")
