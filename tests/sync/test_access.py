"""Access: every request is authenticated (401 otherwise); each role is tried against
each action it may not take and gets 403 with nothing stored; nobody writes as someone else;
an annotator sees neither another team's data nor anyone's drafts."""

from __future__ import annotations

import hashlib
import uuid

import httpx
import pytest

from app.core.domain import utcnow
from tests.sync.helpers import server_counts
from tests.sync.test_server import auth, changes, example, push, statuses, validation

ENDPOINTS = [
    ("GET", "/v1/me", None), ("POST", "/v1/push", {"records": []}), ("POST", "/v1/publish", {"records": []}),
    ("GET", "/v1/changes", None), ("GET", f"/v1/models/{'ab' * 32}", None), ("GET", f"/v1/blobs/{'ab' * 32}", None),
    ("HEAD", f"/v1/blobs/{'ab' * 32}", None), ("PUT", f"/v1/blobs/{'ab' * 32}", None),
    ("GET", "/v1/team/stats", None), ("GET", "/v1/team/duplicates", None),
    ("GET", "/v1/tasks/hate_speech/proposals", None), ("POST", "/v1/tasks/hate_speech/proposals", {}),
    ("GET", f"/v1/proposals/{uuid.uuid4()}", None), ("POST", f"/v1/proposals/{uuid.uuid4()}/decision", {}),
    ("GET", "/v1/policies", None), ("PUT", "/v1/tasks/hate_speech/policy", {"leads_may_promote": True}),
]


@pytest.mark.parametrize("header", [None, "Bearer", "Bearer ddk_not-a-real-token", "Basic b2xnYTpwYXNzd29yZA==",
                                    "Bearer ' OR 1=1 --"])
def test_every_endpoint_needs_a_valid_token(team, header):
    for method, path, body in ENDPOINTS:
        headers = {"Authorization": header} if header else {}
        response = httpx.request(method, f"{team.url}{path}", json=body, headers=headers)
        assert response.status_code == 401, (method, path, response.text)
        assert response.headers["www-authenticate"] == "Bearer"
        if method != "HEAD":
            assert "token" in response.json()["detail"]


def test_a_revoked_token_stops_working_at_once(team, server_db):
    from sync.server import store

    assert httpx.get(f"{team.url}/v1/me", headers=auth(team.bob)).status_code == 200
    store.set_active(server_db, str(team.bob.id), False)
    assert httpx.get(f"{team.url}/v1/me", headers=auth(team.bob)).status_code == 401
    _, token = store.new_token_for(server_db, "Bob Annotator")
    assert httpx.get(f"{team.url}/v1/me", headers={"Authorization": f"Bearer {token}"}).status_code == 200
    assert httpx.get(f"{team.url}/v1/me", headers=auth(team.bob)).status_code == 401  # the old one is gone


def _publish_round_three(team) -> dict:
    from tests.sync.helpers import basics_records

    record = dict(next(r for r in basics_records(None) if r["record"] == "round"))
    record.update(id=str(uuid.uuid4()), number=3)
    return {"records": [record]}


def forbidden_actions(team, record: dict) -> dict[str, list]:
    """For each role, requests it may not make: (what, method, path, json, content)."""
    blob = b"model weights"
    sha = hashlib.sha256(blob).hexdigest()
    as_someone_else = example(team.bob, "written as Bob by someone else")
    publish = ("publish a round", "POST", "/v1/publish", _publish_round_three(team), None)
    upload = ("upload a model file", "PUT", f"/v1/blobs/{sha}", None, blob)
    other_team_stats = ("read another team's figures", "GET", "/v1/team/stats?team=B", None, None)
    allow_leads = ("let leads promote", "PUT", "/v1/tasks/hate_speech/policy", {"leads_may_promote": True}, None)
    adjudicate = validation(team.ann, record, "correct", mode="lead")
    return {
        "annotator": [
            ("push an example as someone else", "POST", "/v1/push", {"records": [as_someone_else]}, None),
            ("push a validation as someone else", "POST", "/v1/push",
             {"records": [validation(team.bob, record)]}, None),
            ("adjudicate", "POST", "/v1/push", {"records": [adjudicate]}, None),
            ("push a person record", "POST", "/v1/push", {"records": [{
                "record": "person", "id": str(uuid.uuid4()), "display_name": "Fake", "role": "owner",
                "created_at": utcnow().isoformat(), "updated_at": utcnow().isoformat()}]}, None),
            publish, upload, allow_leads,
            ("read team figures", "GET", "/v1/team/stats", None, None),
            ("read proposals", "GET", "/v1/tasks/hate_speech/proposals", None, None),
            ("read duplicates", "GET", "/v1/team/duplicates", None, None),
        ],
        "lead": [
            ("push an example as someone else", "POST", "/v1/push", {"records": [as_someone_else]}, None),
            publish, allow_leads, other_team_stats,  # leads upload files: their proposals'

            ("read another team's duplicates", "GET", "/v1/team/duplicates?team=B", None, None),
        ],
        "owner": [
            ("push an example as someone else", "POST", "/v1/push", {"records": [as_someone_else]}, None),
            ("push a validation as someone else", "POST", "/v1/push",
             {"records": [validation(team.bob, record)]}, None),
        ],
    }


def test_each_role_gets_403_for_each_forbidden_action_and_nothing_is_stored(team, server_db):
    record = example(team.lead, "an example for the others to validate")
    assert statuses(push(team, team.lead, record)) == ["stored"]
    accounts = {"annotator": team.ann, "lead": team.lead, "owner": team.owner}
    tried = 0
    for role, actions in forbidden_actions(team, record).items():
        for what, method, path, body, content in actions:
            before = server_counts(server_db)
            response = httpx.request(method, f"{team.url}{path}", json=body, content=content,
                                     headers=auth(accounts[role]))
            assert response.status_code == 403, (role, what, response.status_code, response.text)
            assert response.json()["detail"], (role, what)
            assert server_counts(server_db) == before, (role, what)
            tried += 1
    assert tried == 17
    # A forbidden record spoils its whole request: the good record beside it is not stored either.
    good = example(team.ann, "a perfectly good example")
    response = push(team, team.ann, good, example(team.bob, "but this one is written as Bob"))
    assert response.status_code == 403
    assert [e["index"] for e in response.json()["errors"]] == [1]
    assert statuses(push(team, team.ann, good)) == ["stored"]


def test_an_annotator_sees_only_their_team_and_never_drafts(team):
    ours = example(team.ann, "team A's work")
    assert statuses(push(team, team.ann, ours)) == ["stored"]
    assert statuses(push(team, team.bob, validation(team.bob, ours))) == ["stored"]
    draft = example(team.ann, "a draft", status="draft")
    response = push(team, team.ann, draft)
    assert response.status_code == 422 and "status" in response.json()["errors"][0]["reason"]

    cat_sees = changes(team, team.cat)["records"]  # team B
    assert not [r for r in cat_sees if r["record"] in ("example", "validation")]
    assert not [r for r in cat_sees if r["record"] == "person" and r.get("team") == "A"]
    assert {r["record"] for r in cat_sees} <= {"person", "task", "model", "round", "context"}

    bob_sees = changes(team, team.bob)["records"]
    assert ours["id"] in {r["id"] for r in bob_sees}
    assert "a draft" not in str(bob_sees)
    # Another team's example cannot even be validated by guessing its id.
    response = push(team, team.cat, validation(team.cat, ours))
    assert response.status_code == 403
    stats = httpx.get(f"{team.url}/v1/team/stats", headers=auth(team.lia)).json()  # lead of team B
    assert stats["team"] == "B" and stats["rows"] == []
    owner_view = httpx.get(f"{team.url}/v1/team/stats", params={"team": "A"}, headers=auth(team.owner)).json()
    assert owner_view["rows"][0]["submitted"] == 1
