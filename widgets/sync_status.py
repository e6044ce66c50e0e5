"""The sync status in the status bar: state, records waiting, last successful sync, progress.

A view only: the sync controller tells it what to show (``set_status``, ``set_progress``);
it asks for a sync or the settings through signals.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

COLOURS = {
    "off": "#8a8a8a",
    "synced": "#2e7d32",
    "waiting": "#b26a00",  # synced, but the server put records off until something is published
    "syncing": "#1565c0",
    "offline": "#b26a00",
    "error": "#b3261e",
}
STATES = tuple(COLOURS)


def when(moment: datetime | None, now: datetime | None = None) -> str:
    """'just now', '5 min ago', 'today 14:02', 'yesterday 17:40', '2026-11-20 17:40'."""
    if moment is None:
        return "never"
    now = now or datetime.now(timezone.utc)
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


class SyncStatusWidget(QWidget):
    sync_requested = Signal()
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sync-status")
        self.dot = QLabel("●", objectName="sync-dot")
        self.text = QLabel(objectName="sync-text")
        self.text.setToolTip("Click for sync settings")
        self.text.mousePressEvent = lambda _event: self.settings_requested.emit()
        self.bar = QProgressBar(objectName="sync-progress", maximumWidth=140, maximumHeight=14, textVisible=False)
        self.bar.hide()
        self.button = QToolButton(objectName="sync-now", text="Sync now", autoRaise=True)
        self.button.setToolTip("Push what is waiting and pull what is new (Ctrl+Shift+S)")
        self.button.clicked.connect(self.sync_requested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 0, 2, 0)
        layout.setSpacing(6)
        layout.addWidget(self.dot)
        layout.addWidget(self.text)
        layout.addWidget(self.bar)
        layout.addWidget(self.button)
        self.state = "off"
        self.pending = 0
        self.last_success: datetime | None = None
        self.message = ""
        self.problems = 0
        self.held = 0
        self.deferred = 0
        self.reasons: tuple[str, ...] = ()
        # Relative times ("5 min ago") age while nothing else happens.
        self._clock = QTimer(self, interval=30_000, timeout=self._render)
        self._clock.start()
        self._render()

    def set_status(self, state: str, *, pending: int, last_success: datetime | None, message: str = "",
                   problems: int = 0, held: int = 0, deferred: int = 0, reasons: tuple[str, ...] = ()) -> None:
        """``reasons``: why deferred records wait and what fixes each, one line per reason."""
        if state not in STATES:
            raise ValueError(f"unknown sync state {state!r}")
        self.state, self.pending, self.last_success = state, pending, last_success
        self.message, self.problems, self.held, self.deferred = message, problems, held, deferred
        self.reasons = tuple(reasons)
        if state != "syncing":
            self.bar.hide()
        self._render()

    def set_progress(self, phase: str, done: int, total: int) -> None:
        self.state = "syncing"
        words = {"push": "Sending", "pull": "Receiving", "models": "Downloading models"}.get(phase, "Syncing")
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))
            self.bar.show()
            self.message = f"{words} {done:,} / {total:,}"
        else:
            self.bar.setRange(0, 0)  # busy
            self.bar.show()
            self.message = f"{words}…"
        self._render()

    def _render(self) -> None:
        waiting = f"{self.pending:,} waiting"
        last = f"last sync {when(self.last_success)}"
        text = {
            "off": "Sync off — set a server",
            "synced": f"Synced {when(self.last_success)} · {waiting}",
            "waiting": f"Synced {when(self.last_success)} · ⚠ {waiting}"
                       + ("" if self.deferred == self.pending else f" ({self.deferred:,} put off by the server)"),
            "syncing": self.message or "Syncing…",
            "offline": f"Offline · {waiting} · {last}",
            "error": f"Sync failed · {waiting} · {last}",
        }[self.state]
        if self.problems:
            text += f" · {self.problems:,} refused"
        self.text.setText(text)
        self.dot.setStyleSheet(f"color: {COLOURS[self.state]};")
        tip = [f"Last successful sync: {self.last_success.astimezone():%Y-%m-%d %H:%M:%S}" if self.last_success
               else "Never synced", f"Waiting to be sent: {self.pending:,}"]
        if self.deferred:
            tip.append(f"Of those, {self.deferred:,} refer to something the server does not have yet; they go out "
                       "at the next sync after it is published:")
            tip += [f"  • {reason}" for reason in self.reasons]
        if self.held:
            tip.append(f"Written under other profiles (they sync with their own token): {self.held:,}")
        if self.problems:
            tip.append(f"Refused by the server or in conflict: {self.problems:,} (dynadesk sync problems)")
        if self.message and self.state in ("offline", "error"):
            tip.append(self.message)
        tip.append("Click for sync settings")
        self.text.setToolTip("\n".join(tip))
        self.button.setEnabled(self.state != "syncing")
