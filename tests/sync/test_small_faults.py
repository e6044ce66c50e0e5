"""Small faults, each as it was found: a cursor past 64 bits,
another team's author named in the duplicates, times far in the future (and a forged review time
winning on the desks), a perturbation of another team's example, control characters in names,
a suggestion of a command that does not exist, and empty folders left by a failed upload.
Real server on loopback (SQLite: none of this depends on the backend), CLI through CliRunner."""

from __future__ import annotations

import hashlib
import uuid
from datetime import timedelta

import httpx
import pytest
from click.testing import CliRunner

from app.cli import cli
from app.core.domain import utcnow
from app.core.errors import DynadeskError
from sync.server.db import VERSION_TABLE, ServerDatabase
from sync.server.models import Person
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_review_sync import review, write_example
from tests.sync.test_server import auth, example, push, statuses

sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def results(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()["results"]


@sqlite_only
def test_a_cursor_past_the_largest_64_bit_number_is_a_422_not_a_500(team):
    largest = 2**63 - 1
    assert httpx.get(f"{team.url}/v1/changes", params={"since": largest}, headers=auth(team.ann)).status_code == 200
    response = httpx.get(f"{team.url}/v1/changes", params={"since": largest + 1}, headers=auth(team.ann))
    assert response.status_code == 422, response.text
    assert "since" in response.json()["detail"]


@sqlite_only
def test_a_lead_learns_only_that_a_duplicate_is_in_another_team(team):
    first = example(team.ann, "the very same words in two teams")
    assert statuses(push(team, team.ann, first)) == ["stored"]
    again = example(team.cat, "the very same words in two teams")
    assert statuses(push(team, team.cat, again)) == ["stored"]

    response = httpx.get(f"{team.url}/v1/team/duplicates", headers=auth(team.lia))
    assert response.status_code == 200
    [shown] = response.json()["duplicates"]
    assert (shown["example"], shown["author"], shown["other_team"]) == (again["id"], "Cat Annotator", True)
    assert shown["duplicate_of"] is None and shown["original_author"] is None
    assert first["id"] not in response.text and "Ann Annotator" not in response.text
    feed = httpx.get(f"{team.url}/v1/changes", headers=auth(team.lia))  # nor does team B's change feed
    assert again["id"] in feed.text and first["id"] not in feed.text
    runner = CliRunner()
    configured = runner.invoke(cli, ["sync", "configure", "--url", team.url, "--token-stdin"],
                               input=team.lia.token + "\n")
    assert configured.exit_code == 0, configured.output
    listed = runner.invoke(cli, ["sync", "team", "--duplicates"])
    assert listed.exit_code == 0, listed.output
    assert "another team" in listed.output and "Ann Annotator" not in listed.output

    response = httpx.get(f"{team.url}/v1/team/duplicates", params={"team": "B"}, headers=auth(team.owner))
    [shown] = response.json()["duplicates"]  # owners see everything
    assert (shown["duplicate_of"], shown["original_author"], shown["other_team"]) == \
           (first["id"], "Ann Annotator", True)
    feed = httpx.get(f"{team.url}/v1/changes", headers=auth(team.owner)).json()
    assert {r["id"]: r.get("duplicate_of") for r in feed["records"]}[again["id"]] == first["id"]


@sqlite_only
def test_times_more_than_a_day_ahead_of_the_server_are_refused(team):
    ahead = (utcnow() + timedelta(days=2)).isoformat()
    soon = (utcnow() + timedelta(hours=3)).isoformat()  # a desk clock a little fast is fine
    future_created = example(team.ann, "written in the future", created_at=ahead, updated_at=ahead)
    future_submitted = example(team.ann, "submitted in the future", submitted_at=ahead)
    fine = example(team.ann, "written a little early", created_at=soon, updated_at=soon, submitted_at=soon)
    answers = results(push(team, team.ann, future_created, future_submitted, fine))
    assert [a["status"] for a in answers] == ["rejected", "rejected", "stored"]
    assert "created_at" in answers[0]["reason"] and "more than a day ahead" in answers[0]["reason"]
    assert "submitted_at" in answers[1]["reason"]

    [answer] = results(push(team, team.lead, review(team.lead, fine, created_at=ahead)))
    assert answer["status"] == "rejected" and "more than a day ahead" in answer["reason"]

    now = utcnow().isoformat()
    future_round = {"record": "round", "id": str(uuid.uuid4()), "task": "hate_speech", "number": 9,
                    "created_at": now, "updated_at": ahead, "revision": 1}
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [future_round]}, headers=auth(team.owner))
    [answer] = results(response)
    assert answer["status"] == "rejected" and "updated_at" in answer["reason"]


@sqlite_only
def test_the_latest_review_is_the_last_to_reach_the_server_not_the_one_with_the_latest_clock(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    with client_for(ann, team.url, team.ann) as client:
        mine = write_example(ann, team.ann, "reviewed twice")
        client.run()
        record = {"id": str(mine.id)}
        # A lead's desk claims its accept was written 20 hours from now (within the clock slack)...
        forged = (utcnow() + timedelta(hours=20)).isoformat()
        assert statuses(push(team, team.lead, review(team.lead, record, "accepted", None, created_at=forged,
                                                     updated_at=forged))) == ["stored"]
        client.run()
        assert ann.examples.get(mine.id).review_state == "accepted"
        # ...and the owner's return, which reached the server after it, still wins.
        assert statuses(push(team, team.owner, review(team.owner, record, "returned", "Please fix."))) == ["stored"]
        client.run()
    shown = ann.examples.get(mine.id)
    assert (shown.review_state, shown.review_comment) == ("returned", "Please fix.")
    assert [h.action for h in ann.lead.history(mine.id)] == ["accepted", "returned"]  # the last is the one shown
    ann.close()


@sqlite_only
def test_a_perturbation_of_another_teams_example_is_refused(team):
    theirs = example(team.cat, "team B's original")
    ours = example(team.ann, "team A's original")
    assert statuses(push(team, team.cat, theirs)) == ["stored"]
    assert statuses(push(team, team.ann, ours)) == ["stored"]
    answers = results(push(team, team.bob,
                           example(team.bob, "team B's original, edited", perturbation_of=theirs["id"]),
                           example(team.bob, "team A's original, edited", perturbation_of=ours["id"]),
                           example(team.bob, "an original still on its desk, edited",
                                   perturbation_of=str(uuid.uuid4()))))
    assert [a["status"] for a in answers] == ["rejected", "stored", "stored"]
    assert "another team" in answers[0]["reason"]


def serve(tmp_path, *args: str):
    database = f"sqlite:///{tmp_path / 'cli-server' / 'server.sqlite'}"
    return CliRunner().invoke(cli, ["serve", *args, "--db", database, "--data", str(tmp_path / "cli-server")])


def test_control_characters_in_names_are_refused_and_escaped_when_printed(tmp_path):
    for name in ("Eve\x1b[2J", "Mallory\u202eevil", "Nul\x00l"):
        added = serve(tmp_path, "add-person", name, "--role", "annotator")
        assert isinstance(added.exception, DynadeskError), added.output
        assert "control characters" in str(added.exception)
    assert serve(tmp_path, "add-person", "Zoë  Ng", "--role", "annotator").exit_code == 0

    # A name stored before this check (or by hand) is printed with its controls escaped.
    db = ServerDatabase(f"sqlite:///{tmp_path / 'cli-server' / 'server.sqlite'}")
    with db.write() as session:
        session.execute(Person.__table__.update().values(display_name="Zoë\x1b[2J\x07"))
    db.close()
    people = serve(tmp_path, "people")
    assert people.exit_code == 0, people.output
    assert "Zoë\\x1b[2J\\x07" in people.output and "\x1b" not in people.output and "\x07" not in people.output


@sqlite_only
def test_pushed_person_records_with_control_characters_are_refused(team):
    now = utcnow().isoformat()
    person = {"record": "person", "id": str(uuid.uuid4()), "display_name": "pseudonym\x1b]0;owned\x07",
              "role": "annotator", "created_at": now, "updated_at": now, "revision": 1}
    refused = push(team, team.owner, person)  # at the wire, as every text field's bound
    assert refused.status_code == 422 and "control characters" in refused.json()["errors"][0]["reason"]


def test_serve_people_on_a_newer_schema_says_what_to_do_not_a_missing_command(tmp_path):
    assert serve(tmp_path, "add-person", "Olga", "--role", "owner").exit_code == 0
    db = ServerDatabase(f"sqlite:///{tmp_path / 'cli-server' / 'server.sqlite'}")
    with db.engine.begin() as connection:
        connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
    db.close()
    people = serve(tmp_path, "people")
    message = str(people.exception)
    assert isinstance(people.exception, DynadeskError), people.output
    assert "newer Dynadesk" in message and "Install the Dynadesk version that wrote it" in message
    assert "serve upgrade" not in message

    with db.engine.begin() as connection:  # an older schema: `serve run` upgrades it
        connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '0001'")
    db.close()
    message = str(serve(tmp_path, "people").exception)
    assert "dynadesk serve run" in message and "serve upgrade" not in message


@sqlite_only
def test_a_failed_upload_leaves_no_empty_folders(team, server):
    blobs = server.data_dir / "blobs"
    data = b"model bytes"
    sha = hashlib.sha256(data).hexdigest()
    wrong = httpx.put(f"{team.url}/v1/blobs/{sha}", content=b"something else", headers=auth(team.owner))
    assert wrong.status_code == 422
    assert list(blobs.iterdir()) == []
    assert httpx.put(f"{team.url}/v1/blobs/{sha}", content=data, headers=auth(team.owner)).status_code == 201
    assert [p.name for p in blobs.iterdir()] == [sha[:2]]


def test_sync_status_escapes_control_characters_in_what_the_server_said(data_dir):
    from app.core.desk import Desk
    from sync import local

    with Desk(data_dir) as desk:
        local.note(desk.db, error="the server refused Eve\x1b[2J\x1b]0;owned\x07")
    shown = CliRunner().invoke(cli, ["sync"])
    assert shown.exit_code == 0, shown.output
    assert "Eve\\x1b[2J\\x1b]0;owned\\x07" in shown.output and "\x1b" not in shown.output


@sqlite_only
def test_a_review_sent_again_keeps_the_time_it_first_reached_the_server(team, tmp_path, server_db):
    """The answer to a push was lost, and the review went again: "already stored". The desk must
    order it by when the server first got it, as the server and every other desk do, not by the resend."""
    from sqlalchemy import select

    from app.core.storage.models import ExampleReview as DeskReview
    from app.core.storage.models import OutboxEntry
    from tests.sync.test_review_sync import server_reviews

    ann, lead = prepare_desk(tmp_path / "ann", team.ann), prepare_desk(tmp_path / "lead", team.lead)
    try:
        with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
            mine = write_example(ann, team.ann, "returned, and the answer lost")
            ann_client.run()
            lead_client.run()
            lead.lead.return_examples(team.lead.id, [mine.id], "Name the target group.")
            lead_client.run()
            [stored] = server_reviews(server_db)
            with lead.db.write() as session:  # as if the answer never came: queued again, no arrival time
                table = DeskReview.__table__
                session.execute(table.update().values(received_at=None, sync_state="pending",
                                                      updated_at=table.c.updated_at))
                review_ = session.scalar(select(DeskReview))
                session.add(OutboxEntry(kind="example_review", record_id=review_.id, person_id=team.lead.id,
                                        revision=review_.revision))
            report = lead_client.run()
        assert report.already_stored == 1
        with lead.db.read() as session:
            kept = session.scalar(select(DeskReview)).received_at
        assert kept.replace(tzinfo=None) == stored.received_at.replace(tzinfo=None)  # both UTC
    finally:
        ann.close()
        lead.close()
