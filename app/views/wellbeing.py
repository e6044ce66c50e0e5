"""View-models of analyst wellbeing for readers: what a reading view masks and collapses,
and the Wellbeing section of the profile dialog. Pure functions; controllers run them on the
database worker (the word list match) or on arrival of the model's attributions (a merge only)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final

from app.core.text import WordScore
from app.core.wellbeing.blur import mask_spans, model_spans, utf16_offsets
from app.core.wellbeing.profile import WellbeingProfile

# A text under the task's content warning longer than this opens collapsed in a reading view.
LONG_TEXT_CHARS: Final[int] = 400
# The label the model's attributions are asked toward, where a task has one of these.
HATEFUL_LABELS: Final[frozenset[str]] = frozenset({"hate", "hateful", "offensive", "abusive", "toxic"})


@dataclass(frozen=True, slots=True)
class MaskedText:
    """One text a reading view shows and the spans of it to mask, in UTF-16 code units (Qt's text
    positions) from the start of ``text``."""

    text: str
    spans: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class BlurView:
    """How a reading view shows an example's texts: masked (``masked``: the person's choice for this
    view), and collapsed until the reader opens it (``collapsed``: a long text under a content warning)."""

    texts: tuple[MaskedText, ...]
    masked: bool
    collapsed: bool
    length: int  # characters, for the collapsed note

    @property
    def count(self) -> int:
        return sum(len(t.spans) for t in self.texts) if self.masked else 0


def hateful_label(labels: Iterable[str]) -> str | None:
    """The task's label for hateful text (the model's attributions toward it pick the words to blur)."""
    return next((label for label in labels if label.casefold() in HATEFUL_LABELS), None)


def blur_view(texts: Sequence[str], words: Iterable[str], *, masked: bool, content_warning: str | None,
              scores: Mapping[int, Sequence[WordScore]] | None = None) -> BlurView:
    """``texts``: what the view shows, in order; ``words``: the task's blur list; ``scores``: the model's
    word attributions by text position, once they have come."""
    words = tuple(words)
    items = []
    for index, text in enumerate(texts):
        spans = mask_spans(text, words, (scores or {}).get(index, ())) if masked else ()
        items.append(MaskedText(text, tuple((s.utf16_start, s.utf16_end) for s in spans)))
    length = sum(len(t) for t in texts)
    return BlurView(tuple(items), masked, bool(content_warning) and length > LONG_TEXT_CHARS, length)


def with_model_words(view: BlurView, scores: Mapping[int, Sequence[WordScore]]) -> BlurView:
    """``view`` again with the model's top words masked as well. They arrive on the GUI thread after the
    word list's, so they are merged into the spans the view already has: the list is not matched again."""
    if not view.masked:
        return view
    texts = []
    for index, item in enumerate(view.texts):
        found = model_spans(item.text, scores.get(index, ()))
        if found:
            offsets = utf16_offsets(item.text)
            item = MaskedText(item.text, _merged([*item.spans, *((offsets[s], offsets[e]) for s, e, _w in found)]))
        texts.append(item)
    return replace(view, texts=tuple(texts))


def _merged(spans: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Overlapping spans as one, in reading order (as ``mask_spans`` merges them)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return tuple(merged)


def collapsed_note(view: BlurView) -> str:
    return (f"This text is long ({view.length:,} characters) and the task warns of its content. It stays "
            "closed until you choose to read it.")


# --- the profile dialog's Wellbeing section -----------------------------------------------------

@dataclass(frozen=True, slots=True)
class GroupChoice:
    group: str
    opted_out: bool


@dataclass(frozen=True, slots=True)
class WellbeingSectionView:
    """The person's choices, and for each task with target groups the groups they may opt out of."""

    blur_validating: bool
    blur_browsing: bool
    tasks: tuple[tuple[str, str, tuple[GroupChoice, ...]], ...]  # code, name, groups
    break_after_min: int
    daily_break_after_min: int
    short_break_min: int
    long_break_min: int


def wellbeing_section(profile: WellbeingProfile,
                      task_groups: Sequence[tuple[str, str, Sequence[str]]]) -> WellbeingSectionView:
    """``task_groups``: (code, name, the task's target groups) for the tasks that have them. Groups the
    person opted out of that the task no longer lists (written in as "other") stay on offer."""
    tasks = []
    for code, name, groups in task_groups:
        chosen = profile.opted_out(code)
        offered = list(dict.fromkeys([*groups, *sorted(chosen - set(groups))]))
        tasks.append((code, name, tuple(GroupChoice(g, g in chosen) for g in offered)))
    return WellbeingSectionView(profile.blur_validating, profile.blur_browsing, tuple(tasks), profile.break_after_min,
                                profile.daily_break_after_min, profile.short_break_min, profile.long_break_min)


@dataclass(frozen=True, slots=True)
class WellbeingChoice:
    """What the person chose in the section (the dialog's signal carries it)."""

    blur_validating: bool
    blur_browsing: bool
    opted_out_groups: tuple[tuple[str, tuple[str, ...]], ...]
    break_after_min: int
    daily_break_after_min: int
    short_break_min: int
    long_break_min: int


def chosen_profile(choice: WellbeingChoice, before: WellbeingProfile | None = None) -> WellbeingProfile:
    """The profile to store (pydantic checks the bounds the dialog's spin boxes keep to); choices the
    section does not show (the assistant's slur option) stay as ``before`` had them."""
    groups = {code: sorted(set(g.strip() for g in chosen if g.strip()))
              for code, chosen in choice.opted_out_groups}
    return WellbeingProfile(
        blur_validating=choice.blur_validating, blur_browsing=choice.blur_browsing,
        opted_out_groups={code: chosen for code, chosen in groups.items() if chosen},
        break_after_min=choice.break_after_min, daily_break_after_min=choice.daily_break_after_min,
        short_break_min=choice.short_break_min, long_break_min=choice.long_break_min,
        suggest_slurs=before.suggest_slurs if before is not None else False)


# --- a lead's blur words for a task ---------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class BlurWordsView:
    task_name: str
    bundled: int  # how many words the task's bundled list has
    added: tuple[str, ...]  # the team leads' words, one entry each


def blur_words_message(task_name: str, stored: Sequence[str]) -> str:
    return (f"✓ {len(stored)} blur word{'s' if len(stored) != 1 else ''} added by leads for {task_name}; "
            "they reach your team at the next sync.")
