"""The data-quality guard across desks: a lead's QualitySettings reach the team's desks with the
agreement threshold, and examples that arrive by sync pull reach an open near-duplicate index.
Real desks, a real server on loopback (SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import json

from app.core.quality.settings import QualitySettings
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_review_sync import outbox, write_example
from tests.sync.test_server import auth, push, statuses
from tests.sync.test_team_threshold import setting


def test_the_leads_quality_settings_and_synced_examples_reach_the_other_desks(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    task = bob.tasks.task("hate_speech").id
    chosen = QualitySettings(near_threshold=0.8, token_association_threshold=4.0, duplicate_rate_threshold=0.1)
    with (client_for(ann, team.url, team.ann) as ann_client, client_for(bob, team.url, team.bob) as bob_client,
          client_for(lead, team.url, team.lead) as lead_client):
        bob.near_duplicates.ensure_built(task)  # Bob's index is open before anything arrives
        assert bob.near_duplicates.size(task) == 0

        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=2)
        lead.set_task_settings(team.lead.id, "hate_speech", quality=chosen)  # one record carries both
        assert [e.kind for e in outbox(lead)] == ["task_setting"]
        sent = json.loads(lead.db.get_meta("task_setting.hate_speech"))
        assert sent["settings"] == {"agreement_threshold": 2, "quality": chosen.to_json()}
        lead_client.run()
        assert outbox(lead) == []

        mine = write_example(ann, team.ann, "Those people are vermin and should all go")
        ann_client.run()
        bob_client.run()
        assert bob.tasks.task("hate_speech").id == task  # the index's key has not moved under it
        for desk in (ann, bob):
            assert desk.tasks.settings("hate_speech").quality == chosen
            assert desk.tasks.agreement_threshold(desk.tasks.task("hate_speech").id) == 2
        assert bob.near_duplicates.threshold_of(task) == 0.8
        found = bob.near_duplicates.nearest(task, "those people are VERMIN and should all go!!!")
        assert [(m.example_id, m.similarity, m.author_name) for m in found.near] == [(mine.id, 1.0, "Ann Annotator")]

        # the lead changes the agreement threshold again: the quality settings stay as they were
        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=1)
        lead_client.run()
        ann_client.run()
        assert ann.tasks.settings("hate_speech").quality == chosen
        assert ann.tasks.agreement_threshold(ann.tasks.task("hate_speech").id) == 1
    for desk in (ann, bob, lead):
        desk.close()


def test_the_server_checks_the_quality_settings(team):
    record = setting(team.lead, 2)
    bad = {**record, "settings": {"quality": {"near_threshold": 0.1, "token_association_threshold": 5.0,
                                              "duplicate_rate_threshold": 0.2}}}
    response = push(team, team.lead, bad)
    assert response.status_code == 422 and "quality: The near-duplicate threshold must be a number from 0.3" in \
        response.text
    good = {**record, "settings": {"quality": QualitySettings(near_threshold=0.9).to_json()}}
    assert statuses(push(team, team.lead, good)) == ["stored"]
    assert statuses(push(team, team.lead, good)) == ["already_stored"]
    import httpx

    feed = httpx.get(f"{team.url}/v1/changes", params={"since": 0}, headers=auth(team.bob)).json()["records"]
    [seen] = [r for r in feed if r["record"] == "task_setting"]
    assert seen["settings"] == {"quality": QualitySettings(near_threshold=0.9).to_json()}
