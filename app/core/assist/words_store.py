"""A lead's changes to a task's assistant word lists in a desk's meta table (``ASSIST_WORDS_KEY``),
read and written in the caller's unit of work, as the quality settings are
(``app.core.quality.settings_store``). They travel to the team in the ``task_setting`` record."""

from __future__ import annotations

import logging
from typing import Final

from sqlalchemy.orm import Session

from app.core.assist.lexicon import InvalidLexicon, WordChanges
from app.core.storage.meta_values import meta_value, store_meta_value

ASSIST_WORDS_KEY: Final[str] = "assist_words.{code}"

log = logging.getLogger(__name__)


def assist_words_in(session: Session, code: str) -> WordChanges:
    """The lead's changes for the task on this desk (none until a lead makes some)."""
    try:
        value = meta_value(session, ASSIST_WORDS_KEY.format(code=code))
        return WordChanges() if value is None else WordChanges.from_json(value)
    except (ValueError, TypeError, InvalidLexicon):
        # a damaged value must not stop suggestions: the shipped lists still work, a lead can set them again
        log.warning("the stored assistant word changes of %s are damaged; using the shipped lists", code)
        return WordChanges()


def store_assist_words(session: Session, code: str, changes: WordChanges) -> None:
    store_meta_value(session, ASSIST_WORDS_KEY.format(code=code), None if changes.is_empty() else changes.to_json())
