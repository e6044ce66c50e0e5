"""The writing assistant's record travels: a lead's A-B setting reaches the writers' desks, an
assisted example's provenance reaches the other desks after sync, and the server measures the
edit distance itself and checks the arm. Real desks, a real server on loopback (SQLite, and
PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import uuid

from sqlalchemy import select

from app.core.assist.arms import round_key, session_arm
from app.core.assist.types import Assistance
from app.core.services.rounds import parse_settings
from app.core.services.writing_sessions import begin_writing_session
from sync.server import models as server_models
from tests.conftest import hate_content, hate_output
from tests.sync.helpers import MODEL_SHA, prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_server import example, push, statuses

SUGGESTION = "they are all v3rmin"


def stored_on_server(server_db, example_id) -> dict | None:
    with server_db.read() as session:
        return session.scalar(select(server_models.Example.assistance)
                              .where(server_models.Example.id == uuid.UUID(str(example_id))))


def a_session_drawn(writer_id, arm: str, task_round: str = "hate_speech/1") -> int:
    """The number of one of the writer's sessions that A-B puts in ``arm``."""
    return next(n for n in range(1, 10) if session_arm("ab", writer_id, n, round_key=task_round) == arm)


def run_round_with(team, tmp_path, assistant: str, number: int = 1) -> None:
    """The owner publishes round ``number`` again with the assistant set to ``assistant``."""
    import httpx

    from tests.sync.helpers import basics_records

    record = next(r for r in basics_records(tmp_path) if r["record"] == "round" and r["number"] == number)
    revised = {**record, "settings": {**record["settings"], "assistant": assistant}, "revision": record["revision"] + 1}
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [revised]},
                          headers={"Authorization": f"Bearer {team.owner.token}"})
    assert [r["status"] for r in response.json()["results"]] == ["stored"], response.text


def test_ab_reaches_the_writers_desk_and_assisted_provenance_reaches_the_leads(team, tmp_path, server_db):
    owner = prepare_desk(tmp_path / "owner", team.owner)
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(owner, team.url, team.owner) as owner_client, client_for(ann, team.url, team.ann) as ann_client, \
            client_for(lead, team.url, team.lead) as lead_client:
        model = next(m for m in owner.models.all() if m.sha256 == MODEL_SHA)
        round1 = owner.tasks.round("hate_speech", 1)
        owner.rounds.set_models(round1.id, team.owner.id, [model.id])
        owner.rounds.update(round1.id, team.owner.id, settings=parse_settings({"assistant": "ab"}))
        results = owner_client.publish("hate_speech", [1], with_files=False).results
        assert {r.status for r in results} <= {"stored", "already_stored"}, results

        ann_client.run()  # the setting arrives with the round
        ann_round = ann.tasks.round("hate_speech", 1)
        assert ann.rounds.settings(ann_round).assistant == "ab"
        writing = begin_writing_session(ann.db, ann_round.id, team.ann.id)
        assert writing.arm == session_arm("ab", team.ann.id, 1, round_key=round_key("hate_speech", 1))

        target = next(m for m in ann.models.all() if m.sha256 == MODEL_SHA)
        on = a_session_drawn(team.ann.id, "on")
        off = a_session_drawn(team.ann.id, "off")
        # the desk claims no edits; the writer did add two words ("and", "rats") to the suggestion
        applied = Assistance(arm="on", session=on, applied=True, generator="obfuscation", edit_type="leetspeak",
                             applied_text=SUGGESTION, edit_distance=0)
        assisted = ann.examples.create(team.ann.id, "hate_speech", hate_content(SUGGESTION + " and rats", "hate"),
                                       [hate_output(target, "not hate")], round_number=1, assistance=applied)
        plain = ann.examples.create(team.ann.id, "hate_speech", hate_content("they should all leave", "hate"),
                                    [hate_output(target, "not hate")], round_number=1,
                                    assistance=Assistance(arm="off", session=off))
        ann_client.run()
        lead_client.run()

        on_server = stored_on_server(server_db, assisted.id)
        assert on_server["edit_distance"] == 2 and on_server["applied_text"] == SUGGESTION
        seen = lead.examples.get(assisted.id)
        assert seen.assistance == {"arm": "on", "session": on, "applied": True, "generator": "obfuscation",
                                   "edit_type": "leetspeak", "applied_text": SUGGESTION, "edit_distance": 2}
        assert lead.examples.get(plain.id).assistance["arm"] == "off"
        assert ann.examples.get(assisted.id).assistance == seen.assistance


def test_the_next_round_keeps_ab_on_the_writers_desk_and_a_later_change_reaches_it(team, tmp_path):
    """The hand-over between rounds and desks: the owner's next round copies round 1's A-B setting,
    the writer's desk gets it with the round (its arms keyed by the new round), and the lead's later
    change to that round replaces it there."""
    owner = prepare_desk(tmp_path / "owner", team.owner)
    ann = prepare_desk(tmp_path / "ann", team.ann)
    with client_for(owner, team.url, team.owner) as owner_client, client_for(ann, team.url, team.ann) as ann_client:
        model = next(m for m in owner.models.all() if m.sha256 == MODEL_SHA)
        # round 2 is the latest on every prepared desk; the next round is one only the owner's desk has
        round2 = owner.tasks.round("hate_speech", 2)
        owner.rounds.update(round2.id, team.owner.id, settings=parse_settings({"assistant": "ab"}))
        opened = owner.rounds.open_next("hate_speech", team.owner.id, [model.id], close_previous=False)
        assert owner.rounds.settings(opened).assistant == "ab"
        results = owner_client.publish("hate_speech", [opened.number], with_files=False).results
        assert {r.status for r in results} <= {"stored", "already_stored"}, results

        ann_client.run()
        ann_round = ann.tasks.round("hate_speech", opened.number)
        assert ann.rounds.settings(ann_round).assistant == "ab"
        assert [begin_writing_session(ann.db, ann_round.id, team.ann.id).arm] == \
            [session_arm("ab", team.ann.id, 1, round_key=round_key("hate_speech", opened.number))]

        owner.rounds.update(opened.id, team.owner.id, settings=parse_settings({"assistant": "on"}))
        results = owner_client.publish("hate_speech", [opened.number], with_files=False).results
        assert [r.status for r in results if r.record == "round"] == ["stored"], results
        ann_client.run()
        assert ann.rounds.settings(ann.tasks.round("hate_speech", opened.number)).assistant == "on"
        assert ann.rounds.settings(ann.tasks.round("hate_speech", 1)).assistant == "off"


def test_the_server_refuses_a_forged_arm_and_a_malformed_record_and_measures_the_distance(team, server_db, tmp_path):
    run_round_with(team, tmp_path, "ab")
    on, off = a_session_drawn(team.ann.id, "on"), a_session_drawn(team.ann.id, "off")
    honest = example(team.ann, "they are all v3rmin and rats", assistance={
        "arm": "on", "session": on, "applied": True, "generator": "obfuscation", "edit_type": "leetspeak",
        "applied_text": SUGGESTION, "edit_distance": 0})
    forged_arm = example(team.ann, "a text said to be unassisted", assistance={"arm": "off", "session": on})
    applied_off = example(team.ann, "a suggestion in an unassisted session", assistance={
        "arm": "off", "session": off, "applied": True, "generator": "rules", "edit_type": "negation",
        "applied_text": "x"})
    unknown_generator = example(team.ann, "from an oracle", assistance={
        "arm": "on", "session": on, "applied": True, "generator": "oracle", "edit_type": "x", "applied_text": "x"})
    no_session = example(team.ann, "an arm without its session", assistance={"arm": "on"})
    response = push(team, team.ann, honest, forged_arm, applied_off, unknown_generator, no_session)
    assert statuses(response) == ["stored", "rejected", "rejected", "rejected", "rejected"]
    reasons = [r.get("reason") or "" for r in response.json()["results"]]
    assert "A-B draw gives it the assistant" in reasons[1]
    assert "without the assistant" in reasons[2]
    assert "Unknown generator 'oracle'" in reasons[3]
    assert "not the writing session" in reasons[4]
    assert stored_on_server(server_db, honest["id"])["edit_distance"] == 2
    wrong_shape = example(team.ann, "a wire record with a stray field", assistance={"arm": "on", "speed": 3})
    assert push(team, team.ann, wrong_shape).status_code == 422


def test_a_round_published_with_an_assistant_setting_no_desk_knows_is_refused(team, tmp_path):
    import httpx

    from tests.sync.helpers import basics_records

    round_record = next(r for r in basics_records(tmp_path) if r["record"] == "round" and r["number"] == 2)
    bad = {**round_record, "settings": {"assistant": "sometimes"}, "revision": 7}
    response = httpx.post(f"{team.url}/v1/publish", json={"records": [bad]},
                          headers={"Authorization": f"Bearer {team.owner.token}"})
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    assert result["status"] == "rejected" and "round setting 'assistant' is 'sometimes'" in result["reason"]


def test_a_server_database_from_before_the_assistant_upgrades_with_its_examples_intact(team, server_db):
    from alembic import command
    from sqlalchemy import text

    from sync.server.db import alembic_config

    stored = example(team.ann, "stored before the assistant existed")
    assert statuses(push(team, team.ann, stored)) == ["stored"]
    columns = "id, author_id, text, status, edit_distance, time_spent_ms, revision"

    def rows():
        with server_db.engine.connect() as connection:
            return connection.execute(text(f"SELECT {columns} FROM examples ORDER BY id")).all()

    before = rows()
    with server_db.engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0007")  # the schema of the server before 0008
    assert rows() == before
    server_db.upgrade()
    assert rows() == before and stored_on_server(server_db, stored["id"]) is None


def test_team_figures_split_by_arm_are_computed_on_the_server_from_its_records(team, server_db, tmp_path):
    import httpx
    from sqlalchemy import update

    from tests.app.test_assistant_figures import HAND
    from tests.sync.test_server import auth

    run_round_with(team, tmp_path, "ab")
    on = a_session_drawn(team.ann.id, "on")
    off = a_session_drawn(team.ann.id, "off")
    records = []
    for n, (status, fooled, verdict, ms, assistance) in enumerate(HAND):
        if assistance is not None and assistance.get("arm") is not None:
            assistance = {**assistance, "session": on if assistance["arm"] == "on" else off}
        record = example(team.ann, f"text number {n}", status=status, time_spent_ms=ms, assistance=assistance,
                         outputs=[{"model": str(uuid.uuid4()), "model_sha256": MODEL_SHA,
                                   "label": "not hate" if fooled else "hate",
                                   "probabilities": {"hate": 0.1, "not hate": 0.9} if fooled else
                                   {"hate": 0.9, "not hate": 0.1}, "latency_ms": 3.5}])
        records.append((record, verdict))
    assert statuses(push(team, team.ann, *[r for r, _ in records])) == ["stored"] * len(HAND)
    with server_db.write() as session:  # the decisions validation would have reached
        for record, verdict in records:
            session.execute(update(server_models.Example).where(server_models.Example.id == uuid.UUID(record["id"]))
                            .values(decided_verdict=verdict))

    response = httpx.get(f"{team.url}/v1/team/assistant", params={"by": "annotator"}, headers=auth(team.lead))
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["outside"] == 2 and body["team"] == "A"
    assisted, unassisted = body["rows"]
    assert assisted["name"] == team.ann.name
    assert {k: assisted[k] for k in ("arm", "submitted", "applied", "fooled", "validated_fooling", "decided",
                                     "rejected", "mer", "vmer", "rejection_rate", "median_seconds")} == {
        "arm": "assisted", "submitted": 4, "applied": 2, "fooled": 3, "validated_fooling": 1, "decided": 2,
        "rejected": 1, "mer": 0.75, "vmer": 0.25, "rejection_rate": 0.5, "median_seconds": 60.0}
    assert (unassisted["arm"], unassisted["submitted"], unassisted["mer"], unassisted["rejection_rate"],
            unassisted["median_seconds"]) == ("unassisted", 2, 0.5, 0.0, 30.0)
    by_round = httpx.get(f"{team.url}/v1/team/assistant", headers=auth(team.lead)).json()
    assert {r["name"] for r in by_round["rows"]} == {"Hate speech · round 1"}
    refused = httpx.get(f"{team.url}/v1/team/assistant", headers=auth(team.ann))
    assert refused.status_code == 403 and "Only leads and owners" in refused.text


def test_a_lead_reads_the_teams_split_from_the_command_line(team, tmp_path, capsys):
    import pytest

    from app.cli import main
    from sync.tokens import TokenStore

    run_round_with(team, tmp_path, "on")
    on = a_session_drawn(team.ann.id, "on")
    applied = example(team.ann, "they are all v3rmin and rats", time_spent_ms=42_000, assistance={
        "arm": "on", "session": on, "applied": True, "generator": "obfuscation", "edit_type": "leetspeak",
        "applied_text": SUGGESTION})
    assert statuses(push(team, team.ann, applied, example(team.ann, "no arm here"))) == ["stored", "stored"]
    lead = prepare_desk(tmp_path / "lead", team.lead)
    lead.settings.server_url = team.url
    lead.save_settings()
    TokenStore(lead.root).set(team.url, team.lead.token)
    lead.close()
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(tmp_path / "lead"), "sync", "team", "--assistant", "--by", "annotator"])
    out = capsys.readouterr().out
    assert exit_info.value.code in (0, None), out
    assert "1 example(s) without an arm are outside the split" in out
    (line,) = [row for row in out.splitlines() if team.ann.name in row]
    assert line.split()[2:] == ["assisted", "1", "1", "100.0%", "0.0%", "–", "42", "s"]


def test_claims_the_rounds_setting_does_not_allow_are_stored_as_unassisted_and_the_split_leaves_them_out(
        team, server_db, tmp_path):
    import httpx

    from tests.sync.test_server import auth

    on, off = a_session_drawn(team.ann.id, "on"), a_session_drawn(team.ann.id, "off")
    claim = {"arm": "on", "session": on, "applied": True, "generator": "obfuscation", "edit_type": "leetspeak",
             "applied_text": SUGGESTION}
    in_an_off_round = example(team.ann, "they are all v3rmin, said to be assisted", assistance=claim)
    no_arm_applied = example(team.ann, "applied without a session", assistance={**claim, "arm": None})
    response = push(team, team.ann, in_an_off_round, no_arm_applied)  # round 1 runs without the assistant
    assert statuses(response) == ["stored", "stored"]
    reasons = [r["reason"] for r in response.json()["results"]]
    assert "stored as unassisted" in reasons[0] and "the assistant is off in round hate_speech/1" in reasons[0]
    assert "session without the assistant (no arm)" in reasons[1]
    unassisted = {"arm": None, "session": on, "applied": False, "generator": None, "edit_type": None,
                  "applied_text": None, "edit_distance": None}
    assert stored_on_server(server_db, in_an_off_round["id"]) == unassisted
    assert stored_on_server(server_db, no_arm_applied["id"]) == unassisted

    run_round_with(team, tmp_path, "ab")
    against_the_draw = example(team.ann, "an 'on' arm the draw puts off", assistance={**claim, "session": off})
    honest = example(team.ann, "they are all v3rmin and rats", assistance=claim)
    hidden_control = example(team.ann, "an edit type that moves the cursor",
                             assistance={**claim, "edit_type": "leet\x1b[2Jspeak"})
    refused = push(team, team.ann, against_the_draw, honest, hidden_control)  # the wire's bound: named, none stored
    assert refused.status_code == 422
    [error] = refused.json()["errors"]
    assert error["index"] == 2 and "control characters (\\x1b)" in error["reason"]
    assert stored_on_server(server_db, honest["id"]) is None
    response = push(team, team.ann, against_the_draw, honest)  # as a desk sends again, without the record named
    assert statuses(response) == ["stored", "stored"]
    reasons = [r["reason"] or "" for r in response.json()["results"]]
    assert f"the A-B draw puts session {off} of this writer in round hate_speech/1 without the assistant" in reasons[0]
    assert reasons[1] == "" and stored_on_server(server_db, honest["id"])["arm"] == "on"
    assert stored_on_server(server_db, against_the_draw["id"])["arm"] is None

    split = httpx.get(f"{team.url}/v1/team/assistant", params={"by": "annotator"}, headers=auth(team.lead)).json()
    assert [(r["arm"], r["submitted"], r["applied"]) for r in split["rows"]] == [("assisted", 1, 1)]
    assert split["outside"] == 3  # the three claims the rounds' setting did not allow


def test_a_huge_suggestion_is_stored_unmeasured_and_measuring_holds_up_no_other_desks_push(
        team, server_db, tmp_path, monkeypatch):
    """The distance is measured before the push's write transaction: while one annotator's push is
    being measured, another annotator's push is stored (on SQLite, one writer at a time, it would
    otherwise wait for the first to commit)."""
    import importlib
    import threading

    push_module = importlib.import_module("sync.server.store.ahead")  # measured before the transaction here

    run_round_with(team, tmp_path, "on")
    claim = {"arm": "on", "session": 1, "applied": True, "generator": "rules", "edit_type": "negation"}
    huge = example(team.ann, "they are not vermin", assistance={**claim, "applied_text": "word " * 20_000})
    response = push(team, team.ann, huge)
    assert statuses(response) == ["stored"]
    assert "edit distance from the applied suggestion is stored as unknown" in response.json()["results"][0]["reason"]
    assert "5,000 characters" in response.json()["results"][0]["reason"]  # the task's own max_chars
    stored = stored_on_server(server_db, huge["id"])
    assert stored["edit_distance"] is None and stored["applied_text"] == "word " * 20_000

    measuring, other_stored = threading.Event(), threading.Event()
    measure = push_module.word_distance

    def held_until_the_other_push_is_stored(*args, **kwargs):
        measuring.set()
        if not other_stored.wait(timeout=60):
            raise AssertionError("the other desk's push was not stored while this one was being measured")
        return measure(*args, **kwargs)

    monkeypatch.setattr(push_module, "word_distance", held_until_the_other_push_is_stored)
    measured = example(team.ann, "they are not vermin at all", assistance={**claim, "applied_text": "they are not vermin"})
    outcome: dict = {}
    first = threading.Thread(target=lambda: outcome.update(response=push(team, team.ann, measured)))
    first.start()
    try:
        assert measuring.wait(timeout=60), "the first push never measured its suggestion"
        other = example(team.bob, "another annotator's example")
        assert statuses(push(team, team.bob, other)) == ["stored"]
        assert "response" not in outcome  # the first push is still being measured
    finally:
        other_stored.set()
        first.join(timeout=120)
    assert statuses(outcome["response"]) == ["stored"]
    assert stored_on_server(server_db, measured["id"])["edit_distance"] == 2


def test_a_push_measures_at_most_its_budget_and_leaves_the_rest_unknown(team, server_db, tmp_path, monkeypatch):
    import importlib

    push_module = importlib.import_module("sync.server.store.ahead")
    run_round_with(team, tmp_path, "on")
    claim = {"arm": "on", "session": 1, "applied": True, "generator": "rules", "edit_type": "negation",
             "applied_text": "they are not vermin"}
    first = example(team.ann, "they are not vermin at all", assistance=claim)
    second = example(team.ann, "they are not vermin, not at all", assistance=claim)
    # room for the first pair only (19 + 26 characters)
    monkeypatch.setattr(push_module, "MEASURED_CHARS_PER_PUSH", 50)
    response = push(team, team.ann, first, second)
    assert statuses(response) == ["stored", "stored"]
    assert stored_on_server(server_db, first["id"])["edit_distance"] == 2
    assert stored_on_server(server_db, second["id"])["edit_distance"] is None
    assert "more to measure than one push may" in response.json()["results"][1]["reason"]
