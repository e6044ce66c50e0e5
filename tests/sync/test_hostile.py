"""Hostile records: a record nested deep enough to break JSON serialisers, and records
large enough to blow up one pull page. No single record may stop anyone else's sync."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import select, update

from app.cli import cli
from app.core.errors import DynadeskError, ImportFailed
from app.core.io.importers import import_file
from app.core.io.records import dump_example
from app.core.limits import MAX_FIELD_BYTES, FreeFormTooLarge, free_form_problem
from app.core.storage import outbox
from app.core.storage.models import Example as DeskExample
from sync.client import SyncClient
from sync.local import problems as desk_problems
from sync.protocol import MAX_PULL_BYTES
from sync.server import models as server_models
from sync.server import store
from tests.sync.helpers import basics_records, fill_outbox, prepare_desk, server_records
from tests.sync.test_server import auth, changes, example, push, statuses

# Where the backend does not matter (pydantic's checks, the desk), SQLite alone; the change feed's
# SQL (quarantine, page weights) runs on both.
SQLITE_ONLY = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def nested(depth: int):
    value: object = "bottom"
    for _ in range(depth):
        value = {"a": value}
    return value


def pull_all(team, account, limit: int = 500) -> list[httpx.Response]:
    pages, cursor = [], 0
    for _ in range(100):
        response = httpx.get(f"{team.url}/v1/changes", params={"since": cursor, "limit": limit},
                             headers=auth(account), timeout=60)
        assert response.status_code == 200, response.text[:500]
        pages.append(response)
        page = response.json()
        if not page["more"]:
            return pages
        cursor = page["cursor"]
    raise AssertionError("the pull did not end")


@SQLITE_ONLY
def test_free_form_fields_nested_too_deep_or_too_large_are_refused_at_push_and_publish(team, tmp_path):
    deep = {"kind": "scratch", "x": nested(255)}
    for field, value, said in [("origin", deep, "origin is nested 256 levels deep; at most 32 allowed"),
                               ("edit_ops", [deep], "edit_ops is nested 257 levels deep; at most 32 allowed"),
                               ("origin", {"kind": "x" * MAX_FIELD_BYTES}, "origin takes 64 KiB as JSON; at most 64 KiB")]:
        response = push(team, team.ann, example(team.ann, "deep", **{field: value}))
        assert response.status_code == 422, response.text[:300]
        assert said in response.json()["errors"][0]["reason"]
    round_ = {**next(r for r in basics_records(tmp_path) if r["record"] == "round"), "settings": {"x": nested(100)}}
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [round_]}, headers=auth(team.owner))
    assert response.status_code == 422 and "settings is nested 101 levels deep" in response.text
    assert statuses(push(team, team.ann, example(team.ann, "fine", origin={"kind": "scratch", "x": nested(30)}))) \
        == ["stored"]


@SQLITE_ONLY
def test_a_number_too_large_for_a_float_is_refused_not_stored_as_infinity(team):
    """1e999 is valid JSON that Python reads as inf: SQLite stored it (and the feed sent null),
    PostgreSQL's JSON column refused it (a 500 for the whole push)."""
    for placeholder in ('"origin": {', '"probabilities": {'):
        body = json.dumps({"records": [example(team.ann, "a huge number")]})
        assert placeholder in body
        response = httpx.post(f"{team.url}/v1/push", content=body.replace(placeholder, placeholder + '"x": 1e999, ', 1),
                              headers={**auth(team.ann), "Content-Type": "application/json"})
        assert response.status_code == 400, response.text[:300]  # as any body that is not JSON a server can keep
        assert "the number 1e999 is too large" in response.json()["detail"]
    assert free_form_problem("origin", {"x": float("inf")}) == \
        "origin holds an infinite or not-a-number value, which JSON cannot carry"


def test_a_poison_record_already_stored_is_quarantined_and_everyone_else_syncs_on(team, server_db, tmp_path):
    records = [example(team.ann, f"text {i}") for i in range(3)]
    assert statuses(push(team, team.ann, *records)) == ["stored"] * 3
    poison = uuid.UUID(records[1]["id"])
    with server_db.write() as session:  # as one stored before free-form fields were bounded
        session.execute(update(server_models.Example).where(server_models.Example.id == poison)
                        .values(origin={"kind": "scratch", "x": nested(255)}))

    for reader in (team.bob, team.owner, team.bob):  # the team, every owner, and again after quarantine
        pulled = [r["id"] for r in changes(team, reader)["records"] if r["record"] == "example"]
        assert pulled == [records[0]["id"], records[2]["id"]]
    listed = store.quarantined(server_db)
    assert [(e.record_id, e.kind, e.sender) for e in listed] == [(poison, "example", team.ann.name)]
    assert "origin: Value error, origin is nested 256 levels deep; at most 32 allowed" in listed[0].reason

    db_option = ["--db", server_db.url]
    runner = CliRunner()
    shown = runner.invoke(cli, ["--data-dir", str(tmp_path / "cli"), "serve", "quarantine", "list", *db_option])
    assert shown.exit_code == 0, shown.output
    assert str(poison) in shown.output and "nested 256 levels deep" in shown.output and team.ann.name in shown.output
    dropped = runner.invoke(cli, ["--data-dir", str(tmp_path / "cli"), "serve", "quarantine", "drop", str(poison),
                                  *db_option])
    assert dropped.exit_code == 0 and f"Dropped example {poison}" in dropped.output, dropped.output
    again = runner.invoke(cli, ["--data-dir", str(tmp_path / "cli"), "serve", "quarantine", "drop", str(poison),
                                *db_option])
    assert isinstance(again.exception, DynadeskError) and "not in quarantine" in str(again.exception)  # a message
    assert store.quarantined(server_db) == []
    assert len(changes(team, team.bob)["records"]) > 0


def test_pull_pages_are_capped_by_bytes_and_every_record_arrives_once(team, server_db):
    blob = "é" * (MAX_FIELD_BYTES // 2 - 100)  # two bytes a character: just under the limit
    records = [example(team.ann, f"large {i}", origin={"kind": "scratch", "note": blob},
                       edit_ops=[{"op": "keep", "text": blob}]) for i in range(36)]
    for start in range(0, len(records), 12):
        assert statuses(push(team, team.ann, *records[start:start + 12])) == ["stored"] * 12
    pages = pull_all(team, team.bob)
    largest = 2 * 2 * MAX_FIELD_BYTES + 10_000  # one record: a page may pass the cap by the last one
    assert len(pages) >= 2
    assert max(len(p.content) for p in pages) <= MAX_PULL_BYTES + largest
    ids = [r["id"] for p in pages for r in p.json()["records"] if r["record"] == "example"]
    assert sorted(ids) == sorted(r["id"] for r in records)  # each exactly once

    bob = store.authenticate(server_db, team.bob.token)
    one = store.changes(server_db, bob, 0, 500, max_bytes=1)
    assert len(one.records) - len(one.referenced) == 1 and one.more  # always at least one change


@SQLITE_ONLY
def test_a_desk_holding_a_poison_record_syncs_everything_else_and_names_it(team, server_db, tmp_path):
    desk = prepare_desk(tmp_path / "desk", team.ann)
    try:
        fill_outbox(desk, team.ann.id, 4, seed=16)
        with desk.db.read() as session:
            ids = sorted(session.scalars(select(DeskExample.id)))
        with desk.db.write() as session:  # as a desk written before free-form fields were bounded
            session.execute(update(DeskExample).where(DeskExample.id == ids[0])
                            .values(origin={"kind": "scratch", "x": nested(255)}))
        with SyncClient(desk, team.url, team.ann.token) as client:
            report = client.run(fetch_models=False)
        assert report.pushed == 3 and report.rejected == 1
        assert any(str(ids[0]) in p and "origin is nested 256 levels deep; at most 32 allowed" in p
                   for p in report.problems), report.problems
        assert sorted(server_records(server_db, team.ann.id)) == sorted(str(i) for i in ids[1:])
        [problem] = desk_problems(desk.db)
        assert problem.record_id == ids[0] and "nested 256 levels deep" in problem.last_error
        # Its author can still take it back (the retraction stays here, named at the next push, like it).
        assert desk.examples.retract(ids[0], team.ann.id, "it never went out").status == "retracted"

        # Nor does the desk take in or queue new ones.
        with desk.db.read() as session:
            good = session.get(DeskExample, ids[1])
            record = dump_example(good, "hate_speech")
        path = tmp_path / "deep.jsonl"
        path.write_text(json.dumps({**record, "id": str(uuid.uuid4()), "origin": {"x": nested(40)}}) + "\n")
        with pytest.raises(ImportFailed, match="line 1: example record .*: origin is nested 41 levels deep; at most 32"):
            import_file(desk, path, "jsonl")
        with pytest.raises(FreeFormTooLarge, match="edit_ops takes 64 KiB as JSON; at most 64 KiB allowed"):
            with desk.db.write() as session:
                example_ = session.get(DeskExample, ids[1])
                example_.edit_ops, example_.sync_state, example_.revision = ["x" * MAX_FIELD_BYTES], "pending", 2
                outbox.enqueue(session, example_)
    finally:
        desk.close()


@SQLITE_ONLY
def test_a_poison_round_is_quarantined_and_leaves_quarantine_when_published_again(team, server_db, tmp_path):
    record = example(team.ann, "on a poisoned round")
    assert statuses(push(team, team.ann, record)) == ["stored"]
    with server_db.write() as session:
        round_id = session.scalar(select(server_models.Round.id).where(server_models.Round.number == 1))
        session.execute(update(server_models.Round).where(server_models.Round.id == round_id)
                        .values(settings={"x": nested(100)}))
    page = changes(team, team.bob)
    assert [r["id"] for r in page["records"] if r["record"] == "example"] == [record["id"]]
    assert str(round_id) not in {r["id"] for r in page["records"]}
    assert [(e.record_id, e.kind) for e in store.quarantined(server_db)] == [(round_id, "round")]
    bob = store.authenticate(server_db, team.bob.token)
    with pytest.MonkeyPatch.context() as patch:  # every later page still refers to it: no write for that
        patch.setattr(server_db, "write_retrying", lambda work: pytest.fail("a pull wrote to the database"))
        assert [r["id"] for r in store.changes(server_db, bob, 0, 500).model_dump(mode="json")["records"]
                if r["record"] == "example"] == [record["id"]]
    with pytest.raises(DynadeskError, match="publish it again in a form that fits"):
        store.drop_quarantined(server_db, round_id)

    round_1 = next(r for r in basics_records(tmp_path) if r["record"] == "round" and r["number"] == 1)
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [round_1]}, headers=auth(team.owner))
    assert statuses(response) == ["stored"]
    assert store.quarantined(server_db) == []
    again = changes(team, team.bob, since=page["cursor"])
    assert [r["settings"] for r in again["records"] if r["id"] == str(round_id)] == [{}]


def test_a_desk_refuses_to_publish_records_no_server_takes_before_any_request(tmp_path):
    from app.core.desk import Desk
    from app.core.storage.models import Context, Round
    from sync.transport import Offline, SyncError
    from tests.sync.test_client import QUICK, free_port

    desk = Desk(tmp_path / "owner")
    try:
        desk.switch_person(desk.people.create("Olive", "owner").id)
        round_ = desk.tasks.get_or_create_round("nli", 1)
        with desk.db.write() as session:
            session.get(Round, round_.id).settings = {"x": nested(40)}
            session.add(Context(round_id=round_.id, text="a passage", content_hash="0" * 64,
                                data={"note": "x" * MAX_FIELD_BYTES}))
        # Nothing listens on this port: a request would be an Offline error, not the record named.
        with SyncClient(desk, f"http://127.0.0.1:{free_port()}", "ddk_unused", policy=QUICK) as client:
            with pytest.raises(SyncError) as refused:
                client.publish("nli")
        assert not isinstance(refused.value, Offline)
        said = str(refused.value)
        assert "round 1: settings is nested 41 levels deep; at most 32 allowed" in said
        assert "of round 1: data takes 64 KiB as JSON; at most 64 KiB allowed" in said
    finally:
        desk.close()
