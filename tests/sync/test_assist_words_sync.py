"""A lead's additions to the assistant's word lists reach the team's desks with the task settings,
and an annotator's desk then suggests edits with them. Real desks, a real server on loopback."""

from __future__ import annotations

import json

import pytest

from app.core.assist.lexicon import InvalidLexicon, WordChanges
from app.core.assist.rules import generate_rules
from app.core.assist.types import GenerationContext, Goal
from app.core.errors import DynadeskError
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_review_sync import outbox
from tests.sync.test_server import push, statuses
from tests.sync.test_team_threshold import setting

SIKHS = WordChanges(added={"protected_groups": (("Sikhs", "Sikh"),), "non_protected_groups": (("referees", "referee"),)},
                    removed={"non_protected_groups": (("politicians", "politician"),)})


def test_a_leads_words_reach_an_annotators_suggestions(team, tmp_path):
    ann = prepare_desk(tmp_path / "ann", team.ann)
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with client_for(ann, team.url, team.ann) as ann_client, client_for(lead, team.url, team.lead) as lead_client:
        with pytest.raises(DynadeskError, match="lead"):
            ann.set_task_settings(team.ann.id, "hate_speech", assist_words=SIKHS)  # only a lead changes the lists
        lead.set_task_settings(team.lead.id, "hate_speech", assist_words=SIKHS)
        assert [e.kind for e in outbox(lead)] == ["task_setting"]
        sent = json.loads(lead.db.get_meta("task_setting.hate_speech"))
        assert sent["settings"] == {"assist_words": SIKHS.to_json()}  # the task's own threshold: no override
        lead_client.run()
        ann_client.run()
        assert ann.tasks.settings("hate_speech").assist_words == SIKHS
        lexicon = ann.tasks.assist_lexicon("hate_speech")
        context = GenerationContext("I can't stand Sikhs.", Goal.CONTRAST, "not hate", "hate", ("hate", "not hate"),
                                    "hate_speech", (), lexicon=lexicon)
        made = {c.text: c for c in generate_rules(context)}
        assert made["I can't stand referees."].edit_type == "group_to_non_protected"
        assert not any("politicians" in text for text in made)  # the lead took it out

        # the lead's later threshold keeps the words in force; the annotator keeps them too
        lead.set_task_settings(team.lead.id, "hate_speech", agreement_threshold=2)
        lead_client.run()
        ann_client.run()
        assert ann.tasks.settings("hate_speech").assist_words == SIKHS
        assert ann.tasks.agreement_threshold(ann.tasks.task("hate_speech").id) == 2
    for desk in (ann, lead):
        desk.close()


def test_bad_word_changes_are_refused_at_the_desk_and_at_the_server(team, tmp_path):
    lead = prepare_desk(tmp_path / "lead", team.lead)
    with pytest.raises(InvalidLexicon, match="hate_speech has no word list 'antonyms'"):
        lead.set_task_settings(team.lead.id, "hate_speech", assist_words=WordChanges(added={"antonyms": (("a", "b"),)}))
    assert outbox(lead) == []
    lead.close()
    bad = {**setting(team.lead, 2), "settings": {"assist_words": {"added": {"hedges": ["x" * 200]}}}}
    response = push(team, team.lead, bad)
    assert response.status_code == 422 and "at most 80 characters" in response.text
    good = {**setting(team.lead, 2), "settings": {"assist_words": SIKHS.to_json()}}
    assert statuses(push(team, team.lead, good)) == ["stored"]
    assert statuses(push(team, team.lead, good)) == ["already_stored"]
