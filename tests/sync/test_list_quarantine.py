"""A record no answer can carry (nested 300 deep, a control character, a number beyond 64 bits) is
refused at the wire; one stored before (or by hand) is set aside by every list that would carry it,
shown by ``serve quarantine list`` and dropped with ``serve quarantine drop``, while the list goes on
for everyone. And a failure the server cannot explain says only what is true about what was stored."""

from __future__ import annotations

import uuid

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select, update

from app.cli import cli
from sync.server import models as server_models
from sync.server import store
from tests.sync.test_hostile import nested
from tests.sync.test_proposals_server import TASK, listed, proposal, propose, upload
from tests.sync.test_server import auth

SQLITE_ONLY = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def stored_proposals(server_db) -> int:
    with server_db.read() as session:
        return session.scalar(select(func.count()).select_from(server_models.Proposal)) or 0


@SQLITE_ONLY
def test_a_proposal_no_answer_could_carry_is_refused_before_it_is_stored(team):
    files = [upload(team, team.lead, b"candidate weights")]
    deep = nested(300)  # about 600 bytes
    for extra, said in [({"figures": deep}, "figures is nested 300 levels deep"),
                        ({"figures": {"n": 2**80}}, "integer beyond"),
                        ({"name": "cand\x1b[2Jidate"}, "control characters (\\x1b)"),
                        ({"note": "bell\x07"}, "control characters (\\x07)")]:
        refused = propose(team, team.lead, proposal(files, **extra))
        assert refused.status_code == 422, refused.text[:300]
        assert said in refused.json()["errors"][0]["reason"]
    assert listed(team, team.owner)["proposals"] == [] and listed(team, team.lead)["proposals"] == []
    fine = propose(team, team.lead, proposal(files, note="two\nlines\tfine"))
    assert fine.status_code == 201 and fine.json()["note"] == "two\nlines\tfine"


def test_a_poison_proposal_already_stored_is_quarantined_and_the_list_goes_on(team, server_db, tmp_path):
    files = [upload(team, team.lead, b"candidate weights")]
    first, poison_body = proposal(files), proposal(files)
    assert propose(team, team.lead, first).status_code == 201
    assert propose(team, team.lead, poison_body).status_code == 201
    poison = uuid.UUID(poison_body["id"])
    with server_db.write() as session:  # as one stored before figures were bounded
        session.execute(update(server_models.Proposal).where(server_models.Proposal.id == poison)
                        .values(figures={"a": nested(300)}))

    for reader in (team.owner, team.lead, team.owner):  # the owner, the lead's team, and again after quarantine
        assert [p["id"] for p in listed(team, reader)["proposals"]] == [first["id"]]
    alone = httpx.get(f"{team.url}/v1/proposals/{poison}", headers=auth(team.owner))
    assert alone.status_code == 404 and "quarantine" in alone.json()["detail"]
    entries = store.quarantined(server_db)
    assert [(e.record_id, e.kind, e.team, e.sender) for e in entries] == [(poison, "proposal", "A", team.lead.name)]
    assert "nested 301 levels deep" in entries[0].reason

    db_option = ["--db", server_db.url]
    runner = CliRunner()
    shown = runner.invoke(cli, ["--data-dir", str(tmp_path / "cli"), "serve", "quarantine", "list", *db_option])
    assert shown.exit_code == 0 and str(poison) in shown.output and "proposal" in shown.output, shown.output
    dropped = runner.invoke(cli, ["--data-dir", str(tmp_path / "cli"), "serve", "quarantine", "drop", str(poison),
                                  *db_option])
    assert dropped.exit_code == 0 and f"Dropped proposal {poison}" in dropped.output, dropped.output
    assert store.quarantined(server_db) == [] and stored_proposals(server_db) == 1
    assert [p["id"] for p in listed(team, team.owner)["proposals"]] == [first["id"]]


@SQLITE_ONLY
def test_a_poison_wellbeing_record_is_set_aside_and_the_cursor_moves_past_it(team, server_db):
    from app.core.domain import utcnow

    now = utcnow()
    records = [{"record": "break", "id": str(uuid.uuid4()), "person_id": str(team.ann.id), "kind": "short",
                "action": "taken", "at": now.isoformat(), "break_min": 5, "continuous_min": 50, "daily_min": 100,
                "zone": "UTC"} for _ in range(3)]
    pushed = httpx.post(f"{team.url}/v1/wellbeing/push", json={"records": records}, headers=auth(team.ann))
    assert pushed.status_code == 200, pushed.text
    poison = uuid.UUID(records[1]["id"])
    with server_db.write() as session:
        session.execute(update(server_models.WellbeingRecord).where(server_models.WellbeingRecord.id == poison)
                        .values(body={**records[1], "zone": "UTC\x1b[2J"}))
    for _ in range(2):
        page = httpx.get(f"{team.url}/v1/wellbeing/records", headers=auth(team.lead)).json()
        assert [r["record"]["id"] for r in page["records"]] == [records[0]["id"], records[2]["id"]]
    assert [(e.record_id, e.kind) for e in store.quarantined(server_db)] == [(poison, "wellbeing")]
    store.drop_quarantined(server_db, poison)
    assert store.quarantined(server_db) == []


@SQLITE_ONLY
def test_the_generic_failure_never_claims_nothing_was_stored(team, server, monkeypatch):
    from sync.server.store import proposals as proposal_store

    real = proposal_store.set_policy

    def stored_then_failed(db, me, task, allow):
        real(db, me, task, allow)  # committed
        raise RuntimeError("the answer could not be written")

    monkeypatch.setattr(proposal_store, "set_policy", stored_then_failed)
    failed = httpx.put(f"{team.url}/v1/tasks/{TASK}/policy", json={"leads_may_promote": True},
                       headers=auth(team.owner))
    assert failed.status_code == 500
    detail = failed.json()["detail"]
    assert "not stored" not in detail and "unknown" in detail and "again is safe" in detail
    policies = httpx.get(f"{team.url}/v1/policies", headers=auth(team.owner)).json()["policies"]
    assert {p["task"]: p["leads_may_promote"] for p in policies}[TASK] is True  # it was stored after all

    def read_failed(db):
        raise RuntimeError("a read failed")

    monkeypatch.setattr(proposal_store, "policies", read_failed)
    read = httpx.get(f"{team.url}/v1/policies", headers=auth(team.owner))
    assert read.status_code == 500 and "changed nothing" in read.json()["detail"]
