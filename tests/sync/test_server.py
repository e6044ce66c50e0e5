"""The server's rules, through its HTTP interface: idempotent pushes, immutable examples with
status transitions, append-only validations, conflicts reported and never overwritten,
deferred records, duplicates for the lead, the change feed and its cursor, model files.
Each test runs on SQLite, and on PostgreSQL when DYNADESK_TEST_PG_URL is set."""

from __future__ import annotations

import copy
import hashlib
import uuid
from datetime import timedelta

import httpx
import pytest
from fastapi.routing import APIRoute

from app.core.domain import utcnow
from sync.protocol import manifest_sha256
from tests.sync.helpers import MODEL_SHA, server_counts


def auth(account) -> dict:
    return {"Authorization": f"Bearer {account.token}"}


def example(author, text: str = "they are all vermin", *, label: str = "hate", round_number: int = 1, **extra) -> dict:
    now = utcnow().isoformat()
    meta = {"label_explanation": "dehumanising"}
    if label == "hate":
        meta.update(hate_type="dehumanization", target_groups=["immigrants"])
    record = {
        "record": "example", "id": str(uuid.uuid4()), "task": "hate_speech", "round": str(uuid.uuid4()),
        "round_number": round_number, "author": str(author.id), "inputs": {"text": text}, "true_label": label,
        "model_fooled": True, "fooled_rule": "mean", "meta": meta, "origin": {"kind": "scratch"},
        "status": "submitted", "time_spent_ms": 61_000, "submitted_at": now, "created_at": now, "updated_at": now,
        "revision": 1,
        "outputs": [{"model": str(uuid.uuid4()), "model_sha256": MODEL_SHA, "label": "not hate",
                     "probabilities": {"hate": 0.1, "not hate": 0.9}, "latency_ms": 3.5, "fooled": True}],
    }
    record.update(extra)
    return record


def validation(validator, example_record: dict, verdict: str = "correct", **extra) -> dict:
    now = utcnow().isoformat()
    record = {"record": "validation", "id": str(uuid.uuid4()), "example": example_record["id"],
              "validator": str(validator.id), "verdict": verdict, "mode": "peer", "time_spent_ms": 5_000,
              "created_at": now, "updated_at": now, "revision": 1}
    record.update(extra)
    return record


def push(team, account, *records) -> httpx.Response:
    return httpx.post(f"{team.url}/v1/push", json={"records": list(records)}, headers=auth(account), timeout=60)


def statuses(response: httpx.Response) -> list[str]:
    assert response.status_code == 200, response.text
    return [r["status"] for r in response.json()["results"]]


def changes(team, account, since: int = 0, limit: int = 500) -> dict:
    response = httpx.get(f"{team.url}/v1/changes", params={"since": since, "limit": limit}, headers=auth(account))
    assert response.status_code == 200, response.text
    return response.json()


def test_a_resent_batch_changes_nothing_and_says_so(team, server_db):
    batch = [example(team.ann, f"text number {i}") for i in range(5)]
    assert statuses(push(team, team.ann, *batch)) == ["stored"] * 5
    before = server_counts(server_db)
    feed = changes(team, team.bob)
    again = push(team, team.ann, *batch)
    assert statuses(again) == ["already_stored"] * 5
    assert [r["revision"] for r in again.json()["results"]] == [1] * 5
    assert server_counts(server_db) == before
    assert changes(team, team.bob)["cursor"] == feed["cursor"]  # not even the change feed moved


def test_submitted_examples_are_immutable_except_for_their_status(team):
    record = example(team.ann)
    assert statuses(push(team, team.ann, record)) == ["stored"]

    edited = {**record, "inputs": {"text": "they are all lovely"}}
    response = push(team, team.ann, edited)
    result = response.json()["results"][0]
    assert result["status"] == "conflict" and "cannot be edited" in result["reason"] and "inputs" in result["reason"]
    assert result["server"]["inputs"] == {"text": "they are all vermin"}  # the server's version, kept

    same_revision_other_status = {**record, "status": "retracted"}
    assert statuses(push(team, team.ann, same_revision_other_status)) == ["conflict"]

    flagged = {**record, "status": "flagged", "status_reason": "unsure about the label", "revision": 2}
    assert statuses(push(team, team.ann, flagged)) == ["stored"]
    older = {**record, "revision": 1}
    response = push(team, team.ann, older)
    assert statuses(response) == ["conflict"] and "newer revision" in response.json()["results"][0]["reason"]
    back = {**record, "status": "submitted", "revision": 3}
    response = push(team, team.ann, back)
    assert statuses(response) == ["rejected"] and "flagged example cannot become submitted" in response.text
    retracted = {**record, "status": "retracted", "status_reason": "wrong label", "revision": 3}
    assert statuses(push(team, team.ann, retracted)) == ["stored"]
    assert statuses(push(team, team.ann, retracted)) == ["already_stored"]

    pulled = [r for r in changes(team, team.bob)["records"] if r["id"] == record["id"]]
    assert pulled[0]["status"] == "retracted" and pulled[0]["revision"] == 3


def test_validations_are_append_only_and_follow_the_rules(team, server_db):
    record = example(team.ann)
    assert statuses(push(team, team.ann, record)) == ["stored"]
    good = validation(team.bob, record)
    assert statuses(push(team, team.bob, good)) == ["stored"]
    assert statuses(push(team, team.bob, good)) == ["already_stored"]
    assert statuses(push(team, team.bob, {**good, "verdict": "flagged", "reason": "changed my mind"})) == ["conflict"]
    second = validation(team.bob, record, "incorrect", corrected_label="not hate", reason="it is sarcasm")
    response = push(team, team.bob, second)
    assert statuses(response) == ["conflict"] and "already validated" in response.text

    own = validation(team.ann, record)
    assert statuses(push(team, team.ann, own)) == ["rejected"]
    lee = team.lead
    for bad, reason in [
        (validation(lee, record, "incorrect", reason="no"), "corrected label"),
        (validation(lee, record, "incorrect", corrected_label="maybe", reason="no"), "must be one of"),
        (validation(lee, record, "incorrect", corrected_label="hate", reason="no"), "same as the author's"),
        (validation(lee, record, "flagged"), "needs a reason"),
    ]:
        response = push(team, lee, bad)
        assert statuses(response) == ["rejected"] and reason in response.json()["results"][0]["reason"]

    adjudication = validation(lee, record, "incorrect", corrected_label="not hate", reason="satire", mode="lead")
    assert statuses(push(team, lee, adjudication)) == ["stored"]
    from sync.server import models

    with server_db.read() as session:
        stored = session.get(models.Example, uuid.UUID(record["id"]))
        assert (stored.validation_state, stored.decided_verdict, stored.decided_label) == \
               ("decided", "incorrect", "not hate")
        assert stored.validation_count == 2


def test_records_that_refer_to_what_the_server_lacks_are_deferred_and_rules_are_reasons(team):
    response = push(team, team.ann,
                    example(team.ann, round_number=7),
                    example(team.ann, "a text for a model nobody published", outputs=[
                        {"model": str(uuid.uuid4()), "model_sha256": "cd" * 32, "label": "hate"}]),
                    validation(team.ann, {"id": str(uuid.uuid4())}),
                    example(team.ann, "hate without its metadata", meta={"label_explanation": "x"}),
                    example(team.ann, "x" * 5001),
                    example(team.ann, "labelled with a label the task lacks", label="spam"))
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["deferred", "deferred", "deferred", "rejected", "rejected", "rejected"]
    assert "round 7" in results[0]["reason"] and "not published" in results[1]["reason"]
    assert "Type of hate" in results[3]["reason"]
    assert "5,001 characters" in results[4]["reason"] and "5,000" in results[4]["reason"]
    assert "Choose a label" in results[5]["reason"]


def test_the_same_text_from_two_people_is_kept_and_marked_for_the_lead(team):
    first = example(team.ann, "Das ist  genau derselbe Text 🙂")
    assert statuses(push(team, team.ann, first)) == ["stored"]
    second = example(team.bob, "Das ist  genau derselbe Text 🙂")
    other_round = example(team.bob, "Das ist  genau derselbe Text 🙂", round_number=2)
    assert statuses(push(team, team.bob, second, other_round)) == ["stored", "stored"]
    response = httpx.get(f"{team.url}/v1/team/duplicates", headers=auth(team.lead))
    assert response.status_code == 200
    duplicates = response.json()["duplicates"]
    assert [(d["example"], d["duplicate_of"], d["author"], d["original_author"]) for d in duplicates] == \
           [(second["id"], first["id"], "Bob Annotator", "Ann Annotator")]
    stats = httpx.get(f"{team.url}/v1/team/stats", params={"by": "round"}, headers=auth(team.lead)).json()
    assert {r["name"]: (r["submitted"], r["duplicates"]) for r in stats["rows"]} == {
        "Hate speech · round 1": (2, 1), "Hate speech · round 2": (1, 0)}
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert pulled[second["id"]]["duplicate_of"] == first["id"]


def test_the_change_feed_pages_by_cursor_and_carries_what_records_refer_to(team):
    batch = [example(team.ann, f"feed text {i}") for i in range(7)]
    assert statuses(push(team, team.ann, *batch)) == ["stored"] * 7
    seen, since, pages = [], 0, 0
    while True:
        page = changes(team, team.bob, since, limit=3)
        pages += 1
        records = {r["id"]: r for r in page["records"]}
        for record in page["records"]:
            if record["record"] == "example" and record["id"] not in page["referenced"]:
                seen.append(record["id"])
                # everything it refers to is in the same page
                assert record["author"] in records and record["round"] in records
                assert {o["model"] for o in record["outputs"]} <= set(records)
        since = page["cursor"]
        if not page["more"]:
            break
        assert pages < 20
    assert seen == [r["id"] for r in batch]  # in the order they were stored, each once
    assert changes(team, team.bob, since)["records"] == []
    assert all(r["id"] not in {b["id"] for b in batch} for r in changes(team, team.ann)["records"]), \
        "a person is not sent their own records back"


def test_model_files_are_uploaded_by_owners_and_verified_both_ways(team, tmp_path):
    files = {"model/model.onnx": b"\x08\x07onnx bytes" * 1000, "tokenizer/tokenizer.json": b'{"version": "1.0"}'}
    shas = {name: hashlib.sha256(data).hexdigest() for name, data in files.items()}
    model_sha = manifest_sha256(shas.items())
    owner = auth(team.owner)
    for name, data in files.items():
        assert httpx.head(f"{team.url}/v1/blobs/{shas[name]}", headers=owner).status_code == 404
        wrong = httpx.put(f"{team.url}/v1/blobs/{shas[name]}", content=data + b"tampered", headers=owner)
        assert wrong.status_code == 422 and "not the file" in wrong.json()["detail"]
        put = httpx.put(f"{team.url}/v1/blobs/{shas[name]}", content=data, headers=owner)
        assert put.status_code == 201 and put.json()["created"]
    assert httpx.put(f"{team.url}/v1/blobs/{shas['model/model.onnx']}", content=b"x", headers=auth(team.ann)).status_code == 403
    # leads upload their proposals' files; a wrong content is refused all the same
    fresh = hashlib.sha256(b"a proposal's file").hexdigest()
    assert httpx.put(f"{team.url}/v1/blobs/{fresh}", content=b"x", headers=auth(team.lead)).status_code == 422
    now = utcnow().isoformat()
    record = {"record": "model", "id": str(uuid.uuid4()), "name": "onnx model", "format": "onnx", "sha256": model_sha,
              "label_map": {"0": "not hate", "1": "hate"}, "task": "hate_speech", "provenance": {},
              "files": [{"name": n, "sha256": shas[n], "size": len(d)} for n, d in files.items()],
              "created_at": now, "updated_at": now, "revision": 1}
    lying = copy.deepcopy(record)
    lying["files"][0]["sha256"] = "00" * 32
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [lying]}, headers=owner)
    assert response.json()["results"][0]["status"] == "rejected"
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [record]}, headers=owner)
    assert response.json()["results"][0]["status"] == "stored"
    manifest = httpx.get(f"{team.url}/v1/models/{model_sha}", headers=auth(team.ann)).json()
    assert {f["name"] for f in manifest["files"]} == set(files)
    blob = httpx.get(f"{team.url}/v1/blobs/{shas['model/model.onnx']}", headers=auth(team.ann))
    assert blob.content == files["model/model.onnx"]


def test_the_openapi_document_describes_every_endpoint(team, server):
    spec = httpx.get(f"{team.url}/openapi.json").json()
    routes = [r for r in server.app.routes if isinstance(r, APIRoute) and r.path.startswith("/v1/")]
    assert len(routes) >= 10
    for route in routes:
        for method in route.methods:
            operation = spec["paths"][route.path][method.lower()]
            assert operation.get("summary"), (method, route.path)
            assert {"401", "403", "422"} <= set(operation["responses"]), (method, route.path)
            assert operation.get("security") == [{"token": []}], (method, route.path)
    push_body = spec["paths"]["/v1/push"]["post"]["requestBody"]["content"]["application/json"]["schema"]
    assert push_body["$ref"].endswith("/PushRequest")
    assert "ExampleRecord" in spec["components"]["schemas"] and "ErrorBody" in spec["components"]["schemas"]


def test_rounds_closed_on_the_server_take_only_what_was_written_before(team):
    from tests.sync.helpers import basics_records

    round_two = copy.deepcopy(next(r for r in basics_records(None) if r["record"] == "round" and r["number"] == 2))
    closed_at = utcnow() - timedelta(hours=1)
    round_two.update(status="closed", closed_at=closed_at.isoformat())
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [round_two]}, headers=auth(team.owner))
    assert response.json()["results"][0]["status"] == "stored"
    before = (closed_at - timedelta(hours=2)).isoformat()
    after = utcnow().isoformat()
    results = push(team, team.ann, example(team.ann, "written offline in time", round_number=2, submitted_at=before),
                   example(team.ann, "written after it closed", round_number=2, submitted_at=after)).json()["results"]
    assert [r["status"] for r in results] == ["stored", "rejected"]
    assert "closed at" in results[1]["reason"]


@pytest.mark.parametrize("limit", [0, 5000])
def test_page_limits_are_enforced(team, limit):
    response = httpx.get(f"{team.url}/v1/changes", params={"limit": limit}, headers=auth(team.ann))
    assert response.status_code == 422 and response.json()["errors"]


def test_the_server_schema_is_its_migrations_and_a_newer_one_is_refused(server_db):
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    from app.core.errors import DynadeskError
    from sync.server.db import VERSION_TABLE, ServerDatabase, head_revision
    from sync.server.models import Base

    assert server_db.current_revision() == head_revision()
    with server_db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True, "version_table": VERSION_TABLE})
        assert compare_metadata(context, Base.metadata) == []
        connection.exec_driver_sql(f"UPDATE {VERSION_TABLE} SET version_num = '9999'")
        connection.commit()
    newer = ServerDatabase(server_db.url)
    with pytest.raises(DynadeskError, match="newer Dynadesk"):
        newer.upgrade()
    with pytest.raises(DynadeskError, match="schema 9999"):
        newer.check_schema()
    newer.close()
