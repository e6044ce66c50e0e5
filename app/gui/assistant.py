"""The writing assistant's panel on the Create page: asks the inference service for checked
suggestions (on the explanation lane, never delaying a keystroke's prediction), shows them,
applies one into the editor as one undo step, and tells the Create session of every application,
undo and redo, so that the example records the suggestion applied when it is submitted.

Panel state lives in a Qt-free AssistSession (app/views/assist_session.py); whether this writing
session gets suggestions (the round's mode, the session's arm) is the CreateSession's, looked up by
app/gui/assistant_sessions.py. This controller only translates between them, the inference
service and the view.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from app.core.assist.forms import first_gradient_form
from app.core.assist.types import Assistance, Goal
from app.core.services.target_models import model_input, model_spec
from app.gui.gradient_fetch import GradientFetch
from app.gui.gradient_form import GradientForm
from app.gui.inference import InferenceFailure, SuggestionResult
from app.views.assist_session import AssistSession

log = logging.getLogger(__name__)


def engine_work(definition, inputs: dict[str, str], goal: Goal, label: str | None, rule: str,
                lexicon: Any = None, text_label: str | None = None,
                gradient_form: GradientForm | None = None, slurs: bool = False) -> Callable[[Any, Callable], Any]:
    """What the explanation lane runs: generate the suggestions for ``inputs`` and check each
    against the loaded target. Word substitution uses a member with gradients, else the target's
    PyTorch form (``gradient_form``, loaded on this lane the first time)."""
    from app.core.assist.pipeline import AssistError, suggest
    from app.core.errors import DynadeskError

    model_inputs = model_input(definition, inputs)

    def work(models, checkpoint):
        gradients = next((engine for engine in models.engines if engine.supports_gradients), None)
        if gradients is None and gradient_form is not None:
            gradients = gradient_form.engine()
        try:
            return suggest(models, definition, model_inputs, goal=goal, writer_label=label, gradients=gradients,
                           rule=rule, lexicon=lexicon, checkpoint=checkpoint, text_label=text_label, slurs=slurs)
        except AssistError as exc:  # what is wrong with the request, said to the writer as it is
            raise DynadeskError(str(exc)) from exc

    return work


class AssistantController:
    """The writing assistant for a WorkspaceController (``ws``): its session, its view, its workers."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.session = AssistSession()
        self._previous: dict[int, Assistance | None] = {}  # per applied suggestion: the record it replaced
        self.lexicon: Any = None  # the task's word lists (shipped, with the lead's changes); None: the shipped ones
        self.gradient_form = GradientForm()  # an ONNX target's PyTorch form, for word substitution
        # ... and where it is not on this desk, the form to fetch from the team's server at the first Suggest
        self.gradient_source: Any = None  # a sync.gradient_forms.GradientSource
        self.gradient_fetch = GradientFetch(ws.desk, ws)
        self.gradient_fetch.on_progress = self._fetch_progressed
        self._asked: dict[str, str] | None = None  # the inputs of the last Suggest, asked again when the form arrives
        view = ws.view
        view.suggest_requested.connect(self.suggest)
        view.assist_goal_changed.connect(self.choose_goal)
        view.assist_contrast_label_changed.connect(self.choose_contrast_label)
        view.suggestion_apply_requested.connect(self.apply)
        view.suggestions_more_requested.connect(self.list_more)
        view.assist_label_confirmed.connect(self.confirm_label)
        view.replacement_toggled.connect(self._toggled)
        view.assist_slurs_toggled.connect(self.choose_slurs)
        ws.assistant.assistant_changed.connect(lambda _offered: self.refresh())  # the session's arm is known

    # The task and the example ---------------------------------------------------------------------
    def task_opened(self) -> None:
        """A task opened, or the round written in switched: nothing shown of the previous one stays."""
        ws, definition = self.ws, self.ws.session.definition
        self.session.task_opened(definition)
        self._previous.clear()
        self.lexicon = None
        self.refresh()
        self.wellbeing_changed()  # the words others' texts are masked with on this page (suggestions, notices)
        if definition is None or not self.session.helps():
            return
        tasks, code = ws.desk.tasks, definition.code

        def found(lexicon) -> None:
            if ws.session.definition is definition:
                self.lexicon = lexicon

        def unusable(error: BaseException) -> None:  # the shipped lists still serve; the lead's problem is said
            log.warning("the task's word lists could not be read", exc_info=error)
            self.session.notice(f"The lead's word lists for this task could not be read ({error}); "
                                "suggestions use the shipped ones.")
            self.refresh()

        ws.db.submit(lambda: tasks.assist_lexicon(code), on_done=found, on_error=unusable)

    def wellbeing_changed(self) -> None:
        """The writer's wellbeing choices (now, or after the profile dialog stored them): with blur
        on, rows mask the task's blur words as every reading view does; description → slur edits
        only when asked for."""
        ws, definition = self.ws, self.ws.session.definition
        if definition is None:
            return
        desk, code = ws.desk, definition.code
        profile = desk.settings.wellbeing_for(str(desk.current_person_id))

        def chosen(words: tuple[str, ...]) -> None:
            if ws.session.definition is definition:
                self.session.reading_chosen(words, profile.suggest_slurs)
                self.refresh()

        self.session.reading_chosen(self.session.blur_words, profile.suggest_slurs)
        ws.db.submit(lambda: desk.tasks.blur_words(code) if profile.blur_validating else (),
                     on_done=chosen, on_error=lambda error: log.warning("blur words not read", exc_info=error))

    def choose_slurs(self, wanted: bool) -> None:
        """The panel's option: description → slur edits, stored as this person's choice."""
        desk = self.ws.desk
        person = str(desk.current_person_id)
        before = desk.settings.wellbeing
        desk.settings.wellbeing = {**before, person: desk.settings.wellbeing_for(person).model_copy(
            update={"suggest_slurs": wanted})}
        try:
            desk.save_settings()
        except OSError as exc:
            desk.settings.wellbeing = before
            self._say(f"Not saved: {exc}")
            return
        self.session.reading_chosen(self.session.blur_words, wanted)
        self.refresh()

    def offered(self) -> bool:
        """Whether this writing session gets suggestions for the example on screen."""
        return bool(self.ws.session.assistant_on)

    def example_started(self) -> None:
        """Another example is on screen: nothing shown or applied carries over."""
        self.session.example_started()
        self._previous.clear()
        self.refresh()

    def models_changed(self) -> None:
        """Other target models: suggestions checked against the old ones are no longer shown, and
        word substitution uses the new target's PyTorch form."""
        self.session.models_changed()
        self.refresh()
        ws, records = self.ws, list(self.ws.session.records)
        self.gradient_source = None
        self.session.gradients_settled()
        if not records or not self.session.helps():
            self.gradient_form.want(None)
            return
        desk = ws.desk

        def find():
            from sync.gradient_forms import gradient_source

            record = first_gradient_form(desk, records)
            if record is not None:
                return (str(record.id), model_spec(record)), None
            return None, gradient_source(desk, records)  # a team desk fetches it at the first Suggest

        def found(form_and_source) -> None:
            form, source = form_and_source
            if list(ws.session.records) == records:
                self.gradient_form.want(*(form or (None,)))
                self.gradient_source = source

        ws.db.submit(find, on_done=found, on_error=lambda error: log.warning(
            "no PyTorch form for word substitution", exc_info=error))

    # The writer's requests -----------------------------------------------------------------------
    def suggest(self) -> None:
        """Ctrl+Shift+G: checked suggestions for the text on screen (only the newest request is answered)."""
        ws, session = self.ws, self.session
        view = ws.view
        if not self.offered() or not session.helps():
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
        self._asked = inputs
        self._fetch_gradients()
        work = engine_work(definition, inputs, session.goal, label, ws.session.round.fooled_rule, self.lexicon,
                           text_label=content.label,  # contrast: the label the text has before the edit
                           gradient_form=self.gradient_form, slurs=session.slurs)
        reply = ws.inference.suggest(work, inputs, on_done=self._arrived, on_failed=self.failed)
        session.suggestions_requested(reply.request_id, inputs)
        self.refresh(bring_forward=True)

    def _fetch_gradients(self) -> None:
        """The first Suggest on a desk without the target's PyTorch form fetches it from the team's server;
        the suggestions asked for now come without word substitution, and are asked again when it is here."""
        source, fetch = self.gradient_source, self.gradient_fetch
        if source is None or not fetch.may_fetch(source.sha256):
            return
        records = list(self.ws.session.records)

        def arrived(form) -> None:
            if list(self.ws.session.records) != records:
                return  # other targets meanwhile: theirs is looked up by models_changed
            self.gradient_source = None
            self.gradient_form.want(*form)
            self.session.gradients_settled()
            self.refresh()
            if self._asked is not None and dict(self.ws.view.content().inputs) == self._asked \
                    and self.offered() and self.session.helps():
                self.suggest()  # the writer asked for this text: now with word substitution

        def failed(error: BaseException, missing: bool) -> None:
            if list(self.ws.session.records) == records:
                self.session.gradients_not_fetched(str(error) if missing else f"Word substitution: {error}")
                self.refresh()

        self.session.gradients_fetching(0, 0)
        fetch.start(source, on_done=arrived, on_failed=failed)

    def _fetch_progressed(self, done: int, total: int) -> None:
        self.session.gradients_fetching(done, total)
        self.refresh()

    def shutdown(self) -> None:
        """The window closes: a PyTorch form on its way stops (the next fetch resumes it)."""
        self.gradient_fetch.shutdown()

    def choose_goal(self, goal: Goal) -> None:
        self.session.goal_chosen(goal)
        self.refresh()

    def choose_contrast_label(self, label: str | None) -> None:
        self.session.contrast_label_chosen(label)
        self.refresh()

    def list_more(self) -> None:
        """The panel lists the next page of suggestions (a click, or Alt+↓ past the last one)."""
        self.session.list_more()
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

    # Deliveries ------------------------------------------------------------------------------------
    def _arrived(self, result: SuggestionResult) -> None:
        if self.session.suggestions_arrived(result.request_id, result.inputs, result.result):
            self.refresh(bring_forward=True)

    def failed(self, failure: InferenceFailure) -> None:
        self.session.suggestions_failed(f"No suggestions: {failure.message}")
        self.refresh()

    def _toggled(self, token: int, applied: bool) -> None:
        """The editor did (or redid) an application, or undid it: the example's record follows."""
        known = self.session.known(token)
        if known is None:
            return  # an application to an earlier example, reached by undo: it records nothing now
        create = self.ws.session
        if applied:
            self.session.reapplied(token)
            if create.assistant_on:
                self._previous[token] = create.suggestion_applied(known.generator, known.edit_type, known.text)
        else:
            self.session.unapplied(token)
            if token in self._previous:
                create.assistance_restored(self._previous.pop(token))
        self.refresh()

    # Showing ---------------------------------------------------------------------------------------
    def refresh(self, *, bring_forward: bool = False) -> None:
        ws, session = self.ws, self.session
        content, offered = ws.view.content(), self.offered()
        writing = ws.session.writing
        view = session.panel(content.inputs, content.label, offered=offered,
                             mode=writing.mode if writing is not None else None)
        if view.available and session.goal is Goal.CONTRAST:
            ws.view.set_contrast_choices(session.contrast_choices(content.label), view.contrast_label)
        ws.view.show_assist(view, bring_forward=bring_forward)

    def _say(self, text: str) -> None:
        self.session.notice(text)
        self.refresh(bring_forward=True)
