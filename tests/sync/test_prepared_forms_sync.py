"""A team's desks skip the default model's ONNX preparation: the lead's desk prepares it and
publishes it with the model; a fresh annotator desk fetches it (every sha256 checked) and never
exports; a desk that receives it damaged refuses it and prepares its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from app.core import paths
from app.core.desk import Desk
from app.core.services import default_model_forms
from sync.client import SyncClient
from sync.tokens import TokenStore
from tests.gui.conftest import close_window, open_window
from tests.gui.test_first_start import hold_back_fast_form
from tests.gui.test_workspace import WAIT, text_box, wait_for_prediction
from tests.sync.helpers import add_account

pytestmark = pytest.mark.slow


def lead_prepares_and_publishes(server, tmp_path, default_model_cache):
    lead = add_account(server.db, "Lee Lead", "owner", "A")
    with Desk(tmp_path / "lead") as desk:
        shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))  # prepared once per test run
        default_model_forms.prepare_torch_files(desk)
        assert default_model_forms.adopt_torch_form(desk) is not None
        record = default_model_forms.switch_to_fast_form(desk, default_model_forms.prepared_fast_files(desk))
        assert record is not None and record.format == "onnx"
        with SyncClient(desk, server.url, lead.token) as client:
            results = client.publish("hate_speech", [1]).results
        assert {r.status for r in results} <= {"stored", "already_stored"}
        return record


def fresh_desk(qtbot, server, tmp_path, name: str):
    account = add_account(server.db, name, "annotator", "A")
    root = tmp_path / name.split()[0].lower()
    with Desk(root) as desk:
        desk.settings.server_url = server.url
        desk.settings.acknowledged_warnings = ["hate_speech"]
        desk.save_settings()
        TokenStore(desk.root).set(server.url, account.token)
    win = open_window(qtbot, root)
    win.sync.timer.stop()  # its first sync would bring round 1 itself; here the first start fetches the form
    win.resize(1366, 740)
    win.prepare_first_start()
    return win


def onnx_folders(data_dir) -> list:
    return sorted(p.name for p in paths.models_cache_dir(data_dir).glob("hate-speech-r1-*/onnx-*"))


def test_a_fresh_desk_fetches_the_published_forms_and_a_damaged_one_is_refused(
        qtbot, team_server, tmp_path, default_model_cache, monkeypatch):
    published = lead_prepares_and_publishes(team_server, tmp_path, default_model_cache)

    def never(*_args, **_kwargs):
        raise AssertionError("this desk exported the model itself")

    monkeypatch.setattr(default_model_forms, "prepare_fast_files", never)
    win = fresh_desk(qtbot, team_server, tmp_path, "Ann Annotator")
    try:
        ws = win.workspace
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.loaded.formats == ("onnx",), timeout=WAIT)
        assert ws.records[0].sha256 == published.sha256  # the lead's form, by checksum
        assert paths.models_cache_dir(win.desk.root) in Path(ws.records[0].path).parents
        assert onnx_folders(win.desk.root) == []  # nothing exported here
        qtbot.waitUntil(lambda: "fetched from the team's server" in win.statusBar().currentMessage(), timeout=WAIT)
        qtbot.keyClicks(text_box(win), "I love my family")
        assert wait_for_prediction(qtbot, win).label == "not hate"
    finally:
        close_window(win)

    # The server's copy of the model file is damaged: the next fresh desk refuses it and prepares its own.
    [onnx_blob] = [f["sha256"] for f in _published_files(team_server, published.sha256)
                   if f["name"] == "model/model.onnx"]
    blob = team_server.data_dir / "blobs" / onnx_blob[:2] / onnx_blob
    blob.chmod(0o644)
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    monkeypatch.undo()
    (tmp_path / "bob-held").mkdir()
    arrive, asked = hold_back_fast_form(monkeypatch, tmp_path / "bob", default_model_cache, tmp_path / "bob-held")
    arrive.set()
    win = fresh_desk(qtbot, team_server, tmp_path, "Bob Annotator")
    try:
        ws = win.workspace
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.loaded.formats == ("onnx",), timeout=WAIT)
        assert asked.is_set()  # it prepared its own
        assert "prepared in the background" in win.statusBar().currentMessage()
        assert "sync-" not in ws.records[0].path and onnx_folders(win.desk.root)
        assert not any(p.name == ".complete" for p in paths.models_cache_dir(win.desk.root).rglob("*")
                       if "sync-" in str(p))  # nothing of the damaged copy is in use
    finally:
        close_window(win)


def _published_files(server, sha256: str) -> list[dict]:
    from sync.server import store

    return [f.model_dump() for f in store.model_manifest(server.db, sha256).files]


def test_an_owners_first_sync_does_not_publish_round_one_with_its_stand_in(team_server, tmp_path,
                                                                         default_model_cache):
    """The PyTorch form stands in only until the ONNX form is ready: the team never gets it as round 1's target."""
    import httpx

    owner = add_account(team_server.db, "Olga Owner", "owner", "A")
    with Desk(tmp_path / "owner") as desk:
        shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))
        default_model_forms.prepare_torch_files(desk)
        assert default_model_forms.adopt_torch_form(desk) is not None
        with SyncClient(desk, team_server.url, owner.token) as client:
            report = client.run(fetch_models=False)
        assert report.published == []
        changes = httpx.get(f"{team_server.url}/v1/changes", headers={"Authorization": f"Bearer {owner.token}"})
        assert not [r for r in changes.json()["records"] if r["record"] == "round"]
