"""Which arm of a round's assistant setting a writing session is in.

A-B must be a fair comparison per writer: each writer's sessions in a round are paired in order
(1-2, 3-4, ...) and one session of each pair, chosen by a keyed hash, gets the assistant. So a
writer's sessions are split evenly (within one) however few they write, which of a pair is
assisted cannot be foreseen or steered, and the same session always gets the same arm (on any
desk, after a restart). A session's number is the writer's count of sessions in the round
(see :func:`next_session_number`); it is recorded on every example (``Assistance.session``).
"""

from __future__ import annotations

import hashlib
import uuid
from typing import Literal

from app.core.assist.types import AssistantMode

Arm = Literal["on", "off"]


def round_key(task_code: str, round_number: int) -> str:
    """A round as every desk and the server name it (its id may differ between desks that made it
    before their first sync)."""
    return f"{task_code}/{round_number}"


def session_arm(mode: AssistantMode | str | None, writer_id: uuid.UUID | str, session_number: int, *,
                round_key: str = "") -> Arm | None:
    """The arm of the writer's ``session_number``-th session (from 1) in a round run with ``mode``:
    None when the assistant is off (no arm: nothing to compare), "on" when it is on, and under A-B
    "on" for exactly one session of each consecutive pair. ``round_key`` (:func:`round_key`) keys the
    draw, so that a writer's sequence differs from round to round."""
    mode = AssistantMode(mode or AssistantMode.OFF)
    if mode is AssistantMode.OFF:
        return None
    if mode is AssistantMode.ON:
        return "on"
    if isinstance(session_number, bool) or not isinstance(session_number, int) or session_number < 1:
        raise ValueError(f"A session number counts from 1; got {session_number!r}.")
    pair, second = divmod(session_number - 1, 2)
    key = f"{writer_id}|{round_key}|{pair}".encode()
    first_on = hashlib.sha256(key).digest()[0] & 1 == 1
    return "on" if first_on != bool(second) else "off"


def next_session_number(recorded: list[int | None]) -> int:
    """The number of a writer's new session, from the session numbers on their examples in the
    round (drafts included; None for examples written before the assistant existed)."""
    numbers = [n for n in recorded if isinstance(n, int) and n >= 1]
    return max(numbers, default=0) + 1


# The setting in words, for `rounds show` and the round dialogs.
MODE_WORDS: dict[str, str] = {
    AssistantMode.OFF.value: "off",
    AssistantMode.ON.value: "on in every session",
    AssistantMode.AB.value: "A-B: on for a random half of each writer's sessions",
}
