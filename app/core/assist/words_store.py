"""A lead's changes to a task's assistant word lists in a desk's meta table (``ASSIST_WORDS_KEY``),
read and written in the caller's unit of work, as the quality settings are
(``app.core.quality.settings_store``). They travel to the team in the ``task_setting`` record."""

from __future__ import annotations

import json
import logging
from typing import Final

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.core.assist.lexicon import InvalidLexicon, WordChanges
from app.core.storage.models import Meta

ASSIST_WORDS_KEY: Final[str] = "assist_words.{code}"

log = logging.getLogger(__name__)


def assist_words_in(session: Session, code: str) -> WordChanges:
    """The lead's changes for the task on this desk (none until a lead makes some)."""
    row = session.get(Meta, ASSIST_WORDS_KEY.format(code=code))
    if row is None:
        return WordChanges()
    try:
        return WordChanges.from_json(json.loads(row.value))
    except (ValueError, TypeError, InvalidLexicon):
        # a damaged value must not stop suggestions: the shipped lists still work, a lead can set them again
        log.warning("the stored assistant word changes of %s are damaged; using the shipped lists", code)
        return WordChanges()


def store_assist_words(session: Session, code: str, changes: WordChanges) -> None:
    key = ASSIST_WORDS_KEY.format(code=code)
    if changes.is_empty():
        session.execute(delete(Meta).where(Meta.key == key))
    else:
        session.merge(Meta(key=key, value=json.dumps(changes.to_json(), ensure_ascii=False)))
