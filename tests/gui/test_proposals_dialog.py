"""Round ▸ Proposals… driven like an owner: the lead's proposal is listed with its figures and intervals;
Promote is refused with the figures (the candidate is worse); "Promote anyway" promotes, publishes and
records the override on the desk and on the server. A real server on loopback, two desks, small models."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pytest
from PySide6.QtCore import Qt
from sqlalchemy import select

from app.core.next_round.comparison import BaseTestOptions, compare_candidate
from app.core.next_round.promotion import promotion_lineage
from app.core.services.target_models import register_model
from sync.client import SyncClient
from sync.proposals import propose_candidate
from sync.server.models import Proposal
from tests.gui.conftest import close_window, open_window
from tests.sync.helpers import ThreadServer, add_account, publish_basics, server_database
from tests.sync.proposal_helpers import TASK, base_test_csv, candidate, decided_examples, team_desk
from tests.sync.test_client import QUICK
from tests.sync.test_proposals_server import proposal, propose, upload

# docs/screenshots/proposals.png is this test's refusal, shot with
#   DYNADESK_SCREENSHOTS=docs/screenshots QT_QPA_PLATFORM=offscreen pytest tests/gui/test_proposals_dialog.py
SCREENSHOTS_ENV = "DYNADESK_SCREENSHOTS"


@pytest.fixture
def server(tmp_path):
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    running = ThreadServer(db, tmp_path / "server")
    running.db = db
    running.owner = add_account(db, "Olga Owner", "owner", "A")
    running.lead = add_account(db, "Lee Lead", "lead", "A")
    running.kim = add_account(db, "Kim Lead", "lead", "A")
    publish_basics(running.url, running.owner, tmp_path)
    yield running
    running.stop()
    db.close()


def test_the_owner_sees_the_figures_is_refused_and_promotes_anyway(qtbot, data_dir, modal_log, server, tmp_path,
                                                                  hate_trigger_model_dir):
    data = base_test_csv(tmp_path / "data")
    owner = team_desk(data_dir, server.owner, server.url)
    current = tmp_path / "current"
    shutil.copytree(hate_trigger_model_dir, current)
    target = register_model(owner, current, name="banana detector", task_code=TASK)
    owner.rounds.open_next(TASK, server.owner.id, [target.id], close_previous=True)
    decided_examples(owner, target, held_out=4)  # the comparison's refusal rests on decided held-out examples
    with SyncClient(owner, server.url, server.owner.token, policy=QUICK) as client:
        client.run(fetch_models=False)
        client.publish(TASK)
    number = owner.tasks.round(TASK).number
    owner.close()

    earlier = proposal([upload(server, server.kim, b"an earlier candidate's weights")])
    assert propose(server, server.kim, earlier).status_code == 201  # another lead's, without a comparison
    lead = team_desk(tmp_path / "lead", server.lead, server.url)
    with SyncClient(lead, server.url, server.lead.token, policy=QUICK) as client:
        assert not client.run().problems
        worse = candidate(hate_trigger_model_dir, tmp_path / "worse", inverted=True, rounds=[1, 2, 3])
        report = compare_candidate(lead, TASK, worse, base_test=data, base_options=BaseTestOptions("sentence", "kind"),
                                   resamples=200)
        assert report.differences[0].items == 0 and report.differences[-1].high < 0  # worse on the base test
        proposed = propose_candidate(lead, client, TASK, worse, report, note="labels swapped, on purpose")
    lead.close()

    window = open_window(qtbot, data_dir)
    try:
        window.named_actions["proposals"].trigger()
        qtbot.waitUntil(lambda: window.proposals.dialog is not None and window.proposals.dialog.table.rowCount() == 2,
                        timeout=30_000)
        dialog = window.proposals.dialog
        row = [dialog.table.item(0, c).text() for c in range(dialog.table.columnCount())]
        assert row[0] == "Lee Lead" and row[2] == "1, 2, 3" and row[4] == "open"
        assert "[" in row[3] and "base-test" in row[3]  # the difference with its interval, and where
        assert dialog.selected_id() == str(proposed.id)
        figures = [[dialog.figures.item(r, c).text() for c in range(7)] for r in range(dialog.figures.rowCount())]
        assert any(f[0] == "base-test" and f[1] == "accuracy" and f[5].startswith("[-") for f in figures), figures
        assert "labels swapped, on purpose" in dialog.facts.text() and "Lee Lead" in dialog.facts.text()
        assert dialog.promote.isEnabled() and dialog.decline.isEnabled()

        dialog.table.selectRow(1)  # the other lead's proposal: declined, with a reason
        assert dialog.selected_id() == earlier["id"] and "none was sent" in dialog.verdict.text()
        qtbot.mouseClick(dialog.decline, Qt.MouseButton.LeftButton)
        assert "Say why" in dialog.status.text()
        qtbot.keyClicks(dialog.reason, "no comparison came with it")
        qtbot.mouseClick(dialog.decline, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.table.item(1, 4).text() == "declined", timeout=30_000)
        assert "Declined candidate by Kim Lead" in dialog.status.text() and not dialog.promote.isEnabled()
        assert "Declined by Olga Owner" in dialog.facts.text() and "no comparison came with it" in dialog.facts.text()
        dialog.table.selectRow(0)
        assert dialog.selected_id() == str(proposed.id) and dialog.promote.isEnabled()

        qtbot.mouseClick(dialog.promote, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dialog.refusal.isVisible() or "is open with" in dialog.status.text(), timeout=60_000)
        assert dialog.refusal.isVisible(), dialog.status.text()
        assert "Refused: the candidate is worse than the current target on" in dialog.refusal_text.text()
        assert "test split" in dialog.refusal_text.text().splitlines()[0]  # the worst split named: the base test
        assert ": worse — accuracy" in dialog.refusal_text.text() and "[" in dialog.refusal_text.text()  # the figures
        assert window.desk.tasks.round(TASK).number == number  # refused: no round changed
        dialog.resize(1180, 700)
        if os.environ.get(SCREENSHOTS_ENV):
            dialog.grab().save(str(Path(os.environ[SCREENSHOTS_ENV]) / "proposals.png"))

        qtbot.mouseClick(dialog.promote_anyway, Qt.MouseButton.LeftButton)  # asks why, with the figures in view
        anyway = dialog.anyway_dialog
        qtbot.waitUntil(anyway.isVisible, timeout=10_000)
        assert not anyway.confirm.isEnabled()
        qtbot.keyClicks(anyway.reason, "the labels were swapped on purpose, to test the override")
        qtbot.mouseClick(anyway.confirm, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "is open with" in dialog.status.text(), timeout=120_000)
        assert f"Round {number + 1} is open" in dialog.status.text() and "recorded" in dialog.status.text()
        qtbot.waitUntil(lambda: dialog.table.item(0, 4) is not None and dialog.table.item(0, 4).text().startswith(
            "promoted"), timeout=30_000)
        assert dialog.table.item(0, 4).text() == f"promoted (round {number + 1}), forced"
        assert not dialog.promote.isEnabled()

        opened = window.desk.tasks.round(TASK)
        assert opened.number == number + 1
        lineage = promotion_lineage(window.desk.models.round_models(opened.id)[0])
        assert lineage["forced"] and lineage["override"]["refused_because"]
        assert lineage["override"]["reason"] == "the labels were swapped on purpose, to test the override"

        # The server out of reach: a sentence in the dialog, and the list stays as it was.
        from sync.tokens import TokenStore

        TokenStore(window.desk.root).set("http://127.0.0.1:9", server.owner.token)
        window.desk.settings.server_url = "http://127.0.0.1:9"
        qtbot.mouseClick(dialog.refresh, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "cannot be reached" in dialog.status.text(), timeout=30_000)
        assert "nothing changed here" in dialog.status.text() and dialog.table.rowCount() == 2
    finally:
        close_window(window)
    with server.db.read() as session:
        stored = session.scalar(select(Proposal).where(Proposal.id == proposed.id))
        assert (stored.state, stored.promoted_round, stored.forced, stored.decided_by_id) == (
            "promoted", number + 1, True, server.owner.id)
        assert stored.reason == "the labels were swapped on purpose, to test the override"
        declined = session.get(Proposal, uuid.UUID(earlier["id"]))
        assert (declined.state, declined.reason, declined.decided_by_id) == (
            "declined", "no comparison came with it", server.owner.id)
    assert not [c for c in modal_log if c[0] in ("critical", "warning")], modal_log
