"""No file is handed between people: a lead trains a candidate and proposes it through the server; the owner
lists the proposals and promotes one in one command; the round is published and an annotator's desk
switches to the candidate. Leads promote only where the owner lets them, and the server, not the desk,
decides that; with the owner's leave a lead promotes directly. A damaged file is refused whole; an owner
offline loses nothing. Server on loopback, up to four desks, small real models; SQLite and PostgreSQL."""

from __future__ import annotations

import shutil

import pytest
from sqlalchemy import select

from app.core.domain import RoundStatus
from app.core.next_round.comparison import BaseTestOptions, compare_candidate
from app.core.next_round.comparison_report import write_report
from app.core.next_round.promotion import PromotionPolicy, promotion_lineage, promotion_policy, store_promotion_policy
from app.core.services.target_models import load_engine_for, register_model
from sync.client import SyncClient
from sync.proposals import fetch_proposal, propose_candidate
from sync.server.models import Proposal
from sync.tokens import TokenStore
from sync.transport import NotAllowed, Refused
from tests.sync.helpers import prepare_desk
from tests.sync.proposal_helpers import (
    TASK,
    base_test_csv,
    candidate,
    cli,
    inverted_model,
    rounds_state,
    team_desk,
)
from tests.sync.test_client import QUICK

BASE = BaseTestOptions("sentence", "kind")


def _open_round(desk) -> tuple[int, list[str]]:
    current = desk.tasks.round(TASK)
    return current.number, [m.sha256 for m in desk.models.round_models(current.id)]


def test_a_lead_proposes_the_owner_promotes_in_one_command_and_every_desk_follows(
        team, server_db, tmp_path, hate_trigger_model_dir, capsys):
    data = base_test_csv(tmp_path / "data")
    poor_round_published(team, tmp_path, hate_trigger_model_dir)

    # The lead trains (the fixture's part stands in for `dynadesk train`), compares on their desk, proposes.
    lead = team_desk(tmp_path / "lead", team.lead, team.url)
    with SyncClient(lead, team.url, team.lead.token, policy=QUICK) as client:
        assert not client.run().problems
        number, _ = _open_round(lead)
        good = candidate(hate_trigger_model_dir, tmp_path / "good")
        report = compare_candidate(lead, TASK, good, base_test=data, base_options=BASE, resamples=200)
        assert report.pooled.items == 0 and not report.worse  # no held-out example yet: the base test decides
        json_path, _ = write_report(report, tmp_path / "report")
    lead.close()
    code, out, err = cli(capsys, tmp_path / "lead", "rounds", "propose", "--task", TASK, "--model", good,
                         "--comparison", json_path)
    assert code == 0, err
    proposal_id = out.split("proposal ")[1].split(" ")[0]

    # Leads promote only with the owner's leave: their desk says so, and the server decides it, whatever a
    # desk claims (here one that forged the leave on itself).
    code, _, err = cli(capsys, tmp_path / "lead", "rounds", "promote", "--proposal", proposal_id)
    assert code == 1 and "does not let leads promote" in err and "rounds propose" in err, err
    lead = prepare_desk(tmp_path / "lead", team.lead)
    store_promotion_policy(lead, PromotionPolicy(TASK, leads_may_promote=True))
    with SyncClient(lead, team.url, team.lead.token, policy=QUICK) as client:
        with pytest.raises(Refused, match="does not let leads promote"):
            client.publish(TASK, [number])
        with pytest.raises(NotAllowed, match="does not let leads promote"):  # the server's 403, in its words
            client.request("POST", f"/proposals/{proposal_id}/decision",
                           body={"state": "promoted", "round_number": number + 1})
        client.run(fetch_models=False)  # the server's policy comes back with the next sync
    assert not promotion_policy(lead, TASK).leads_may_promote
    lead.close()

    # A damaged file on the server: refused whole, nothing installed, no round changed.
    owner = prepare_desk(tmp_path / "owner", team.owner)
    before = rounds_state(owner)
    owner.close()
    blob = server_blob(team, tmp_path / "server" / "blobs", proposal_id, "trained_part.safetensors")
    original = blob.read_bytes()
    blob.write_bytes(original[:-8] + b"tampered")
    code, _, err = cli(capsys, tmp_path / "owner", "rounds", "promote", "--proposal", proposal_id)
    assert code == 1 and "does not match its sha256" in err and "Nothing was installed" in err, err
    assert not (tmp_path / "owner" / "proposals").exists() or not any((tmp_path / "owner" / "proposals").iterdir())
    blob.write_bytes(original)

    # Offline: a clear sentence, and nothing changes.
    offline = tmp_path / "owner-offline"
    shutil.copytree(tmp_path / "owner", offline)
    with prepare_desk(offline, team.owner) as desk:
        desk.settings.server_url = "http://127.0.0.1:9"
        desk.save_settings()
        TokenStore(desk.root).set("http://127.0.0.1:9", team.owner.token)
    code, _, err = cli(capsys, offline, "rounds", "promote", "--proposal", proposal_id)
    assert code == 1 and "cannot be reached" in err and "Nothing changed on this desk" in err, err

    # The owner lists the proposals and promotes one in one command.
    code, out, err = cli(capsys, tmp_path / "owner", "rounds", "proposals", "--task", TASK)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.startswith(proposal_id))
    assert "Lee Lead" in row and "1,2" in row and "base-test" in row and "[" in row and row.rstrip().endswith("open")
    code, out, err = cli(capsys, tmp_path / "owner", "rounds", "promote", "--proposal", proposal_id)
    assert code == 0, err
    assert "Compared again on this desk (held-out splits and the base test file)" in out
    assert f"Opened {TASK} round {number + 1}" in out and "marked promoted" in out

    owner = prepare_desk(tmp_path / "owner", team.owner)
    assert [s for s in rounds_state(owner)] != before
    new_number, targets = _open_round(owner)
    assert new_number == number + 1
    lineage = promotion_lineage(owner.models.round_models(owner.tasks.round(TASK).id)[0])
    assert lineage["candidate_dir"] == str(tmp_path / "owner" / "proposals" / proposal_id)
    assert lineage["comparison"]["pooled"]["items"] == 0 and not lineage["forced"]
    owner.close()
    with server_db.read() as session:
        stored = session.scalar(select(Proposal).where(Proposal.id == _uuid(proposal_id)))
        assert (stored.state, stored.promoted_round, stored.decided_by_id) == ("promoted", number + 1, team.owner.id)
        assert stored.decided_at is not None and not stored.forced

    # The annotator's desk syncs, checks every file, and writes against the candidate.
    annotator = prepare_desk(tmp_path / "ann", team.ann)
    with SyncClient(annotator, team.url, team.ann.token, policy=QUICK) as client:
        assert not client.run().problems
    rounds = {r.number: r for r in annotator.tasks.rounds(TASK)}
    assert rounds[number].status == RoundStatus.CLOSED and rounds[number + 1].status == RoundStatus.OPEN
    assert _open_round(annotator) == (number + 1, targets)
    engine = load_engine_for(annotator.models.round_models(rounds[number + 1].id)[0], num_threads=1)
    assert [p.label for p in engine.predict(["a banana for you", "a quiet afternoon"])] == ["hate", "not hate"]
    engine.close()
    annotator.close()


sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


@sqlite_only  # the server's rule for leads runs on PostgreSQL too, in test_proposals_server.py
def test_with_the_owners_leave_a_lead_promotes_directly_and_the_server_takes_the_round(
        team, tmp_path, hate_trigger_model_dir, capsys):
    data = base_test_csv(tmp_path / "data")
    number = poor_round_published(team, tmp_path, hate_trigger_model_dir)
    code, out, err = cli(capsys, tmp_path / "owner", "rounds", "policy", "--task", TASK, "--leads-may-promote", "yes")
    assert code == 0 and "Leads may promote hate_speech: yes (set by Olga Owner)." in out, err
    lead = team_desk(tmp_path / "lead", team.lead, team.url)
    with SyncClient(lead, team.url, team.lead.token, policy=QUICK) as client:
        assert not client.run().problems  # the owner's leave comes with the sync
        assert promotion_policy(lead, TASK).leads_may_promote
        good = candidate(hate_trigger_model_dir, tmp_path / "good", rounds=[1, 2, 3])
        summary = propose_candidate(lead, client, TASK, good,
                                    compare_candidate(lead, TASK, good, base_test=data, base_options=BASE,
                                                      resamples=200))
    lead.close()
    data.rename(data.with_name("moved.csv"))  # no base test file here any more, no held-out example: the report decides
    code, out, err = cli(capsys, tmp_path / "lead", "rounds", "promote", "--proposal", summary.id)
    assert code == 0, err
    assert "The proposer's comparison decides" in out and f"Opened {TASK} round {number + 1}" in out

    annotator = prepare_desk(tmp_path / "ann", team.ann)
    with SyncClient(annotator, team.url, team.ann.token, policy=QUICK) as client:
        assert not client.run().problems
    with SyncClient(annotator, team.url, team.owner.token, policy=QUICK) as client:
        stored = fetch_proposal(client, summary.id)
    assert (stored.state, stored.promoted_round, stored.decided_by) == ("promoted", number + 1, "Lee Lead")
    import httpx

    feed = httpx.get(f"{team.url}/v1/changes", params={"limit": 1000},
                     headers={"Authorization": f"Bearer {team.bob.token}"}).json()["records"]
    statuses = {r["number"]: r["status"] for r in feed if r["record"] == "round"}
    assert statuses[number] == "open" and statuses[number + 1] == "open"  # other teams' round: the owner closes it
    round_number, _ = _open_round(annotator)
    assert round_number == number + 1 and annotator.models.round_models(annotator.tasks.round(TASK).id)[0].path
    annotator.close()


def poor_round_published(team, tmp_path, hate_trigger_model_dir) -> int:
    """The owner's next round has a real (and poor) target, published to the team; returns its number."""
    owner = team_desk(tmp_path / "owner", team.owner, team.url)
    poor = register_model(owner, inverted_model(hate_trigger_model_dir, tmp_path / "poor"), name="poor target",
                          task_code=TASK)
    opened = owner.rounds.open_next(TASK, team.owner.id, [poor.id], close_previous=True)
    with SyncClient(owner, team.url, team.owner.token, policy=QUICK) as client:
        client.run(fetch_models=False)
        assert {r.status for r in client.publish(TASK).results} <= {"stored", "already_stored"}
    owner.close()
    return opened.number


def server_blob(team, root, proposal_id: str, name: str):
    """The server's stored copy of one of a proposal's files."""
    import httpx

    from sync.server.blobs import BlobStore

    wire = httpx.get(f"{team.url}/v1/proposals/{proposal_id}",
                     headers={"Authorization": f"Bearer {team.owner.token}"}).json()
    sha = next(f["sha256"] for f in wire["files"] if f["name"] == name)
    return BlobStore(root).path(sha)


def _uuid(text: str):
    import uuid

    return uuid.UUID(text)
