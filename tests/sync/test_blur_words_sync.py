"""A lead's blur words reach the team's desks with the task settings (server migration 0011), and a
later threshold change keeps them; the CLI adds and removes them, leads only. Real desks, a real
server on loopback (SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import json

import pytest

from app.core.errors import DynadeskError
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_review_sync import outbox
from tests.sync.test_server import changes, push, statuses
from tests.sync.test_team_threshold import setting


def test_a_leads_blur_words_reach_the_team_and_stay_through_a_threshold_change(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        with pytest.raises(DynadeskError):  # an annotator cannot change the team's list
            ann.set_task_settings(team.ann.id, "hate_speech", blur_words=["roaches"])
        stored = lead.set_task_settings(team.lead.id, "hate_speech", blur_words=["R0aches", "  filthy   lot ", "roaches"])
        assert stored.settings.blur_words == ("R0aches", "filthy lot", "roaches")
        assert [e.kind for e in outbox(lead)] == ["task_setting"]
        assert json.loads(lead.db.get_meta("task_setting.hate_speech"))["settings"]["blur_words"] == [
            "R0aches", "filthy lot", "roaches"]
        lead_client.run()
        ann_client.run()
        assert ann.tasks.settings("hate_speech").blur_words == ("R0aches", "filthy lot", "roaches")
        assert "vermin" in ann.tasks.blur_words("hate_speech") and "filthy lot" in ann.tasks.blur_words("hate_speech")

        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=2)  # the words travel on with it
        lead_client.run()
        ann_client.run()
        assert ann.tasks.agreement_threshold(ann.tasks.task("hate_speech").id) == 2
        assert ann.tasks.settings("hate_speech").blur_words == ("R0aches", "filthy lot", "roaches")
    for desk in (ann, lead):
        desk.close()


def test_the_server_checks_and_keeps_the_blur_words(team):
    record = setting(team.lead, 2)
    too_long = {**record, "settings": {"blur_words": ["x" * 61]}}
    assert push(team, team.lead, too_long).status_code == 422
    good = {**record, "settings": {"blur_words": ["roaches"]}}
    assert statuses(push(team, team.lead, good)) == ["stored"]
    assert statuses(push(team, team.lead, good)) == ["already_stored"]


HOSTILE = ["*", ".*", "(a+)+$", "\x00", "vermin"]


def _refusal(words) -> str:
    from app.core.wellbeing.word_list import InvalidWordList, clean_words

    with pytest.raises(InvalidWordList) as refused:
        clean_words(words)
    return str(refused.value)


def test_the_server_refuses_a_list_every_desk_would_refuse_naming_its_entries(team):
    record = setting(team.lead, 2)
    response = push(team, team.lead, {**record, "settings": {"blur_words": HOSTILE}})
    assert response.status_code == 422
    body = response.json()
    reason = body["errors"][0]["reason"]
    assert _refusal(HOSTILE) in reason  # the desk's words, from the one rule
    for shown in ("'*'", "'.*'", "'(a+)+$'", "\\x00"):
        assert shown in reason
    assert "nothing was stored" in body["detail"]
    assert not [r for r in changes(team, team.lead)["records"] if r["record"] == "task_setting"]  # nothing stored
    assert statuses(push(team, team.lead, {**record, "settings": {"blur_words": ["vermin"]}})) == ["stored"]


def test_the_cli_lists_adds_and_removes_a_leads_words(desk, capsys):
    from tests.app.test_cli_quality import run

    lead = desk.people.create("Lee Lead", "lead")
    desk.settings.current_person_id = str(lead.id)
    desk.save_settings()
    data = desk.root
    desk.close()
    code, out, _ = run(capsys, data, "wellbeing", "words", "add", "--task", "hate_speech", "roaches", "filthy lot")
    assert code == 0 and "2 word(s) added by leads" in out
    assert run(capsys, data, "wellbeing", "words", "remove", "--task", "hate_speech", "ROACHES")[0] == 0
    code, out, _ = run(capsys, data, "wellbeing", "words", "list", "--task", "hate_speech", "--json")
    listed = json.loads(out)
    assert listed["added"] == ["filthy lot"] and "vermin" in listed["bundled"]
    code, _, err = run(capsys, data, "wellbeing", "words", "remove", "--task", "hate_speech", "nope")
    assert code != 0 and "Not among the leads' words" in err
    code, _, err = run(capsys, data, "wellbeing", "words", "add", "--task", "hate_speech", "x")
    assert code != 0 and "'x' has fewer than two letters" in err
    code, _, err = run(capsys, data, "wellbeing", "words", "add", "--task", "hate_speech", *HOSTILE)
    assert code != 0 and _refusal(HOSTILE) in " ".join(err.split())  # the server's words too
