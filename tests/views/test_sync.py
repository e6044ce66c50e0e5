"""The sync status's view-model and its words, without Qt."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

from app.views.sync import (
    COLOURS,
    SyncLight,
    SyncView,
    progress_message,
    settings_view,
    sync_line,
    sync_view,
    syncing_view,
)

NOW = datetime(2026, 5, 6, 12, 0, tzinfo=UTC)


def status(**counts):
    base = dict(pending=0, deferred=0, held=0, rejected=0, conflicts=0, last_success=NOW - timedelta(minutes=5),
                waiting=(), waiting_for_server=0, server_upgrade="", held_back=0)
    return SimpleNamespace(**{**base, **counts})


def test_a_sync_view_never_shows_green_over_deferred_work():
    assert sync_view(SyncLight.SYNCING, status(pending=2)).state is SyncLight.SYNCED
    waiting = sync_view(SyncLight.SYNCED, status(pending=3, deferred=2, rejected=1, conflicts=1, waiting=(
        SimpleNamespace(count=2, reason="its round is not published", fix="publish the round"),)))
    assert waiting.state is SyncLight.WAITING and waiting.problems == 2
    assert waiting.reasons == ("2 because its round is not published\n      fix: publish the round",)
    assert sync_view(SyncLight.OFF, status(deferred=1)).state is SyncLight.OFF
    assert syncing_view(None) == SyncView(SyncLight.SYNCING, 0, None)


def test_the_words_of_each_state():
    five_ago = NOW - timedelta(minutes=5)
    assert sync_line(SyncView(SyncLight.OFF, 0, None), NOW).text == "Sync off — set a server"
    assert sync_line(SyncView(SyncLight.SYNCED, 0, five_ago), NOW).text == "Synced 5 min ago · 0 waiting"
    waiting = sync_line(SyncView(SyncLight.WAITING, 3, five_ago, deferred=2, reasons=("why",)), NOW)
    assert waiting.text == "Synced 5 min ago · ⚠ 3 waiting (2 put off by the server)" and "  • why" in waiting.tooltip
    offline = sync_line(SyncView(SyncLight.OFFLINE, 1234, five_ago, message="cannot reach the server"), NOW)
    assert offline.text == "Offline · 1,234 waiting · last sync 5 min ago"
    assert offline.tooltip.splitlines()[-2:] == ["cannot reach the server", "Click for sync settings"]
    failed = sync_line(SyncView(SyncLight.ERROR, 3, None, problems=2), NOW)
    assert failed.text == "Sync failed · 3 waiting · last sync never · 2 refused" and failed.colour == "#b3261e"
    busy = sync_line(SyncView(SyncLight.SYNCING, 0, None, message=progress_message("push", 1500, 10000)), NOW)
    assert busy.text == "Sending 1,500 / 10,000" and not busy.can_sync
    assert progress_message("pull", 0, 0) == "Receiving…"


def test_the_settings_dialog_opens_on_minutes_and_knows_a_stored_token():
    assert settings_view(None, True, 300, "the keyring") == settings_view("", False, 300, "the keyring")
    view = settings_view("https://sync.example.org", True, 20, "the keyring")
    assert view.token_stored and view.interval_min == 1 and view.url == "https://sync.example.org"


def test_the_line_says_what_crosses_a_version_gap_and_is_never_green_over_it():
    waiting = sync_view(SyncLight.SYNCED, status(pending=3, waiting_for_server=2, server_upgrade="Dynadesk 0.2"))
    assert waiting.state is SyncLight.WAITING
    line = sync_line(waiting, NOW)
    assert line.text == "Synced 5 min ago · ⚠ 3 waiting · 2 wait for the server's upgrade"
    assert "2 wait for the server's upgrade to Dynadesk 0.2" in line.tooltip
    held = sync_line(sync_view(SyncLight.SYNCED, status(held_back=4)), NOW)
    assert held.text == "Synced 5 min ago · 0 waiting · ⚠ 4 need a newer Dynadesk"
    assert held.colour != COLOURS[SyncLight.SYNCED]
    plain = sync_line(sync_view(SyncLight.SYNCED, status()), NOW)
    assert plain.text == "Synced 5 min ago · 0 waiting" and plain.colour == COLOURS[SyncLight.SYNCED]


def test_what_the_last_sync_had_to_say_is_in_the_tooltip():
    from sync.transport import SyncReport

    report = SyncReport(rechecked=3, no_longer_fooling=1, warnings=["could not read who may promote: 503"])
    assert report.notices() == [report.recheck_note(), "could not read who may promote: 503"]
    note = "; ".join(report.notices())
    line = sync_line(sync_view(SyncLight.SYNCED, status(), note), NOW)
    assert line.text == "Synced 5 min ago · 0 waiting"
    assert ("The last sync: 3 example(s) written against this desk's own form of the round's model were re-checked "
            "against the team's target; 1 of them no longer fool it.; could not read who may promote: 503") in line.tooltip
    assert "The last sync" not in sync_line(sync_view(SyncLight.SYNCED, status()), NOW).tooltip
