"""A task's lead-added blur words in a desk's meta table (``BLUR_WORDS_KEY``), read and written in
the caller's unit of work, as the data-quality settings are (``app.core.quality.settings_store``)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.core.storage.meta_values import meta_value, store_meta_value
from app.core.wellbeing.word_list import BLUR_WORDS_KEY, InvalidWordList, clean_words


def lead_words_in(session: Session, code: str) -> tuple[str, ...]:
    """The words the team's leads added for the task on this desk (none until a lead adds some)."""
    try:
        value = meta_value(session, BLUR_WORDS_KEY.format(code=code))
        return clean_words(value) if isinstance(value, list) else ()
    except (ValueError, InvalidWordList):
        return ()  # a damaged value blurs what the bundled list blurs; a lead can set the words again


def store_lead_words(session: Session, code: str, words: tuple[str, ...]) -> None:
    store_meta_value(session, BLUR_WORDS_KEY.format(code=code), list(words) or None)
