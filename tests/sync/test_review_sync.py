"""Lead reviews (accept / return) travel by sync: a lead returns an example on their desk and
its author sees it on theirs, marked, with the comment; accepts likewise. Real desks (SQLite
files), a real server on loopback (SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import uuid
from datetime import datetime

import httpx
import pytest
from sqlalchemy import func, select

from app.core.domain import utcnow
from app.core.services.lead import NotALead
from app.core.services.review import ExampleFilter
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleReview, OutboxEntry, Person
from sync import local
from sync.server import models as server_models
from tests.conftest import ROOT, hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, desk_records, prepare_desk, server_records
from tests.sync.test_client import client_for
from tests.sync.test_server import auth, example, push, statuses


def write_example(desk, account, text: str):
    model = next(m for m in desk.models.all() if m.sha256 == MODEL_SHA)
    return desk.examples.create(account.id, "hate_speech", hate_content(text, "hate"), [hate_output(model, "not hate")],
                                round_number=1)


def ann_writes_bob_says_correct(team, ann, ann_client, bob, bob_client, text: str):
    """Ann writes an example and syncs it; Bob pulls it, calls it correct and syncs his verdict."""
    ann_client.run()
    mine = write_example(ann, team.ann, text)
    ann_client.run()
    bob_client.run()
    bob.validation.validate(mine.id, team.bob.id, "correct")
    bob_client.run()
    return mine


def returned_to_me(desk, author_id) -> list:
    """What the Data tab shows with "Returned to me" ticked."""
    return desk.review.rows(ExampleFilter(author_ids=[author_id], review_states=["returned"]))


def outbox(desk) -> list[OutboxEntry]:
    with desk.db.read() as session:
        return list(session.scalars(select(OutboxEntry).order_by(OutboxEntry.seq)))


def reviews_on(desk) -> list[tuple]:
    with desk.db.read() as session:
        return [(r.id, r.example_id, r.lead_id, r.action, r.comment, r.created_at, r.sync_state)
                for r in session.scalars(select(ExampleReview).order_by(ExampleReview.created_at))]


def server_reviews(server_db) -> list:
    with server_db.read() as session:
        return list(session.scalars(select(server_models.ExampleReview).order_by(server_models.ExampleReview.created_at)))


def test_a_returned_example_reaches_its_authors_desk_marked_with_the_comment(team, tmp_path, server_db):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        ann_client.run()
        mine = write_example(ann, team.ann, "they are all the same")
        other = write_example(ann, team.ann, "an example nobody returns")
        ann_client.run()
        lead_client.run()  # the lead's desk gets Ann's examples
        assert lead.lead.return_examples(team.lead.id, [mine.id], "Name the target group.") == 1
        [entry] = outbox(lead)  # in the same unit of work as the review
        assert (entry.kind, entry.person_id, entry.revision, entry.state) == ("example_review", team.lead.id, 1,
                                                                              "pending")
        assert returned_to_me(ann, team.ann.id) == []  # not there yet: nothing has synced

        report = lead_client.run()
        assert report.pushed == 1 and outbox(lead) == []
        assert [r[-1] for r in reviews_on(lead)] == ["synced"]
        [stored] = server_reviews(server_db)
        assert (stored.example_id, stored.lead_id, stored.action, stored.comment, stored.team) == (
            mine.id, team.lead.id, "returned", "Name the target group.", "A")

        report = ann_client.run()
        assert report.pulled >= 1
    [row] = returned_to_me(ann, team.ann.id)
    assert (row.id, row.review_state, row.review_comment) == (mine.id, "returned", "Name the target group.")
    assert [e.id for e in ann.lead.returned_to(team.ann.id)] == [mine.id]
    [history] = ann.lead.history(mine.id)
    assert (history.lead, history.action, history.comment) == ("Lee Lead", "returned", "Name the target group.")
    assert reviews_on(ann) == [(r[0], *r[1:6], "synced") for r in reviews_on(lead)]  # the lead's record, as written
    assert ann.examples.get(other.id).review_state is None
    # Ann's examples are still exactly what the server holds (the review did not touch them).
    assert desk_records(ann, team.ann.id) == server_records(server_db, team.ann.id)
    assert local.local_status(ann.db, team.ann.id).pending == 0  # a pulled review never goes back out
    ann.close()
    lead.close()


def test_an_accept_reaches_the_author_and_the_review_that_reaches_the_server_last_counts(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    owner = prepare_desk(tmp_path / "owner", team.owner)
    clients = {desk: client_for(desk, team.url, account)
               for desk, account in ((ann, team.ann), (lead, team.lead), (owner, team.owner))}
    clients[ann].run()
    first = write_example(ann, team.ann, "first of Ann's")
    second = write_example(ann, team.ann, "second of Ann's")
    clients[ann].run()
    clients[lead].run()
    clients[owner].run()

    # The lead returns the first example; their desk stays offline for a while.
    lead.lead.return_examples(team.lead.id, [first.id], "Too close to the prompt.")
    # Later, the owner accepts both and syncs at once.
    assert owner.lead.accept_work(team.owner.id, team.ann.id, example_ids=[first.id, second.id],
                                  comment="Good work") == 2
    clients[owner].run()
    clients[ann].run()
    accepted = ann.review.rows(ExampleFilter(author_ids=[team.ann.id], review_states=["accepted"]))
    assert {(r.id, r.review_comment) for r in accepted} == {(first.id, "Good work"), (second.id, "Good work")}
    assert returned_to_me(ann, team.ann.id) == []

    # The lead's return, written earlier, reaches the server after the owner's accept. The server's
    # arrival order decides (a desk's clock may be wrong, or forged): every desk shows the return,
    # and keeps both in the history.
    clients[lead].run()
    clients[ann].run()
    shown = ann.examples.get(first.id)
    assert (shown.review_state, shown.review_comment) == ("returned", "Too close to the prompt.")
    assert [(h.lead, h.action) for h in ann.lead.history(first.id)] == [("Olga Owner", "accepted"),
                                                                         ("Lee Lead", "returned")]
    on_lead = lead.examples.get(first.id)  # the lead's desk pulled the owner's accept, which came first
    assert (on_lead.review_state, on_lead.review_comment) == ("returned", "Too close to the prompt.")
    assert on_lead.reviewed_at == shown.reviewed_at
    assert lead.examples.get(second.id).review_state == "accepted"
    clients[owner].run()
    assert [h.action for h in owner.lead.history(first.id)] == ["accepted", "returned"]
    assert owner.examples.get(first.id).review_state == "returned"
    for desk, client in clients.items():
        client.close()
        desk.close()


def test_pulling_the_same_reviews_again_changes_nothing(team, tmp_path, server_db):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        ann_client.run()
        mine = write_example(ann, team.ann, "returned once, pulled twice")
        ann_client.run()
        lead_client.run()
        lead.lead.return_examples(team.lead.id, [mine.id], "Explain why the model failed.")
        lead_client.run()
        ann_client.run()
        before = (reviews_on(ann), ann.examples.get(mine.id).updated_at, ann.examples.get(mine.id).reviewed_at,
                  desk_records(ann))
        assert len(before[0]) == 1

        again = ann_client.run()  # nothing new since the cursor
        assert again.pulled == 0
        key = local.cursor_key(team.url, team.ann.id)
        with ann.db.write() as session:
            local.set_meta(session, key, "0")  # as if every page arrived a second time
        again = ann_client.run()
    assert again.pulled == 0 and again.problems == []
    after = (reviews_on(ann), ann.examples.get(mine.id).updated_at, ann.examples.get(mine.id).reviewed_at,
             desk_records(ann))
    assert after == before
    [row] = returned_to_me(ann, team.ann.id)
    assert row.review_comment == "Explain why the model failed."
    assert len(server_reviews(server_db)) == 1
    ann.close()
    lead.close()


def test_an_annotator_cannot_push_a_review_and_the_outbox_says_why(team, tmp_path, server_db):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(bob, team.url, team.bob) as bob_client:
        ann_client.run()
        mine = write_example(ann, team.ann, "Bob is no lead")
        ann_client.run()
        bob_client.run()
        # Bob's desk profile says "lead" (edited on the desk); the server knows better.
        with bob.db.write() as session:
            session.get(Person, team.bob.id).role = "lead"
        bob.lead.return_examples(team.bob.id, [mine.id], "I say so")
        report = bob_client.run()
        assert report.rejected == 1 and report.pushed == 0
        [entry] = outbox(bob)
        assert entry.kind == "example_review" and entry.state == "rejected"
        assert entry.last_error.startswith("not allowed: ")
        assert "Bob Annotator is an annotator on this server" in entry.last_error
        assert "only team leads and owners accept or return work" in entry.last_error
        assert [p.record_id for p in local.problems(bob.db)] == [entry.record_id]
        assert server_reviews(server_db) == []
        ann_client.run()
    assert ann.examples.get(mine.id).review_state is None and returned_to_me(ann, team.ann.id) == []
    # The sync told Bob's desk his role; the desk now refuses before anything is written.
    with pytest.raises(NotALead):
        bob.lead.return_examples(team.bob.id, [mine.id], "once more")
    ann.close()
    bob.close()


KILLED_AFTER_RETURNING = """
import os, signal, sys, uuid
from app.core.desk import Desk
desk = Desk(sys.argv[1])
desk.lead.return_examples(uuid.UUID(sys.argv[2]), [uuid.UUID(sys.argv[3])], "Written, then the power went.")
print("RETURNED", flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_review_written_just_before_the_desk_was_killed_still_goes_out(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as client:
        client.run()
        mine = write_example(ann, team.ann, "survives a kill")
        client.run()
    with client_for(lead, team.url, team.lead) as client:
        client.run()
    lead.close()
    done = subprocess.run([sys.executable, "-c", KILLED_AFTER_RETURNING, str(tmp_path / "lead"), str(team.lead.id),
                           str(mine.id)], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == -9 and "RETURNED" in done.stdout, done.stderr[-2000:]

    from app.core.desk import Desk

    lead = Desk(tmp_path / "lead")
    [entry] = outbox(lead)
    assert (entry.kind, entry.state) == ("example_review", "pending")
    with client_for(lead, team.url, team.lead) as client:
        assert client.run().pushed == 1
        assert client.run().pushed == 0  # pushed once
    with client_for(ann, team.url, team.ann) as client:
        client.run()
    [row] = returned_to_me(ann, team.ann.id)
    assert (row.id, row.review_comment) == (mine.id, "Written, then the power went.")
    ann.close()
    lead.close()


def review(lead_account, example_record: dict, action: str = "returned", comment: str | None = "fix it",
           **extra) -> dict:
    now = utcnow().isoformat()
    record = {"record": "example_review", "id": str(uuid.uuid4()), "example": example_record["id"],
              "lead": str(lead_account.id), "action": action, "comment": comment, "created_at": now,
              "updated_at": now, "revision": 1}
    record.update(extra)
    return record


def test_the_servers_rules_for_reviews(team, server_db):
    ours = example(team.ann, "reviewed on the server")
    theirs = example(team.cat, "team B's example")
    early = review(team.lead, example(team.bob, "not pushed yet"))
    assert statuses(push(team, team.ann, ours)) == ["stored"]
    assert statuses(push(team, team.cat, theirs)) == ["stored"]

    returned = review(team.lead, ours)
    assert statuses(push(team, team.lead, returned)) == ["stored"]
    assert statuses(push(team, team.lead, returned)) == ["already_stored"]  # a resent batch
    edited = {**returned, "comment": "something else"}
    response = push(team, team.lead, edited)
    assert statuses(response) == ["conflict"]
    assert response.json()["results"][0]["server"]["comment"] == "fix it"  # never overwritten
    assert statuses(push(team, team.lead, early)) == ["deferred"]  # its example is not on the server yet

    no_comment = review(team.lead, ours, comment="  ")
    response = push(team, team.lead, no_comment)
    assert statuses(response) == ["rejected"] and "needs a comment" in response.json()["results"][0]["reason"]
    own = example(team.lead, "the lead's own example")
    assert statuses(push(team, team.lead, own)) == ["stored"]
    response = push(team, team.lead, review(team.lead, own, "accepted", None))
    assert statuses(response) == ["rejected"] and "own example" in response.json()["results"][0]["reason"]
    assert statuses(push(team, team.owner, review(team.owner, ours, "accepted", None))) == ["stored"]

    refusals = {
        "an annotator": (team.bob, review(team.bob, ours)),
        "as someone else": (team.bob, review(team.lead, ours)),
        "another team's lead": (team.lia, review(team.lia, ours)),
        "into another team": (team.lead, review(team.lead, theirs)),
    }
    for what, (account, record) in refusals.items():
        response = push(team, account, record)
        assert response.status_code == 403, (what, response.text)
        [error] = response.json()["errors"]
        assert error["id"] == record["id"] and error["reason"], what
    assert "only team leads and owners accept or return work" in \
        push(team, team.bob, review(team.bob, ours)).json()["errors"][0]["reason"]
    assert {(r.action, r.lead_id) for r in server_reviews(server_db)} == {("returned", team.lead.id),
                                                                          ("accepted", team.owner.id)}

    # Team A's desks pull both reviews with the example they refer to; team B sees none.
    feed = httpx.get(f"{team.url}/v1/changes", params={"since": 0}, headers=auth(team.bob)).json()
    pulled = [r for r in feed["records"] if r["record"] == "example_review"]
    assert {r["id"] for r in pulled} == {str(r.id) for r in server_reviews(server_db)}
    assert ours["id"] in {r["id"] for r in feed["records"] if r["record"] == "example"}
    b_feed = httpx.get(f"{team.url}/v1/changes", params={"since": 0}, headers=auth(team.cat)).json()
    assert not [r for r in b_feed["records"] if r["record"] == "example_review"]
    response = push(team, team.lead, {**review(team.lead, ours), "action": "rejected"})
    assert response.status_code == 422 and "action" in response.json()["errors"][0]["reason"]


def test_reviews_written_before_this_version_are_queued_on_upgrade(tmp_path):
    path = tmp_path / "old.sqlite"
    Database(path, upgrade=False).upgrade("0005")
    ids = {name: uuid.uuid4().hex for name in ("task", "round", "author", "lead", "ex", "imported", "r1", "r2")}
    now = datetime(2026, 1, 2, 3, 4, 5).isoformat(sep=" ")
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?)",
                    ("hate_speech", "Hate speech", json.dumps({"code": "hate_speech"}), "f" * 64, 1, ids["task"], now, now))
        for name, role in (("author", "annotator"), ("lead", "lead")):
            raw.execute("INSERT INTO people VALUES (?,?,?,?,?,?)", (name, role, 1, ids[name], now, now))
        raw.execute("INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (ids["task"], 1, "r1", "", "open", "mean", now, None, "{}", 1, ids["round"], now, now))
        for name, sync_state in (("ex", "synced"), ("imported", "local")):
            raw.execute(
                "INSERT INTO examples (id, task_id, round_id, author_id, inputs, text, fooled_rule, meta, origin, status,"
                " time_spent_ms, sync_state, validation_state, validation_count, flag_count, disagreement_count,"
                " revision, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (ids[name], ids["task"], ids["round"], ids["author"], "{}", name, "mean", "{}", "{}", "submitted", 0,
                 sync_state, "unvalidated", 0, 0, 0, 1, now, now))
        for review_id, example_id in (("r1", "ex"), ("r2", "imported")):
            raw.execute("INSERT INTO example_reviews (id, example_id, lead_id, action, comment, created_at, updated_at)"
                        " VALUES (?,?,?,?,?,?,?)", (ids[review_id], ids[example_id], ids["lead"], "returned", "why", now,
                                                    now))
    db = Database(path)
    with db.read() as session:
        queued = [(e.kind, e.record_id.hex, e.person_id.hex, e.revision, e.state)
                  for e in session.scalars(select(OutboxEntry))]
        states = {r.id.hex: (r.sync_state, r.revision) for r in session.scalars(select(ExampleReview))}
        assert session.scalar(select(func.count()).select_from(Example)) == 2
    assert queued == [("example_review", ids["r1"], ids["lead"], 1, "pending")]
    assert states == {ids["r1"]: ("pending", 1), ids["r2"]: ("local", 1)}  # an imported set's review stays here
    db.close()


def test_a_lead_verdict_written_on_the_leads_desk_decides_the_example_on_the_authors(team, tmp_path, server_db):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        ann_client.run()
        mine = write_example(ann, team.ann, "adjudicated elsewhere")
        ann_client.run()
        lead_client.run()
        verdict = lead.lead.adjudicate(mine.id, team.lead.id, "incorrect", corrected_label="not hate",
                                       reason="reclaimed slur, not an attack")
        assert lead_client.run().pushed == 1
        ann_client.run()
    shown = ann.examples.get(mine.id)
    assert (shown.validation_state, shown.decided_verdict, shown.decided_label) == ("decided", "incorrect", "not hate")
    assert [(v.id, v.mode) for v in ann.validation.validations_of(mine.id)] == [(verdict.id, "lead")]
    with server_db.read() as session:
        stored = session.get(server_models.Example, mine.id)
        assert (stored.decided_verdict, stored.decided_label) == ("incorrect", "not hate")
    ann.close()
    lead.close()


def test_a_desk_that_syncs_late_gets_the_example_and_its_reviews_in_one_page(team, tmp_path, caplog):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        ann_client.run()
        mine = write_example(ann, team.ann, "seen by Bob only at the end")
        ann_client.run()
        lead_client.run()
        lead.lead.return_examples(team.lead.id, [mine.id], "Add the target group.")
        lead_client.run()
    bob = prepare_desk(tmp_path / "bob", team.bob)  # a teammate's desk, first sync after all of it
    with caplog.at_level("INFO", logger="sync.incoming"), client_for(bob, team.url, team.bob) as client:
        report = client.run()
    assert report.pages == 1 and report.problems == []
    assert not [r for r in caplog.records if "record by record" in r.getMessage()]  # stored in bulk
    shown = bob.examples.get(mine.id)
    assert (shown.review_state, shown.review_comment) == ("returned", "Add the target group.")
    assert returned_to_me(bob, team.bob.id) == []  # it is Ann's, not Bob's
    ann.close()
    lead.close()
    bob.close()


def test_pulled_verdicts_are_decided_under_the_threshold_a_lead_set_on_that_desk(team, tmp_path, server_db):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    bob = prepare_desk(tmp_path / "bob", team.bob)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=1)  # a small team: one verdict decides here
    with (client_for(ann, team.url, team.ann) as ann_client, client_for(bob, team.url, team.bob) as bob_client,
          client_for(lead, team.url, team.lead) as lead_client):
        mine = ann_writes_bob_says_correct(team, ann, ann_client, bob, bob_client, "one verdict is enough here")
        lead_client.run()
    assert lead.examples.get(mine.id).decided_verdict == "correct"
    assert bob.examples.get(mine.id).validation_state == "in_progress"  # Bob has not pulled the lead's setting yet
    with server_db.read() as session:  # the lead's sync pushed it: the server decides the team's figures with it
        assert session.get(server_models.Example, mine.id).validation_state == "decided"
    for desk in (ann, bob, lead):
        desk.close()
