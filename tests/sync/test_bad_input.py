"""Bad input: malformed JSON, wrong types, a huge text, invalid UTF-8, unknown fields,
SQL-looking strings, NaN, a body over the limit. Each gets a 4xx with a reason; nothing is
stored; the server stays up."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from sync.protocol import MAX_BODY_BYTES
from tests.sync.helpers import server_counts
from tests.sync.test_server import auth, changes, example, push, statuses

SQL = "'); DROP TABLE examples; --"


def cases(team) -> list[tuple[str, bytes, int, str]]:
    """(what, body, expected status, a word the reason must contain)."""
    good = example(team.ann)

    def body(records) -> bytes:
        return json.dumps({"records": records}).encode()

    def record(**changes) -> dict:
        return {**good, "id": str(uuid.uuid4()), **changes}

    unknown = record()
    unknown["sneaky"] = 1
    return [
        ("malformed JSON", b'{"records": [{"record": "example",', 400, "not valid JSON"),
        ("not JSON at all", b"records=1&x=2", 400, "not valid JSON"),
        ("invalid UTF-8", b'{"records": [{"record": "example", "inputs": {"text": "\xff\xfe"}}]}', 400, "not UTF-8"),
        ("NaN", json.dumps({"records": [record(time_spent_ms=float("nan"))]}).encode(), 400, "NaN"),
        ("a list, not an object", b"[1, 2, 3]", 422, "object"),
        ("no records", body([]), 422, "records"),
        ("wrong types", body([record(time_spent_ms="a minute", model_fooled="perhaps")]), 422, "time_spent_ms"),
        ("an id that is not a UUID", body([record(id=SQL)]), 422, "id"),
        ("a status that is not one", body([record(status=f"submitted{SQL}")]), 422, "status"),
        ("a task code that is SQL", body([record(task=SQL)]), 422, "task"),
        ("unknown fields", body([unknown]), 422, "sneaky: unknown field"),
        ("an unknown record kind", body([{**good, "record": "table"}]), 422, "record"),
        ("a huge text", body([record(inputs={"text": "x" * 300_000})]), 422, "inputs.text"),
        ("a body over the limit", body([record(inputs={"text": "y" * 150_000}) for _ in range(120)]), 413, "MiB"),
        ("too many records", body([record() for _ in range(2001)]), 422, "records"),
    ]


def test_each_bad_request_gets_a_4xx_with_a_reason_and_stores_nothing(team, server_db):
    headers = {**auth(team.ann), "Content-Type": "application/json"}
    for what, content, expected, word in cases(team):
        before = server_counts(server_db)
        response = httpx.post(f"{team.url}/v1/push", content=content, headers=headers, timeout=60)
        assert response.status_code == expected, (what, response.status_code, response.text[:500])
        reason = json.dumps(response.json())
        assert word in reason, (what, reason[:500])
        assert server_counts(server_db) == before, what
        assert httpx.get(f"{team.url}/v1/me", headers=auth(team.ann)).status_code == 200, f"server down after {what}"
    assert len(json.dumps({"records": [example(team.ann, "y" * 150_000)] * 120})) > MAX_BODY_BYTES


def test_a_bad_record_is_named_by_its_place_and_id(team):
    records = [example(team.ann, "fine"), {**example(team.ann), "time_spent_ms": -5}, example(team.ann, "also fine")]
    response = push(team, team.ann, *records)
    assert response.status_code == 422
    errors = response.json()["errors"]
    assert [(e["index"], e["id"]) for e in errors] == [(1, records[1]["id"])]
    assert "time_spent_ms" in errors[0]["reason"]
    # Without it, the others go in.
    assert statuses(push(team, team.ann, records[0], records[2])) == ["stored", "stored"]


def test_sql_looking_text_is_stored_as_text(team, server_db):
    texts = [SQL, "Robert'); DROP TABLE students;--", "1 OR 1=1; SELECT * FROM people", "\\x00 \\' \" ` $$ ;;"]
    records = [example(team.ann, text, label="not hate", meta={"label_explanation": SQL}) for text in texts]
    assert statuses(push(team, team.ann, *records)) == ["stored"] * 4
    pulled = {r["id"]: r for r in changes(team, team.bob)["records"] if r["record"] == "example"}
    assert [pulled[r["id"]]["inputs"]["text"] for r in records] == texts
    assert pulled[records[0]["id"]]["meta"]["label_explanation"] == SQL
    assert server_counts(server_db)["examples"] == 4


@pytest.mark.parametrize("path", ["/v1/changes?since=-1", "/v1/changes?since=1%20OR%201=1",
                                  f"/v1/models/{SQL}", "/v1/team/stats?by=everything"])
def test_bad_query_and_path_values(team, path):
    response = httpx.get(f"{team.url}{path}", headers=auth(team.lead))
    assert response.status_code in (404, 422), response.text
    assert response.json()["detail"]
