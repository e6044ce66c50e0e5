"""A team desk for GUI tests: a real sync server on loopback with an owner, a lead and an annotator,
and a main window configured with one of their tokens (so the desk works as the token's holder)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.sync.helpers import ThreadServer, add_account, publish_basics, server_database


@pytest.fixture
def team_server(tmp_path):
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    running = ThreadServer(db, tmp_path / "server")
    owner = add_account(db, "Olga Owner", "owner", "A")
    publish_basics(running.url, owner, tmp_path)
    running.accounts = SimpleNamespace(owner=owner, lead=add_account(db, "Leo Lead", "lead", "A"),
                                       annotator=add_account(db, "Ann Annotator", "annotator", "A"))
    yield running
    running.stop()
    db.close()


def join_team(qtbot, window, server, role: str) -> None:
    """Configure the window's sync as a person with ``role`` would (their token), and wait until the
    desk works as them; the desk also keeps local profiles of the team's other roles."""
    account = getattr(server.accounts, role)
    for other in vars(server.accounts).values():
        if other is not account and window.desk.people.by_name(other.name) is None:
            window.desk.people.create(other.name, other.role, person_id=other.id)
    with qtbot.waitSignal(window.sync.identity_changed, timeout=30_000):
        window.sync.configure(server.url, account.token, 300)
    qtbot.waitUntil(lambda: window.person_label.text().startswith(account.name), timeout=10_000)
