"""What the break prompt says: gentle, short, with the figures that prompted it."""

from __future__ import annotations

from dataclasses import dataclass

from app.core.wellbeing.breaks import BreakKind, BreakPrompt


@dataclass(frozen=True)
class BreakPromptView:
    kind: BreakKind
    title: str
    text: str
    take_label: str
    snooze_label: str


def _duration(minutes: int) -> str:
    hours, rest = divmod(minutes, 60)
    if not hours:
        return f"{rest} min"
    return f"{hours} h {rest:02d} min" if rest else f"{hours} h"


def _minutes(count: int) -> str:
    return f"{count} minute{'' if count == 1 else 's'}"


def break_prompt_view(prompt: BreakPrompt, snooze_min: int) -> BreakPromptView:
    if prompt.kind is BreakKind.LONG:
        title = "Time for a longer break"
        text = (f"You have spent {_duration(prompt.daily_min)} with hateful content today. "
                f"A {prompt.break_min}-minute break away from the screen helps.")
    else:
        title = "Time for a short break"
        text = (f"You have worked with hateful content for {_duration(prompt.continuous_min)} without a pause. "
                f"Step away for {_minutes(prompt.break_min)}.")
    return BreakPromptView(prompt.kind, title, text, f"Take a {prompt.break_min}-minute break",
                           f"Remind me in {snooze_min} min")


def break_taken_text(prompt: BreakPrompt) -> str:
    return f"Break started: see you in {_minutes(prompt.break_min)}. Your work is saved."
