"""An example's assistance record: its stored and wire form, its checks, and the figure computed
at submit (the word edit distance from the applied suggestion to the submitted text).

The stored form keeps the applied suggestion's text, so that the distance can be recomputed by
whoever receives the record (the sync server never trusts a client's figure) and so that a draft
keeps it across restarts.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from app.core.assist.types import Assistance, Generator
from app.core.errors import InvalidExample
from app.core.text import word_edits

ARMS = ("on", "off")
MAX_EDIT_TYPE = 64
MAX_APPLIED_CHARS = 100_000
MAX_SESSION = 1_000_000


def assistance_record(assistance: Assistance) -> dict[str, Any]:
    """The stored, synced and exported form (every field, None where unknown)."""
    return {"arm": assistance.arm, "session": assistance.session, "applied": assistance.applied,
            "generator": assistance.generator, "edit_type": assistance.edit_type,
            "applied_text": assistance.applied_text, "edit_distance": assistance.edit_distance}


def check_assistance(assistance: Assistance) -> Assistance:
    """``assistance`` as it may be stored, or :class:`InvalidExample` saying what is wrong with it."""
    if assistance.arm is not None and assistance.arm not in ARMS:
        raise InvalidExample(f"The assistant's arm must be 'on' or 'off' (or none); got {assistance.arm!r}.")
    session = assistance.session
    if session is not None and (isinstance(session, bool) or not isinstance(session, int)
                                or not 1 <= session <= MAX_SESSION):
        raise InvalidExample(f"The writing session's number must be a whole number from 1; got {session!r}.")
    if not isinstance(assistance.applied, bool):
        raise InvalidExample(f"Whether a suggestion was applied must be true or false; got {assistance.applied!r}.")
    if not assistance.applied:
        if any(v is not None for v in (assistance.generator, assistance.edit_type, assistance.applied_text,
                                       assistance.edit_distance)):
            raise InvalidExample("No suggestion was applied, yet the record names a generator, an edit type, "
                                 "a suggestion or an edit distance; drop them or mark a suggestion applied.")
        return assistance
    if assistance.arm == "off":
        raise InvalidExample("A suggestion was applied in a session without the assistant (arm 'off').")
    if assistance.generator not in {g.value for g in Generator}:
        raise InvalidExample(f"Unknown generator {assistance.generator!r}; one of "
                             f"{', '.join(g.value for g in Generator)}.")
    edit_type = assistance.edit_type
    if not isinstance(edit_type, str) or not edit_type.strip() or len(edit_type) > MAX_EDIT_TYPE:
        raise InvalidExample(f"An applied suggestion needs its edit type (up to {MAX_EDIT_TYPE} characters).")
    text = assistance.applied_text
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_APPLIED_CHARS:
        raise InvalidExample("An applied suggestion needs the text it put in the editor.")
    distance = assistance.edit_distance
    if distance is not None and (isinstance(distance, bool) or not isinstance(distance, int) or distance < 0):
        raise InvalidExample(f"The edit distance must be a whole number of words, 0 or more; got {distance!r}.")
    return assistance


def read_assistance(data: Any) -> Assistance | None:
    """The record from its stored or wire form (None stays None), checked."""
    if data is None:
        return None
    if not isinstance(data, dict):
        raise InvalidExample(f"The assistance record must be an object; got {type(data).__name__}.")
    known = set(assistance_record(Assistance()))
    unknown = set(data) - known
    if unknown:
        raise InvalidExample(f"The assistance record has unknown field(s) {sorted(unknown)}.")
    return check_assistance(Assistance(**{k: data[k] for k in known if k in data}))


def at_submit(assistance: Assistance, submitted_text: str) -> Assistance:
    """The record as stored with a submitted example: the word edit distance from the applied
    suggestion to ``submitted_text``, measured with the one word segmentation (app.core.text)."""
    assistance = check_assistance(assistance)
    if not assistance.applied:
        return assistance
    assert assistance.applied_text is not None  # checked
    _ops, distance = word_edits(assistance.applied_text, submitted_text)
    return replace(assistance, edit_distance=distance)


def received_assistance(data: Any, submitted_text: str, writer_id: Any = None, round_key: str = "") -> dict[str, Any] | None:
    """An example's record as another desk sent it (the sync server's check, also an import's): its
    shape checked, an "off" arm checked against the A-B draw for the writer's session (only A-B
    makes one; skipped without ``writer_id``, as for files whose authors are pseudonyms), and the
    edit distance measured here from the applied suggestion to ``submitted_text``, whatever figure
    was sent. Raises :class:`InvalidExample` saying what is wrong."""
    from app.core.assist.arms import session_arm

    assistance = read_assistance(data)
    if assistance is None:
        return None
    if assistance.arm is not None and assistance.session is None:
        raise InvalidExample("The assistance record names an arm but not the writing session that drew it.")
    if writer_id is not None and assistance.arm == "off" and session_arm("ab", writer_id, assistance.session or 0, round_key=round_key) != "off":
        raise InvalidExample(f"The assistance record says session {assistance.session} of this writer in round "
                             f"{round_key} ran without the assistant, but the A-B draw gives it the assistant.")
    return assistance_record(at_submit(replace(assistance, edit_distance=None), submitted_text))
