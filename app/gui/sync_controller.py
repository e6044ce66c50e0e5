"""The GUI's side of sync: runs the (Qt-free) sync client on its own worker thread, on a timer
from the settings and on "Sync now", and tells the status widget what to show.

The sync worker is separate from the database worker that serves editing, so a slow sync
never blocks the editor; the client itself writes in short units of work. Offline is shown as
a state, not an error, and retried with backoff (never more often than every 15 s, never less
often than the interval).

``sync_page`` declares the status widget, the Sync menu and the settings dialog for the main window
(MainWindow.mount).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QWidget

from app.core.errors import DynadeskError
from app.gui.pages import Menu, MenuAction, Page
from app.gui.worker import SerialWorker
from app.views.sync import SyncLight, SyncView, settings_view, sync_view, syncing_view

log = logging.getLogger(__name__)

FIRST_SYNC_MS = 3_000  # after start, once the window is up
POLL_MS = 5_000  # how often the waiting count is refreshed between syncs
RETRY_MIN_S = 15
FIRST_SYNC_SOON = "Syncing in a moment…"


class SyncController(QObject):
    status_changed = Signal(object)  # SyncView
    progress = Signal(str, int, int)  # phase, done, total
    finished = Signal(object)  # SyncReport of a successful sync
    test_finished = Signal(bool, str)
    identity_changed = Signal()  # the desk now works as the token's holder
    settings_needed = Signal(str)  # "Sync now" with no server set: why nothing happened

    def __init__(self, desk, parent: QObject | None = None, *, clients=None):
        super().__init__(parent)
        from sync.client import ClientFactory

        self.desk = desk
        # The one place this window's sync clients are made (and its tokens kept): lent to proposals and
        # the first start's prepared form.
        self.clients = clients if clients is not None else ClientFactory(desk)
        self.worker = SerialWorker("dynadesk-sync", self)
        self.worker.failed.connect(lambda exc: log.error("sync worker job failed: %s", exc))
        self.timer = QTimer(self, singleShot=True, timeout=lambda: self.sync_now(asked=False))
        self.poll = QTimer(self, interval=POLL_MS, timeout=self.refresh)
        self.running = False
        self.failures = 0
        self.state = SyncLight.OFF
        self.message = ""
        self._status = None  # the last LocalStatus read
        self._handle = None
        self._client = None
        self._lock = threading.Lock()
        self._stopped = False
        self._started_once = False  # a sync has run (or been tried) since the window opened

    def start(self) -> None:
        self.poll.start()
        self.refresh()
        if self.configured:
            self.timer.start(FIRST_SYNC_MS)

    def stop(self) -> None:
        """Cancel a running sync (it resumes next time) and wait briefly for the worker."""
        self._stopped = True
        self.timer.stop()
        self.poll.stop()
        with self._lock:
            if self._handle is not None:
                self._handle.cancel()
            if self._client is not None:
                try:
                    self._client.close()  # aborts a request in flight; the server is idempotent
                except Exception:  # closing from another thread may race; the cancel still holds
                    pass
        self.worker.shutdown(wait=True)

    @property
    def configured(self) -> bool:
        return bool(self.desk.settings.server_url)

    def team_server(self) -> str | None:
        """The team server this desk syncs with, where a token for it is held (read on a worker: the
        keyring may be slow); on such a desk the token's holder is who works here."""
        url = self.desk.settings.server_url
        return url if url and self.clients.token(url) else None

    def first_view(self, status=None) -> SyncView:
        """What the status bar says before the first sync: on a desk with a server, that it is seconds away
        (never "Sync off"); without one, that sync is off."""
        if self.configured:
            return replace(syncing_view(status), message=FIRST_SYNC_SOON)
        return SyncView(SyncLight.OFF, 0, None)

    def sync_now(self, asked: bool = True) -> None:
        """Sync now; ``asked``: a person asked (Sync now), so a sync that cannot start says why."""
        if self.running or self._stopped:
            return
        if not self.configured:
            self._set(SyncLight.OFF, "")
            if asked:
                self.settings_needed.emit("Sync is off: no server is set. Enter your team's server and the token "
                                          "your owner gave you, then sync.")
            return
        self.timer.stop()
        self.running = True
        self._started_once = True
        self._set(SyncLight.SYNCING, "")
        self.progress.emit("sync", 0, 0)
        self.worker.submit(self._run, on_done=self._succeeded, on_error=self._failed)

    def _run(self):
        from sync.transport import SyncHandle

        handle = SyncHandle(on_progress=self.progress.emit)  # a signal: queued to the GUI thread
        client = self.clients.configured()
        with self._lock:
            self._handle, self._client = handle, client
        try:
            return client.run(handle)
        finally:
            with self._lock:
                self._handle = self._client = None
            client.close()

    def publish(self, task_code: str, rounds: list[int] | None, *, on_done, on_error) -> None:
        """Publish a task's rounds and their target models (owners), on the sync worker: the client's
        ``publish``, as ``dynadesk sync publish`` calls it; progress comes through ``progress``."""
        def run():
            from sync.transport import SyncHandle

            with self.clients.configured() as client:
                return client.publish(task_code, rounds, handle=SyncHandle(on_progress=self.progress.emit))

        def then(callback):
            def deliver(value) -> None:
                self.refresh()  # the status bar leaves the publish's progress for the usual state
                callback(value)
            return deliver

        self.worker.submit(run, on_done=then(on_done), on_error=then(on_error))

    def _succeeded(self, report) -> None:
        self.running = False
        self.failures = 0
        self._set(SyncLight.SYNCED, "; ".join(report.notices()[:3]))
        self.finished.emit(report)
        self._schedule(self.desk.settings.sync_interval_s)

    def _failed(self, error: BaseException) -> None:
        from sync.transport import Cancelled, Offline

        self.running = False
        if isinstance(error, Cancelled):
            self._set(SyncLight.SYNCED if self.state is SyncLight.SYNCED else SyncLight.OFFLINE, "")
            return
        self.failures += 1
        if isinstance(error, Offline):
            self._set(SyncLight.OFFLINE, str(error))
        else:
            if isinstance(error, DynadeskError):  # explained in its message
                log.info("sync failed: %s", error)
            else:
                log.error("sync failed", exc_info=(type(error), error, error.__traceback__))
            self._set(SyncLight.ERROR, str(error) or error.__class__.__name__)
        # Back off while the server is away, but never wait longer than the usual interval.
        interval = self.desk.settings.sync_interval_s
        self._schedule(min(interval, RETRY_MIN_S * 2 ** (self.failures - 1)))

    def _schedule(self, seconds: float) -> None:
        if not self._stopped and self.configured:
            self.timer.start(int(seconds * 1000))

    def refresh(self) -> None:
        """Re-read the waiting count and last sync time (on the sync worker, never here)."""
        if self.running or self._stopped:
            return
        self.worker.submit(self._read_status, on_done=self._show, on_error=lambda exc: log.warning("sync status: %s", exc))

    def _read_status(self):
        from sync.client import person_id
        from sync.local import local_status

        who = person_id(self.desk)
        if who is None and self.desk.settings.current_person_id:
            import uuid

            who = uuid.UUID(self.desk.settings.current_person_id)
        return local_status(self.desk.db, who)

    def _show(self, status) -> None:
        if self.running:
            return
        self._status = status
        if self.configured and not self._started_once:
            self.status_changed.emit(self.first_view(status))
            return
        self.status_changed.emit(sync_view(self.state if self.configured else SyncLight.OFF, status, self.message))

    def _set(self, state: SyncLight, message: str) -> None:
        self.state, self.message = state, message
        if state is SyncLight.SYNCING:
            self.status_changed.emit(syncing_view(self._status))
        else:
            self.refresh()

    def configure(self, url: str, token: str, interval_s: int) -> None:
        """Save the server and interval (settings) and the token (keyring or private file); make the
        token's holder this desk's profile; then sync. A plain http:// URL to another machine is
        refused (the token would cross the network in clear); the CLI's --insecure allows it."""
        from sync.transport import SyncError, refuse_token_in_clear

        try:
            refuse_token_in_clear(url)
        except SyncError as exc:
            self._set(SyncLight.ERROR, str(exc))
            return
        self.desk.settings.server_url = url.rstrip("/")
        self.desk.settings.sync_interval_s = interval_s
        self.desk.save_settings()

        def store():
            from sync.transport import Offline

            if token:
                self.clients.tokens.set(url, token)
            try:
                with self.clients.for_server(url, token) as client:
                    me = client.me()
                    client.adopt_identity(me)
            except Offline:
                return False  # it will say so when it syncs
            if self.desk.settings.current_person_id != str(me.id):
                self.desk.switch_person(me.id)  # new work is written as the person the server knows
                return True
            return False

        def stored(switched: bool) -> None:
            if switched:
                self.identity_changed.emit()
            self.sync_now()

        self.failures = 0
        self.worker.submit(store, on_done=stored, on_error=self._failed)

    def open_settings(self, parent: QWidget, why: str = "") -> None:
        """The sync settings dialog (``why``: what to explain in it); one already open says it there."""
        from widgets.sync_dialog import SyncDialog

        for dialog in parent.findChildren(SyncDialog):
            if dialog.isVisible():
                if why:
                    dialog.explain(why)
                dialog.raise_()
                return
        url = self.desk.settings.server_url
        dialog = SyncDialog(settings_view(url, bool(url and self.clients.token(url)),
                                          self.desk.settings.sync_interval_s, self.clients.tokens.where), parent)
        dialog.test_requested.connect(self.test_connection)
        self.test_finished.connect(dialog.show_test_result)
        dialog.accepted_with.connect(self.configure)
        dialog.finished.connect(lambda _code: self.test_finished.disconnect(dialog.show_test_result))
        if why:
            dialog.explain(why)
        dialog.open()

    def test_connection(self, url: str, token: str) -> None:
        def check():
            from sync.transport import refuse_token_in_clear

            refuse_token_in_clear(url)  # before the token goes anywhere
            with self.clients.for_server(url, token) as client:
                return client.me()

        def done(me):
            self.test_finished.emit(True, f"Connected as {me.display_name} ({me.role.value}, team {me.team}).")

        self.worker.submit(check, on_done=done, on_error=lambda exc: self.test_finished.emit(False, str(exc)))


def sync_page(controller: SyncController, parent: QWidget, show_message: Callable[[str, int], None]) -> Page:
    """Sync in the main window, declared for MainWindow.mount: the status widget in the status bar, the
    Sync menu and the settings dialog."""
    from widgets.sync_status import SyncStatusWidget

    widget = SyncStatusWidget()
    widget.show_status(controller.first_view())

    def settings_needed(why: str) -> None:
        show_message(why, 15_000)
        controller.open_settings(parent, why)

    controller.status_changed.connect(widget.show_status)
    controller.progress.connect(widget.set_progress)
    widget.sync_requested.connect(controller.sync_now)
    widget.settings_requested.connect(lambda: controller.open_settings(parent))
    controller.settings_needed.connect(settings_needed)
    return Page(controller, status=(widget,), shutdown=controller.stop, actions=(
        MenuAction(Menu.SYNC, "Sync &now", lambda: controller.sync_now(), "Ctrl+Shift+S", "sync-now"),
        MenuAction(Menu.SYNC, "Sync &settings…", lambda: controller.open_settings(parent), name="sync-settings"),
    ))
