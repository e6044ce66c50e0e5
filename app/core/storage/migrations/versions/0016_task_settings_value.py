"""A task's lead settings are one meta value, ``task_setting.<code>``: the ``task_setting`` record,
whose ``settings`` hold ``TaskSettings.to_json()``. Before, each setting had a key of its own beside
the record (``agreement_threshold.<code>``, ``quality_settings.<code>``, ``assist_words.<code>``,
``blur_words.<code>``) and the record carried them as fields of its own. Values are kept; a value
that could not be read before (damaged) is left out, as it was read as the default. The downgrade
writes the old keys and fields back.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

RECORD = "task_setting."
# Each setting's old key prefix, by its name in the record (frozen copies: migrations never import live code).
OLD_KEYS = {"agreement_threshold": "agreement_threshold.", "quality": "quality_settings.",
            "assist_words": "assist_words.", "blur_words": "blur_words."}
OLD_TYPES = {"agreement_threshold": int, "quality": dict, "assist_words": dict, "blur_words": list}
DEFINITION_THRESHOLD = 3  # a task definition's agreement threshold when it names none

meta = sa.table("meta", sa.column("key", sa.String()), sa.column("value", sa.Text()))


def _values(prefixes: tuple[str, ...]) -> dict[str, str]:
    rows = op.get_bind().execute(sa.select(meta.c.key, meta.c.value).where(
        sa.or_(*(meta.c.key.startswith(prefix) for prefix in prefixes)))).all()
    return dict(rows)


def _json(text: str | None):
    try:
        return None if text is None else json.loads(text)
    except ValueError:
        return None


def _replace(removed: list[str], written: dict[str, str]) -> None:
    bind = op.get_bind()
    if removed:
        bind.execute(meta.delete().where(meta.c.key.in_(removed)))
    if written:
        bind.execute(meta.delete().where(meta.c.key.in_(list(written))))
        bind.execute(meta.insert(), [{"key": key, "value": value} for key, value in written.items()])


def upgrade() -> None:
    stored = _values((RECORD, *OLD_KEYS.values()))
    codes = {key.split(".", 1)[1] for key in stored}
    written: dict[str, str] = {}
    for code in sorted(codes):
        settings = {}
        for name, prefix in OLD_KEYS.items():
            value = _json(stored.get(prefix + code))
            if isinstance(value, OLD_TYPES[name]) and not isinstance(value, bool):
                settings[name] = value
        record = _json(stored.get(RECORD + code))
        if not isinstance(record, dict):  # settings without a record were never queued: nothing to send
            record = {"record": "task_setting", "task": code, "sync_state": "local"}
        record = {key: value for key, value in record.items() if key not in OLD_KEYS}
        written[RECORD + code] = json.dumps({**record, "settings": settings}, ensure_ascii=False)
    _replace([key for key in stored if not key.startswith(RECORD)], written)


def downgrade() -> None:
    stored = _values((RECORD,))
    tasks = sa.table("tasks", sa.column("code", sa.String()), sa.column("definition", sa.JSON()))
    definitions = dict(op.get_bind().execute(sa.select(tasks.c.code, tasks.c.definition)).all())
    written: dict[str, str] = {}
    removed: list[str] = []
    for key, text in stored.items():
        code, record = key[len(RECORD):], _json(text)
        settings = record.get("settings") if isinstance(record, dict) else None
        if not isinstance(settings, dict):
            continue
        for name, prefix in OLD_KEYS.items():
            if settings.get(name) is not None:
                value = settings[name]
                written[prefix + code] = str(value) if name == "agreement_threshold" else json.dumps(value,
                                                                                                    ensure_ascii=False)
        if not record.get("id"):  # the old desk reads a record only with an id
            removed.append(key)
            continue
        threshold = settings.get("agreement_threshold")
        if threshold is None:  # the old record always named one: the task's own
            threshold = (definitions.get(code) or {}).get("agreement_threshold", DEFINITION_THRESHOLD)
        old = {k: v for k, v in record.items() if k != "settings"}
        written[key] = json.dumps({**old, "agreement_threshold": threshold, "quality": settings.get("quality"),
                                   "assist_words": settings.get("assist_words"),
                                   "blur_words": settings.get("blur_words")}, ensure_ascii=False)
    _replace(removed, written)
