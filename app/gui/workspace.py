"""The Create page's controller: translates between the page's state (a Qt-free CreateSession,
app/views/create_session.py), the database worker, the inference service and the view. Every
database call runs on the serial worker and every model call on the inference service. Round
following is in round_follow.py, attributions and perturbations in perturbation.py.
"""

from __future__ import annotations

import logging
import time
import uuid

from PySide6.QtCore import QObject, QTimer, Signal

from app.core.assist.provenance import read_assistance
from app.core.desk import Desk
from app.core.domain import FooledRule, Span
from app.core.errors import DynadeskError, InvalidExample
from app.core.services.target_models import TargetModelError, model_input, model_spec, to_model_output
from app.core.tasks.content import Content, check_content
from app.core.tasks.fooling import is_fooled
from app.gui.assistant import AssistantController
from app.gui.assistant_sessions import AssistantSessions
from app.gui.inference import InferenceFailure, InferenceService, LoadedModels, PredictionResult
from app.gui.perturbation import PairController
from app.gui.quality_guard import DuplicateGuard
from app.gui.round_follow import RoundFollower
from app.gui.worker import SerialWorker
from app.views.create import TYPE_TO_SEE, EditorContent, ExplainTarget, prediction_view, task_view
from app.views.create_session import CreateSession, DraftRef, LoadOutcome, Submit
from widgets.workspace_view import WorkspaceView

log = logging.getLogger(__name__)
NO_MODEL = "This round has no target model yet: a lead can attach one (Round menu)."
_UNKNOWN = object()  # a starting label not looked up yet


class WorkspaceController(QObject):
    status_changed = Signal(str)  # models, device and latency, for the status bar
    example_stored = Signal(object)  # the stored example's id

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, view: WorkspaceView, undo_stack):
        super().__init__(view)
        self.desk, self.db, self.inference, self.view, self.undo_stack = desk, db, inference, view, undo_stack
        self.session = CreateSession()
        self.no_model_message = NO_MODEL  # what the prediction panel says while the round has no target
        self._keep_shown = False  # the models being loaded replace a form of the same model
        self._autosave = QTimer(self, singleShot=True, interval=desk.settings.draft_autosave_ms)
        self._autosave.timeout.connect(self.save_draft)
        self.rounds = RoundFollower(self)
        self.pairs = PairController(self)
        self.guard = DuplicateGuard(self)  # novelty while typing, near-duplicate warning at submit
        self.assistant = AssistantSessions(self)  # the writer's session per round and its assistant arm
        self.assist = AssistantController(self)  # the assistant's panel: suggested edits, checked against the target

        view.content_changed.connect(self._content_changed)
        view.text_edited.connect(self._text_edited)
        view.next_context_requested.connect(self.next_context)
        view.prompt_requested.connect(self.prompt)
        view.submit_requested.connect(self.submit)
        view.discard_requested.connect(self.discard)
        view.metadata_confirmed.connect(self._store)
        view.explain_requested.connect(self.pairs.explain)
        view.pinned_changed.connect(self.pairs.pin)
        view.warning_acknowledged.connect(self._acknowledge_warning)
        view.restore_draft_requested.connect(self._restore_offered)
        view.discard_drafts_requested.connect(self._discard_offered)
        view.move_requested.connect(self.rounds.move_to_current_round)
        view.keep_requested.connect(self.rounds.keep_as_draft)

    task_code = property(lambda self: self.session.task_asked)  # the task chosen, open or being opened
    definition = property(lambda self: self.session.definition)
    round = property(lambda self: self.session.round)
    records = property(lambda self: self.session.records)
    loaded = property(lambda self: self.session.loaded)
    draft = property(lambda self: self.session.draft)
    original = property(lambda self: self.session.original)
    last_prediction = property(lambda self: self.session.last_prediction)
    last_outputs = property(lambda self: self.session.last_outputs)
    frozen_outputs = property(lambda self: self.session.frozen_outputs)
    pending_round = property(lambda self: self.session.pending_round)

    def _current_prediction_matches(self) -> bool:
        return self.session.matches(self.view.content().inputs)

    def set_task(self, task_code: str) -> None:
        """Open a task: its definition, open round, target models and starting label are looked
        up on the database worker, then the page is laid out for them."""
        self.save_draft()
        self.session.task_chosen(task_code)
        tasks, models, rounds, person = self.desk.tasks, self.desk.models, self.desk.rounds, self.desk.current_person_id

        def find():
            definition = tasks.definition_by_code(task_code)
            try:
                current = tasks.round(task_code)
            except DynadeskError:
                return definition, None, [], None
            label = rounds.starting_label(current.id, person, previous=None, after_submit=False) \
                if definition.labels else None
            return definition, current, models.round_models(current.id), label

        self.db.submit_latest("workspace.task", find, on_done=lambda found: self._task_found(task_code, *found),
                              on_error=self._show_error)

    def _task_found(self, task_code: str, definition, current, records: list, label: str | None) -> None:
        session, view = self.session, self.view
        session.open_task(task_code, definition, current, records)
        view.show_task(task_view(definition))
        self.assist.task_opened()
        if current is None:
            view.show_goal("")
            view.set_locked(True, f"{definition.name} has no open round; a lead can open one (Round menu).")
            return
        view.show_goal(f"<b>Round {current.number}</b> · {current.goal_message or definition.description}")
        self.assistant.begin(current)
        self._load_models()
        warned = definition.content_warning and task_code not in self.desk.settings.acknowledged_warnings
        view.show_warning(f"<b>Content warning.</b> {definition.content_warning}" if warned else None)
        view.set_locked(bool(warned), "Read the content warning and the guidelines first." if warned else "")
        self._new_example(after_submit=False, label=label)
        self._offer_drafts()
        self.guard.task_opened()

    def set_no_model_message(self, message: str) -> None:
        """What the prediction panel says while the round has no target model (the first start's progress)."""
        self.no_model_message = message

    def _load_models(self, *, keep_shown: bool = False) -> None:
        """Load the open round's target models (the session's records). ``keep_shown``: the same
        model in another form; the prediction on screen stays, marked out of date, until it answers."""
        session = self.session
        session.models_requested()
        self._keep_shown = False
        if not session.records:
            self.view.clear_prediction(self.no_model_message)
            self.status_changed.emit("No target model")
            return
        try:
            specs = [model_spec(record) for record in session.records]
        except TargetModelError as exc:
            self.view.clear_prediction(str(exc))
            return
        if keep_shown:
            self._keep_shown = True
            self.view.set_prediction_stale(True)
        else:
            self.view.clear_prediction("Loading the target model…")
        self.status_changed.emit("Loading " + ", ".join(r.name for r in session.records) + "…")
        self.request_models(specs)

    def request_models(self, specs: list) -> int:
        """Ask the inference service for these target models; returns the load's request id. A newer
        load cancels this one, so only the newest models asked for are shown as loaded."""
        return self.inference.load(specs, on_done=self._models_loaded, on_failed=self._load_failed).request_id

    def reload_models(self, *, keep_shown: bool = False) -> None:
        """The round's target models changed: load them, keeping what is on screen (``keep_shown``:
        also the prediction, until the new models answer; for another form of the same model)."""
        if self.session.round is None:
            return
        models, round_id = self.desk.models, self.session.round.id

        def loaded(records: list) -> None:
            if self.session.round is not None and self.session.round.id == round_id:
                self.session.targets_changed(records)
                self._load_models(keep_shown=keep_shown)

        self.db.submit_latest("workspace.models", lambda: models.round_models(round_id), on_done=loaded,
                              on_error=self._show_error)

    def follow_rounds(self) -> None:
        """The task's rounds may have changed: see RoundFollower.follow."""
        self.rounds.follow()

    def explain(self, target_kind: ExplainTarget | str = ExplainTarget.PREDICTED) -> None:
        """Word attributions for the text on screen: see PairController.explain."""
        self.pairs.explain(target_kind)

    def start_from_text(self, text: str, label: str | None = None, *, origin: dict | None = None,
                        note: str | None = None) -> None:
        """Open the editor on a text from elsewhere: see PairController.start_from_text."""
        self.pairs.start_from_text(text, label, origin=origin, note=note)

    def start_perturbation(self, example_id: uuid.UUID) -> None:
        """Open the editor on a copy of a submitted example: see PairController.start_perturbation."""
        self.pairs.start_perturbation(example_id)

    def writer_renamed(self) -> None:
        """The same writer now works under the profile the sync server knows: the example on screen
        is theirs (else it would be stored under the old profile, and never sent)."""
        examples, person = self.desk.examples, self.desk.current_person_id
        ref = self.session.writer_renamed(person)
        if ref is None:
            return

        def give():
            if ref.id is not None:
                examples.give_draft(ref.id, person)

        self.db.submit(give, on_error=self._show_error)

    def _acknowledge_warning(self) -> None:
        settings, code = self.desk.settings, self.session.task_code
        if code not in settings.acknowledged_warnings:
            settings.acknowledged_warnings = [*settings.acknowledged_warnings, code]
            self.desk.save_settings()
        self.view.show_warning(None)
        self.view.set_locked(False)
        self.view.focus_editor()

    def _new_example(self, *, after_submit: bool, previous_label: str | None = None, label=_UNKNOWN) -> None:
        """A fresh example in the open round, on screen at once. Its starting label, unless given
        (or the task has none), is looked up on the database worker and chosen when it arrives."""
        session, person = self.session, self.desk.current_person_id
        draft = session.new_example(person, after_submit=after_submit)
        self.view.offer_move(None)  # a new example belongs to the open round
        labelled = bool(session.definition.labels)
        self._show_new_example(after_submit, label if labelled and label is not _UNKNOWN else None)
        if not labelled or label is not _UNKNOWN:
            return
        rounds, round_id = self.desk.rounds, session.round.id

        def chosen(found: str | None) -> None:
            if found is None or session.draft is not draft:
                return  # no starting label, or another example is on screen by now
            self.view.show_content(EditorContent({}, found))
            if not self.view.content().written(session.definition):
                session.writing_restarted()  # choosing it for the writer is no time spent writing

        self.db.submit_latest(
            "workspace.example",
            lambda: rounds.starting_label(round_id, person, previous=previous_label, after_submit=after_submit),
            on_done=chosen, on_error=self._show_error)

    def _show_new_example(self, after_submit: bool, label: str | None) -> None:
        definition = self.session.definition
        current = self.view.content()
        written = {f.name: "" for f in definition.written_inputs}
        inputs = {**(current.inputs if after_submit else {}), **written}
        # Clearing is undoable, so the text of the example just stored is never out of reach.
        self.view.show_content(EditorContent(inputs, label), record_undo=after_submit)
        self.view.set_metadata({}, label)
        self.session.writing_restarted()
        self.assist.example_started()
        if not after_submit and definition.context_inputs:
            self.next_context()
        self.view.focus_editor()

    def next_context(self) -> None:
        session = self.session
        if session.round is None:
            return
        rounds, round_id, person = self.desk.rounds, session.round.id, self.desk.current_person_id

        def show(context) -> None:
            if context is None:
                self.view.set_status("This round has no contexts yet: a lead can import them (Round menu).")
                return
            session.use_draft(DraftRef(session.task_code, session.round.number, person, context_id=context.id))
            self.view.show_context([spec.name for spec in session.definition.context_inputs], context.text)

        self.db.submit(lambda: rounds.next_context(round_id, person), on_done=show, on_error=self._show_error)

    def prompt(self) -> None:
        """The prompt condition: start from a sentence of the round's prompts, and edit it."""
        session = self.session
        rounds, round_id, person = self.desk.rounds, session.round.id, self.desk.current_person_id

        def show(context) -> None:
            if context is None:
                self.view.set_status("This round has no prompts yet: a lead can import them (Round menu).")
                return
            session.use_draft(DraftRef(session.task_code, session.round.number, person, context_id=context.id,
                                       origin={"kind": "prompt", "context_id": str(context.id), "text": context.text}))
            name = session.definition.written_inputs[0].name
            self.view.show_content(EditorContent({name: context.text}), record_undo=True)

        self.db.submit(lambda: rounds.next_context(round_id, person), on_done=show, on_error=self._show_error)

    def _content_changed(self, content: EditorContent) -> None:
        session = self.session
        session.text_changed(time.monotonic())
        self.view.set_metadata_label(content.label)
        self._show_fooled(content)
        self.assist.refresh()  # the suggestions shown may no longer be for this text
        if session.original is not None:
            self.pairs.show_pair()  # a label change alone (Alt+N) must show in the pair's summary at once
        if session.draft is not None:
            self._autosave.start()

    def save_draft(self) -> None:
        """Store what the editor holds, exactly as typed (runs after a short pause in typing)."""
        self._autosave.stop()
        session = self.session
        if session.draft is None or session.definition is None:
            return
        content = self.view.content()
        if not content.written(session.definition):
            return  # nothing written yet: no draft
        ref, examples, elapsed = session.draft, self.desk.examples, session.clock.ms
        inputs, label, answer, meta = dict(content.inputs), content.label, content.answer, self.view.metadata()
        assistance = ref.assistance  # as it is now (frozen): the worker may run after the next change

        def save():
            if ref.id is None:
                draft = examples.start_draft(ref.author_id, ref.task_code, ref.round_number, context_id=ref.context_id,
                                             perturbation_of=ref.perturbation_of, origin=ref.origin)
                ref.id = draft.id
            examples.save_draft(ref.id, inputs=inputs, true_label=label, answer=answer, meta=meta,
                                time_spent_ms=elapsed, assistance=assistance)

        self.db.submit(save, on_error=self._show_error)

    def hold_autosave(self) -> None:
        """No autosave until the next change (the draft is being moved or stored)."""
        self._autosave.stop()

    def _offer_drafts(self) -> None:
        examples, tasks, person = self.desk.examples, self.desk.tasks, self.desk.current_person_id
        task_id = self.session.round.task_id

        def find():
            drafts = [d for d in examples.drafts(person) if d.task_id == task_id and (d.text.strip() or d.true_label)]
            return [(d, tasks.round_by_id(d.round_id).number) for d in drafts]

        def offer(drafts) -> None:
            self.session.drafts_offered(drafts)
            if not drafts:
                self.view.offer_drafts(None)
                return
            newest = drafts[0][0]
            more = f" (and {len(drafts) - 1} older)" if len(drafts) > 1 else ""
            snippet = " ".join(newest.text.split())[:80]
            self.view.offer_drafts(f"You have an unfinished example from {newest.updated_at.astimezone():%d %b %H:%M}"
                                   f"{more}: “{snippet}”")

        self.db.submit(find, on_done=offer, on_error=self._show_error)

    def _restore_offered(self) -> None:
        session, view = self.session, self.view
        offered = session.take_offered()
        if offered is None:
            return
        draft, number = offered
        view.offer_drafts(None)
        session.use_draft(DraftRef(session.task_code, number, draft.author_id, context_id=draft.context_id,
                                   perturbation_of=draft.perturbation_of, origin=draft.origin, id=draft.id,
                                   assistance=read_assistance(draft.assistance)))
        view.show_content(EditorContent(dict(draft.inputs), draft.true_label, Span.from_json(draft.answer)))
        view.set_metadata(draft.meta or {}, draft.true_label)
        session.writing_resumed(draft.time_spent_ms)
        self.assist.example_started()
        if draft.perturbation_of:
            self.pairs.load_original(draft.perturbation_of)
        if session.round is not None and number != session.round.number:
            self.rounds.offer_move(number)
        else:
            view.offer_move(None)
        self._text_edited()

    def _discard_offered(self) -> None:
        examples, drafts = self.desk.examples, [draft for draft, _number in self.session.offered]
        self.session.drafts_offered([])
        self.view.offer_drafts(None)
        self.db.submit(lambda: [examples.discard_draft(d.id) for d in drafts], on_error=self._show_error)

    def discard(self) -> None:
        ref, examples = self.session.draft, self.desk.examples
        self._autosave.stop()
        if ref is not None:
            self.db.submit(lambda: ref.id is not None and examples.discard_draft(ref.id), on_error=self._show_error)
        self.session.perturbation_ended()
        self.view.clear_pair()
        self._new_example(after_submit=True)

    def _text_edited(self) -> None:
        """Every keystroke asks for a prediction; the service keeps only the newest request."""
        session, view = self.session, self.view
        if not session.can_predict():
            return
        content = view.content()
        if not content.written(session.definition):
            view.clear_prediction(TYPE_TO_SEE)
            session.prediction_cleared()
            return
        view.set_prediction_stale(True)
        reply = self.inference.predict(model_input(session.definition, dict(content.inputs)),
                                       on_done=self._predicted, on_failed=self._prediction_failed)
        session.prediction_requested(reply.request_id, content.inputs)
        view.set_attribution_stale(True)
        if session.pinned:
            self.pairs.explain(view.explain_target())

    def _models_loaded(self, loaded: LoadedModels) -> None:
        outcome = self.session.models_loaded(loaded)
        if outcome is LoadOutcome.STALE:
            return  # the models of the round that is no longer open
        if outcome is LoadOutcome.SWITCH:
            self.rounds.switch_round()
        self.assist.models_changed()  # after a switch: the new round's target
        details = ", ".join(f"{name} on {device}" for name, device in zip(loaded.names, loaded.devices))
        self.status_changed.emit(details)
        if not self._keep_shown:  # else the old form's answer stays, marked out of date, until the new one's
            self.view.clear_prediction(TYPE_TO_SEE)
        self._keep_shown = False
        self._text_edited()

    def _predicted(self, result: PredictionResult) -> None:
        session = self.session
        if not session.prediction_arrived(result):
            return  # e.g. an answer of a target that is no longer the round's
        try:
            session.outputs_judged([to_model_output(member, record)
                                    for member, record in zip(result.prediction.members, session.records)])
        except TargetModelError as exc:
            self.view.clear_prediction(str(exc))
            return
        self._show_fooled(self.view.content())
        loaded = session.loaded
        self.status_changed.emit(
            f"{', '.join(loaded.names)} on {', '.join(sorted(set(loaded.devices)))} · "
            f"last prediction {result.prediction.latency_ms:.1f} ms")
        if session.original is not None:
            self.pairs.show_pair()
        if session.take_pending_submit():
            self.submit()

    def _fooled(self, content: EditorContent) -> bool | None:
        session = self.session
        if not session.last_outputs or (not content.label and not content.answer):
            return None
        try:
            return is_fooled(session.definition, session.last_outputs, content.label, content.answer,
                             FooledRule(session.round.fooled_rule))
        except ValueError:
            return None

    def _show_fooled(self, content: EditorContent) -> None:
        session = self.session
        result, loaded = session.last_prediction, session.loaded
        if result is None or session.definition is None or loaded is None:
            return
        self.view.show_prediction(prediction_view(session.definition, result.prediction, loaded.names,
                                                  loaded.devices, content, self._fooled(content)))

    def _load_failed(self, failure: InferenceFailure) -> None:
        if self.session.load_failed():  # the round changes all the same; its model's problem is shown
            self.rounds.switch_round()
        self.view.clear_prediction(f"The target model could not be loaded: {failure.message}")
        self.status_changed.emit("Target model failed to load")
        self.session.prediction_failed()

    def _prediction_failed(self, failure: InferenceFailure) -> None:
        self.view.clear_prediction(f"No prediction: {failure.message}")
        self.session.prediction_failed()

    def submit(self) -> None:
        """Ctrl+Enter: check the example, freeze the outputs for exactly this text, ask for metadata."""
        session, view = self.session, self.view
        if view.form_shown():
            view.confirm_metadata()
            return
        if self.guard.warning_shown():  # Ctrl+Enter again on the near-duplicate warning: submit anyway
            self.guard.submit_anyway()
            return
        if session.definition is None or session.round is None or not view.can_submit():
            return
        content = view.content()
        try:
            check_content(session.definition, Content(dict(content.inputs), content.label, content.answer),
                          require_metadata=False)
        except InvalidExample as exc:
            self._problem(str(exc))
            return
        outcome = session.submit_requested(content.inputs)
        if outcome is Submit.WAIT_ROUND:
            self._problem(f"Round {session.pending_round.number} is open — loading its target; your example is "
                          "kept as a draft.")
        elif outcome is Submit.MOVE:
            self.rounds.offer_move(session.draft.round_number)
            self._problem(f"Round {session.draft.round_number} is no longer open: move the example to round "
                          f"{session.round.number} or keep it as a draft (above).")
        elif outcome is Submit.NOT_LOADED:
            self._problem("The target model is not loaded yet; your example is kept as a draft.")
        elif outcome is Submit.WAIT_PREDICTION:  # the prediction for this very text is on its way
            view.set_status("Waiting for the model's prediction of this text…")
            self._text_edited()
        else:
            self.guard.check_then(lambda: self._ask_metadata(content))

    def _ask_metadata(self, content: EditorContent) -> None:
        view = self.view
        view.set_metadata_label(content.label if self.session.definition.labels else None)
        view.show_form(True)
        view.set_status("The model was fooled. Explain why, then store it." if self._fooled(content) else
                        "Explain your label, then store it.")

    def _store(self, meta: dict) -> None:
        session, content = self.session, self.view.content()
        ref, examples, outputs = session.draft, self.desk.examples, session.frozen_outputs or []
        elapsed = session.clock.ms
        payload = Content(dict(content.inputs), content.label, content.answer, meta)
        label, assistance = content.label, ref.assistance

        def store():
            if ref.id is None:
                return examples.create(ref.author_id, ref.task_code, payload, outputs, round_number=ref.round_number,
                                       context_id=ref.context_id, perturbation_of=ref.perturbation_of,
                                       time_spent_ms=elapsed, origin=ref.origin, assistance=assistance)
            return examples.submit(ref.id, outputs, payload, time_spent_ms=elapsed, assistance=assistance)

        def stored(example) -> None:
            self.view.show_form(False)
            verdict = ("and it fooled the model" if example.model_fooled else "but the model was not fooled"
                       ) if example.model_fooled is not None else "(no target model)"
            pair = f" as a perturbation ({example.edit_distance} word(s) changed)" if example.perturbation_of else ""
            self.view.show_message(f"Stored{pair}, {verdict}.")
            self.example_stored.emit(example.id)
            self.guard.stored()
            session.submitted()
            self.view.clear_pair()
            self._new_example(after_submit=True, previous_label=label)

        self._autosave.stop()
        self.db.submit(store, on_done=stored, on_error=self._store_failed)

    def _store_failed(self, error: BaseException) -> None:
        self.view.show_form(True)
        if isinstance(error, DynadeskError):
            self.view.show_metadata_problem(str(error))
        else:
            self._show_error(error)

    def _problem(self, text: str) -> None:
        self.view.set_status(f"<span style='color:#b3261e'>{text}</span>")

    def _show_error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            self._problem(str(error))
        else:
            log.error("workspace error", exc_info=(type(error), error, error.__traceback__))
            self._problem(f"Unexpected error: {error}. Your draft is kept; details are in the log.")

