"""The server decides what counts: "fooled" is judged on the server from the
stored outputs of the round's target models, the true label and the round's rule, with the one
definition in ``app.core.tasks.fooling``; a client's ``model_fooled`` never reaches the figures that rate
annotators. Each test runs on SQLite, and on PostgreSQL when DYNADESK_TEST_PG_URL is set."""

from __future__ import annotations

import uuid

import httpx
import pytest

from app.core.domain import utcnow
from tests.sync.helpers import MODEL_SHA
from tests.sync.test_server import auth, changes, example, push

# The rules do not depend on the database; what stores and compares JSON (resends, the migration) runs on both.
sqlite_only = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def output(label: str, hate: float, sha: str = MODEL_SHA, fooled: bool | None = None) -> dict:
    return {"model": str(uuid.uuid4()), "model_sha256": sha, "label": label,
            "probabilities": {"hate": hate, "not hate": round(1 - hate, 6)}, "latency_ms": 2.0, "fooled": fooled}


def results(response: httpx.Response) -> list[dict]:
    assert response.status_code == 200, response.text
    return response.json()["results"]


def round_one(team, account) -> dict:
    stats = httpx.get(f"{team.url}/v1/team/stats", params={"by": "round"}, headers=auth(account)).json()
    return {r["name"]: r for r in stats["rows"]}["Hate speech · round 1"]


@sqlite_only
def test_a_claimed_fool_without_outputs_does_not_count(team):
    forged = example(team.ann, "they are all vermin, trust me", model_fooled=True, outputs=[])
    [result] = results(push(team, team.ann, forged))
    assert result["status"] == "stored"
    assert "not counted as fooling" in result["reason"] and "no output" in result["reason"]
    row = round_one(team, team.lead)
    assert (row["submitted"], row["fooled"], row["mer"]) == (1, 0, 0.0)
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert pulled[forged["id"]]["model_fooled"] is None  # desks see the server's judgement


def test_the_server_judges_from_the_outputs_whatever_the_claim(team):
    # The model said "hate" (0.9) to a text labelled "hate": not fooled, though the client says so.
    claimed = example(team.ann, "a text the model got right", model_fooled=True,
                      outputs=[output("hate", 0.9, fooled=True)])
    # The model said "not hate" to "hate": fooled, though the client says not.
    modest = example(team.ann, "a text the model got wrong", model_fooled=False,
                     outputs=[output("not hate", 0.2, fooled=False)])
    honest = example(team.ann, "an honest fool")  # model_fooled true, output "not hate" (0.1)
    stored = results(push(team, team.ann, claimed, modest, honest))
    assert [r["status"] for r in stored] == ["stored"] * 3
    assert "judges it not fooled" in stored[0]["reason"] and "judges it fooled" in stored[1]["reason"]
    assert stored[2]["reason"] is None
    row = round_one(team, team.lead)
    assert (row["submitted"], row["fooled"]) == (3, 2)
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert [pulled[e["id"]]["model_fooled"] for e in (claimed, modest, honest)] == [False, True, True]
    assert [pulled[e["id"]]["outputs"][0]["fooled"] for e in (claimed, modest, honest)] == [False, True, True]
    # A resend of the same record (with the client's claim) is already stored, and a retraction goes through.
    assert [r["status"] for r in results(push(team, team.ann, claimed))] == ["already_stored"]
    retracted = {**claimed, "status": "retracted", "status_reason": "wrong", "revision": 2}
    assert [r["status"] for r in results(push(team, team.ann, retracted))] == ["stored"]


@sqlite_only
def test_an_output_no_model_gives_is_refused_not_judged_fooled(team):
    negative = example(team.ann, "a negative probability", outputs=[
        {**output("not hate", 0.1), "probabilities": {"hate": -0.6, "not hate": 1.6}}])
    unknown = example(team.ann, "a label the task lacks", outputs=[{**output("not hate", 0.1), "label": "kittens"}])
    honest = example(team.ann, "an honest fool")
    stored = results(push(team, team.ann, negative, unknown, honest))
    assert [r["status"] for r in stored] == ["rejected", "rejected", "stored"]
    assert "cannot be judged: its probability of 'hate' is -0.6" in stored[0]["reason"]
    assert "cannot be judged: its label 'kittens' is not one of the task's labels" in stored[1]["reason"]
    row = round_one(team, team.lead)
    assert (row["submitted"], row["fooled"]) == (1, 1)


@sqlite_only
def test_outputs_of_models_that_are_not_the_rounds_targets_are_refused(team, tmp_path):
    from tests.sync.helpers import basics_records

    other_sha = "cd" * 32
    model = next(dict(r) for r in basics_records(tmp_path) if r["record"] == "model")
    model.update(id=str(uuid.uuid4()), name="a weak model of my own", sha256=other_sha)
    assert results(httpx.post(f"{team.url}/v1/publish", json={"records": [model]}, headers=auth(team.owner)))[0][
        "status"] == "stored"
    foreign = example(team.ann, "fooled my own weak model", outputs=[output("not hate", 0.1, sha=other_sha)])
    twice = example(team.ann, "the target twice", outputs=[output("not hate", 0.1), output("not hate", 0.2)])
    refused = results(push(team, team.ann, foreign, twice))
    assert [r["status"] for r in refused] == ["rejected", "rejected"]
    assert "not from a target model of round 1" in refused[0]["reason"] and other_sha[:12] in refused[0]["reason"]
    assert "more than one output" in refused[1]["reason"]
    stats = httpx.get(f"{team.url}/v1/team/stats", params={"by": "round"}, headers=auth(team.lead)).json()
    assert stats["rows"] == []


def published(team, *records) -> None:
    response = httpx.post(f"{team.url}/v1/publish", json={"records": list(records)}, headers=auth(team.owner))
    assert {r["status"] for r in results(response)} <= {"stored", "already_stored"}, response.text


def model_record(name: str, sha: str, task: str) -> dict:
    now = utcnow().isoformat()
    return {"record": "model", "id": str(uuid.uuid4()), "name": name, "format": "onnx", "sha256": sha,
            "label_map": {}, "task": task, "created_at": now, "updated_at": now, "revision": 1}


def round_record(task: str, number: int, targets: list[dict], rule: str) -> dict:
    now = utcnow().isoformat()
    return {"record": "round", "id": str(uuid.uuid4()), "task": task, "number": number, "fooled_rule": rule,
            "target_models": [m["id"] for m in targets], "created_at": now, "updated_at": now, "revision": 1}


@sqlite_only
def test_ensembles_follow_the_rounds_rule_and_every_target_must_answer(team):
    first = model_record("first of the pair", MODEL_SHA, "hate_speech")
    second = model_record("second of the pair", "ef" * 32, "hate_speech")
    published(team, first, second, round_record("hate_speech", 3, [first, second], "all"),
              round_record("hate_speech", 4, [first, second], "any"))
    # True label "hate": the first model is fooled ("not hate"), the second is not.
    split = [output("not hate", 0.1), output("hate", 0.8, sha=second["sha256"])]
    under_all = example(team.ann, "split ensemble", round_number=3, outputs=split)
    under_any = example(team.ann, "split ensemble", round_number=4, outputs=split)
    half = example(team.ann, "only one of the pair answered", round_number=4, outputs=split[:1])
    stored = results(push(team, team.ann, under_all, under_any, half))
    assert [r["status"] for r in stored] == ["stored"] * 3
    assert "not counted as fooling" in stored[2]["reason"] and "ef" * 6 in stored[2]["reason"]
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert [pulled[e["id"]]["model_fooled"] for e in (under_all, under_any, half)] == [False, True, None]
    assert [pulled[e["id"]]["fooled_rule"] for e in (under_all, under_any)] == ["all", "any"]


@sqlite_only
def test_question_answering_is_fooled_below_an_f1_of_0_4(team):
    from app.core.tasks.definition import builtin_tasks_dir, load_task_file

    definition = load_task_file(builtin_tasks_dir() / "extractive_qa.yaml")
    now = utcnow().isoformat()
    task = {"record": "task", "id": str(uuid.uuid4()), "code": "extractive_qa", "name": definition.name,
            "definition": definition.model_dump(mode="json"), "fingerprint": definition.fingerprint(),
            "created_at": now, "updated_at": now, "revision": 1}
    reader = model_record("a reader", "12" * 32, "extractive_qa")
    published(team, task, reader, round_record("extractive_qa", 1, [reader], "mean"))
    passage = "The bridge was built in 1932 by the city of Porto and painted red in 1950."

    def question(text: str, predicted: str, claimed: bool) -> dict:
        start = passage.index(predicted)
        record = example(team.ann, label="not hate", task="extractive_qa", model_fooled=claimed, true_label=None,
                         inputs={"context": passage, "question": text},
                         answer={"start": passage.index("1932"), "end": passage.index("1932") + 4, "text": "1932"},
                         meta={"label_explanation": "the passage says so"},
                         outputs=[{"model": str(uuid.uuid4()), "model_sha256": reader["sha256"], "label": predicted,
                                   "answer": {"start": start, "end": start + len(predicted), "text": predicted}}])
        return record

    near = question("When was the bridge built?", "in 1932", claimed=True)  # F1 0.67: not fooled
    far = question("In which year was it built?", "1950", claimed=False)  # F1 0: fooled
    stored = results(push(team, team.ann, near, far))
    assert [r["status"] for r in stored] == ["stored"] * 2, stored
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert [pulled[e["id"]]["model_fooled"] for e in (near, far)] == [False, True]


@sqlite_only
def test_desks_and_the_server_give_the_same_figures_and_a_forged_flag_is_undone(team, tmp_path):
    """One definition of MER and vMER (app.core.tasks.figures), tied: the server's team figures are the
    desk's figures over the same examples, on the author's desk (whose forged flags the push undid)
    and on a team mate's, through the statistics service, the dashboard and `dynadesk stats`."""
    import json

    from click.testing import CliRunner
    from sqlalchemy import select, update

    from app.cli import cli
    from app.core.services.dashboard_snapshot import DashboardFilter
    from app.core.storage.models import Example as DeskExample
    from sync.client import SyncClient
    from tests.sync.helpers import fill_outbox, prepare_desk
    from tests.sync.test_client import QUICK
    from tests.sync.test_server import validation

    with prepare_desk(tmp_path / "ann", team.ann) as desk:
        fill_outbox(desk, team.ann.id, 16, seed=7)
        with desk.db.write() as session:  # a tampered desk: every honest "not fooled" says "fooled"
            forged = set(session.scalars(select(DeskExample.id).where(DeskExample.model_fooled.is_(False))))
            session.execute(update(DeskExample).where(DeskExample.id.in_(forged)).values(model_fooled=True))
        assert forged
        with SyncClient(desk, team.url, team.ann.token, policy=QUICK) as client:
            client.run(fetch_models=False)
        with desk.db.read() as session:
            fooled = {e.id: e.model_fooled for e in session.scalars(select(DeskExample))}
        assert not any(fooled[i] for i in forged)  # the server's judgement came back with the push results
        decided = sorted(fooled)[:6]  # the lead decides a few, so that vMER is not zero
        records = [validation(team.lead, {"id": str(i)}, "correct", mode="lead") for i in decided]
        assert {r["status"] for r in results(push(team, team.lead, *records))} == {"stored"}
        with SyncClient(desk, team.url, team.ann.token, policy=QUICK) as client:
            client.run(fetch_models=False)
        on_author_desk = {f.name: f for f in desk.stats.figures("annotator")}["Ann Annotator"]
        desk.dashboard.refresh()
        on_dashboard = {g.name: g for g in desk.dashboard.annotators(DashboardFilter())}["Ann Annotator"]
    with prepare_desk(tmp_path / "bob", team.bob) as desk:  # a team mate's desk pulls it all
        with SyncClient(desk, team.url, team.bob.token, policy=QUICK) as client:
            client.run(fetch_models=False)
        on_team_desk = {f.name: f for f in desk.stats.figures("annotator")}["Ann Annotator"]
    printed = CliRunner().invoke(cli, ["--data-dir", str(tmp_path / "bob"), "stats", "--by", "annotator", "--json"])
    assert printed.exit_code == 0, printed.output
    on_command_line = {r["name"]: r for r in json.loads(printed.stdout)["annotator"]}["Ann Annotator"]
    stats = httpx.get(f"{team.url}/v1/team/stats", params={"by": "annotator"}, headers=auth(team.lead)).json()
    on_server = {r["name"]: r for r in stats["rows"]}["Ann Annotator"]
    fields = ("submitted", "fooled", "validated_fooling", "mer", "vmer")
    expected = tuple(on_server[name] for name in fields)
    for figures in (on_author_desk, on_dashboard, on_team_desk):
        assert tuple(getattr(figures, name) for name in fields) == expected
    assert tuple(on_command_line[name] for name in fields) == expected
    assert on_server["submitted"] == 16 and 0 < on_server["vmer"] < on_server["mer"] < 1


def test_examples_stored_before_the_server_judged_are_judged_on_upgrade(team, server_db, tmp_path):
    """Migration 0004: what older servers stored on the client's word is judged again, and desks
    that already hold those examples get the server's judgement at their next pull."""
    from alembic import command
    from sqlalchemy import select, update

    from app.core.storage.models import Example as DeskExample
    from sync.client import SyncClient
    from sync.server import models
    from sync.server.db import alembic_config
    from tests.sync.helpers import prepare_desk
    from tests.sync.test_client import QUICK

    def team_mate_sees() -> dict:
        with SyncClient(desk, team.url, team.bob.token, policy=QUICK) as client:
            client.run(fetch_models=False)
        with desk.db.read() as session:
            return {str(e.id): e.model_fooled for e in session.scalars(select(DeskExample))}

    right = example(team.ann, "the model got this right", outputs=[output("hate", 0.9)], model_fooled=False)
    empty = example(team.ann, "no outputs at all", outputs=[], model_fooled=None)
    assert [r["status"] for r in results(push(team, team.ann, right, empty))] == ["stored", "stored"]
    seen = changes(team, team.lead)["cursor"]
    with server_db.write() as session:  # as an older server stored them: the desk's claims
        session.execute(update(models.Example).values(model_fooled=True))
    assert round_one(team, team.lead)["fooled"] == 2
    desk = prepare_desk(tmp_path / "bob", team.bob)
    assert team_mate_sees() == {right["id"]: True, empty["id"]: True}
    with server_db.engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0003")  # to before 0004
    server_db.upgrade()
    assert round_one(team, team.lead)["fooled"] == 0
    again = {r["id"]: r for r in changes(team, team.lead, seen)["records"] if r["record"] == "example"}
    assert {i: r["model_fooled"] for i, r in again.items()} == {right["id"]: False, empty["id"]: None}
    assert team_mate_sees() == {right["id"]: False, empty["id"]: None}
    desk.close()


@sqlite_only
def test_fooled_is_judged_before_the_push_transaction_and_again_if_the_round_changed_in_between(team, monkeypatch):
    """While one push's examples are judged, another annotator's push is stored (on SQLite, one writer at a
    time, it would otherwise wait). A judgement made against targets the round no longer has is not used."""
    import importlib
    import threading

    push_module = importlib.import_module("sync.server.store.ahead")  # judged before the transaction here
    judging, other_stored = threading.Event(), threading.Event()
    judge = push_module.judge

    def held_until_the_other_push_is_stored(*args, **kwargs):
        if not judging.is_set():
            judging.set()
            if not other_stored.wait(timeout=60):
                raise AssertionError("the other desk's push was not stored while this one was being judged")
        return judge(*args, **kwargs)

    monkeypatch.setattr(push_module, "judge", held_until_the_other_push_is_stored)
    first = example(team.ann, "judged while another push is stored")
    outcome: dict = {}
    thread = threading.Thread(target=lambda: outcome.update(response=push(team, team.ann, first)))
    thread.start()
    try:
        assert judging.wait(timeout=60), "the first push was never judged"
        assert [r["status"] for r in results(push(team, team.bob, example(team.bob, "the other push")))] == ["stored"]
        assert "response" not in outcome  # the first push is still being judged
    finally:
        other_stored.set()
        thread.join(timeout=120)
    assert [r["status"] for r in results(outcome["response"])] == ["stored"]

    from sync.server.store.judging import Judgement

    stale = Judgement(False, [], ["0" * 64], [], False, [])  # made against a target the round no longer has
    monkeypatch.setattr(importlib.import_module("sync.server.store.push"), "judge_ahead", lambda db, records: {
        i: (("0" * 64,), "mean", stale) for i in range(len(records))})
    honest = example(team.ann, "judged against the round's own targets")  # the output says "not hate": fooled
    [result] = results(push(team, team.ann, honest))
    assert result["status"] == "stored"
    pulled = {r["id"]: r for r in changes(team, team.lead)["records"] if r["record"] == "example"}
    assert pulled[honest["id"]]["model_fooled"] is True  # judged again in the transaction, not taken as stale
