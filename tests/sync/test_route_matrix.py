"""The route × role × team matrix, generated from the routes.

The set of routes comes from the FastAPI app's own route table; every route needs at least one row in
``MATRIX``, and every row names, for an annotator, a lead, the owner, another team's lead and no token,
the status expected and whether the request stores anything. A refusal (and every read) must leave the
database and the blob store exactly as they were. Team isolation is a column: after every request by the
lead (or an annotator) of team A that stores something, what team B sees (its feed, proposals, figures,
wellbeing, storage) is compared with what it saw before: unchanged, or, for the one row where the owner
allows it (the round a lead's own promotion opened, under "leads may promote"), grown by new records with
nothing it saw changed.

One server for the module (SQLite, with "leads may promote" on for the task), many requests.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx
import pytest
from fastapi.routing import APIRoute
from sqlalchemy import func, select

from app.core.domain import utcnow
from sync.protocol import manifest_sha256
from sync.server import models as server_models
from sync.server.limits import Rate
from tests.sync.helpers import MODEL_SHA, ThreadServer, add_account, basics_records, publish_basics, server_database
from tests.sync.test_proposals_server import PASSING  # figures the promotion rule passes
from tests.sync.test_server import example

TASK = "hate_speech"
ROLES = ("annotator", "lead", "owner", "other_lead", "none")
TEAM_A = ("annotator", "lead")  # whose stored writes must leave team B's view as it was
# no token, nothing of anyone's (the health check answers the same to all: tests/sync/test_blob_stores.py)
OUTSIDE_API = {("GET", "/openapi.json"), ("HEAD", "/openapi.json"), ("GET", "/health")}


@dataclass
class World:
    url: str
    db: object
    blobs: object
    people: dict  # role -> Account (None: no token)
    b_people: dict  # who stands for team B when its view is read: lead and annotator
    team_a_example: dict
    stored_blob: str
    app: object
    http: httpx.Client
    counter: int = 0
    params: dict = field(default_factory=dict)  # what a row's setup made for its request

    def headers(self, role: str) -> dict:
        account = self.people[role]
        return {"Authorization": f"Bearer {account.token}"} if account is not None else {}

    def call(self, role: str, method: str, path: str, **kwargs) -> httpx.Response:
        return self.http.request(method, f"{self.url}{path}", headers=self.headers(role), **kwargs)

    def unique(self) -> int:
        self.counter += 1
        return self.counter


@dataclass
class Request:
    method: str
    path: str
    json: object = None
    content: bytes | None = None
    params: dict | None = None


@dataclass
class Cell:
    status: int
    stores: bool
    team_b: str = "same"  # "same": team B sees exactly what it saw; "grows": new records only


@dataclass
class Row:
    """One kind of request against one route, with each role's expected answer."""
    what: str
    request: Callable[[World, str], Request]  # built for each role (fresh ids), after ``setup``
    cells: dict[str, Cell]
    setup: Callable[[World, str], None] | None = None  # not part of what is compared
    cleanup: Callable[[World, str], None] | None = None


def _refused(status: int) -> Cell:
    return Cell(status, False)


READ = {role: Cell(200, False) for role in ROLES[:-1]} | {"none": _refused(401)}
LEADS_READ = READ | {"annotator": _refused(403)}


def _blob(world: World, role: str) -> bytes:
    return f"model file {world.unique()} by {role}".encode()


def _sha(content: bytes) -> str:
    return hashlib.sha256(content).hexdigest()


def _proposal_body(world: World) -> dict:
    f = {"name": "trained_part.safetensors", "sha256": world.stored_blob, "size": len(b"the stored file")}
    return {"id": str(uuid.uuid4()), "name": f"candidate {world.unique()}", "rounds_trained_on": [1], "files": [f],
            "files_sha256": manifest_sha256([(f["name"], f["sha256"])]), "figures": PASSING}


def _team_a_proposal(world: World) -> str:
    body = _proposal_body(world)
    response = world.call("lead", "POST", f"/v1/tasks/{TASK}/proposals", json=body)
    assert response.status_code == 201, response.text
    return body["id"]


def _next_round(world: World) -> int:
    with world.db.read() as session:
        return (session.scalar(select(func.max(server_models.Round.number))) or 0) + 1


def _round_record(number: int, **changes) -> dict:
    record = dict(next(r for r in basics_records(None) if r["record"] == "round" and r["number"] == 2))
    record.update({"id": str(uuid.uuid4()), "number": number, **changes})
    return record


def _form_record(world: World) -> dict:
    """An ONNX record that names the published test model as its parent: a form of it (``model_forms``)."""
    record = dict(basics_records(None)[1])
    files = [{"name": f"model/model-{world.unique()}.onnx", "sha256": world.stored_blob,
              "size": len(b"the stored file")}]
    record.update(id=str(uuid.uuid4()), name="a faster form", format="onnx", files=files,
                  sha256=manifest_sha256([(f["name"], f["sha256"]) for f in files]),
                  provenance={"export": {"parent_sha256": MODEL_SHA}})
    return record


def _publish_next_round(world: World, _role: str) -> None:
    response = world.call("owner", "POST", "/v1/publish", json={"records": [_round_record(_next_round(world))]})
    assert response.status_code == 200, response.text


def _promote_to_next(world: World, role: str) -> None:
    """The lead's (or owner's) own promotion claims the next round, as `rounds promote` does first."""
    if role not in ("lead", "owner"):
        return
    proposal = _team_a_proposal(world)
    decided = world.call(role, "POST", f"/v1/proposals/{proposal}/decision",
                         json={"state": "promoted", "round_number": _next_round(world)})
    assert decided.status_code == 200, decided.text


def _open_proposal(world: World, role: str) -> None:
    world.params["proposal"] = _team_a_proposal(world)


def _wellbeing(world: World, role: str) -> Request:
    account = world.people[role]
    person = str(account.id) if account is not None else str(uuid.uuid4())
    now = utcnow().isoformat()
    record = {"record": "break", "id": str(uuid.uuid4()), "person_id": person, "kind": "short", "action": "taken",
              "at": now, "break_min": 5, "continuous_min": 50, "daily_min": 120, "zone": "UTC"}
    return Request("POST", "/v1/wellbeing/push", json={"records": [record]})


def _review(world: World, role: str) -> Request:
    account = world.people[role]
    now = utcnow().isoformat()
    record = {"record": "example_review", "id": str(uuid.uuid4()), "example": world.team_a_example["id"],
              "lead": str(account.id) if account is not None else str(uuid.uuid4()), "action": "accepted",
              "comment": None, "created_at": now, "updated_at": now, "revision": 1}
    return Request("POST", "/v1/push", json={"records": [record]})


def _own_example(world: World, role: str) -> Request:
    account = world.people[role] or world.people["annotator"]
    return Request("POST", "/v1/push", json={"records": [example(account, f"an example number {world.unique()}")]})


MATRIX: dict[tuple[str, str], list[Row]] = {
    ("GET", "/v1/me"): [Row("who am I", lambda w, r: Request("GET", "/v1/me"), READ)],
    ("POST", "/v1/push"): [
        Row("their own example", _own_example,
            {role: Cell(200, True) for role in ROLES[:-1]} | {"none": _refused(401)}),
        Row("accept team A's example", _review,
            {"annotator": _refused(403), "lead": Cell(200, True), "owner": Cell(200, True),
             "other_lead": _refused(403), "none": _refused(401)}),
    ],
    ("POST", "/v1/publish"): [
        Row("close round 2 and switch its assistant on",
            lambda w, r: Request("POST", "/v1/publish", json={"records": [
                _round_record(2, id=basics_records(None)[3]["id"], status="closed",
                              settings={"assistant": "on"})]}),
            {"annotator": _refused(403), "lead": Cell(200, False), "owner": Cell(200, True),
             "other_lead": Cell(200, False), "none": _refused(401)},
            cleanup=lambda w, r: w.call("owner", "POST", "/v1/publish", json={"records": [basics_records(None)[3]]})),
        Row("a new context in round 1",
            lambda w, r: Request("POST", "/v1/publish", json={"records": [{
                "record": "context", "id": str(uuid.uuid4()), "round": str(uuid.uuid4()), "task": TASK,
                "round_number": 1, "text": f"a context {w.unique()}",
                "created_at": utcnow().isoformat(), "updated_at": utcnow().isoformat(), "revision": 1}]}),
            {"annotator": _refused(403), "lead": Cell(200, False), "owner": Cell(200, True),
             "other_lead": Cell(200, False), "none": _refused(401)}),
        Row("a faster form of the published target, which every team's desks would fetch", lambda w, r: Request(
            "POST", "/v1/publish", json={"records": [_form_record(w)]}),
            {"annotator": _refused(403), "lead": Cell(200, False), "owner": Cell(200, True),
             "other_lead": Cell(200, False), "none": _refused(401)}),
        Row("the round the lead's own promotion opened",
            lambda w, r: Request("POST", "/v1/publish", json={"records": [_round_record(_next_round(w))]}),
            {"annotator": _refused(403), "lead": Cell(200, True, "grows"), "owner": Cell(200, True, "grows"),
             "other_lead": Cell(200, False), "none": _refused(401)},
            setup=_promote_to_next),
    ],
    ("GET", "/v1/changes"): [Row("the feed", lambda w, r: Request("GET", "/v1/changes"), READ)],
    ("GET", "/v1/models/{sha256}"): [Row("a model", lambda w, r: Request("GET", f"/v1/models/{MODEL_SHA}"), READ)],
    ("GET", "/v1/models/{sha256}/forms"): [
        Row("its forms", lambda w, r: Request("GET", f"/v1/models/{MODEL_SHA}/forms"), READ)],
    ("GET", "/v1/blobs/{sha256}"): [Row("a file", lambda w, r: Request("GET", f"/v1/blobs/{w.stored_blob}"), READ)],
    ("HEAD", "/v1/blobs/{sha256}"): [
        Row("has a file", lambda w, r: Request("HEAD", f"/v1/blobs/{w.stored_blob}"), READ)],
    ("PUT", "/v1/blobs/{sha256}"): [
        Row("a new file", lambda w, r: (lambda c: Request("PUT", f"/v1/blobs/{_sha(c)}", content=c))(_blob(w, r)),
            {"annotator": _refused(403), "lead": Cell(201, True), "owner": Cell(201, True),
             "other_lead": Cell(201, True), "none": _refused(401)}),
        Row("a file over the quota",
            lambda w, r: (lambda c: Request("PUT", f"/v1/blobs/{_sha(c)}", content=c))(_blob(w, r) * 4000),
            {"annotator": _refused(403), "lead": _refused(413), "owner": Cell(201, True),
             "other_lead": _refused(413), "none": _refused(401)}),
    ],
    ("GET", "/v1/storage"): [Row("my files", lambda w, r: Request("GET", "/v1/storage"), READ)],
    ("GET", "/v1/team/stats"): [Row("figures", lambda w, r: Request("GET", "/v1/team/stats"), LEADS_READ),
                                Row("team A's figures", lambda w, r: Request("GET", "/v1/team/stats",
                                                                             params={"team": "A"}),
                                    LEADS_READ | {"other_lead": _refused(403)})],
    ("GET", "/v1/team/assistant"): [Row("A-B split", lambda w, r: Request("GET", "/v1/team/assistant"), LEADS_READ)],
    ("GET", "/v1/team/duplicates"): [
        Row("duplicates", lambda w, r: Request("GET", "/v1/team/duplicates"), LEADS_READ)],
    ("POST", "/v1/tasks/{task}/proposals"): [
        Row("propose", lambda w, r: Request("POST", f"/v1/tasks/{TASK}/proposals", json=_proposal_body(w)),
            {"annotator": _refused(403), "lead": Cell(201, True), "owner": Cell(201, True),
             "other_lead": Cell(201, True), "none": _refused(401)})],
    ("GET", "/v1/tasks/{task}/proposals"): [
        Row("list", lambda w, r: Request("GET", f"/v1/tasks/{TASK}/proposals"), LEADS_READ)],
    ("GET", "/v1/proposals/{proposal_id}"): [
        Row("team A's proposal", lambda w, r: Request("GET", f"/v1/proposals/{w.params['proposal']}"),
            READ | {"annotator": _refused(404), "other_lead": _refused(404)}, setup=_open_proposal)],
    ("POST", "/v1/proposals/{proposal_id}/decision"): [
        Row("decline team A's proposal",
            lambda w, r: Request("POST", f"/v1/proposals/{w.params['proposal']}/decision",
                                 json={"state": "declined", "reason": "not now"}),
            {"annotator": _refused(404), "lead": Cell(200, True), "owner": Cell(200, True),
             "other_lead": _refused(404), "none": _refused(401)}, setup=_open_proposal),
        Row("promote anyway without saying why",
            lambda w, r: Request("POST", f"/v1/proposals/{w.params['proposal']}/decision",
                                 json={"state": "promoted", "round_number": _next_round(w), "forced": True}),
            {"annotator": _refused(404), "lead": _refused(400), "owner": _refused(400),
             "other_lead": _refused(404), "none": _refused(401)}, setup=_open_proposal),
        Row("promote team A's proposal to the next round",
            lambda w, r: Request("POST", f"/v1/proposals/{w.params['proposal']}/decision",
                                 json={"state": "promoted", "round_number": _next_round(w)}),
            {"annotator": _refused(404), "lead": Cell(200, True), "owner": Cell(200, True),
             "other_lead": _refused(404), "none": _refused(401)}, setup=_open_proposal,
            cleanup=lambda w, r: _publish_next_round(w, r) if r in ("lead", "owner") else None),
    ],
    ("GET", "/v1/policies"): [Row("policies", lambda w, r: Request("GET", "/v1/policies"), READ)],
    ("PUT", "/v1/tasks/{task}/policy"): [
        Row("leads may promote (as it is)",
            lambda w, r: Request("PUT", f"/v1/tasks/{TASK}/policy", json={"leads_may_promote": True}),
            {"annotator": _refused(403), "lead": _refused(403), "owner": Cell(200, False),
             "other_lead": _refused(403), "none": _refused(401)})],
    ("POST", "/v1/wellbeing/push"): [
        Row("their own break", _wellbeing, {role: Cell(200, True) for role in ROLES[:-1]} | {"none": _refused(401)})],
    ("GET", "/v1/wellbeing/records"): [Row("exposure", lambda w, r: Request("GET", "/v1/wellbeing/records"), READ)],
    ("PUT", "/v1/wellbeing/limits"): [
        Row("their team's alert lines",
            lambda w, r: Request("PUT", "/v1/wellbeing/limits", json={"daily_min": 200 + w.unique(),
                                                                      "continuous_min": 60}),
            {"annotator": _refused(403), "lead": Cell(200, True), "owner": Cell(200, True),
             "other_lead": Cell(200, True), "none": _refused(401)})],
    ("GET", "/v1/wellbeing/limits"): [
        Row("alert lines", lambda w, r: Request("GET", "/v1/wellbeing/limits"),
            READ | {"other_lead": Cell(204, False)})],  # team A's are set; team B has none
}


def app_routes(app) -> set[tuple[str, str]]:
    """Every (method, path) the app answers, from its route table."""
    found = set()
    for route in app.routes:
        for method in getattr(route, "methods", None) or ():
            found.add((method, route.path))
    return found


def unlisted(app, matrix=MATRIX) -> list[str]:
    """What the matrix lacks: routes without rows, and rows without every role."""
    problems = [f"{m} {p}: no rows in the route matrix" for m, p in sorted(app_routes(app) - OUTSIDE_API)
                if not matrix.get((m, p))]
    problems += [f"{m} {p} '{row.what}': no cell for {', '.join(sorted(set(ROLES) - row.cells.keys()))}"
                 for (m, p), rows in matrix.items() for row in rows if set(ROLES) - row.cells.keys()]
    problems += [f"{m} {p}: in the matrix, not in the app" for m, p in sorted(matrix.keys() - app_routes(app))]
    return problems


def stored_state(world: World) -> dict:
    """Everything the server keeps: every table's rows and the blob folder."""
    state = {}
    with world.db.read() as session:
        for table in server_models.Base.metadata.sorted_tables:
            state[table.name] = sorted(json.dumps(list(row), default=str) for row in session.execute(select(table)))
    state["blobs"] = sorted(f"{p.relative_to(world.blobs)}:{p.stat().st_size}" for p in world.blobs.rglob("*")
                            if p.is_file())
    return state


def team_b_view(world: World) -> dict:
    """What team B's lead and annotator see, keyed so that additions and changes can be told apart."""
    view: dict = {}
    for who, account in world.b_people.items():
        headers = {"Authorization": f"Bearer {account.token}"}
        since, records = 0, {}
        while True:
            page = world.http.get(f"{world.url}/v1/changes", params={"since": since, "limit": 1000},
                                  headers=headers).json()
            records.update({r["id"]: json.dumps(r, sort_keys=True) for r in page["records"]})
            since = page["cursor"]
            if not page["more"]:
                break
        view[f"{who} feed"] = records
        for path in ("/v1/tasks/hate_speech/proposals", "/v1/policies", "/v1/team/stats", "/v1/team/assistant",
                     "/v1/team/duplicates", "/v1/wellbeing/records", "/v1/wellbeing/limits", "/v1/storage"):
            response = world.http.get(f"{world.url}{path}", headers=headers)
            view[f"{who} {path}"] = {"": f"{response.status_code} {response.text}"}
    return view


def check_isolation(before: dict, after: dict, expected: str, what: str) -> None:
    for part, seen in before.items():
        now = after[part]
        changed = [key for key in seen if now.get(key) != seen[key]]
        assert not changed, f"{what}: team B's {part} changed ({len(changed)} record(s))"
        if expected == "same":
            assert now.keys() == seen.keys(), f"{what}: team B's {part} got {len(now.keys() - seen.keys())} new"


def run_cell(world: World, route: tuple[str, str], row: Row, role: str) -> None:
    what = f"{route[0]} {route[1]} '{row.what}' as {role}"
    cell = row.cells[role]
    if row.setup:
        row.setup(world, role)
    request = row.request(world, role)
    before = stored_state(world)
    # a request that stores nothing leaves the server as it was, and every view with it
    b_before = team_b_view(world) if role in TEAM_A and cell.stores else None
    response = world.call(role, request.method, request.path, json=request.json, content=request.content,
                          params=request.params)
    assert response.status_code == cell.status, f"{what}: {response.status_code} {response.text[:300]}"
    if request.method == "POST" and response.status_code == 200 and "results" in response.json():
        statuses = {r["status"] for r in response.json()["results"]}
        assert (statuses & {"stored"} != set()) == cell.stores, f"{what}: {statuses}"
    after = stored_state(world)
    if cell.stores:
        assert after != before, f"{what}: expected to store something; nothing changed"
    else:
        changed = [name for name in before if before[name] != after[name]]
        assert not changed, f"{what}: answered {response.status_code} but changed {changed}"
    if b_before is not None:
        check_isolation(b_before, team_b_view(world), cell.team_b, what)
    if row.cleanup:
        row.cleanup(world, role)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from sync.server.blobs import BlobStore
    from sync.server.store import storage

    root = tmp_path_factory.mktemp("route-matrix")
    db = server_database(f"sqlite:///{root / 'server' / 'server.sqlite'}")
    server = ThreadServer(db, root / "server", per_token=Rate.parse("0"), per_address=Rate.parse("0"))
    owner = add_account(db, "Olga Owner", "owner", "A")
    people = {"annotator": add_account(db, "Ann Annotator", "annotator", "A"),
              "lead": add_account(db, "Lee Lead", "lead", "A"), "owner": owner, "other_lead": add_account(db, "Lia Lead", "lead", "B"), "none": None}
    b_people = {"lead B": people["other_lead"], "annotator B": add_account(db, "Cat Annotator", "annotator", "B")}
    publish_basics(server.url, owner, root)
    for name in ("Lee Lead", "Lia Lead"):
        storage.set_quota(db, name, 64 * 1024)  # the quota rows: a few kB files fit, a larger one does not
    headers = {"Authorization": f"Bearer {owner.token}"}
    content = b"the stored file"
    assert httpx.put(f"{server.url}/v1/blobs/{_sha(content)}", content=content, headers=headers).status_code == 201
    assert httpx.put(f"{server.url}/v1/tasks/{TASK}/policy", json={"leads_may_promote": True},
                     headers=headers).status_code == 200
    ours = example(people["annotator"], "team A's example")
    assert httpx.post(f"{server.url}/v1/push", json={"records": [ours]},
                      headers={"Authorization": f"Bearer {people['annotator'].token}"}).status_code == 200
    theirs = example(b_people["annotator B"], "team B's example")
    assert httpx.post(f"{server.url}/v1/push", json={"records": [theirs]},
                      headers={"Authorization": f"Bearer {b_people['annotator B'].token}"}).status_code == 200
    world = World(server.url, db, BlobStore(root / "server" / "blobs").root, people, b_people, ours, _sha(content),
                  server.app, httpx.Client(timeout=60))
    assert world.call("lead", "PUT", "/v1/wellbeing/limits", json={"daily_min": 240, "continuous_min": 60}
                      ).status_code == 200
    # team B has an open proposal of its own, which nothing team A's lead does may touch
    body = _proposal_body(world)
    assert world.call("other_lead", "POST", f"/v1/tasks/{TASK}/proposals", json=body).status_code == 201
    yield world
    world.http.close()
    server.stop()
    db.close()


def test_every_route_of_the_app_has_a_row_for_every_role(world):
    assert unlisted(world.app) == []
    assert {p for _, p in app_routes(world.app)} - {p for _, p in MATRIX} == {"/openapi.json", "/health"}


ORDER = ("none", "annotator", "other_lead", "lead", "owner")  # the owner last: their rows change the most


@pytest.mark.parametrize("route", sorted(MATRIX), ids=lambda r: f"{r[0]} {r[1]}")
def test_each_role_gets_what_the_matrix_says_and_team_b_sees_nothing_of_team_a(world, route):
    for row in MATRIX[route]:
        for role in ORDER:
            run_cell(world, route, row, role)


def test_the_guard_fails_on_a_route_without_rows(world):
    routes = world.app.router.routes
    routes.append(APIRoute("/v1/export-everything", lambda: {}, methods=["GET"]))
    try:
        assert unlisted(world.app) == ["GET /v1/export-everything: no rows in the route matrix"]
    finally:
        routes.pop()
    row = MATRIX[("GET", "/v1/me")][0]
    partial = {("GET", "/v1/me"): [Row(row.what, row.request, {k: v for k, v in row.cells.items() if k != "none"})]}
    assert "GET /v1/me 'who am I': no cell for none" in unlisted(world.app, partial)


def test_the_guard_fails_on_a_cross_team_write(world, monkeypatch):
    """The server as it was: a lead who may promote publishes rounds as an owner does. The lead's cell of
    the round-closing row then changes what team B sees, and the guard says so."""
    import importlib

    publish = importlib.import_module("sync.server.store.publish")  # the module; the package names its function

    class Everyone:  # every lead counts as an owner
        class LEAD:
            value = "lead"

        class OWNER:
            value = "lead"

    monkeypatch.setattr(publish, "Role", Everyone)
    row = MATRIX[("POST", "/v1/publish")][0]
    storing = Row(row.what, row.request, row.cells | {"lead": Cell(200, True)})  # only the isolation column differs
    try:
        with pytest.raises(AssertionError, match="team B's .* feed changed"):
            run_cell(world, ("POST", "/v1/publish"), storing, "lead")
    finally:
        monkeypatch.undo()
        world.call("owner", "POST", "/v1/publish", json={"records": [basics_records(None)[3]]})
