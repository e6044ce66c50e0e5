"""A task's lead-added blur words in a desk's meta table (``BLUR_WORDS_KEY``), read and written in
the caller's unit of work, as the data-quality settings are (``app.core.quality.settings_store``)."""

from __future__ import annotations

import json

from sqlalchemy import delete
from sqlalchemy.orm import Session

from app.core.storage.models import Meta
from app.core.wellbeing.word_list import BLUR_WORDS_KEY, InvalidWordList, clean_words


def lead_words_in(session: Session, code: str) -> tuple[str, ...]:
    """The words the team's leads added for the task on this desk (none until a lead adds some)."""
    row = session.get(Meta, BLUR_WORDS_KEY.format(code=code))
    if row is None:
        return ()
    try:
        value = json.loads(row.value)
        return clean_words(value) if isinstance(value, list) else ()
    except (ValueError, InvalidWordList):
        return ()  # a damaged value blurs what the bundled list blurs; a lead can set the words again


def store_lead_words(session: Session, code: str, words: tuple[str, ...]) -> None:
    key = BLUR_WORDS_KEY.format(code=code)
    if not words:
        session.execute(delete(Meta).where(Meta.key == key))
    else:
        session.merge(Meta(key=key, value=json.dumps(list(words), ensure_ascii=False)))
