"""A proposal's files arrive as a folder the owner's desk can hold, or not at all: names that cannot share
one folder are refused by the server and, from any server, by the desk before anything is written; a
model description nested past any reader is a clear refusal on the owner's desk, not a crash."""

from __future__ import annotations

import uuid

import httpx
import pytest

from app.core.domain import utcnow
from sync.client import SyncClient
from sync.proposal_wire import ProposalFile, ProposalWire
from sync.proposals import ProposalError, download_proposal
from sync.protocol import manifest_sha256
from tests.sync.proposal_helpers import TASK, candidate, cli, team_desk
from tests.sync.test_client import QUICK
from tests.sync.test_proposals_server import proposal, propose, upload
from tests.sync.test_proposals_sync import poor_round_published
from tests.sync.test_server import auth

SQLITE_ONLY = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


@SQLITE_ONLY
def test_file_names_that_cannot_share_a_folder_are_refused_and_leave_nothing_behind(team, tmp_path):
    weights = upload(team, team.lead, b"candidate weights")
    for names in (["model", "model/part.bin"], ["Model.bin", "model.bin"]):
        files = [{**weights, "name": name} for name in names]
        refused = propose(team, team.lead, proposal(files))
        assert refused.status_code == 422 and "cannot share one folder" in refused.text, refused.text[:300]

    # From a server that took them (an older one): the desk refuses before it writes anything.
    files = [ProposalFile(name=name, sha256=weights["sha256"], size=weights["size"])
             for name in ("model", "model/part.bin")]
    wire = ProposalWire.model_construct(
        id=uuid.uuid4(), task=TASK, team="A", proposer_id=team.lead.id, proposer="Lee Lead", created_at=utcnow(),
        name="clash", rounds_trained_on=[1], compared_with_round=None, files=files,
        files_sha256=manifest_sha256((f.name, f.sha256) for f in files), comparison=None, figures={}, note=None,
        state="open")
    owner = team_desk(tmp_path / "owner", team.owner, team.url)
    with SyncClient(owner, team.url, team.owner.token, policy=QUICK) as client:
        with pytest.raises(ProposalError, match="cannot share one folder"):
            download_proposal(owner, client, wire)
    proposals = tmp_path / "owner" / "proposals"
    assert not proposals.exists() or list(proposals.iterdir()) == []
    owner.close()


@SQLITE_ONLY
def test_a_description_nested_past_any_reader_is_a_clear_refusal_on_the_owners_desk(
        team, tmp_path, hate_trigger_model_dir, capsys):
    poor_round_published(team, tmp_path, hate_trigger_model_dir)
    folder = candidate(hate_trigger_model_dir, tmp_path / "crafted")
    (folder / "dynadesk_model.json").write_text('{"a":' * 5000 + "1" + "}" * 5000, encoding="utf-8")
    files = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        uploaded = upload(team, team.lead, path.read_bytes())
        files.append({**uploaded, "name": path.relative_to(folder).as_posix()})
    body = proposal(files)
    assert propose(team, team.lead, body).status_code == 201, "a crafted client proposes it"

    code, out, err = cli(capsys, tmp_path / "owner", "rounds", "promote", "--proposal", body["id"])
    assert code == 1 and "nested too deep" in err, (out, err)
    assert "RecursionError" not in err and "Traceback" not in err
    shown = httpx.get(f"{team.url}/v1/proposals/{body['id']}", headers=auth(team.owner)).json()
    assert shown["state"] == "open"  # nothing was promoted
