"""A task's lead settings are one typed record (``TaskSettings``): each field checked by its own rule,
kept on a desk in one meta value, and carried forward from the keys of one setting each that a desk
from before it kept (desk migration 0016, and back). Real desks (SQLite files)."""

from __future__ import annotations

import json
import uuid

import pytest
from sqlalchemy import select

from app.core.assist.lexicon import InvalidLexicon, WordChanges
from app.core.quality.settings import InvalidQualitySettings, QualitySettings
from app.core.storage.models import Meta
from app.core.task_settings import InvalidTaskSettings, TaskSettings
from app.core.wellbeing.word_list import InvalidWordList

WORDS = WordChanges(added={"protected_groups": (("Sikhs", "Sikh"),)}, removed={"hedges": (("frankly",),)})


def test_each_setting_is_checked_by_its_own_rule_and_its_error_says_which():
    assert TaskSettings() == TaskSettings.from_json({}) == TaskSettings.from_json(None)
    assert TaskSettings().to_json() == {}  # the defaults are left out: an older desk reads its own defaults
    chosen = TaskSettings().changed(agreement_threshold=2, quality=QualitySettings(near_threshold=0.9),
                                    assist_words=WORDS, blur_words=["R0aches", "  filthy   lot ", "roaches"])
    assert chosen.blur_words == ("R0aches", "filthy lot", "roaches")  # in its normal form
    assert chosen.to_json() == {"agreement_threshold": 2, "quality": QualitySettings(near_threshold=0.9).to_json(),
                                "assist_words": WORDS.to_json(),
                                "blur_words": ["R0aches", "filthy lot", "roaches"]}
    assert TaskSettings.from_json(json.loads(json.dumps(chosen.to_json()))) == chosen
    assert chosen.changed(blur_words=()).to_json()["agreement_threshold"] == 2  # one change keeps the others

    for change, error, said in [({"agreement_threshold": 21}, InvalidTaskSettings, "between 1 and 20; got 21"),
                                ({"agreement_threshold": True}, InvalidTaskSettings, "got True"),
                                ({"quality": {"near_threshold": 0.1}}, InvalidQualitySettings,
                                 "near-duplicate threshold"),
                                ({"blur_words": ["x"]}, InvalidWordList, "'x' has fewer than two letters"),
                                ({"blur_words": "roaches"}, InvalidTaskSettings, "a list of words"),
                                ({"assist_words": {"added": {"hedges": ["x" * 200]}}}, InvalidLexicon, "80"),
                                ({"daily_quota": 40}, InvalidTaskSettings, "Unknown task setting(s): daily_quota")]:
        with pytest.raises(error, match=said.replace("(", r"\(").replace(")", r"\)")):
            chosen.changed(**change)


def test_from_json_names_every_problem_or_with_a_fallback_keeps_what_it_can():
    bad = {"agreement_threshold": 0, "quality": {"near_threshold": 0.1}, "blur_words": ["roaches", "*"],
           "daily_quota": 3}
    with pytest.raises(InvalidTaskSettings) as refused:
        TaskSettings.from_json(bad)
    said = str(refused.value)
    for part in ("agreement_threshold: The number of matching verdicts", "quality: The near-duplicate threshold",
                 "blur_words: These blur words cannot be used: '*'", "Unknown setting 'daily_quota'"):
        assert part in said
    held = TaskSettings(agreement_threshold=2, blur_words=("vermin",))
    taken = TaskSettings.from_json({**bad, "assist_words": WORDS.to_json()}, fallback=held)
    assert taken == TaskSettings(agreement_threshold=2, blur_words=("vermin",), assist_words=WORDS)
    assert TaskSettings.from_json(["not", "an", "object"], fallback=held) is held


def test_a_desk_keeps_a_tasks_settings_in_one_meta_value(desk, people):
    stored = desk.set_task_settings(people.lead.id, "hate_speech", agreement_threshold=2, blur_words=["roaches"])
    assert stored.decided == 0 and stored.settings == TaskSettings(agreement_threshold=2, blur_words=("roaches",))
    with desk.db.read() as session:
        keys = sorted(session.scalars(select(Meta.key).where(Meta.key.contains("hate_speech"))))
    assert keys == ["task_setting.hate_speech"]
    record = json.loads(desk.db.get_meta("task_setting.hate_speech"))
    assert record["settings"] == {"agreement_threshold": 2, "blur_words": ["roaches"]}
    assert record["sync_state"] == "pending" and record["lead"] == str(people.lead.id)
    with pytest.raises(InvalidWordList):  # a refused value stores nothing
        desk.set_task_settings(people.lead.id, "hate_speech", blur_words=["x"], agreement_threshold=1)
    assert desk.tasks.settings("hate_speech") == stored.settings
    with pytest.raises(InvalidLexicon, match="hate_speech has no word list 'antonyms'"):  # the task's own lists
        desk.set_task_settings(people.lead.id, "hate_speech",
                               assist_words=WordChanges(added={"antonyms": (("a", "b"),)}))
    set_meta(desk, "task_setting.hate_speech", json.dumps({**record, "settings": {
        "agreement_threshold": 99, "blur_words": ["roaches"]}}))  # damaged: what can be read is kept
    assert desk.tasks.settings("hate_speech") == TaskSettings(blur_words=("roaches",))
    assert desk.tasks.agreement_threshold(desk.tasks.task("hate_speech").id) == 3


def set_meta(desk, key: str, value: str) -> None:
    with desk.db.write() as session:
        session.merge(Meta(key=key, value=value))


OLD_KEYS = {"agreement_threshold.hate_speech": "2",
            "quality_settings.hate_speech": json.dumps(QualitySettings(near_threshold=0.8).to_json()),
            "assist_words.hate_speech": json.dumps(WORDS.to_json()),
            "blur_words.hate_speech": json.dumps(["roaches", "filthy lot"]),
            "blur_words.nli": "not json",  # damaged: read as none before, left out now
            "quality_settings.sentiment": json.dumps(QualitySettings(duplicate_rate_threshold=0.5).to_json())}


def test_a_desk_from_before_keeps_its_settings_through_the_upgrade_and_back(data_dir, desk, people):
    from alembic import command

    from app.core.desk import Desk
    from app.core.storage.db import alembic_config

    pending = str(uuid.uuid4())
    old_record = {"record": "task_setting", "id": pending, "task": "hate_speech", "agreement_threshold": 2,
                  "quality": QualitySettings(near_threshold=0.8).to_json(), "assist_words": WORDS.to_json(),
                  "blur_words": ["roaches", "filthy lot"], "lead": str(people.lead.id),
                  "created_at": "2026-11-27T10:00:00+00:00", "updated_at": "2026-11-27T10:00:00+00:00", "revision": 1,
                  "received_at": None, "sync_state": "pending"}
    with desk.db.engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0015")
    for key, value in {**OLD_KEYS, "task_setting.hate_speech": json.dumps(old_record)}.items():
        set_meta(desk, key, value)
    desk.close()
    with Desk(data_dir) as upgraded:
        assert upgraded.tasks.settings("hate_speech") == TaskSettings(
            agreement_threshold=2, quality=QualitySettings(near_threshold=0.8), assist_words=WORDS,
            blur_words=("roaches", "filthy lot"))
        assert upgraded.tasks.settings("sentiment") == TaskSettings(
            quality=QualitySettings(duplicate_rate_threshold=0.5))
        assert upgraded.tasks.settings("nli") == TaskSettings()
        record = json.loads(upgraded.db.get_meta("task_setting.hate_speech"))
        assert {k: v for k, v in record.items() if k != "settings"} == {
            k: v for k, v in old_record.items() if k not in ("agreement_threshold", "quality", "assist_words",
                                                              "blur_words")}  # still the record that goes out
        assert all(upgraded.db.get_meta(key) is None for key in OLD_KEYS)
        with upgraded.db.engine.begin() as connection:
            command.downgrade(alembic_config(connection), "0015")
        back = {key: upgraded.db.get_meta(key) for key in OLD_KEYS}
        assert json.loads(upgraded.db.get_meta("task_setting.hate_speech")) == old_record
        assert upgraded.db.get_meta("task_setting.nli") is None  # no record was ever queued for it
    assert {k: json.loads(v) for k, v in back.items() if v is not None} == {
        k: json.loads(v) for k, v in OLD_KEYS.items() if k != "blur_words.nli"}
    assert back["blur_words.nli"] is None
