"""The writing assistant's panel on the Create page, as frozen view-models built by pure functions.

What a suggestion set (app.core.assist's SuggestionSet: the checked suggestions, ranked, and the
generators that gave nothing, with why) looks like in the panel: one row per suggestion with its
edit type, the inline word diff from the writer's text, the model's new probabilities and whether
it now fools the model; a line per generator that could not help. Nothing here touches a model.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.assist.types import CheckedSuggestion, Generator, Unavailable
from app.core.assist.types import Goal as Goal  # re-exported: widgets import only app.views
from app.core.formatting import size_text
from app.core.wellbeing.blur import blurred
from app.views.create import DiffKind, DiffPiece, diff_view

SUGGEST_KEYS = "Ctrl+Shift+G"
APPLY_KEYS = "Alt+Enter"
MOVE_KEYS = "Alt+↑ / Alt+↓"
PAGE = 10  # rows listed at first (and added by "more"): building all 64 would hold the GUI thread ~0.2 s

GENERATOR_NAMES = {
    Generator.OBFUSCATION: "obfuscation",
    Generator.SUBSTITUTION: "word substitution",
    Generator.RULES: "rule",
}
GOAL_NAMES = {Goal.FOOL: "Fool the model", Goal.CONTRAST: "Contrast pair"}


class SuggestionSetLike(Protocol):
    """What the panel reads of app.core.assist's SuggestionSet."""

    suggestions: Sequence[CheckedSuggestion]
    unavailable: Any  # Generator -> Unavailable (a mapping), or (Generator, Unavailable) pairs


def edit_type_name(edit_type: str) -> str:
    """'slur_to_description' → 'Slur to description'."""
    text = edit_type.replace("_", " ").strip()
    return text[:1].upper() + text[1:]


def percent(value: float) -> str:
    return f"{100 * value:.0f}%" if 0.005 <= value <= 0.995 or value in (0.0, 1.0) else f"{100 * value:.1f}%"


@dataclass(frozen=True, slots=True)
class SuggestionRow:
    """One checked suggestion as the panel lists it."""

    rank: int  # 1-based, the order the checker ranked it
    text: str  # the new text of the written input (what applying puts into the editor)
    edit_type: str  # shown: "Leetspeak"
    generator: str  # shown: "obfuscation"
    note: str  # what was changed, in words
    diff: tuple[DiffPiece, ...]  # from the writer's text
    labels: tuple[str, ...]
    probabilities: Mapping[str, float]
    predicted: str
    fools: bool
    shift: float
    claimed_label: str | None  # contrast: the true label the edit means to produce
    needs_judgement: bool  # a substituted word may change the meaning: the writer must judge
    shown_text: str = ""  # ``text`` as the panel shows it: masked where the writer reads with blur on

    @property
    def verdict(self) -> str:
        return "fools the model" if self.fools else "the model holds"

    @property
    def probability_line(self) -> str:
        """The model's new probabilities, its label first: 'not hate 91% · hate 9%'."""
        ordered = sorted(self.labels, key=lambda label: (label != self.predicted, self.labels.index(label)))
        return " · ".join(f"{label} {percent(self.probabilities.get(label, 0.0))}" for label in ordered)

    @property
    def lookalikes(self) -> str:
        """What an edit that looks like nothing changed did: the characters it added that are not
        ASCII, by script ('Т, а: Cyrillic'), and invisible ones by name ('an invisible zero width space')."""
        seen: list[str] = []
        for piece in self.diff:
            if piece.kind is DiffKind.INSERT:
                for ch in piece.text:  # emoji (symbols) show as themselves
                    if ord(ch) > 127 and ch not in seen and not unicodedata.category(ch).startswith("S"):
                        seen.append(ch)
        scripts: dict[str, list[str]] = {}
        invisible = []
        for ch in seen:
            name = unicodedata.name(ch, f"U+{ord(ch):04X}")
            if unicodedata.category(ch) in ("Cf", "Zs", "Mn"):
                invisible.append(f"an invisible {name.lower()}")
            else:
                scripts.setdefault(name.split(" ")[0].title(), []).append(ch)
        parts = [f"look-alike {', '.join(chars)}: {script}" for script, chars in scripts.items()] + invisible
        return "; ".join(parts)

    @property
    def title(self) -> str:
        same = self.edit_type.lower() == self.generator.lower()  # "Word substitution (word substitution)"
        return f"{self.rank}. {self.edit_type}" + ("" if same else f" ({self.generator})")

    @property
    def accessible_text(self) -> str:
        """The row read aloud: title, verdict, probabilities, the new text."""
        return f"{self.title}: {self.verdict}; model says {self.probability_line}. New text: {self.shown_text}"


@dataclass(frozen=True, slots=True)
class AssistPanelView:
    """Everything the panel shows."""

    available: bool  # False: the panel shows only ``reason`` (assistant off, or this session's arm)
    reason: str = ""
    goal: Goal = Goal.FOOL
    labels: tuple[str, ...] = ()
    contrast_label: str | None = None  # contrast: the new label the writer picked
    rows: tuple[SuggestionRow, ...] = ()  # the first ones, in rank order (more on request)
    total: int = 0  # how many checked suggestions there are
    notes: tuple[str, ...] = ()  # generators that gave nothing, and why
    status: str = ""
    current: bool = True  # the rows are for the text on screen (else they are shown greyed, not applicable)
    busy: bool = False  # suggestions are being generated and checked
    confirm_label: str | None = None  # contrast: a suggestion was applied; offer to set this label
    slurs: bool = False  # the writer asked for description → slur edits (off unless they do)
    fetch_line: str = ""  # word substitution's PyTorch form: coming from the team's server, or why it is not here
    fetch_fraction: float | None = None  # how much of it has arrived (None: no download under way)


def fetching_line(done: int, total: int) -> str:
    """The panel's line while the target's PyTorch form comes from the team's server."""
    if total <= 0:
        return "Word substitution: asking the team's server for the target's PyTorch form…"
    return (f"Word substitution: fetching the target's PyTorch form from the team's server, {size_text(done)} of "
            f"{size_text(total)} ({100 * done / total:.0f}%); the other suggestions do not wait for it.")


def unavailable_notes(unavailable: Any) -> tuple[str, ...]:
    """One line per generator that gave nothing: 'Word substitution: the target model's form has …'."""
    if not unavailable:
        return ()
    pairs: Iterable[tuple[Any, Any]] = unavailable.items() if isinstance(unavailable, Mapping) else unavailable
    notes = []
    for generator, why in pairs:
        name = GENERATOR_NAMES.get(Generator(generator), str(generator)) if generator is not None else ""
        reason = why.value if isinstance(why, Unavailable) else str(why)
        notes.append(f"{name[:1].upper() + name[1:]}: {reason}" if name else reason)
    return tuple(notes)


def suggestion_rows(labels: Sequence[str], written_text: str,
                    suggestions: Sequence[CheckedSuggestion], first_rank: int = 1, *,
                    blur_words: Sequence[str] = ()) -> tuple[SuggestionRow, ...]:
    """The checked suggestions for ``written_text`` as rows, in the checker's order (ranked from ``first_rank``).
    ``blur_words``: the task's blur list where the writer reads with blur on: every text a row shows
    (diff, note, the text read aloud) is masked as in the reading views; applying puts in the real text."""
    rows = []
    written = blurred(written_text, blur_words)
    for rank, checked in enumerate(suggestions, start=first_rank):
        candidate = checked.candidate
        generator = Generator(candidate.generator)
        shown = blurred(candidate.text, blur_words)
        rows.append(SuggestionRow(
            rank=rank, text=candidate.text, edit_type=edit_type_name(candidate.edit_type),
            generator=GENERATOR_NAMES.get(generator, str(generator)), note=blurred(candidate.note, blur_words),
            diff=diff_view(written, shown), labels=tuple(labels),
            probabilities=dict(checked.probabilities), predicted=checked.predicted, fools=checked.fools,
            shift=checked.shift, claimed_label=candidate.claimed_label,
            needs_judgement=generator is Generator.SUBSTITUTION, shown_text=shown))
    return tuple(rows)


def result_status(suggestions: Sequence[CheckedSuggestion], goal: Goal) -> str:
    if not suggestions:
        return "No checked suggestion for this text: try rewording it yourself, or another goal."
    fooling = sum(s.fools for s in suggestions)
    what = "fool the model" if goal is Goal.FOOL else "fool the model with the new label"
    return (f"{len(suggestions)} checked suggestion(s), {fooling} {what}. {APPLY_KEYS} applies the selected one "
            f"({MOVE_KEYS} to choose); Ctrl+Z takes it back.")
