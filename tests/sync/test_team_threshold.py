"""A lead's agreement threshold is the team's: set on the lead's desk, it is pushed as a
``task_setting``, the server decides the team's examples with it (team figures follow), and the
team's other desks pull it and decide with it too. Real desks (SQLite files), a real server on
loopback (SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import json
import uuid

import httpx

from app.core.domain import utcnow
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_review_sync import ann_writes_bob_says_correct, outbox
from tests.sync.test_server import auth, example, push, statuses, validation


def team_rows(team, lead) -> list[dict]:
    response = httpx.get(f"{team.url}/v1/team/stats", params={"by": "annotator"}, headers=auth(lead), timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["rows"]


def setting(lead, threshold: int) -> dict:
    now = utcnow().isoformat()
    return {"record": "task_setting", "id": str(uuid.uuid4()), "task": "hate_speech",
            "settings": {"agreement_threshold": threshold}, "lead": str(lead.id), "created_at": now,
            "updated_at": now, "revision": 1}


def test_a_leads_threshold_decides_the_teams_examples_on_the_server_and_on_every_desk(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    # Team B: one verdict on Cat's example, which its own threshold (the task's 3) does not decide.
    cats = example(team.cat, "team B keeps the task's own number")
    assert statuses(push(team, team.cat, cats)) == ["stored"]
    assert statuses(push(team, team.lia, validation(team.lia, cats))) == ["stored"]
    with (client_for(ann, team.url, team.ann) as ann_client, client_for(bob, team.url, team.bob) as bob_client,
          client_for(lead, team.url, team.lead) as lead_client):
        mine = ann_writes_bob_says_correct(team, ann, ann_client, bob, bob_client, "one verdict decides in a team of two")
        ann_client.run()
        assert ann.examples.get(mine.id).decided_verdict is None  # the task's 3 is out of reach
        assert [row["vmer"] for row in team_rows(team, team.lead)] == [0.0]

        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=2)
        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=1)  # changed before it was sent: only this goes
        assert [e.kind for e in outbox(lead)] == ["task_setting"]
        lead_client.run()
        assert outbox(lead) == []
        sent = json.loads(lead.db.get_meta("task_setting.hate_speech"))
        assert sent["sync_state"] == "synced" and sent["received_at"]  # its place among the team's settings
        [row] = team_rows(team, team.lead)  # the server decided it: vMER counts it
        assert (row["name"], row["validated_fooling"]) == ("Ann Annotator", 1) and row["vmer"] > 0

        bob_client.run()
        ann_client.run()
        assert bob.examples.get(mine.id).decided_verdict == "correct"
        assert ann.examples.get(mine.id).decided_verdict == "correct"
        assert ann.tasks.agreement_threshold(ann.tasks.task("hate_speech").id) == 1
    assert [row["validated_fooling"] for row in team_rows(team, team.lia)] == [0]  # team B is unaffected
    for desk in (ann, bob, lead):
        desk.close()


def test_only_leads_set_the_teams_threshold(team):
    refused = push(team, team.ann, setting(team.ann, 1))
    assert refused.status_code == 403 and "only team leads and owners" in refused.text
    too_high = setting(team.lead, 21)
    response = push(team, team.lead, too_high)
    assert response.status_code == 422 and "agreement_threshold" in response.text
    stored = setting(team.lead, 2)
    assert statuses(push(team, team.lead, stored)) == ["stored"]
    assert statuses(push(team, team.lead, stored)) == ["already_stored"]
    assert statuses(push(team, team.lia, setting(team.lia, 1))) == ["stored"]  # team B's own

    def settings_seen_by(account) -> list:
        feed = httpx.get(f"{team.url}/v1/changes", params={"since": 0}, headers=auth(account)).json()["records"]
        return [(r["settings"]["agreement_threshold"], r["lead"]) for r in feed if r["record"] == "task_setting"]

    assert settings_seen_by(team.bob) == [(2, str(team.lead.id))]
    assert settings_seen_by(team.cat) == [(1, str(team.lia.id))]  # each team's desks get their own team's
    assert settings_seen_by(team.owner) == [(2, str(team.lead.id))]  # the owner's desk: the owner's team's
