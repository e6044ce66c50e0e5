"""An example written on a desk whose bundled model got another checksum (exports by older
versions held the exporting desk's paths) reaches the server, and the desk lists the model once."""

from __future__ import annotations

import httpx

from app.core.desk import Desk
from app.core.io.records import dump_model, dump_round
from sync.client import SyncClient
from sync.local import local_status
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import prepare_desk, server_records
from tests.sync.test_client import QUICK

BUNDLED = "Hate speech R1 (MiniLM-L6 + trained top layer), ONNX int8"
OWNERS_EXPORT, ANNS_EXPORT = "a" * 64, "b" * 64


def register_bundled(desk: Desk, sha256: str):
    export = {"parent_sha256": "c" * 64, "quantization": "dynamic int8", "opset": 18}
    return desk.models.register(BUNDLED, "onnx", sha256, task_id=desk.tasks.task("hate_speech").id,
                                label_map={"0": "not hate", "1": "hate"},
                                provenance={"default_model": True, "export": export})


def test_an_example_written_against_another_export_of_the_bundled_model_is_accepted(team, tmp_path, server_db):
    with Desk(tmp_path / "owner") as owner:  # the owner published round 3 with their own export
        model = register_bundled(owner, OWNERS_EXPORT)
        round_3 = owner.tasks.get_or_create_round("hate_speech", 3)
        response = httpx.post(f"{team.url}/v1/publish", headers={"Authorization": f"Bearer {team.owner.token}"},
                              json={"records": [dump_model(model, "hate_speech"),
                                                dump_round(round_3, "hate_speech", [model.id])]})
        assert {r["status"] for r in response.json()["results"]} == {"stored"}, response.text

    desk = prepare_desk(tmp_path / "ann", team.ann)
    mine = register_bundled(desk, ANNS_EXPORT)
    desk.tasks.get_or_create_round("hate_speech", 3)
    example = desk.examples.create(team.ann.id, "hate_speech", hate_content("written in round 3", "not hate"),
                                   [hate_output(mine, "not hate")], round_number=3)

    with SyncClient(desk, team.url, team.ann.token, policy=QUICK) as client:
        client.run(fetch_models=False)

    assert local_status(desk.db, team.ann.id).pending == 0
    stored = server_records(server_db, team.ann.id)[str(example.id)]
    assert [o["model_sha256"] for o in stored["outputs"]] == [OWNERS_EXPORT]
    assert [(m.name, m.sha256) for m in desk.models.all() if m.name == BUNDLED] == [(BUNDLED, OWNERS_EXPORT)]
    assert [o.model_sha256 for o in desk.examples.get(example.id).outputs] == [OWNERS_EXPORT]
    desk.close()
