"""The previous release (tagged, protocol 1) and this one (protocol 2) side by side, for real: the previous
release's own code in its own venv (tests/previous_release.py) runs a desk (its CLI, and Python against its
own Desk API) or a server (`serve run`), and this checkout runs the other side.

Protocol 2 adds nothing real to the records yet; each test registers, in this process, a record kind and a
field as if protocol 2 had brought them (lead reviews; a validation's model note), so that what the previous
release cannot take is really in play. The registry is this process's: the server or the desk of this
checkout shapes by it, as it will by the real entries.

Every start of the previous release costs seconds: each step that runs it does all it can in one process.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from contextlib import ExitStack, closing
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from app.cli import cli
from app.core.desk import Desk
from app.core.storage.models import Example, ExampleReview, Validation
from sync import local, wire_versions
from sync.server import models as server_models
from sync.server.store import held_back
from tests.conftest import hate_content, hate_output
from tests.previous_release import PREVIOUS_PROTOCOL, PreviousRelease, PreviousReleaseUnavailable, previous_release
from tests.sync.helpers import (
    MODEL_SHA,
    PG_ENV,
    Account,
    ProcessServer,
    basics_records,
    postgres_schema,
    prepare_desk,
)
from tests.sync.test_client import client_for

NOTE = "the model missed the slur"

# Python run inside the previous release: one desk, the steps given as JSON; prints what each step returns.
OLD_DESK = r'''
import json, sys, uuid
from sqlalchemy import select
from app.core.desk import Desk
from app.core.domain import ModelOutput
from app.core.storage.models import Example, ExampleReview, Validation
from app.core.tasks.content import Content
from sync.client import SyncClient

steps = json.loads(sys.argv[1])
desk = Desk(steps[0]["dir"])
out = []
for step in steps[1:]:
    op = step["op"]
    if op == "write":
        model = next(m for m in desk.models.all() if m.sha256 == "ab" * 32)
        ids = []
        for text in step["texts"]:
            content = Content({"text": text}, "hate", meta={"hate_type": "derogation", "target_groups": ["women"],
                                                          "label_explanation": "because"})
            output = ModelOutput(model.id, model.sha256, "not hate", {"hate": 0.1, "not hate": 0.9}, 4.2)
            ids.append(str(desk.examples.create(uuid.UUID(step["author"]), "hate_speech", content, [output],
                                                round_number=1).id))
        out.append(ids)
    elif op == "validate":
        out.append(str(desk.validation.validate(uuid.UUID(step["example"]), uuid.UUID(step["by"]), "correct",
                                                model_note=step.get("note")).id))
    elif op == "return":
        out.append(desk.lead.return_examples(uuid.UUID(step["by"]), [uuid.UUID(step["example"])], step["comment"]))
    elif op == "sync":
        with SyncClient(desk, step["url"], step["token"]) as client:
            out.append(client.run().summary())
    elif op == "inventory":
        with desk.db.read() as session:
            out.append({"examples": sorted(str(i) for i in session.scalars(select(Example.id))),
                        "validations": {str(v.id): v.model_note for v in session.scalars(select(Validation))},
                        "reviews": {str(r.id): r.comment for r in session.scalars(select(ExampleReview))}})
desk.close()
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def previous() -> PreviousRelease:
    try:
        return previous_release()
    except PreviousReleaseUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture
def protocol_2_additions(monkeypatch):
    """Lead reviews as a kind, and a validation's model note as a field, that protocol 2 brought."""
    monkeypatch.setitem(wire_versions.RECORD_SINCE, "example_review", 2)
    monkeypatch.setitem(wire_versions.FIELD_SINCE, ("validation", "model_note"), 2)


def old_desk(previous: PreviousRelease, folder: Path, *steps: dict) -> list:
    return json.loads(previous.script(OLD_DESK, json.dumps([{"dir": str(folder)}, *steps]), timeout=300))


def old_desk_records(folder: Path) -> dict:
    """What the previous release's desk holds, read from its database file (no process to start)."""
    with closing(sqlite3.connect(folder / "dynadesk.sqlite")) as db:
        return {"examples": sorted(str(uuid.UUID(i)) for (i,) in db.execute("SELECT id FROM examples")),
                "validations": {str(uuid.UUID(i)): note for i, note in db.execute("SELECT id, model_note FROM validations")},
                "reviews": {str(uuid.UUID(i)): c for i, c in db.execute("SELECT id, comment FROM example_reviews")}}


def inventory(desk: Desk) -> dict:
    with desk.db.read() as session:
        return {"examples": sorted(str(i) for i in session.scalars(select(Example.id))),
                "validations": {str(v.id): v.model_note for v in session.scalars(select(Validation))},
                "reviews": {str(r.id): r.comment for r in session.scalars(select(ExampleReview))}}


def write(desk: Desk, account, *texts: str) -> list[str]:
    model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
    return [str(desk.examples.create(account.id, "hate_speech", hate_content(text, "hate"), [hate_output(model, "not hate")],
                                     round_number=1).id) for text in texts]


@pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)
def test_an_old_desk_and_new_desks_of_one_team_share_everything_through_a_new_server(
        previous, protocol_2_additions, team, server_db, server_db_url, tmp_path):
    """An old lead's desk (the previous release) and new desks of the same team, through a new server: every
    example, validation and review written on either side reaches the other, except what the old desk cannot
    take, which the server counts for it and sends once it is upgraded."""
    lead_dir = tmp_path / "old-lead"
    ann = prepare_desk(tmp_path / "ann", team.ann)
    owner = prepare_desk(tmp_path / "owner", team.owner)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(owner, team.url, team.owner) as owner_client:
        ann_client.run()
        ann_examples = write(ann, team.ann, "they are all vermin", "send every one of them back")
        ann_client.run()

        # The old lead's desk, set up from its command line (protocol 1: no headers); its first sync takes
        # its profile, the task, the rounds and their model from the server.
        configured = previous.run("sync", "configure", "--url", team.url, "--token-stdin", data_dir=lead_dir,
                                  input=team.lead.token + "\n")
        assert f"{team.lead.name} (lead, team A)" in configured.stdout
        # It validates one of Ann's examples (with a note), returns the other, writes one of its own.
        first, validated, returned, [lead_example], summary = old_desk(
            previous, lead_dir,
            {"op": "sync", "url": team.url, "token": team.lead.token},
            {"op": "validate", "example": ann_examples[0], "by": str(team.lead.id), "note": NOTE},
            {"op": "return", "example": ann_examples[1], "by": str(team.lead.id), "comment": "Name the group."},
            {"op": "write", "author": str(team.lead.id), "texts": ["an old desk's own example"]},
            {"op": "sync", "url": team.url, "token": team.lead.token})
        assert "pulled" in first
        assert returned == 1 and summary.startswith("Pushed 3 new record(s)")

        # New desks take all of it, and answer: the owner validates the old lead's example with a note, and
        # returns it; Ann validates it without one.
        ann_client.run()
        owner_client.run()
        on_ann = inventory(ann)
        assert on_ann["validations"][validated] == NOTE and "Name the group." in on_ann["reviews"].values()
        assert lead_example in on_ann["examples"]
        noted = str(owner.validation.validate(uuid.UUID(lead_example), team.owner.id, "correct", model_note=NOTE).id)
        assert owner.lead.return_examples(team.owner.id, [uuid.UUID(lead_example)], "Say who it targets.") == 1
        plain = str(ann.validation.validate(uuid.UUID(lead_example), team.ann.id, "correct").id)
        assert owner_client.run().pushed == 2 and ann_client.run().pushed == 1

    # The old desk gets what it can take: both validations, the note left out; not the review. Its own
    # figures and export work on what it has.
    synced = previous.run("sync", "--now", data_dir=lead_dir)
    assert "pulled" in synced.stdout and "protocol" not in synced.stdout + synced.stderr
    on_old = old_desk_records(lead_dir)
    assert on_old["validations"][noted] is None and on_old["validations"][plain] is None
    assert "Say who it targets." not in on_old["reviews"].values()
    assert set(ann_examples) <= set(on_old["examples"])
    stats = json.loads(previous.run("stats", "--json", "--by", "round", data_dir=lead_dir).stdout)
    assert sum(row["submitted"] for row in stats["round"]) == 3, stats

    # Every record it was not sent (or not sent whole) is counted, and its lead sees it.
    assert held_back.counts(server_db)[team.lead.id].changes == 2
    people = CliRunner().invoke(cli, ["serve", "people", "--db", server_db_url, "--data", str(tmp_path / "server")])
    assert "Lee Lead's desk speaks sync protocol 1: 2 change(s) need Dynadesk 0.2 or later" in people.output

    # The old lead's desk is upgraded in place: its first sync gets what was held back.
    with Desk(lead_dir) as upgraded, client_for(upgraded, team.url, team.lead) as client:
        report = client.run()
        assert report.held_back == 0 and "need a newer Dynadesk" not in report.summary()
        after = inventory(upgraded)
    assert after["validations"][noted] == NOTE and "Say who it targets." in after["reviews"].values()
    assert team.lead.id not in held_back.counts(server_db)
    with server_db.read() as session:  # nothing written on either side is missing on the server
        assert len(session.scalars(select(server_models.Validation)).all()) == 3
        assert len(session.scalars(select(server_models.ExampleReview)).all()) == 2


def test_a_new_desk_keeps_for_an_old_server_what_it_cannot_take_and_sends_it_after_its_upgrade(
        previous, protocol_2_additions, tmp_path):
    """The previous release's `serve run`, then the same database and port served by this release. On
    PostgreSQL when DYNADESK_TEST_PG_URL is set (the other cross-version test serves from SQLite); each
    start of a server process costs seconds, so it runs on one backend."""
    with ExitStack() as stack:
        if os.environ.get(PG_ENV):
            url = stack.enter_context(postgres_schema(os.environ[PG_ENV]))
        else:
            url = f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}"
        (tmp_path / "server").mkdir(exist_ok=True)
        _old_server_then_new(previous, url, tmp_path)


def _old_server_then_new(previous: PreviousRelease, url: str, tmp_path: Path) -> None:
    made = previous.script(
        "import json, sys\nfrom sync.server.db import ServerDatabase\nfrom sync.server import store\n"
        "db = ServerDatabase(sys.argv[1]); db.upgrade()\n"
        "people = [store.add_person(db, n, r, 'A') for n, r in "
        "[('Olga Owner', 'owner'), ('Lee Lead', 'lead'), ('Ann Annotator', 'annotator')]]\n"
        "print(json.dumps([[str(p.id), p.display_name, p.role, t] for p, t in people]))", url)
    owner, lead, ann = [Account(uuid.UUID(i), name, role, "A", token) for i, name, role, token in json.loads(made)]
    server = ProcessServer(url, tmp_path / "server", release=previous)
    try:
        server.start()
        published = httpx.post(f"{server.url}/v1/publish", json={"records": basics_records(tmp_path)},
                               headers={"Authorization": f"Bearer {owner.token}"}, timeout=60)
        assert published.status_code == 200, published.text
        ann_desk, lead_desk = prepare_desk(tmp_path / "ann", ann), prepare_desk(tmp_path / "lead", lead)
        with client_for(ann_desk, server.url, ann) as ann_client, client_for(lead_desk, server.url, lead) as lead_client:
            ann_client.run()
            assert ann_client.protocol == PREVIOUS_PROTOCOL
            texts = write(ann_desk, ann, "they are all vermin", "send every one of them back")
            assert ann_client.run().pushed == 2
            lead_client.run()
            assert lead_desk.lead.return_examples(lead.id, [uuid.UUID(texts[0])], "Name the group.") == 1
            lead_desk.validation.validate(uuid.UUID(texts[0]), lead.id, "correct", model_note=NOTE)
            lead_desk.validation.validate(uuid.UUID(texts[1]), lead.id, "correct")
            report = lead_client.run()
            assert report.pushed == 1 and report.waiting_for_server == 2
            assert "2 change(s) wait for the server's upgrade to Dynadesk 0.2." in report.summary()
            assert local.local_status(lead_desk.db, lead.id).pending == 2 and not report.problems

            server.halt()  # the server is upgraded in place: this release on the same database and port
            server.release = None
            server.start()
            report = lead_client.run()
            assert lead_client.protocol == wire_versions.PROTOCOL_VERSION
            assert report.pushed == 2 and report.waiting_for_server == 0
            assert local.local_status(lead_desk.db, lead.id).pending == 0
            ann_client.run()
            on_ann = inventory(ann_desk)
            assert sorted(filter(None, on_ann["validations"].values())) == [NOTE]
            assert list(on_ann["reviews"].values()) == ["Name the group."]
    finally:
        server.stop()
