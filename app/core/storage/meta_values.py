"""JSON values kept under a key in a desk's meta table, read and written in the caller's unit of
work: a lead's task settings (quality, assistant word lists, blur words) are stored this way."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.core.storage.models import Meta


def meta_value(session: Session, key: str) -> Any:
    """The value stored under ``key`` (None when there is none); ValueError when it is not JSON."""
    row = session.get(Meta, key)
    return None if row is None else json.loads(row.value)


def store_meta_value(session: Session, key: str, value: Any) -> None:
    """Store ``value`` under ``key``; None removes the key (the defaults are in force again)."""
    if value is None:
        session.execute(delete(Meta).where(Meta.key == key))
    else:
        session.merge(Meta(key=key, value=json.dumps(value, ensure_ascii=False)))
