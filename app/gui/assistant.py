"""The writing assistant on the Create page: asks the inference service for checked suggestions
(on the explanation lane, never delaying a keystroke's prediction), shows them, applies one into
the editor as one undo step, and tells the workspace what the example records about it.

State lives in a Qt-free AssistSession (app/views/assist_session.py); this controller only
translates between it, the database worker, the inference service and the view.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Callable

from app.core.assist.types import AssistantMode, Assistance, Goal
from app.core.services.target_models import model_input
from app.gui.inference import InferenceFailure, SuggestionResult
from app.views.assist_session import AssistSession

log = logging.getLogger(__name__)


def round_mode(rounds, round_) -> AssistantMode:
    """The round's assistant setting (off / on / A-B)."""
    settings = rounds.settings(round_)
    return AssistantMode(getattr(settings, "assistant", AssistantMode.OFF))


def session_arm(round_, person_id: uuid.UUID, session_key: uuid.UUID, mode: AssistantMode) -> str | None:
    """This writing session's arm: "on" / "off" (A-B: a random half of each writer's sessions)."""
    if mode is AssistantMode.OFF:
        return None
    if mode is AssistantMode.ON:
        return "on"
    return "on" if uuid.uuid5(session_key, f"{round_.id}/{person_id}").int % 2 == 0 else "off"


def engine_work(definition, inputs: dict[str, str], goal: Goal, label: str | None) -> Callable[[Any, Callable], Any]:
    """What the explanation lane runs: generate and check the suggestions for ``inputs``."""
    from app.core.assist import suggest

    def work(models, checkpoint):
        return suggest(models, definition, inputs, goal=goal, writer_label=label, checkpoint=checkpoint)

    return work


class AssistantController:
    """The writing assistant for a WorkspaceController (``ws``): its session, its view, its workers."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.session = AssistSession()
        self.session_key = uuid.uuid4()  # one writing session (this window's life): A-B draws its arm per session
        view = ws.view
        view.suggest_requested.connect(self.suggest)
        view.assist_goal_changed.connect(self.choose_goal)
        view.assist_contrast_label_changed.connect(self.choose_contrast_label)
        view.suggestion_apply_requested.connect(self.apply)
        view.assist_label_confirmed.connect(self.confirm_label)
        view.replacement_toggled.connect(self._toggled)
        ws.inference.suggestion_ready.connect(self._arrived)

    # The round ---------------------------------------------------------------------------------
    def round_opened(self) -> None:
        """The round written in changed (a task opened, a round switched): its mode, this session's arm."""
        ws = self.ws
        definition, round_ = ws.session.definition, ws.session.round
        self.session.round_opened(definition, AssistantMode.OFF, None)
        if round_ is None:
            self.refresh()
            return
        rounds, person, key = ws.desk.rounds, ws.desk.current_person_id, self.session_key

        def find():
            mode = round_mode(rounds, round_)
            return mode, session_arm(round_, person, key, mode)

        def found(mode_arm) -> None:
            if ws.session.round is round_:
                self.session.round_opened(definition, *mode_arm)
                self.refresh()

        ws.db.submit(find, on_done=found, on_error=ws._show_error)

    def example_started(self) -> None:
        """Another example is on screen: nothing shown or applied carries over."""
        self.session.example_started()
        self.refresh()

    def models_changed(self) -> None:
        """Other target models: suggestions checked against the old ones are no longer shown."""
        self.session.models_changed()
        self.refresh()

    # The writer's requests -----------------------------------------------------------------------
    def suggest(self) -> None:
        """Ctrl+Shift+G: checked suggestions for the text on screen (only the newest request is answered)."""
        ws, session = self.ws, self.session
        view = ws.view
        if not session.available:
            self.refresh(bring_forward=True)
            return
        definition = ws.session.definition
        content = view.content()
        if not content.written(definition):
            self._say("Write something first: the suggestions edit your text.")
            return
        if ws.session.loaded is None:
            self._say("The target model is not loaded yet: every suggestion is checked against it.")
            return
        label, problem = session.target_label(content.label)
        if problem:
            self._say(problem)
            return
        inputs = dict(content.inputs)
        request = ws.inference.suggest(engine_work(definition, inputs, session.goal, label), inputs)
        session.suggestions_requested(request, inputs)
        self.refresh(bring_forward=True)

    def choose_goal(self, goal: Goal) -> None:
        self.session.goal_chosen(goal)
        self.refresh()

    def choose_contrast_label(self, label: str | None) -> None:
        self.session.contrast_label_chosen(label)
        self.refresh()

    def apply(self, index: int) -> None:
        """Put suggestion ``index`` into the editor as one undo step (Ctrl+Z takes it back)."""
        view = self.ws.view
        if view.form_shown():
            return
        try:
            applied = self.session.applying(index, view.content().inputs)
        except (ValueError, IndexError) as exc:
            self._say(str(exc))
            return
        view.replace_written(applied.field, applied.text, applied.token)
        view.focus_editor()

    def confirm_label(self, label: str) -> None:
        """Contrast: the writer confirms the applied edit's new label; it goes into the label field."""
        if label in (self.ws.session.definition.labels if self.ws.session.definition else ()):
            self.ws.view.choose_label(label)

    def assistance(self) -> Assistance | None:
        """What the example about to be stored records (None: the round runs without the assistant)."""
        return self.session.assistance()

    # Deliveries ------------------------------------------------------------------------------------
    def _arrived(self, result: SuggestionResult) -> None:
        if self.session.suggestions_arrived(result.request_id, result.inputs, result.result):
            self.refresh(bring_forward=True)

    def failed(self, failure: InferenceFailure) -> None:
        if failure.cancelled:
            return  # a newer request is on its way
        self.session.suggestions_failed(f"No suggestions: {failure.message}")
        self.refresh()

    def _toggled(self, token: int, applied: bool) -> None:
        (self.session.reapplied if applied else self.session.unapplied)(token)
        self.refresh()

    # Showing ---------------------------------------------------------------------------------------
    def refresh(self, *, bring_forward: bool = False) -> None:
        ws, session = self.ws, self.session
        content = ws.view.content()
        if session.available and session.goal is Goal.CONTRAST:
            ws.view.set_contrast_choices(session.contrast_choices(content.label),
                                         session.target_label(content.label)[0])
        ws.view.show_assist(session.panel(content.inputs, content.label), bring_forward=bring_forward)

    def _say(self, text: str) -> None:
        self.session.notice(text)
        self.refresh(bring_forward=True)
