"""Screenshots of sync in the app: the status bar after a sync, the settings dialog, the
warning state over records the server put off, and records that wait for an older server's upgrade
(each with its tooltip drawn in, since a tooltip is a window of its own that a grab of the main
window leaves out).

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_sync_screenshots.py

Runs a real sync server on loopback with a scratch database; nothing leaves the machine.
"""

import tempfile
from pathlib import Path

from screenshot_kit import OUT, ROOT, application, show_window, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.desk import Desk
    from app.core.io.importers import import_file
    from tests.conftest import hate_content, hate_output
    from tests.sync.helpers import ThreadServer, add_account, publish_basics, server_database
    from widgets.sync_dialog import SyncDialog

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        db = server_database(f"sqlite:///{scratch / 'server' / 'server.sqlite'}")
        server = ThreadServer(db, scratch / "server")
        owner = add_account(db, "Olga Owner", "owner", "Hate speech team")
        ada = add_account(db, "Ada Lovelace", "lead", "Hate speech team")
        publish_basics(server.url, owner, scratch)
        desk = Desk(scratch / "desk")
        import_file(desk, ROOT / "tests" / "fixtures" / "dynahate_sample.csv", "dynahate")
        window = show_window(desk, 1440, 820)
        window.sync.configure(server.url, ada.token, 300)
        wait_until(lambda: window.sync_status.text.text().startswith("Synced"))
        model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
        texts = ["They should all be sent back where they came from", "Honestly, the new neighbours are lovely people",
                 "Women like her should keep quiet in meetings"]
        for text in texts:
            label = "not hate" if "lovely" in text else "hate"
            desk.examples.create(ada.id, "hate_speech", hate_content(text, label), [hate_output(model, "not hate")],
                                 round_number=1)
        window.sync.sync_now()
        wait_until(lambda: window.sync_status.text.text().startswith("Synced") and not window.sync.running)
        desk.examples.create(ada.id, "hate_speech", hate_content("Written on the train, waiting for the next sync",
                                                                 "not hate"), [hate_output(model, "hate")], round_number=1)
        window.refresh()
        window.sync.refresh()
        wait_until(lambda: window.sync_status.text.text().endswith("1 waiting"))
        window.table.selectRow(0)
        wait(600)
        window.grab().save(str(OUT / "sync-status.png"))

        window.open_sync_settings()
        dialog = window.findChild(SyncDialog)
        dialog.test.click()
        wait_until(lambda: dialog.result.text().startswith("Connected"))
        dialog.grab().save(str(OUT / "sync-dialog.png"))
        dialog.reject()

        desk.tasks.get_or_create_round("hate_speech", 3)  # a round the owner has not published
        for text in ("Written for round three before the owner published it",
                     "Another one for round three, waiting on the server"):
            desk.examples.create(ada.id, "hate_speech", hate_content(text, "hate"), [hate_output(model, "not hate")],
                                 round_number=3)
        window.sync.sync_now()
        wait_until(lambda: window.sync_status.state == "waiting" and not window.sync.running)
        wait(300)
        waiting_with_tooltip(window).save(str(OUT / "sync-waiting.png"))
        window.close()
        desk.close()
        server.stop()
        db.close()
    waiting_for_the_servers_upgrade()
    print(f"Screenshots written to {OUT}")


def waiting_for_the_servers_upgrade() -> None:
    """A desk of this release and a server of the previous one (protocol 1, as tests/sync/test_negotiation.py
    presents it): what protocol 2 brought waits in the outbox, and the status bar says so."""
    from app.core.desk import Desk
    from sync import wire_versions
    from tests.conftest import hate_content, hate_output
    from tests.sync.helpers import ThreadServer, add_account, publish_basics, server_database
    from tests.sync.test_negotiation import OlderServer

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        db = server_database(f"sqlite:///{scratch / 'server' / 'server.sqlite'}")
        server = ThreadServer(db, scratch / "server", wrap=OlderServer())
        owner = add_account(db, "Olga Owner", "owner", "Hate speech team")
        ada = add_account(db, "Ada Lovelace", "lead", "Hate speech team")
        publish_basics(server.url, owner, scratch)
        desk = Desk(scratch / "desk")
        window = show_window(desk, 1366, 768)
        window.sync.configure(server.url, ada.token, 300)
        wait_until(lambda: window.sync_status.text.text().startswith("Synced"))
        wire_versions.FIELD_SINCE[("example", "outputs")] = 2  # as if protocol 2 had brought a field they carry
        model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
        for text in ("Written at the new desk, for a server not yet upgraded",
                     "A second one, waiting for the same upgrade", "And a third"):
            desk.examples.create(ada.id, "hate_speech", hate_content(text, "hate"), [hate_output(model, "not hate")],
                                 round_number=1)
        window.refresh()
        window.sync.sync_now()
        wait_until(lambda: "server's upgrade" in window.sync_status.text.text() and not window.sync.running)
        wait(300)
        waiting_with_tooltip(window).save(str(OUT / "sync-waiting-for-upgrade.png"))
        del wire_versions.FIELD_SINCE[("example", "outputs")]
        window.close()
        desk.close()
        server.stop()
        db.close()


def waiting_with_tooltip(window):
    """The bottom of the window, with the status widget's tooltip drawn above it as Qt shows it."""
    from PySide6.QtCore import QPoint, QRect
    from PySide6.QtGui import QPainter
    from PySide6.QtWidgets import QLabel

    shot = window.grab()
    status = window.sync_status
    tip = QLabel(status.text.toolTip())
    tip.setStyleSheet("QLabel { background: #ffffdc; color: #000; border: 1px solid #767676; padding: 4px; }")
    tip.setFont(status.text.font())
    tip.ensurePolished()
    tip.resize(tip.sizeHint())
    anchor = status.text.mapTo(window, QPoint(0, 0))
    left = max(4, min(anchor.x(), window.width() - tip.width() - 4))
    top = anchor.y() - tip.height() - 6
    painter = QPainter(shot)
    tip.render(painter, QPoint(left, top))
    painter.end()
    bottom = max(0, top - 20)
    return shot.copy(QRect(0, bottom, window.width(), window.height() - bottom))


if __name__ == "__main__":
    main()
