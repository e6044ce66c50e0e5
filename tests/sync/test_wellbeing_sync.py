"""Exposure and breaks travel to the leads of the person's team only: real desks, a real
server on loopback (SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set). Another team's lead and the
team's annotators never receive them; nobody pushes them as someone else; a lead's limits reach the team."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import httpx

from app.core.wellbeing.breaks import BreakAction, BreakKind, BreakPrompt
from app.core.wellbeing.exposure import Activity
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_server import auth

# Yesterday at noon: a span of up to an hour ends inside one day whatever the hour the test runs (an hour
# before now, it crossed midnight for runs just after it, and the day's figures held only part of it).
END = (datetime.now(UTC) - timedelta(days=1)).replace(hour=12, minute=0, second=0, microsecond=0)


def hateful_work(desk, person_id, minutes: int):
    (model,) = [m for m in desk.models.all() if m.sha256 == MODEL_SHA]
    example = desk.examples.create(person_id, "hate_speech", hate_content("they are vermin", "hate"),
                                   [hate_output(model, "not hate")], time_spent_ms=minutes * 60_000)
    span = desk.exposure.record_stored(person_id, Activity.WRITING, example.id, ended_at=END)
    desk.exposure.record_break(person_id, BreakPrompt(BreakKind.SHORT, minutes, minutes, 5), BreakAction.TAKEN,
                               at=END)
    return span


def names_of(desk) -> dict[str, float]:
    day = END.date()
    return {d.name: d.writing_min for d in desk.exposure.person_days(day - timedelta(days=1), day + timedelta(days=1))}


def test_exposure_reaches_the_teams_leads_and_nobody_else(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    lia = prepare_desk(tmp_path / "lia", team.lia)
    cat = prepare_desk(tmp_path / "cat", team.cat)
    hateful_work(ann, team.ann.id, 42)
    hateful_work(cat, team.cat.id, 17)
    for desk, account in ((ann, team.ann), (cat, team.cat), (lead, team.lead), (lia, team.lia), (bob, team.bob)):
        with client_for(desk, team.url, account) as client:
            report = client.run(fetch_models=False)
            assert not [w for w in report.warnings if "exposure" in w], report.warnings
    assert names_of(lead) == {"Ann Annotator": 42}  # team A's lead: Ann's, not Cat's
    assert [(b.person_id, b.action) for b in lead.exposure.breaks()] == [(team.ann.id, "taken")]
    assert names_of(lia) == {"Cat Annotator": 17}  # team B's lead: Cat's only
    assert names_of(bob) == {} and bob.exposure.breaks() == []  # an annotator of the team: nobody's
    assert names_of(ann) == {"Ann Annotator": 42}  # and her own stay hers
    with client_for(ann, team.url, team.ann) as client:  # a second sync sends and receives nothing again
        again = client.run(fetch_models=False)
    assert (again.pushed, again.pulled) == (0, 0)

    # on the server itself: the feed's rule, whoever asks
    def feed(account) -> set[str]:
        response = httpx.get(f"{team.url}/v1/wellbeing/records", headers=auth(account))
        assert response.status_code == 200, response.text
        return {item["person_name"] for item in response.json()["records"]}

    assert feed(team.lead) == {"Ann Annotator"} and feed(team.owner) == {"Ann Annotator"}
    assert feed(team.lia) == {"Cat Annotator"} and feed(team.bob) == set() and feed(team.ann) == {"Ann Annotator"}


def test_nobody_pushes_exposure_as_someone_else_and_records_do_not_change(team, tmp_path):
    at = END.isoformat()
    record = {"record": "exposure", "id": str(uuid.uuid4()), "person_id": str(team.ann.id), "activity": "writing",
              "task_code": "hate_speech", "started_at": (END - timedelta(minutes=5)).isoformat(), "ended_at": at,
              "zone": "Europe/Berlin"}
    url = f"{team.url}/v1/wellbeing/push"
    forged = httpx.post(url, json={"records": [record]}, headers=auth(team.lead))
    assert forged.status_code == 403 and "someone else" in forged.json()["detail"]
    first = httpx.post(url, json={"records": [record]}, headers=auth(team.ann))
    assert first.status_code == 200 and first.json()["stored"] == 1
    same = httpx.post(url, json={"records": [record]}, headers=auth(team.ann))
    assert same.json() == {"stored": 0, "already_stored": 1, "conflicts": []}
    changed = httpx.post(url, json={"records": [{**record, "activity": "reviewing"}]}, headers=auth(team.ann))
    assert changed.json()["conflicts"] == [record["id"]]
    backwards = httpx.post(url, json={"records": [{**record, "id": str(uuid.uuid4()), "started_at": at,
                                                    "ended_at": (END - timedelta(minutes=5)).isoformat()}]},
                           headers=auth(team.ann))
    assert backwards.status_code == 422 and "ends after it starts" in backwards.text


def test_a_leads_limits_reach_their_team_only(team, tmp_path):
    lead = prepare_desk(tmp_path / "lead", team.lead)
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead.exposure.set_limits(team.lead.id, daily_min=180, continuous_min=45)
    with client_for(lead, team.url, team.lead) as client:
        client.run(fetch_models=False)
    assert lead.exposure.limits().sync_state == "synced"
    with client_for(ann, team.url, team.ann) as client:
        client.run(fetch_models=False)
    limits = ann.exposure.limits()
    assert (limits.daily_min, limits.continuous_min, limits.team, limits.set_by) == (180, 45, "A", team.lead.id)
    other = httpx.get(f"{team.url}/v1/wellbeing/limits", headers=auth(team.lia))
    assert other.status_code == 204  # team B has set none
    refused = httpx.put(f"{team.url}/v1/wellbeing/limits", json={"daily_min": 100, "continuous_min": 30},
                        headers=auth(team.bob))
    assert refused.status_code == 403 and "lead" in refused.json()["detail"]
