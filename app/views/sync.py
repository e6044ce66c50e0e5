"""What the sync status widget and the sync settings dialog show.

``sync_view`` turns the sync client's local status into a :class:`SyncView`; ``sync_line`` words it
(the text, its tooltip and colour) at a given moment, so relative times ("5 min ago") age without a
new status. Qt-free, tested in tests/views/test_sync.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from app.core.domain import StrEnum
from app.core.text import printable


class WaitingReason(Protocol):
    count: int
    reason: str
    fix: str


class LocalStatus(Protocol):
    """What sync.local.local_status reads (named here so widgets need not import the sync package)."""

    pending: int
    deferred: int
    held: int
    rejected: int
    conflicts: int
    last_success: datetime | None
    waiting: Sequence[WaitingReason]
    waiting_for_server: int
    server_upgrade: str
    held_back: int


class SyncLight(StrEnum):
    """Where sync stands, as the status bar shows it."""

    OFF = "off"
    SYNCED = "synced"
    WAITING = "waiting"  # synced, but the server put records off until something is published
    SYNCING = "syncing"
    OFFLINE = "offline"
    ERROR = "error"


COLOURS = {
    SyncLight.OFF: "#8a8a8a",
    SyncLight.SYNCED: "#2e7d32",
    SyncLight.WAITING: "#b26a00",
    SyncLight.SYNCING: "#1565c0",
    SyncLight.OFFLINE: "#b26a00",
    SyncLight.ERROR: "#b3261e",
}
PHASES = {"push": "Sending", "pull": "Receiving", "models": "Downloading models"}


@dataclass(frozen=True, slots=True)
class SyncView:
    """What the status widget shows."""

    state: SyncLight
    pending: int
    last_success: datetime | None
    message: str = ""
    problems: int = 0
    held: int = 0
    deferred: int = 0
    reasons: tuple[str, ...] = ()  # why the deferred records wait and what fixes each, one line per reason
    waiting_for_server: int = 0  # of ``pending``, records the server's older release cannot take yet
    server_upgrade: str = ""  # the release they wait for
    held_back: int = 0  # changes a newer server did not send: this desk needs upgrading to see them


@dataclass(frozen=True, slots=True)
class SyncLine:
    """The status widget's words at one moment."""

    text: str
    tooltip: str
    colour: str
    can_sync: bool  # one sync at a time


@dataclass(frozen=True, slots=True)
class SyncSettingsView:
    """What the sync settings dialog opens with."""

    url: str
    token_stored: bool
    interval_min: int
    token_place: str  # where the token is kept (keyring or a private file)


def sync_view(state: SyncLight, status: LocalStatus, message: str = "") -> SyncView:
    """The status of a sync controller in ``state`` (OFF when no server is set), over the local status read."""
    if state is SyncLight.SYNCING:
        state = SyncLight.SYNCED
    # never a green "Synced" over work the server put off, or over changes that cross a version gap
    if state is SyncLight.SYNCED and (status.deferred or status.waiting_for_server or status.held_back):
        state = SyncLight.WAITING
    reasons = tuple(printable(f"{w.count:,} because {w.reason}") + "\n      fix: " + printable(w.fix)
                    for w in status.waiting)
    return SyncView(state, status.pending, status.last_success, message, status.rejected + status.conflicts,
                    status.held, status.deferred, reasons, status.waiting_for_server,
                    printable(status.server_upgrade), status.held_back)


def syncing_view(status: LocalStatus | None) -> SyncView:
    """A sync has started: the counts last read stay shown."""
    return SyncView(SyncLight.SYNCING, status.pending if status else 0, status.last_success if status else None)


def settings_view(url: str | None, token_stored: bool, interval_s: int, token_place: str) -> SyncSettingsView:
    return SyncSettingsView(url or "", bool(url and token_stored), max(1, round(interval_s / 60)), token_place)


def progress_message(phase: str, done: int, total: int) -> str:
    """'Sending 1,500 / 10,000'; without a total, 'Receiving…'."""
    words = PHASES.get(phase, "Syncing")
    return f"{words} {done:,} / {total:,}" if total > 0 else f"{words}…"


def when(moment: datetime | None, now: datetime | None = None) -> str:
    """'just now', '5 min ago', 'today 14:02', 'yesterday 17:40', '2026-11-20 17:40'."""
    if moment is None:
        return "never"
    now = now or datetime.now(UTC)
    local, local_now = moment.astimezone(), now.astimezone()
    age = now - moment
    if age < timedelta(minutes=1):
        return "just now"
    if age < timedelta(hours=1):
        return f"{int(age.total_seconds() // 60)} min ago"
    if local.date() == local_now.date():
        return f"today {local:%H:%M}"
    if local.date() == (local_now - timedelta(days=1)).date():
        return f"yesterday {local:%H:%M}"
    return f"{local:%Y-%m-%d %H:%M}"


def sync_line(view: SyncView, now: datetime | None = None) -> SyncLine:
    """The status widget's text, tooltip and colour for ``view`` at ``now``."""
    waiting = f"{view.pending:,} waiting"
    last = f"last sync {when(view.last_success, now)}"
    text = {
        SyncLight.OFF: "Sync off — set a server",
        SyncLight.SYNCED: f"Synced {when(view.last_success, now)} · {waiting}",
        SyncLight.WAITING: f"Synced {when(view.last_success, now)} · {'⚠ ' if view.pending else ''}{waiting}"
                           + (f" ({view.deferred:,} put off by the server)"
                              if view.deferred and view.deferred != view.pending else ""),
        SyncLight.SYNCING: view.message or "Syncing…",
        SyncLight.OFFLINE: f"Offline · {waiting} · {last}",
        SyncLight.ERROR: f"Sync failed · {waiting} · {last}",
    }[view.state]
    if view.problems:
        text += f" · {view.problems:,} refused"
    if view.waiting_for_server:
        text += f" · {view.waiting_for_server:,} wait for the server's upgrade"
    if view.held_back:
        text += f" · {'' if view.pending else '⚠ '}{view.held_back:,} need a newer Dynadesk"
    tip = [f"Last successful sync: {view.last_success.astimezone():%Y-%m-%d %H:%M:%S}" if view.last_success
           else "Never synced", f"Waiting to be sent: {view.pending:,}"]
    if view.deferred:
        tip.append(f"Of those, {view.deferred:,} refer to something the server does not have yet; they go out "
                   "at the next sync after it is published:")
        tip += [f"  • {reason}" for reason in view.reasons]
    if view.waiting_for_server:
        tip.append(f"Of those, {view.waiting_for_server:,} wait for the server's upgrade to "
                   f"{view.server_upgrade or 'a newer Dynadesk'}: its release cannot take them yet. They stay "
                   "here and go at the first sync after the server is upgraded.")
    if view.held_back:
        tip.append(f"The server did not send this desk {view.held_back:,} change(s) that need a newer Dynadesk; "
                   "upgrade this desk to see them (they are sent at its first sync after the upgrade).")
    if view.held:
        tip.append(f"Written under other profiles (they sync with their own token): {view.held:,}")
    if view.problems:
        tip.append(f"Refused by the server or in conflict: {view.problems:,} (dynadesk sync problems)")
    if view.message and view.state in (SyncLight.OFFLINE, SyncLight.ERROR):
        tip.append(view.message)
    elif view.message and view.state in (SyncLight.SYNCED, SyncLight.WAITING):  # what the last sync had to say
        tip.append(f"The last sync: {view.message}")
    tip.append("Click for sync settings")
    return SyncLine(text, "\n".join(tip), COLOURS[view.state], view.state is not SyncLight.SYNCING)
