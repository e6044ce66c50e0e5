"""Protocol negotiation in one process: a real server on loopback (SQLite, and PostgreSQL when
DYNADESK_TEST_PG_URL is set), real desks (SQLite files), and protocol-1 requests as release 0.1 sends
them (no protocol headers). Protocol 2 adds nothing real to the records yet, so these tests register
entries of their own (an existing kind or field marked as if protocol 2 had brought it); the
cross-version tests (test_cross_version.py) run the real previous release."""

from __future__ import annotations

import uuid

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select

from app.cli import cli
from app.core.domain import utcnow
from app.core.storage.models import ExampleReview, Validation
from sync import local, wire_versions
from sync.negotiation import LOWEST_HEADER, PROTOCOL_HEADER, Tally, shape_answer, shape_record
from sync.protocol import ChangesResponse, ExampleRecord
from sync.server import models as server_models
from sync.server.store import held_back
from sync.transport import SyncReport, Unsupported
from tests.cli_in_process import run_dynadesk
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, ThreadServer, prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_server import auth, example, push, statuses, validation

NEW_DESK = {PROTOCOL_HEADER: "2", LOWEST_HEADER: "1"}


def get(team, account, path: str, headers: dict | None = None, **params) -> httpx.Response:
    return httpx.get(f"{team.url}/v1{path}", params=params, headers={**auth(account), **(headers or {})})


def review(lead, example_record: dict, action: str = "returned", comment: str = "name the target group") -> dict:
    now = utcnow().isoformat()
    return {"record": "example_review", "id": str(uuid.uuid4()), "example": example_record["id"], "lead": str(lead.id),
            "action": action, "comment": comment, "created_at": now, "updated_at": now, "revision": 1}


def test_every_answer_says_the_servers_protocol_and_each_desk_gets_its_own(team):
    for headers, version in (({}, 1), (NEW_DESK, 2), ({PROTOCOL_HEADER: "1"}, 1)):
        answer = get(team, team.ann, "/me", headers)
        assert answer.status_code == 200, answer.text
        assert (answer.headers[PROTOCOL_HEADER], answer.headers[LOWEST_HEADER]) == ("2", "1")
        assert answer.json()["protocol"] == version
    refused = httpx.get(f"{team.url}/v1/me", headers={"Authorization": "Bearer ddk_not-a-token", **NEW_DESK})
    assert refused.status_code == 401 and refused.headers[PROTOCOL_HEADER] == "2"
    # a protocol-1 desk's pages carry nothing release 0.1 does not know; a protocol-2 desk's carry the count
    assert "held_back" not in get(team, team.ann, "/changes").json()
    assert get(team, team.ann, "/changes", NEW_DESK).json()["held_back"] == 0


def test_a_desk_outside_the_window_is_refused_in_one_sentence_naming_both_versions(team, monkeypatch):
    too_new = get(team, team.ann, "/me", {PROTOCOL_HEADER: "4", LOWEST_HEADER: "3"})
    assert too_new.status_code == 426 and too_new.headers[PROTOCOL_HEADER] == "2"
    detail = too_new.json()["detail"]
    assert set(too_new.json()) == {"detail", "errors"}  # the ErrorBody every desk reads
    assert "protocol 3 at the lowest" in detail and "protocol 2 at most" in detail and "server must be upgraded" in detail
    assert ". " not in detail and detail.endswith(".")  # one sentence

    unreadable = get(team, team.ann, "/me", {PROTOCOL_HEADER: "two"})
    assert unreadable.status_code == 400 and "cannot be read" in unreadable.json()["detail"]
    # the token is checked first, whatever the headers say
    assert httpx.get(f"{team.url}/v1/me", headers={PROTOCOL_HEADER: "9"}).status_code == 401

    monkeypatch.setattr(wire_versions, "LOWEST_PROTOCOL", 2)  # a server that no longer serves release 0.1
    old = get(team, team.ann, "/changes")
    assert old.status_code == 426
    assert old.json()["detail"] == ("This desk speaks sync protocol 1 (Dynadesk 0.1) and this server (Dynadesk 0.2.0) "
                                    "serves protocol 2 to 2: upgrade this desk to sync with it.")


def test_what_an_older_desk_cannot_take_is_held_back_counted_and_sent_after_its_upgrade(team, server_db, monkeypatch,
                                                                                        server_db_url, tmp_path):
    monkeypatch.setitem(wire_versions.RECORD_SINCE, "example_review", 2)
    monkeypatch.setitem(wire_versions.FIELD_SINCE, ("validation", "model_note"), 2)
    first, second = example(team.ann, "they are all vermin"), example(team.ann, "go back where you came from")
    assert statuses(push(team, team.ann, first, second)) == ["stored"] * 2
    noted = validation(team.bob, first, model_note="the model missed the slur")
    plain = validation(team.bob, second)
    assert statuses(push(team, team.bob, noted, plain)) == ["stored"] * 2
    returned = review(team.lead, first)
    assert statuses(push(team, team.lead, returned)) == ["stored"]

    # Ann's desk speaks protocol 1 (no headers): no review, the noted validation without its note
    page = get(team, team.ann, "/changes").json()
    kinds = [r["record"] for r in page["records"]]
    assert "example_review" not in kinds and kinds.count("validation") == 2
    sent = {r["id"]: r for r in page["records"] if r["record"] == "validation"}
    assert "model_note" not in sent[noted["id"]] and "model_note" not in sent[plain["id"]]
    assert "held_back" not in page
    held = held_back.counts(server_db)[team.ann.id]
    assert (held.changes, held.protocol) == (2, 1)
    assert get(team, team.ann, "/changes").status_code == 200  # the same page again is not counted again
    assert held_back.counts(server_db)[team.ann.id].changes == 2
    assert "held_back" not in get(team, team.ann, "/changes", since=page["cursor"]).json()

    # the team's lead (the server's owner) sees it
    people = CliRunner().invoke(cli, ["serve", "people", "--db", server_db_url, "--data", str(tmp_path / "server")])
    assert people.exit_code == 0, people.output
    assert ("Ann Annotator's desk speaks sync protocol 1: 2 change(s) need Dynadesk 0.2 or later "
            "(they are sent once the desk is upgraded)") in people.output

    # Ann upgrades: her desk asks from where it stands, is sent back to the first change held back, and gets
    # everything from there in full
    back = get(team, team.ann, "/changes", NEW_DESK, since=page["cursor"]).json()
    assert back["records"] == [] and back["more"] and back["cursor"] < page["cursor"]
    again = get(team, team.ann, "/changes", NEW_DESK, since=page["cursor"]).json()  # its answer was lost
    assert again["cursor"] == back["cursor"]
    full = get(team, team.ann, "/changes", NEW_DESK, since=back["cursor"]).json()
    by_id = {r["id"]: r for r in full["records"]}
    assert by_id[returned["id"]]["comment"] == "name the target group"
    assert by_id[noted["id"]]["model_note"] == "the model missed the slur"
    assert full["held_back"] == 0 and team.ann.id not in held_back.counts(server_db)


def test_a_newer_desk_keeps_what_an_older_server_cannot_take_and_sends_it_after_the_upgrade(team, server_db, tmp_path,
                                                                                           monkeypatch):
    monkeypatch.setitem(wire_versions.RECORD_SINCE, "example_review", 2)
    monkeypatch.setitem(wire_versions.FIELD_SINCE, ("validation", "model_note"), 2)
    older = OlderServer()
    server = ThreadServer(server_db, tmp_path / "older-server", wrap=older)
    try:
        ann, lead = prepare_desk(tmp_path / "ann", team.ann), prepare_desk(tmp_path / "lead", team.lead)
        with client_for(ann, server.url, team.ann) as ann_client, client_for(lead, server.url, team.lead) as lead_client:
            ann_client.run()
            model = next(m for m in ann.models.all() if m.sha256 == MODEL_SHA)
            written = [ann.examples.create(team.ann.id, "hate_speech", hate_content(text, "hate"),
                                           [hate_output(model, "not hate")], round_number=1)
                       for text in ("they are all vermin", "send them all back")]
            ann_client.run()
            lead_client.run()
            assert lead.lead.return_examples(team.lead.id, [written[0].id], "Name the target group.") == 1
            lead.validation.validate(written[0].id, team.lead.id, "correct", model_note="missed the slur")
            lead.validation.validate(written[1].id, team.lead.id, "correct")

            report = lead_client.run()
            assert lead_client.protocol == 1 and report.pushed == 1  # the plain validation
            assert report.waiting_for_server == 2
            assert "2 change(s) wait for the server's upgrade to Dynadesk 0.2." in report.summary()
            assert local.local_status(lead.db, team.lead.id).pending == 2
            assert local.versions(lead.db).waiting == 2
            status = run_dynadesk("--data-dir", tmp_path / "lead", "sync")
            assert "Of those, 2 wait for the server's upgrade to Dynadesk 0.2" in status.stdout, status.stderr
            with server_db.read() as session:
                assert session.scalars(select(server_models.ExampleReview)).all() == []

            older.upgraded = True
            report = lead_client.run()
            assert lead_client.protocol == 2 and report.pushed == 2 and report.waiting_for_server == 0
            assert "wait for the server's upgrade" not in report.summary()
            assert local.local_status(lead.db, team.lead.id).pending == 0 and local.versions(lead.db).waiting == 0
            assert "server's upgrade" not in run_dynadesk("--data-dir", tmp_path / "lead", "sync").stdout
            ann_client.run()
            with ann.db.read() as session:
                assert session.scalar(select(ExampleReview.comment)) == "Name the target group."
                assert sorted(filter(None, session.scalars(select(Validation.model_note)))) == ["missed the slur"]
    finally:
        server.stop()


def test_a_newer_desk_refuses_a_server_outside_its_window_in_one_sentence(team, server_db, tmp_path):
    server = ThreadServer(server_db, tmp_path / "far-server", wrap=lambda app: FarServer(app))
    try:
        desk = prepare_desk(tmp_path / "ann", team.ann)
        with client_for(desk, server.url, team.ann) as client, pytest.raises(Unsupported) as refused:
            client.run()
    finally:
        server.stop()
    message = str(refused.value)
    assert message == ("The server runs Dynadesk 0.2.0, which speaks sync protocol 3 at the lowest, and this Dynadesk "
                       "0.2.0 speaks protocol 2 at most: upgrade this desk to sync with that server.")
    assert local.local_status(desk.db, team.ann.id).last_error == message


def test_a_newer_server_counts_in_the_page_what_a_protocol_2_desk_cannot_take(monkeypatch):
    """For a desk one version behind a future server, the count travels in the page (a protocol-2 field)."""
    monkeypatch.setitem(wire_versions.FIELD_SINCE, ("example", "assistance"), 3)
    record = ExampleRecord.model_validate(example(type("A", (), {"id": uuid.uuid4()}), assistance={"arm": "on"}))
    page = ChangesResponse(records=[record], cursor=7, more=False, remaining=0, held_back=4)
    tally = Tally()
    shaped = shape_answer(page, 2, tally)
    assert shaped["held_back"] == 4 and "assistance" not in shaped["records"][0]
    assert tally.partly == {str(record.id): "example"}
    assert "held_back" not in shape_answer(page, 1)
    plain = shape_record({**example(type("A", (), {"id": uuid.uuid4()})), "assistance": None}, 2)
    assert plain.record is not None and "assistance" not in plain.record and not plain.held_back
    # and the desk that reads the count says it
    assert "4 change(s) need a newer Dynadesk; upgrade to see them." in SyncReport(held_back=4).summary()


class OlderServer:
    """In front of the server: until ``upgraded``, it answers as release 0.1 did (no protocol headers either
    way, so the server answers in protocol 1 and says so in /me)."""

    def __init__(self):
        self.upgraded = False

    def __call__(self, app):
        return _AsOlder(app, self)


class _AsOlder:
    def __init__(self, app, older: OlderServer):
        self.app, self.older = app, older

    async def __call__(self, scope, receive, send):
        if self.older.upgraded or scope["type"] != "http":
            return await self.app(scope, receive, send)
        names = {PROTOCOL_HEADER.lower().encode(), LOWEST_HEADER.lower().encode()}
        scope = {**scope, "headers": [(k, v) for k, v in scope["headers"] if k.lower() not in names]}

        async def plain(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [(k, v) for k, v in message["headers"] if k.lower() not in names]}
            await send(message)

        await self.app(scope, receive, plain)


class FarServer:
    """A server two versions ahead: it says protocol 4, down to 3."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        names = {PROTOCOL_HEADER.lower().encode(), LOWEST_HEADER.lower().encode()}

        async def far(message):
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message["headers"] if k.lower() not in names]
                message = {**message, "headers": [*kept, (PROTOCOL_HEADER.encode(), b"4"), (LOWEST_HEADER.encode(), b"3")]}
            await send(message)

        await self.app(scope, receive, far)
