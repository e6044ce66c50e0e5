"""The writing assistant's panel state on the Create page, free of Qt: the goal, the suggestions
shown (and the inputs they are for), the newest request, and the suggestions applied to the
example on screen (as a stack, so that undo and redo of an application are followed).

Whether suggestions are offered at all (the round's assistant mode, this writing session's arm)
and what the example records (``Assistance``) are the CreateSession's (app/views/create_session.py);
the Qt controller (app/gui/assistant.py) tells it of every application and undo, and only
translates between these objects, the inference service and the widgets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.core.assist.types import AssistantMode, CheckedSuggestion, Generator, Goal
from app.views.assist import (
    PAGE,
    SUGGEST_KEYS,
    AssistPanelView,
    SuggestionRow,
    fetching_line,
    result_status,
    suggestion_rows,
    unavailable_notes,
)

if TYPE_CHECKING:
    from app.core.tasks.definition import TaskDefinition

OFF_REASON = "The writing assistant is off in this round (a lead's round setting)."
ARM_OFF_REASON = ("This round compares writing with and without the assistant: this session writes "
                  "without it.")
NOT_CLASSIFICATION = "The writing assistant helps with labelled tasks; here you write the question yourself."
NO_ROUND = "Suggestions are offered while you write in the task's open round."
LOOKING_UP = "Looking up this round's assistant setting…"


def unavailable_reason(definition: TaskDefinition | None, mode: AssistantMode | str | None, offered: bool) -> str:
    """Why the panel offers no suggestions, in one line ("" when it does)."""
    if definition is not None and (not definition.labels or definition.is_extractive):
        return NOT_CLASSIFICATION
    if offered:
        return ""
    if mode is None:
        return LOOKING_UP
    mode = AssistantMode(mode)
    if mode is AssistantMode.OFF:
        return OFF_REASON
    if mode is AssistantMode.AB:
        return ARM_OFF_REASON
    return NO_ROUND


@dataclass(frozen=True, slots=True)
class AppliedSuggestion:
    """A suggestion put into the editor: what the example records if it is still applied at submit."""

    token: int  # names the editor's undo step that applied it
    generator: str
    edit_type: str
    field: str  # the written input it replaced
    text: str  # the suggestion as applied
    before: Mapping[str, str]  # the editor's inputs before
    after: Mapping[str, str]  # and after
    claimed_label: str | None  # contrast: the label the edit means to make true


class AssistSession:
    """See the module docstring. Read the attributes freely; change them through the methods."""

    def __init__(self) -> None:
        self.goal: Goal = Goal.FOOL
        self.contrast_label: str | None = None
        self.definition: TaskDefinition | None = None
        self.requested: tuple[int, dict[str, str]] | None = None  # the newest request: id, the inputs it is for
        self.shown: Any = None  # the SuggestionSet shown
        self.shown_inputs: dict[str, str] | None = None  # the inputs it is for
        self.failure: str | None = None
        self._rows: tuple[SuggestionRow, ...] = ()  # built for the rows listed so far, once each
        self.listed = PAGE  # how many rows the panel lists
        self._applied: list[AppliedSuggestion] = []  # applied now, oldest first (undo takes the last)
        self._known: dict[int, AppliedSuggestion] = {}  # every application of this example, by token
        self._tokens = 0
        self.blur_words: tuple[str, ...] = ()  # the task's blur list while the writer reads with blur on
        self.slurs = False  # the writer asked for description → slur edits
        self.fetch_line = ""  # word substitution's PyTorch form: being fetched, or why it is not here
        self.fetch_fraction: float | None = None

    def reading_chosen(self, blur_words: tuple[str, ...], slurs: bool) -> None:
        """The writer's wellbeing choices: the words rows mask (none: blur off), and whether they
        asked for description → slur edits. Rows listed so far are built again, masked as now chosen."""
        if blur_words != self.blur_words:
            self.blur_words, self._rows = blur_words, ()
        self.slurs = slurs

    # The task -------------------------------------------------------------------------------
    def task_opened(self, definition: TaskDefinition | None) -> None:
        """A task (or another round of it) is open: nothing shown of the previous one stays."""
        self.definition = definition
        self.contrast_label = None
        self.example_started()

    def helps(self) -> bool:
        """Whether the task is one the assistant can help with (labelled, not extractive)."""
        return self.definition is not None and bool(self.definition.labels) and not self.definition.is_extractive

    @property
    def written_field(self) -> str:
        """The input the assistant edits (NLI: the hypothesis, never the premise)."""
        assert self.definition is not None
        return self.definition.written_inputs[0].name

    # The writer's choices --------------------------------------------------------------------
    def goal_chosen(self, goal: Goal | str) -> bool:
        """Returns whether the goal changed (the suggestions shown were for the other one)."""
        goal = Goal(goal)
        changed, self.goal = goal != self.goal, goal
        if changed:
            self._forget_shown()
        return changed

    def contrast_label_chosen(self, label: str | None) -> None:
        if label != self.contrast_label and self.goal is Goal.CONTRAST:
            self._forget_shown()
        self.contrast_label = label

    def contrast_choices(self, writer_label: str | None) -> tuple[str, ...]:
        """The labels a contrast edit can aim at: every label but the writer's present one."""
        labels = tuple(self.definition.labels) if self.definition else ()
        return tuple(label for label in labels if label != writer_label)

    def target_label(self, writer_label: str | None) -> tuple[str | None, str | None]:
        """The label the suggestions work toward, or why none can be asked for: (label, problem)."""
        if self.goal is Goal.FOOL:
            if not writer_label:
                return None, "Choose your label first (Alt+1, Alt+2, …): the suggestions keep it and fool the model."
            return writer_label, None
        choices = self.contrast_choices(writer_label)
        label = self.contrast_label if self.contrast_label in choices else (choices[0] if len(choices) == 1 else None)
        if label is None:
            return None, "Pick the new label the contrast edit should make true."
        return label, None

    # Requests and results --------------------------------------------------------------------
    def suggestions_requested(self, request_id: int, inputs: Mapping[str, str]) -> None:
        self.requested, self.failure = (request_id, dict(inputs)), None

    def suggestions_arrived(self, request_id: int, inputs: Mapping[str, str], result: Any) -> bool:
        """Returns whether they are the newest asked for (an older set changes nothing)."""
        if self.requested is None or self.requested[0] != request_id:
            return False
        self.requested = None
        self.shown, self.shown_inputs, self._rows, self.listed = result, dict(inputs), (), PAGE
        return True

    def suggestions_failed(self, message: str) -> None:
        """No suggestions came: ``message`` says why (it shows until the next request)."""
        self.requested, self.failure = None, message

    def notice(self, message: str) -> None:
        """Something to tell the writer in the panel's status line (a request that could not be made)."""
        self.failure = message

    def models_changed(self) -> None:
        """Other target models: suggestions checked against the old ones are not shown any more,
        and a request in flight will not be answered; what was applied stays applied."""
        self._forget_shown()
        self.requested = None

    # Word substitution's PyTorch form, from the team's server -----------------------------------
    def gradients_fetching(self, done: int, total: int) -> None:
        """``done`` of ``total`` bytes of the target's PyTorch form have arrived (total 0: asking for it)."""
        self.fetch_line = fetching_line(done, total)
        self.fetch_fraction = min(1.0, done / total) if total > 0 else 0.0

    def gradients_not_fetched(self, message: str) -> None:
        """The form did not come: ``message`` says why (and what can be done); it shows until the next try."""
        self.fetch_line, self.fetch_fraction = message, None

    def gradients_settled(self) -> None:
        """The form is here (or other targets came): nothing more to say about it."""
        self.fetch_line, self.fetch_fraction = "", None

    @property
    def busy(self) -> bool:
        return self.requested is not None

    def current(self, inputs: Mapping[str, str]) -> bool:
        """Whether the suggestions shown apply to ``inputs``: they are for exactly that text, or
        that text is one of them applied unchanged (applying another replaces it)."""
        if self.shown_inputs is None:
            return False
        if dict(inputs) == self.shown_inputs:
            return True
        top = self.applied
        return top is not None and top.before == self.shown_inputs and dict(inputs) == dict(top.after)

    def list_more(self) -> None:
        """The panel lists the next page of suggestions too."""
        self.listed += PAGE

    def suggestion(self, index: int) -> CheckedSuggestion:
        suggestions: tuple[CheckedSuggestion, ...] = tuple(self.shown.suggestions) if self.shown is not None else ()
        if not 0 <= index < len(suggestions):
            raise IndexError(f"no suggestion {index + 1} is shown")
        return suggestions[index]

    # Applying --------------------------------------------------------------------------------
    def applying(self, index: int, inputs: Mapping[str, str]) -> AppliedSuggestion:
        """The writer applies suggestion ``index`` to the editor holding ``inputs``: what to put
        there. It counts as applied once the editor did it (``reapplied`` with its token)."""
        if not self.current(inputs):
            raise ValueError("The text changed since these suggestions were made: ask for new ones.")
        checked = self.suggestion(index)
        assert self.shown_inputs is not None
        field = self.written_field
        candidate = checked.candidate
        self._tokens += 1
        applied = AppliedSuggestion(self._tokens, str(candidate.generator), candidate.edit_type, field,
                                    candidate.text, dict(self.shown_inputs),
                                    {**self.shown_inputs, field: candidate.text}, candidate.claimed_label)
        self._known[applied.token] = applied
        return applied

    def known(self, token: int) -> AppliedSuggestion | None:
        """The application ``token`` names, if it was made to the example on screen."""
        return self._known.get(token)

    def unapplied(self, token: int) -> None:
        """The editor undid the application ``token`` (an unknown token, of an earlier example, changes nothing)."""
        self._applied = [a for a in self._applied if a.token != token]

    def reapplied(self, token: int) -> None:
        """The editor redid the application ``token``."""
        applied = self._known.get(token)
        if applied is not None and applied not in self._applied:
            self._applied.append(applied)

    @property
    def applied(self) -> AppliedSuggestion | None:
        """The suggestion applied last and not undone."""
        return self._applied[-1] if self._applied else None

    def confirm_label(self, writer_label: str | None) -> str | None:
        """Contrast: the new label to offer setting, while the applied suggestion claims one the
        writer has not chosen yet."""
        top = self.applied
        if top is None or not top.claimed_label or top.claimed_label == writer_label:
            return None
        return top.claimed_label

    # The example -----------------------------------------------------------------------------
    def example_started(self) -> None:
        """A new example (or another draft) is on screen: nothing shown or applied carries over."""
        self._forget_shown()
        self.requested, self._applied, self._known = None, [], {}

    def _forget_shown(self) -> None:
        self.shown, self.shown_inputs, self.failure, self._rows = None, None, None, ()

    # The panel -------------------------------------------------------------------------------
    def panel(self, inputs: Mapping[str, str], writer_label: str | None, *, offered: bool,
              mode: AssistantMode | str | None) -> AssistPanelView:
        """What the panel shows for the editor holding ``inputs`` with ``writer_label``; ``offered``:
        this writing session gets suggestions (``mode``: the round's setting, None: not known yet)."""
        if not offered or not self.helps() or self.definition is None:
            return AssistPanelView(available=False, reason=unavailable_reason(self.definition, mode, offered))
        labels = tuple(self.definition.labels)
        contrast = self.target_label(writer_label)[0] if self.goal is Goal.CONTRAST else None
        base = AssistPanelView(available=True, goal=self.goal, labels=labels, contrast_label=contrast,
                               busy=self.busy, confirm_label=self.confirm_label(writer_label), slurs=self.slurs,
                               fetch_line=self.fetch_line, fetch_fraction=self.fetch_fraction)
        if self.shown is None or self.shown_inputs is None:
            if self.busy:
                status = "Generating suggestions and checking each against the model…"
            elif self.failure:
                status = self.failure
            else:
                status = (f"Write your text, then press Suggest ({SUGGEST_KEYS}): every suggestion is checked "
                          "against the model before it is shown.")
            return replace(base, status=status)
        suggestions = tuple(self.shown.suggestions)
        wanted = min(self.listed, len(suggestions))
        if len(self._rows) < wanted:  # each row built once: the panel is refreshed on every keystroke
            self._rows += suggestion_rows(labels, self.shown_inputs.get(self.written_field, ""),
                                          suggestions[len(self._rows):wanted], first_rank=len(self._rows) + 1,
                                          blur_words=self.blur_words)
        rows = self._rows[:wanted]
        current = self.current(inputs)
        if self.busy:
            status = "Generating suggestions for the new text…"
        elif self.failure:
            status = self.failure
        elif not current:
            status = f"The text changed since these suggestions: press Suggest ({SUGGEST_KEYS}) for new ones."
        else:
            status = result_status(suggestions, self.goal)
        unavailable = getattr(self.shown, "unavailable", None) or {}
        if self.fetch_line:  # the fetch's line says it better than "needs the PyTorch form"
            pairs = unavailable.items() if isinstance(unavailable, Mapping) else unavailable
            unavailable = [(g, why) for g, why in pairs if g != Generator.SUBSTITUTION]
        return replace(base, rows=rows, total=len(suggestions), notes=unavailable_notes(unavailable),
                       status=status, current=current)

