"""A task's lead settings travel as one typed record: a new setting is one field of ``TaskSettings``
and its check, and travels desk -> server -> desk with nothing else changed; a desk from before sends
them as fields of their own, which the server takes; the server's columns of one setting each fold
into one JSON column and back (migration 0013). Real desks (SQLite files), a real server on loopback
(SQLite, and PostgreSQL when DYNADESK_TEST_PG_URL is set)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from app.core.assist.lexicon import WordChanges
from app.core.domain import utcnow
from app.core.quality.settings import QualitySettings
from app.core.task_settings import InvalidTaskSettings, TaskSettings
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import client_for
from tests.sync.test_server import changes, push, statuses

ROOT = Path(__file__).resolve().parents[2]
WORDS = WordChanges(added={"protected_groups": (("Sikhs", "Sikh"),)})


def old_setting(lead, **fields) -> dict:
    """A ``task_setting`` as a desk from before ``settings`` sends it: each setting a field of the record."""
    now = utcnow().isoformat()
    return {"record": "task_setting", "id": str(uuid.uuid4()), "task": "hate_speech", "lead": str(lead.id),
            "created_at": now, "updated_at": now, "revision": 1, "agreement_threshold": 3, "quality": None,
            "assist_words": None, "blur_words": None, **fields}


def served_settings(team, account) -> list[dict]:
    return [r["settings"] for r in changes(team, account)["records"] if r["record"] == "task_setting"]


def test_a_desk_from_before_sends_its_settings_as_fields_and_the_team_gets_them(team, tmp_path):
    old = old_setting(team.lead, agreement_threshold=2, quality=QualitySettings(near_threshold=0.8).to_json(),
                      blur_words=["roaches"])
    assert statuses(push(team, team.lead, old)) == ["stored"]
    assert statuses(push(team, team.lead, old)) == ["already_stored"]  # its resend after a lost answer
    assert served_settings(team, team.ann) == [{"agreement_threshold": 2, "blur_words": ["roaches"],
                                                "quality": QualitySettings(near_threshold=0.8).to_json()}]
    mixed = {**old_setting(team.lead), "settings": {"agreement_threshold": 2}}  # both shapes: which one?
    response = push(team, team.lead, mixed)
    assert response.status_code == 422 and "agreement_threshold: unknown field" in response.text
    ann = prepare_desk(tmp_path / "ann", team.ann)
    with client_for(ann, team.url, team.ann) as ann_client:
        ann_client.run()
    assert ann.tasks.settings("hate_speech") == TaskSettings(
        agreement_threshold=2, quality=QualitySettings(near_threshold=0.8), blur_words=("roaches",))
    assert ann.tasks.agreement_threshold(ann.tasks.task("hate_speech").id) == 2
    ann.close()


def test_the_servers_setting_columns_fold_into_one_and_back_with_every_value(team, server_db):
    from alembic import command
    from sqlalchemy import JSON, Integer, Uuid, column, select, table

    from sync.server.db import alembic_config

    first, second = old_setting(team.lead, agreement_threshold=2), old_setting(team.lead)
    newer = {**old_setting(team.lead), "settings": {"blur_words": ["vermin"]}}  # the task's own threshold
    for record in (first, second, newer):
        del record["quality"], record["assist_words"], record["blur_words"]
    assert statuses(push(team, team.lead, first, second)) == ["stored", "stored"]
    assert statuses(push(team, team.lead, {k: v for k, v in newer.items() if k != "agreement_threshold"})) == [
        "stored"]
    settings = table("task_settings", column("id", Uuid()), column("agreement_threshold", Integer()),
                     column("quality", JSON(none_as_null=True)), column("assist_words", JSON(none_as_null=True)),
                     column("blur_words", JSON(none_as_null=True)))
    # What the old server held: a setting of each kind, and one from a desk that sent only the threshold.
    old_values = {uuid.UUID(first["id"]): (2, QualitySettings(near_threshold=0.8).to_json(), WORDS.to_json(),
                                           ["roaches", "filthy lot"]),
                  # as a desk from before sent every record: each setting, at its default or not
                  uuid.UUID(second["id"]): (3, QualitySettings().to_json(), WordChanges().to_json(), []),
                  uuid.UUID(newer["id"]): (3, None, None, ["vermin"])}  # the downgrade names the task's own

    def columns() -> dict:
        with server_db.engine.connect() as connection:
            return {row[0]: tuple(row[1:]) for row in connection.execute(select(*settings.c))}

    with server_db.engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0012")
    assert columns()[uuid.UUID(newer["id"])] == old_values[uuid.UUID(newer["id"])]
    with server_db.engine.begin() as connection:
        for row_id, (threshold, quality, words, blur) in old_values.items():
            connection.execute(settings.update().where(settings.c.id == row_id).values(
                agreement_threshold=threshold, quality=quality, assist_words=words, blur_words=blur))
    server_db.upgrade()
    served = {r["id"]: r["settings"] for r in changes(team, team.ann)["records"] if r["record"] == "task_setting"}
    assert served == {first["id"]: {"agreement_threshold": 2, "quality": QualitySettings(near_threshold=0.8).to_json(),
                                    "assist_words": WORDS.to_json(), "blur_words": ["roaches", "filthy lot"]},
                      second["id"]: {"agreement_threshold": 3},
                      newer["id"]: {"agreement_threshold": 3, "blur_words": ["vermin"]}}
    resent = {k: v for k, v in first.items() if k != "agreement_threshold"}
    assert statuses(push(team, team.lead, {**resent, "settings": served[first["id"]]})) == [
        "already_stored"]  # a resend in the new shape is the same record
    old_second = old_setting(team.lead, quality=QualitySettings().to_json(), assist_words=WordChanges().to_json(),
                             blur_words=[])
    assert statuses(push(team, team.lead, {**old_second, **{k: second[k] for k in ("id", "created_at",
                                                                                    "updated_at")}})) == [
        "already_stored"]  # and so is the old desk's resend in its own shape
    with server_db.engine.begin() as connection:
        command.downgrade(alembic_config(connection), "0012")
    assert columns() == old_values
    server_db.upgrade()


def test_a_desk_older_than_a_setting_takes_the_settings_it_can_and_keeps_pulling(desk, people):
    from pydantic import ValidationError

    from sync.incoming import apply_page
    from sync.protocol import ChangesResponse, PushRequest

    def pulled(settings: dict, received_at: str) -> dict:
        now = utcnow().isoformat()
        return {"record": "task_setting", "id": str(uuid.uuid4()), "task": "hate_speech", "settings": settings,
                "lead": str(people.lead.id), "created_at": now, "updated_at": now, "revision": 1,
                "received_at": received_at}

    def pull(record: dict, cursor: int) -> None:
        page = ChangesResponse.model_validate_json(json.dumps({"records": [record], "cursor": cursor, "more": False,
                                                               "remaining": 0}))
        report = apply_page(desk.db, page.records, page.referenced, key="pull.cursor", cursor=cursor)
        assert report.added == {"task settings": 1} and not report.skipped

    pull(pulled({"agreement_threshold": 2, "blur_words": ["vermin"]}, "2026-11-28T10:00:00+00:00"), 1)
    # A newer desk's lead: a setting this desk has no field for, and words a rule it lacks lets through.
    pull(pulled({"agreement_threshold": 4, "daily_quota": 40, "blur_words": ["x"]}, "2026-11-28T11:00:00+00:00"), 2)
    assert desk.tasks.settings("hate_speech") == TaskSettings(agreement_threshold=4, blur_words=("vermin",))
    with pytest.raises(ValidationError, match="Unknown setting 'daily_quota'"):  # a push of it is refused
        PushRequest.model_validate({"records": [pulled({"daily_quota": 40}, "2026-11-28T11:00:00+00:00")]})


# The one change a developer makes to add a setting: a check, and a field that names it.
NEW_CHECK = '''
def _daily_quota(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 500:
        raise InvalidTaskSettings(f"The daily quota must be a whole number from 1 to 500; got {value!r}.")
    return value


'''
NEW_FIELD = "    daily_quota: int | None = setting(None, _daily_quota)\n"

SCENARIO = '''
import json, sys
from pathlib import Path

import app.core

path = Path(app.core.__file__).parent / "task_settings.py"
source = path.read_text(encoding="utf-8")
anchor = "@dataclass(frozen=True)\\nclass TaskSettings:"
last_field = "    blur_words: tuple[str, ...] = setting((), _blur_words, list)\\n"
assert source.count(anchor) == 1 and source.count(last_field) == 1
new_check, new_field, url, root = json.loads(sys.argv[1])
source = source.replace(anchor, new_check + anchor).replace(last_field, last_field + new_field)
module = type(sys)("app.core.task_settings")
module.__file__ = str(path)
sys.modules[module.__name__] = module
exec(compile(source, str(path), "exec"), module.__dict__)

import httpx
from tests.sync.helpers import ThreadServer, add_account, prepare_desk, publish_basics, server_database
from tests.sync.test_client import client_for
from tests.sync.test_team_threshold import setting

root = Path(root)
db = server_database(url)
server = ThreadServer(db, root / "server")
try:
    owner, lead, ann = (add_account(db, name, role, "A") for name, role in
                        (("Olga Owner", "owner"), ("Lee Lead", "lead"), ("Ann Annotator", "annotator")))
    publish_basics(server.url, owner, root)
    lead_desk, ann_desk = prepare_desk(root / "lead", lead), prepare_desk(root / "ann", ann)
    stored = lead_desk.set_task_settings(lead.id, "hate_speech", daily_quota=40, agreement_threshold=2)
    with client_for(lead_desk, server.url, lead) as lead_client, client_for(ann_desk, server.url, ann) as ann_client:
        lead_client.run()
        ann_client.run()
    bad = httpx.post(f"{server.url}/v1/push", headers={"Authorization": f"Bearer {lead.token}"}, timeout=60,
                     json={"records": [{**setting(lead, 2), "settings": {"daily_quota": 0}}]})
    there = ann_desk.tasks.settings("hate_speech")
    print(json.dumps({"sent": stored.settings.to_json(), "arrived": [there.daily_quota, there.agreement_threshold],
                      "in_force": ann_desk.tasks.agreement_threshold(ann_desk.tasks.task("hate_speech").id),
                      "refused": [bad.status_code, bad.text]}))
    lead_desk.close()
    ann_desk.close()
finally:
    server.stop()
    db.close()
'''


def test_a_new_setting_is_one_field_and_its_check_and_travels_from_desk_to_server_to_desk(server_db_url, tmp_path):
    """The scenario runs in a fresh interpreter whose ``app/core/task_settings.py`` has one more field and
    its check, and nothing else changed: the lead's desk stores and pushes it, the server checks and
    keeps it, the annotator's desk pulls it and has it in force."""
    with pytest.raises(InvalidTaskSettings, match="daily_quota"):  # this interpreter's TaskSettings lacks it
        TaskSettings.from_json({"daily_quota": 40})
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DYNADESK_DATA_DIR": str(tmp_path / "data")}
    done = subprocess.run([sys.executable, "-c", SCENARIO, json.dumps([NEW_CHECK, NEW_FIELD, server_db_url,
                                                                       str(tmp_path)])],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sent"] == {"agreement_threshold": 2, "daily_quota": 40}
    assert seen["arrived"] == [40, 2] and seen["in_force"] == 2
    status, text = seen["refused"]
    assert status == 422 and "daily_quota: The daily quota must be a whole number from 1 to 500; got 0" in text
