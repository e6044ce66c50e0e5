"""An example's assistance record: its stored and wire form, its checks, and the figure computed
at submit (the word edit distance from the applied suggestion to the submitted text).

The stored form keeps the applied suggestion's text, so that the distance can be recomputed by
whoever receives the record (the sync server never trusts a client's figure) and so that a draft
keeps it across restarts.

The distance is measured only on texts within a bound (:func:`distance_bound`: the task's own
``max_chars``, capped by ``MAX_DISTANCE_CHARS``); beyond it the record says "unknown" (None), so
measuring one received record costs a bounded time whatever it holds.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from app.core.assist.arms import session_arm
from app.core.assist.types import Assistance, AssistantMode, Generator
from app.core.errors import InvalidExample
from app.core.tasks.definition import TaskDefinition
from app.core.text import control_characters, word_distance

ARMS = ("on", "off")
MAX_EDIT_TYPE = 64
MAX_APPLIED_CHARS = 100_000
MAX_SESSION = 1_000_000
# The longest text the edit distance is measured on, whatever a task allows (every shipped task's
# written inputs fit): segmenting words is Python work per character, up to ~20 µs for the worst
# mixes, and the server measures every record it receives, within its 1 s budget per record.
MAX_DISTANCE_CHARS = 5_000


def distance_bound(definition: TaskDefinition) -> int:
    """The longest suggestion or text whose edit distance is measured for ``definition``'s examples:
    what its written inputs may hold together (joined by newlines), at most ``MAX_DISTANCE_CHARS``."""
    written = definition.written_inputs
    allowed = sum(f.max_chars for f in written) + max(len(written) - 1, 0)
    return min(allowed, MAX_DISTANCE_CHARS)


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
    hidden = control_characters(edit_type)
    if hidden:
        raise InvalidExample(f"The edit type holds control characters ({', '.join(hidden)}); "
                             "it names the kind of edit in plain words.")
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


def at_submit(assistance: Assistance, submitted_text: str, *, max_chars: int) -> Assistance:
    """The record as stored with a submitted example: the word edit distance from the applied
    suggestion to ``submitted_text``, measured with the one word segmentation (app.core.text);
    None (unknown) when either is longer than ``max_chars`` (:func:`distance_bound`)."""
    assistance = check_assistance(assistance)
    if not assistance.applied:
        return assistance
    assert assistance.applied_text is not None  # checked
    return replace(assistance, edit_distance=word_distance(assistance.applied_text, submitted_text,
                                                           max_chars=max_chars))


@dataclass(frozen=True)
class Received:
    """A received record as it is stored (None: no record), and what was changed or left unmeasured,
    in words for the sender (None: stored as sent, its distance measured)."""

    record: dict[str, Any] | None
    note: str | None = None


Measure = Callable[[str, str], int | None]


def received_assistance(data: Any, submitted_text: str, *, max_chars: int, writer_id: uuid.UUID | str | None = None,
                        round_key: str = "", mode: AssistantMode | str | None = None,
                        measure: Measure | None = None) -> Received:
    """An example's record as another desk sent it (the sync server's check, also an import's).

    - Its shape is checked (:func:`read_assistance`); a bad one raises :class:`InvalidExample`.
    - With ``writer_id`` (the server; a file's authors are pseudonyms): an "off" arm must be what the
      A-B draw gives the writer's session (no desk makes another); else :class:`InvalidExample`.
    - With ``mode`` too (the round's assistant setting on the server): an arm or an applied suggestion
      the setting does not allow (an "on" arm the draw puts off, any arm in a round without the
      assistant, a suggestion applied outside an assistant session) is not believed: the record is
      stored as unassisted (no arm, nothing applied, outside the A-B figures), the note says why.
    - The edit distance is measured here by ``measure`` (default: :func:`word_distance` within
      ``max_chars``), whatever figure was sent; None (unknown, with a note) beyond the bound.
    """
    assistance = read_assistance(data)
    if assistance is None:
        return Received(None)
    if assistance.arm is not None and assistance.session is None:
        raise InvalidExample("The assistance record names an arm but not the writing session that drew it.")
    if writer_id is not None and assistance.arm == "off" and _drawn("ab", writer_id, assistance, round_key) != "off":
        raise InvalidExample(f"The assistance record says session {assistance.session} of this writer in round "
                             f"{round_key} ran without the assistant, but the A-B draw gives it the assistant.")
    if writer_id is not None and mode is not None:
        refused = _not_allowed(assistance, AssistantMode(mode), writer_id, round_key)
        if refused:
            neutral = Assistance(session=assistance.session)
            return Received(assistance_record(neutral), f"its assistance record is stored as unassisted, outside "
                                                        f"the A-B figures: {refused}")
    if not assistance.applied:
        return Received(assistance_record(replace(assistance, edit_distance=None)))
    assert assistance.applied_text is not None  # checked
    measured = (measure(assistance.applied_text, submitted_text) if measure is not None
                else word_distance(assistance.applied_text, submitted_text, max_chars=max_chars))
    note = None if measured is not None else (
        f"the edit distance from the applied suggestion is stored as unknown: the suggestion or the text is "
        f"longer than the {max_chars:,} characters it is measured on for this task, or the request held more "
        f"to measure than one push may")
    return Received(assistance_record(replace(assistance, edit_distance=measured)), note)


def _drawn(mode: AssistantMode | str, writer_id: uuid.UUID | str, assistance: Assistance, key: str) -> str | None:
    return session_arm(mode, writer_id, assistance.session or 0, round_key=key)


def _not_allowed(assistance: Assistance, mode: AssistantMode, writer_id: uuid.UUID | str, key: str) -> str | None:
    """Why the round's assistant setting (``mode``) does not allow the record's claim, or None."""
    if assistance.arm is None:
        return ("a suggestion is marked applied in a session without the assistant (no arm)"
                if assistance.applied else None)
    expected = _drawn(mode, writer_id, assistance, key)
    if expected == assistance.arm:
        return None
    if expected is None:
        return f"the assistant is off in round {key}, so no session there has an arm"
    if mode is AssistantMode.ON:
        return f"the assistant is on in every session of round {key}, not A-B"
    return (f"the A-B draw puts session {assistance.session} of this writer in round {key} "
            f"{'with' if expected == 'on' else 'without'} the assistant")
