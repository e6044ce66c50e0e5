"""The sync client against a real server: offline as a state, a refused token, cancel and
resume of both push and pull, requests that are too large, pulled changes applied to the desk,
model files downloaded and verified, and where the token is kept."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import uuid
from pathlib import Path

import httpx
import pytest

from app.core.storage.models import Round as DeskRound
from sync.client import ClientFactory, SyncClient
from sync.local import local_status
from sync.protocol import manifest_sha256
from sync.tokens import TokenStore
from sync.transport import AuthError, Cancelled, Offline, RetryPolicy, SyncError, SyncHandle
from tests.conftest import FIXTURES, hate_content, hate_output
from tests.sync.helpers import (
    MODEL_SHA,
    desk_records,
    fill_outbox,
    prepare_desk,
    server_counts,
    server_records,
)
from tests.sync.test_server import auth

QUICK = RetryPolicy(attempts=4, first_delay=0.01, max_delay=0.05)


def client_for(desk, team_url, account, **kwargs) -> SyncClient:
    return SyncClient(desk, team_url, account.token, policy=kwargs.pop("policy", QUICK), **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_offline_is_a_state_and_the_work_waits(tmp_path, desk, people, target_model):
    desk.examples.create(people.author.id, "hate_speech", hate_content("written on a plane", "hate"),
                         [hate_output(target_model, "not hate")])
    with SyncClient(desk, f"http://127.0.0.1:{free_port()}", "ddk_token", policy=QUICK) as client:
        with pytest.raises(Offline, match="cannot be reached"):
            client.run()
    status = local_status(desk.db, people.author.id)
    assert status.pending == 1 and status.last_error is None and status.last_success is None


def test_a_refused_token_is_said_plainly(team, tmp_path):
    desk = prepare_desk(tmp_path / "desk", team.ann)
    with SyncClient(desk, team.url, "ddk_not-my-token", policy=QUICK) as client:
        with pytest.raises(AuthError, match="refused the sync token"):
            client.run()
    assert "refused the sync token" in local_status(desk.db, team.ann.id).last_error
    desk.close()


def test_a_cancelled_push_resumes_where_it_stopped(team, tmp_path, server_db):
    desk = prepare_desk(tmp_path / "desk", team.ann)
    fill_outbox(desk, team.ann.id, 1200, seed=2)
    handle = SyncHandle(on_progress=lambda phase, done, total: phase == "push" and done >= 400 and handle.cancel())
    with client_for(desk, team.url, team.ann, batch_size=200) as client:
        with pytest.raises(Cancelled):
            client.run(handle)
        sent = server_counts(server_db)["examples"]
        assert 400 <= sent < 1200
        assert local_status(desk.db, team.ann.id).pending == 1200 - sent
        report = client.run()
    assert report.pushed == 1200 - sent and report.already_stored == 0  # nothing sent twice
    assert desk_records(desk, team.ann.id) == server_records(server_db, team.ann.id)
    desk.close()


def test_a_cancelled_pull_resumes_at_its_cursor(team, tmp_path):
    bob = prepare_desk(tmp_path / "bob", team.bob)
    fill_outbox(bob, team.bob.id, 45, seed=3)
    with client_for(bob, team.url, team.bob) as client:
        client.run()
    ann = prepare_desk(tmp_path / "ann", team.ann)
    pages = []
    handle = SyncHandle(on_progress=lambda phase, done, total: phase == "pull" and (pages.append(done) or
                                                                                      handle.cancel()))
    with client_for(ann, team.url, team.ann, page_size=10) as client:
        with pytest.raises(Cancelled):
            client.run(handle)
        first = len(desk_records(ann, team.bob.id))
        assert 0 < first < 45
        report = client.run()
    assert len(desk_records(ann, team.bob.id)) == 45
    assert desk_records(ann, team.bob.id) == desk_records(bob, team.bob.id)  # every field as Bob wrote it
    assert report.pulled == 45 - first  # the second run started where the first stopped
    bob.close()
    ann.close()


def test_requests_too_large_for_the_server_are_split(team, tmp_path, server_db, monkeypatch):
    import sync.server.app as server_app

    monkeypatch.setattr(server_app, "MAX_BODY_BYTES", 150_000)
    desk = prepare_desk(tmp_path / "desk", team.ann)
    fill_outbox(desk, team.ann.id, 600, seed=4)
    with client_for(desk, team.url, team.ann, batch_size=500) as client:
        report = client.run()
    assert report.pushed == 600 and server_counts(server_db)["examples"] == 600
    desk.close()


def test_what_changed_on_the_server_reaches_the_desk(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(bob, team.url, team.bob) as bob_client:
        ann_client.run()
        bob_client.run()
        model = next(m for m in ann.models.all() if m.sha256 == MODEL_SHA)
        mine = ann.examples.create(team.ann.id, "hate_speech", hate_content("ann's example", "hate"),
                                   [hate_output(model, "not hate")], round_number=1)
        ann_client.run()
        bob_client.run()
        assert bob.examples.get(mine.id).text == "ann's example"
        verdict = bob.validation.validate(mine.id, team.bob.id, "correct")
        bob_client.run()
        ann_client.run()
        assert ann.examples.get(mine.id).validation_count == 1  # the verdict arrived and was counted
        assert [v.id for v in ann.validation.validations_of(mine.id)] == [verdict.id]

        ann.examples.retract(mine.id, team.ann.id, "I misread it")
        ann_client.run()
        bob_client.run()
        pulled = bob.examples.get(mine.id)
        assert (pulled.status, pulled.revision, pulled.status_reason) == ("retracted", 2, "I misread it")
        assert pulled.sync_state == "synced" and local_status(bob.db, team.bob.id).pending == 0

        # The owner closes round 2: desks follow.
        from tests.sync.helpers import basics_records

        round_two = dict(next(r for r in basics_records(None) if r["record"] == "round" and r["number"] == 2))
        round_two.update(status="closed", closed_at="2026-11-01T00:00:00+00:00")
        assert httpx.post(f"{team.url}/v1/publish", json={"records": [round_two]},
                          headers=auth(team.owner)).status_code == 200
        bob_client.run()
        with bob.db.read() as session:
            local = session.query(DeskRound).filter_by(number=2).one()
            assert local.status == "closed"
    ann.close()
    bob.close()


def tiny_onnx_model() -> bytes:
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])])
    return helper.make_model(graph, doc_string="x" * 300_000).SerializeToString()


def test_open_rounds_target_models_are_downloaded_and_verified(team, tmp_path, server):
    files = {"model/model.onnx": tiny_onnx_model(), "model/config.json": b'{"model_type": "bert"}',
             "tokenizer/tokenizer.json": b'{"version": "1.0", "model": {}}'}
    shas = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    model_sha = manifest_sha256(shas.items())
    owner = auth(team.owner)
    for name, data in files.items():
        assert httpx.put(f"{team.url}/v1/blobs/{shas[name]}", content=data, headers=owner).status_code == 201
    now = "2026-11-20T10:00:00+00:00"
    model = {"record": "model", "id": str(uuid.uuid4()), "name": "round-3 target", "format": "onnx", "sha256": model_sha,
             "label_map": {"0": "not hate", "1": "hate"}, "task": "hate_speech",
             "provenance": {"runtime": {"tokenizer_dir": "/home/olga/models/tok"}},
             "files": [{"name": n, "sha256": shas[n], "size": len(d)} for n, d in files.items()],
             "created_at": now, "updated_at": now}
    round_three = {"record": "round", "id": str(uuid.uuid4()), "task": "hate_speech", "number": 3,
                   "target_models": [model["id"]], "created_at": now, "updated_at": now}
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [model, round_three]}, headers=owner)
    assert [r["status"] for r in response.json()["results"]] == ["stored", "stored"]

    # A damaged file on the server is caught on arrival, and nothing is installed.
    blob = server.data_dir / "blobs" / shas["model/model.onnx"][:2] / shas["model/model.onnx"]
    blob.write_bytes(b"damaged")
    desk = prepare_desk(tmp_path / "desk", team.ann)
    with client_for(desk, team.url, team.ann) as client:
        with pytest.raises(Exception, match="arrived damaged"):
            client.run()
        record = next(m for m in desk.models.all() if m.sha256 == model_sha)
        assert not record.path
        blob.write_bytes(files["model/model.onnx"])
        report = client.run()
    assert report.models == ["round-3 target"]
    record = next(m for m in desk.models.all() if m.sha256 == model_sha)
    folder = Path(record.path)
    assert (folder / "model.onnx").read_bytes() == files["model/model.onnx"]
    assert (folder / "tokenizer" / "tokenizer.json").read_bytes() == files["tokenizer/tokenizer.json"]
    assert record.provenance["runtime"]["tokenizer_dir"] == str(folder / "tokenizer")
    from local_models.engine import model_sha256

    assert model_sha256(folder, format="onnx", tokenizer_dir=folder / "tokenizer") == model_sha
    desk.close()


def test_an_owner_shares_an_imported_data_set_under_its_own_authors(team, tmp_path, server_db):
    from app.core.io.importers import import_file
    from sync.transport import Refused

    desk = prepare_desk(tmp_path / "owner", team.owner)
    with client_for(desk, team.url, team.owner) as client:
        client.run()
        import_file(desk, FIXTURES / "dynahate_sample.csv", "dynahate")
        client.run()
        assert server_counts(server_db)["examples"] == 0  # not unless asked
        assert client.queue_imported(source="dynahate") == 10
        report = client.run()
    # Rounds 3 and 4 are not published: those examples wait, and say why.
    assert report.pushed + report.deferred == 10 and report.deferred > 0
    assert local_status(desk.db, team.owner.id).deferred == report.deferred
    imported = [r for r in server_records(server_db).values() if r["source"] == "dynahate"]
    assert len(imported) == report.pushed
    assert {r["author"] for r in imported}.isdisjoint({str(team.owner.id)})  # the data set's own authors
    annotator_desk = prepare_desk(tmp_path / "ann", team.ann)
    with client_for(annotator_desk, team.url, team.ann) as client:
        with pytest.raises(Refused, match="Only owners"):
            client.queue_imported()
    desk.close()
    annotator_desk.close()


class MemoryKeyring:
    """Stands in for the keyring module with a working backend (registering a real backend class
    would leak into every later test)."""

    def __init__(self):
        self.store = {}

    def get_keyring(self):
        return self

    def get_password(self, service, username):
        return self.store.get((service, username))

    def set_password(self, service, username, password):
        self.store[(service, username)] = password

    def delete_password(self, service, username):
        self.store.pop((service, username), None)


def test_tokens_go_to_the_keyring_when_there_is_one(tmp_path, monkeypatch):
    import sync.tokens

    memory = MemoryKeyring()
    monkeypatch.setattr(sync.tokens, "_keyring", lambda: memory)
    tokens = TokenStore(tmp_path)
    assert "keyring" in tokens.where
    tokens.set("https://sync.example.org/", "ddk_secret")
    assert tokens.get("https://sync.example.org") == "ddk_secret"
    assert not (tmp_path / "sync-token.json").exists()
    assert "ddk_secret" in memory.store.values()
    tokens.delete("https://sync.example.org")
    assert tokens.get("https://sync.example.org") is None


def test_without_a_keyring_tokens_go_to_a_file_only_its_owner_reads(tmp_path):
    tokens = TokenStore(tmp_path, use_keyring=False)
    tokens.set("https://sync.example.org", "ddk_secret")
    path = tmp_path / "sync-token.json"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o644)  # someone loosens it
    assert tokens.get("https://sync.example.org/") == "ddk_secret"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    tokens.delete("https://sync.example.org")
    assert tokens.get("https://sync.example.org") is None and json.loads(path.read_text()) == {}


def test_every_client_is_made_by_the_factory_from_the_settings_and_the_kept_token(team, tmp_path):
    desk = prepare_desk(tmp_path / "desk", team.ann)
    clients = ClientFactory(desk, tokens=TokenStore(tmp_path / "tokens", use_keyring=False), policy=QUICK)
    with pytest.raises(SyncError, match="No sync server is set"):
        clients.configured()
    assert clients.ready() is None  # what only asks the team for help (a prepared form) asks nobody
    desk.settings.server_url = team.url
    assert clients.ready() is None  # a server, but no token for it
    with pytest.raises(AuthError, match="No sync token is set"):
        clients.configured()
    clients.tokens.set(team.url, team.ann.token)
    with clients.configured() as client:
        assert client.policy is QUICK and client.me().display_name == "Ann Annotator"
    with clients.ready() as client:
        assert client.url == team.url
    with clients.for_server(team.url, team.lead.token) as client:  # a token checked before it is kept
        assert client.me().display_name == "Lee Lead"
    assert clients.token(team.url) == team.ann.token
    desk.close()


def test_published_contexts_reach_annotators_and_their_examples_refer_to_them(team, tmp_path, server_db):
    from app.core.storage.models import Context
    from app.core.tasks.content import Content
    from app.core.text import content_hash

    passage = "The Vistula is the longest river in Poland, at 1,047 km.\nIt flows through Kraków and Warsaw."
    owner = prepare_desk(tmp_path / "owner", team.owner)
    with owner.db.write() as session:
        session.add(Context(round_id=owner.tasks.round("nli", 1).id, text=passage, content_hash=content_hash(passage),
                            tag="geography", source="wiki"))
    with client_for(owner, team.url, team.owner) as client:
        published = client.publish("nli")
    assert [r.record for r in published.results if r.status == "stored"] == ["task", "round", "context"]

    ann = prepare_desk(tmp_path / "ann", team.ann)
    with ann.db.write() as session:  # the same passage, already on this desk (its own id)
        local = Context(round_id=ann.tasks.round("nli", 1).id, text=passage, content_hash=content_hash(passage))
        session.add(local)
    with client_for(ann, team.url, team.ann) as client:
        client.run()
        written = ann.examples.create(team.ann.id, "nli", Content({"context": passage, "hypothesis": "Warsaw has no river."},
                                                                  "contradiction", meta={"label_explanation": "line 2"}),
                                      context_id=local.id)
        report = client.run()
    assert report.pushed == 1
    from sync.server import models

    with server_db.read() as session:
        stored = session.get(models.Example, written.id)
        context = session.get(models.Context, stored.context_id)
    assert context.text == passage and context.tag == "geography"  # matched by content, not by desk id
    bob = prepare_desk(tmp_path / "bob", team.bob)
    with client_for(bob, team.url, team.bob) as client:
        client.run()
    pulled = bob.examples.get(written.id)
    with bob.db.read() as session:
        assert session.get(Context, pulled.context_id).text == passage
    for desk in (owner, ann, bob):
        desk.close()
