"""The sync status and settings in the main window, driven like a user, against a real server on
loopback. Waits are on conditions and signals, never on sleeps."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from datetime import UTC, datetime, timedelta

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialogButtonBox

from app.views.sync import SyncLight, SyncView, when
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import ThreadServer, add_account, publish_basics, server_counts, server_database
from widgets.sync_dialog import SyncDialog
from widgets.sync_status import SyncStatusWidget


@pytest.fixture
def server(tmp_path):
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    gate = Gate()
    running = ThreadServer(db, tmp_path / "server", wrap=gate.wrap)
    running.gate = gate
    owner = add_account(db, "Olga Owner", "owner", "A")
    publish_basics(running.url, owner, tmp_path)
    running.ann = add_account(db, "Ann Annotator", "annotator", "A")
    yield running
    gate.release.set()
    running.stop()
    db.close()


class Gate:
    """Holds pushes at the door until the test lets them through (``hold``/``release``)."""

    def __init__(self):
        self.release = threading.Event()
        self.release.set()
        self.waiting = threading.Event()

    def wrap(self, app):
        async def gated(scope, receive, send):
            if scope["type"] == "http" and scope["path"] == "/v1/push" and not self.release.is_set():
                self.waiting.set()
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
            await app(scope, receive, send)

        return gated


def action(window, name) -> QAction:
    found = window.findChild(QAction, name)
    assert found is not None, name
    return found


def status_text(window) -> str:
    return window.sync_status.text.text()


def submit_examples(desk, person_id, n: int) -> None:
    model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
    for i in range(n):
        desk.examples.create(person_id, "hate_speech", hate_content(f"written at the desk, number {i}", "hate"),
                             [hate_output(model, "not hate")])


def configure_through_the_dialog(qtbot, window, url: str, token: str) -> SyncDialog:
    action(window, "sync-settings").trigger()
    dialog = window.findChild(SyncDialog)
    assert dialog is not None and dialog.isVisible()
    dialog.url.clear()
    qtbot.keyClicks(dialog.url, url)
    qtbot.keyClicks(dialog.token, token)
    return dialog


def test_the_status_widget_says_where_sync_stands(qtbot):
    widget = SyncStatusWidget()
    qtbot.addWidget(widget)
    widget.show()
    assert widget.text.text() == "Sync off — set a server"
    earlier = datetime.now(UTC) - timedelta(minutes=5)
    widget.show_status(SyncView(SyncLight.SYNCED, pending=0, last_success=earlier))
    assert widget.text.text() == "Synced 5 min ago · 0 waiting"
    widget.show_status(SyncView(SyncLight.OFFLINE, pending=1234, last_success=earlier, message="cannot reach the server"))
    assert widget.text.text() == "Offline · 1,234 waiting · last sync 5 min ago"
    assert "cannot reach the server" in widget.text.toolTip()
    widget.set_progress("push", 1500, 10000)
    assert widget.text.text() == "Sending 1,500 / 10,000" and widget.bar.isVisible() and widget.bar.value() == 1500
    assert not widget.button.isEnabled()  # one sync at a time
    widget.show_status(SyncView(SyncLight.ERROR, pending=3, last_success=None,
                                message="The server refused the sync token", problems=2))
    assert widget.text.text() == "Sync failed · 3 waiting · last sync never · 2 refused"
    assert not widget.bar.isVisible() and widget.button.isEnabled()
    with qtbot.waitSignal(widget.sync_requested, timeout=1000):
        qtbot.mouseClick(widget.button, Qt.MouseButton.LeftButton)
    with qtbot.waitSignal(widget.settings_requested, timeout=1000):
        qtbot.mouseClick(widget.text, Qt.MouseButton.LeftButton)
    now = datetime(2026, 5, 6, 12, 0, tzinfo=UTC)
    assert when(now - timedelta(seconds=20), now) == "just now"
    assert when(now - timedelta(days=3), now).startswith("2026-05-03")


def test_settings_dialog_checks_the_connection_and_keeps_the_token_out_of_settings(qtbot, window, server, data_dir):
    assert status_text(window) == "Sync off — set a server"
    dialog = configure_through_the_dialog(qtbot, window, "not a url", "")
    dialog.test.click()
    assert "http://" in dialog.result.text()  # said in the dialog, nothing sent

    dialog.url.clear()
    qtbot.keyClicks(dialog.url, "http://sync.example.org:8765")
    qtbot.keyClicks(dialog.token, "ddk_secret")
    dialog.test.click()  # plain http:// to another machine: the token is not sent
    qtbot.waitUntil(lambda: dialog.test.isEnabled() and "unencrypted" in dialog.result.text(), timeout=10_000)
    dialog.token.clear()

    dialog.url.clear()
    qtbot.keyClicks(dialog.url, server.url)
    qtbot.keyClicks(dialog.token, "ddk_wrong-token")
    dialog.test.click()
    qtbot.waitUntil(lambda: dialog.test.isEnabled() and "refused" in dialog.result.text(), timeout=10_000)

    dialog.token.clear()
    qtbot.keyClicks(dialog.token, server.ann.token)
    dialog.test.click()
    qtbot.waitUntil(lambda: dialog.result.text().startswith("Connected as Ann Annotator"), timeout=10_000)
    dialog.interval.setValue(10)
    dialog.buttons.button(QDialogButtonBox.StandardButton.Ok).click()

    qtbot.waitUntil(lambda: status_text(window).startswith("Synced just now"), timeout=20_000)
    saved = json.loads((data_dir / "settings.json").read_text())
    assert saved["server_url"] == server.url and saved["sync_interval_s"] == 600
    assert server.ann.token not in (data_dir / "settings.json").read_text()
    token_file = data_dir / "sync-token.json"  # no system keyring on the test machine
    assert token_file.exists() and stat.S_IMODE(os.stat(token_file).st_mode) == 0o600
    assert window.desk.current_person().id == server.ann.id  # the desk works as the server knows Ann


def test_sync_now_sends_the_outbox_without_blocking_the_editor(qtbot, window, server):
    desk = window.desk
    window.sync.configure(server.url, server.ann.token, 300)
    qtbot.waitUntil(lambda: status_text(window).startswith("Synced"), timeout=20_000)
    submit_examples(desk, server.ann.id, 3)
    window.sync.refresh()
    qtbot.waitUntil(lambda: status_text(window).endswith("3 waiting"), timeout=10_000)

    server.gate.release.clear()  # the server takes the push but holds it at the door
    action(window, "sync-now").trigger()
    server.gate.waiting.wait(timeout=20)
    qtbot.waitUntil(lambda: window.sync.running, timeout=5000)
    # While the sync waits on the server, the data browser still answers.
    window.refresh()
    qtbot.waitUntil(lambda: window.count_label.text() == "3 examples", timeout=5000)
    assert window.sync.running
    server.gate.release.set()
    qtbot.waitUntil(lambda: status_text(window).startswith("Synced") and status_text(window).endswith("0 waiting"),
                    timeout=20_000)
    assert server_counts(server.db)["examples"] == 3

    # Offline is a state, not an error: the work waits.
    server.stop()
    submit_examples(desk, server.ann.id, 1)
    action(window, "sync-now").trigger()
    qtbot.waitUntil(lambda: status_text(window).startswith("Offline · 1 waiting"), timeout=20_000)
    assert window.sync.timer.isActive()  # and it will try again


def test_a_lead_returning_an_example_elsewhere_shows_in_returned_to_me_after_sync(qtbot, window, server, tmp_path):
    from app.core.services.review import ExampleFilter
    from sync.client import SyncClient
    from sync.transport import RetryPolicy
    from tests.sync.helpers import prepare_desk

    desk = window.desk
    window.sync.configure(server.url, server.ann.token, 300)
    qtbot.waitUntil(lambda: status_text(window).startswith("Synced"), timeout=20_000)
    submit_examples(desk, server.ann.id, 2)
    action(window, "sync-now").trigger()
    qtbot.waitUntil(lambda: status_text(window).startswith("Synced") and status_text(window).endswith("0 waiting"),
                    timeout=20_000)
    window.tabs.setCurrentWidget(window.data_page)
    author = window.filter_bar.author
    author.setCurrentIndex(author.findData("returned"))
    qtbot.waitUntil(lambda: window.count_label.text() == "0 examples", timeout=5000)

    # On the lead's own desk: pull Ann's work, return one example, sync.
    lead_account = add_account(server.db, "Lee Lead", "lead", "A")
    lead = prepare_desk(tmp_path / "lead-desk", lead_account)
    with SyncClient(lead, server.url, lead_account.token, policy=RetryPolicy(attempts=3, first_delay=0.01)) as client:
        client.run(fetch_models=False)
        returned = next(e for e in lead.review.rows(ExampleFilter(author_ids=[server.ann.id]))
                        if e.text.endswith("number 1"))
        lead.lead.return_examples(lead_account.id, [returned.id], "Say which group is attacked")
        assert client.run(fetch_models=False).pushed == 1
    lead.close()

    # Ann syncs (Ctrl+Shift+S); her "Returned to me" list shows it, marked, with the comment.
    qtbot.keyClick(window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=20_000)
    assert window.table_model.row_data(0).id == returned.id
    column = [key for key, _ in window.table_model.columns].index("review_state")
    assert window.table_model.data(window.table_model.index(0, column)) == "⟲ returned"
    window.table.selectRow(0)
    qtbot.waitUntil(lambda: "Returned by a lead: Say which group is attacked" in window.detail.toPlainText(),
                    timeout=5000)


def test_records_the_server_put_off_show_as_waiting_with_the_reason_and_its_fix(qtbot, window, server):
    desk = window.desk
    window.sync.configure(server.url, server.ann.token, 300)
    qtbot.waitUntil(lambda: status_text(window).startswith("Synced"), timeout=20_000)
    model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
    desk.tasks.get_or_create_round("hate_speech", 3)  # the owner never published round 3
    for i in range(2):
        desk.examples.create(server.ann.id, "hate_speech", hate_content(f"in an unpublished round {i}", "hate"),
                             [hate_output(model, "not hate")], round_number=3)
    action(window, "sync-now").trigger()
    qtbot.waitUntil(lambda: window.sync_status.state == "waiting", timeout=20_000)
    widget = window.sync_status
    assert status_text(window).startswith("Synced just now · ⚠ 2 waiting")  # never a green "Synced" over them
    assert "#2e7d32" not in widget.dot.styleSheet()
    tip = widget.text.toolTip()
    assert "2 because round 3 of 'hate_speech' is not published yet" in tip
    assert "fix: the owner must publish round 3: `dynadesk sync publish hate_speech --round 3`" in tip


def test_sync_now_with_sync_off_opens_the_settings_and_says_why(qtbot, window):
    assert status_text(window) == "Sync off — set a server"
    qtbot.keyClick(window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
    qtbot.waitUntil(lambda: window.findChild(SyncDialog) is not None and window.findChild(SyncDialog).isVisible(),
                    timeout=5000)
    dialog = window.findChild(SyncDialog)
    assert "Sync is off: no server is set" in dialog.result.text()
    assert "Sync is off: no server is set" in window.statusBar().currentMessage()
    action(window, "sync-now").trigger()  # again, with the dialog open: still one dialog
    assert len([d for d in window.findChildren(SyncDialog) if d.isVisible()]) == 1


def test_records_an_older_server_cannot_take_show_as_waiting_for_its_upgrade(qtbot, window, tmp_path, monkeypatch):
    """A server of the previous release (protocol 1) cannot take a field protocol 2 brought: the status bar
    says how many wait for its upgrade, never a green "Synced", and they go once it is upgraded."""
    from sync import local, wire_versions
    from tests.sync.test_negotiation import OlderServer

    db = server_database(f"sqlite:///{tmp_path / 'older' / 'server.sqlite'}")
    older = OlderServer()
    server = ThreadServer(db, tmp_path / "older", wrap=older)
    try:
        owner = add_account(db, "Olga Owner", "owner", "A")
        publish_basics(server.url, owner, tmp_path)
        ann = add_account(db, "Ann Annotator", "annotator", "A")
        window.sync.configure(server.url, ann.token, 300)
        qtbot.waitUntil(lambda: status_text(window).startswith("Synced"), timeout=20_000)
        monkeypatch.setitem(wire_versions.FIELD_SINCE, ("example", "outputs"), 2)  # as if protocol 2 brought it
        submit_examples(window.desk, ann.id, 2)
        action(window, "sync-now").trigger()
        qtbot.waitUntil(lambda: "wait for the server's upgrade" in status_text(window), timeout=20_000)
        assert status_text(window) == "Synced just now · ⚠ 2 waiting · 2 wait for the server's upgrade"
        assert "#2e7d32" not in window.sync_status.dot.styleSheet()
        assert "2 wait for the server's upgrade to Dynadesk 0.2: its release cannot take them yet" in \
            window.sync_status.text.toolTip()
        assert server_counts(db).get("examples", 0) == 0

        older.upgraded = True
        action(window, "sync-now").trigger()
        qtbot.waitUntil(lambda: status_text(window) == "Synced just now · 0 waiting", timeout=20_000)
        assert "#2e7d32" in window.sync_status.dot.styleSheet()
        assert server_counts(db)["examples"] == 2

        # a newer server's count of what it did not send (the last sync's page says it)
        local.note_versions(window.desk.db, held_back=3)
        window.sync.refresh()
        qtbot.waitUntil(lambda: "need a newer Dynadesk" in status_text(window), timeout=10_000)
        assert status_text(window) == "Synced just now · 0 waiting · ⚠ 3 need a newer Dynadesk"
        assert "did not send this desk 3 change(s) that need a newer Dynadesk; upgrade this desk" in \
            window.sync_status.text.toolTip()
    finally:
        server.stop()
        db.close()
