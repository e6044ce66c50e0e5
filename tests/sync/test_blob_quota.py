"""Model files on the server have a per-person quota (an owner sets it with `dynadesk serve quota`), files
nothing names are swept after a grace period (`dynadesk serve sweep-blobs`, and at every `serve run`), and a
lead sees their use in `dynadesk sync`. Before, any lead stored as much as they liked without proposing.
Quotas and the sweep work the same whether the files live in the server folder or in the database."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta

import httpx
import pytest

from app.core.domain import utcnow
from sync.protocol import manifest_sha256
from sync.server.store import storage
from tests.sync.helpers import ThreadServer
from tests.sync.test_server import auth

sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


@pytest.fixture(params=["files", "database"])
def server(request, server_db, tmp_path):
    """The team's server, its model files in its folder or in its database."""
    running = ThreadServer(server_db, tmp_path / "server", blobs=request.param)
    yield running
    running.stop()


def put(team, account, content: bytes, *, declare: bool = True) -> httpx.Response:
    sha = hashlib.sha256(content).hexdigest()
    if declare:
        return httpx.put(f"{team.url}/v1/blobs/{sha}", content=content, headers=auth(account))
    # a chunked body declares no length: the server counts what arrives
    return httpx.put(f"{team.url}/v1/blobs/{sha}", content=iter([content[:10], content[10:]]), headers=auth(account))


def use(team, account) -> dict:
    response = httpx.get(f"{team.url}/v1/storage", headers=auth(account))
    assert response.status_code == 200, response.text
    return response.json()


def test_a_lead_stores_model_files_only_within_their_quota_and_a_refusal_stores_nothing(team, server, server_db):
    blobs = server.app.state.blobs
    assert use(team, team.lead) == {"used": 0, "files": 0, "quota": storage.DEFAULT_QUOTA["lead"]}
    storage.set_quota(server_db, "Lee Lead", 1000)
    first = b"a" * 600
    assert put(team, team.lead, first).status_code == 201
    assert put(team, team.lead, first).status_code == 200  # stored already: costs nothing more
    assert use(team, team.lead) == {"used": 600, "files": 1, "quota": 1000}
    for declare in (True, False):
        refused = put(team, team.lead, b"b" * 600, declare=declare)
        assert refused.status_code == 413, refused.text
        assert "quota" in refused.json()["detail"] and "600 bytes of 1000 bytes" in refused.json()["detail"]
    assert not blobs.exists(hashlib.sha256(b"b" * 600).hexdigest())
    assert list(blobs.partial()) == []  # no half-written file left behind
    assert use(team, team.lead)["used"] == 600
    assert put(team, team.lia, b"b" * 600).status_code == 201  # another lead's quota is their own
    assert put(team, team.owner, b"c" * 5000).status_code == 201  # owners: no limit by default
    assert use(team, team.owner)["quota"] is None
    assert httpx.get(f"{team.url}/v1/storage", headers=auth(team.ann)).json() == {"used": 0, "files": 0, "quota": 0}


def test_unreferenced_files_are_swept_after_the_grace_period_and_leave_the_use(team, server, server_db):
    blobs = server.app.state.blobs
    kept, dropped = b"weights someone proposed", b"weights nobody proposed"
    for content in (kept, dropped):
        assert put(team, team.lead, content).status_code == 201
    f = {"name": "trained_part.safetensors", "sha256": hashlib.sha256(kept).hexdigest(), "size": len(kept)}
    body = {"id": str(uuid.uuid4()), "name": "candidate", "rounds_trained_on": [1], "files": [f],
            "files_sha256": manifest_sha256([(f["name"], f["sha256"])]), "figures": {}}
    assert httpx.post(f"{team.url}/v1/tasks/hate_speech/proposals", json=body,
                      headers=auth(team.lead)).status_code == 201
    killed = blobs.writer("ab" * 32)  # a server killed mid-upload: never finished, never aborted
    killed.write(b"a killed upload")
    assert not blobs.exists("ab" * 32) and len(list(blobs.partial())) == 1

    assert storage.sweep(server_db, blobs) == storage.Swept(0, 0, 0)  # all younger than the grace period
    later = utcnow() + timedelta(hours=25)
    assert storage.sweep(server_db, blobs, now=later, dry_run=True) == storage.Swept(1, len(dropped), 1)
    assert blobs.exists(hashlib.sha256(dropped).hexdigest())
    assert storage.sweep(server_db, blobs, now=later) == storage.Swept(1, len(dropped), 1)
    assert not blobs.exists(hashlib.sha256(dropped).hexdigest()) and list(blobs.partial()) == []
    assert blobs.exists(f["sha256"])  # an open proposal names it
    assert use(team, team.lead) == {"used": len(kept), "files": 1, "quota": storage.DEFAULT_QUOTA["lead"]}

    decline = {"state": "declined", "reason": "not better"}
    assert httpx.post(f"{team.url}/v1/proposals/{body['id']}/decision", json=decline,
                      headers=auth(team.owner)).status_code == 200
    assert storage.sweep(server_db, blobs, now=later).files == 1  # a declined proposal keeps no files
    assert use(team, team.lead)["used"] == 0


@sqlite_only
def test_the_owner_sets_a_quota_on_the_server_and_the_lead_sees_their_use_in_sync_status(
        team, server, server_db_url, tmp_path, capsys):
    from sync.client import SyncClient
    from tests.sync.proposal_helpers import cli, team_desk

    where = ["--db", server_db_url, "--data", str(server.data_dir)]
    code, out, err = cli(capsys, tmp_path / "admin", "serve", "quota", "Lee Lead", "2KiB", *where)
    assert code == 0 and "Lee Lead keeps 0 model file(s), 0 bytes, on the server; a quota of 2.0 KiB." in out, err
    code, out, err = cli(capsys, tmp_path / "admin", "serve", "quota", "Lee Lead", "lots", *where)
    assert code == 2 and "is not a size" in err
    assert put(team, team.lead, b"x" * 1536).status_code == 201
    lead = team_desk(tmp_path / "lead", team.lead, team.url)
    with SyncClient(lead, team.url, team.lead.token) as client:
        client.run(fetch_models=False)
    lead.close()
    code, out, err = cli(capsys, tmp_path / "lead", "sync")
    assert code == 0 and "Model files:   1.5 KiB in 1 file(s) on the server (75% of your 2.0 KiB;" in out, err
    code, out, err = cli(capsys, tmp_path / "admin", "serve", "sweep-blobs", "--grace-hours", "0", "--dry-run", *where,
                         "--blobs", server.app.state.blobs.kind)
    assert code == 0 and "Would remove 1 model file(s) nothing needs any more (1.5 KiB)" in err, err
    code, out, err = cli(capsys, tmp_path / "admin", "serve", "quota", "Lee Lead", "default", *where)
    assert code == 0 and "a quota of 4.0 GiB" in out
