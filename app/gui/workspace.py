"""The annotation workspace's controller: drafts, live predictions and submission, with every
database call on the serial worker and every model call on the inference service. Round following
is in round_follow.py, attributions and perturbations in perturbation.py.
"""

from __future__ import annotations

import logging
import time
import uuid

from PySide6.QtCore import QObject, QTimer, Signal

from app.desk import Desk
from app.domain import FooledRule, ModelOutput, Span
from app.errors import DynadeskError, InvalidExample
from app.gui.inference import InferenceFailure, InferenceService, LoadedModels, PredictionResult
from app.gui.perturbation import PairController
from app.gui.round_follow import RoundFollower
from app.gui.worker import SerialWorker
from app.gui.workspace_records import DraftRef, Original
from app.services.examples import Content, check_content
from app.services.target_models import TargetModelError, model_input, model_spec, to_model_output
from app.tasks.definition import TaskDefinition
from app.tasks.fooling import is_fooled, span_f1
from widgets.workspace_view import WorkspaceView

log = logging.getLogger(__name__)
IDLE_GAP_S = 60  # pauses longer than this do not count as time spent writing


def editor_spec(definition: TaskDefinition) -> dict:
    return {
        "inputs": [{"name": f.name, "label": f.label, "kind": f.kind.value, "placeholder": f.placeholder,
                    "max_chars": f.max_chars} for f in definition.inputs],
        "labels": list(definition.labels),
        "extractive": definition.is_extractive,
        "span_of": definition.answer.span_of if definition.answer else None,
        "prompt_enabled": bool(definition.prompt and definition.prompt.enabled),
    }


def form_fields(definition: TaskDefinition) -> list[dict]:
    return [{"name": f.name, "label": f.label, "kind": f.kind.value, "choices": list(f.choices),
             "allow_other": f.allow_other, "required": f.required, "help": f.help,
             "applies_to": list(f.applies_when.label) if f.applies_when else None}
            for f in definition.metadata]


class WorkspaceController(QObject):
    status_changed = Signal(str)  # models, device and latency, for the status bar
    example_stored = Signal(object)  # the stored example's id

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, view: WorkspaceView, undo_stack):
        super().__init__(view)
        self.desk, self.db, self.inference, self.view, self.undo_stack = desk, db, inference, view, undo_stack
        self.definition: TaskDefinition | None = None
        self.task_code: str | None = None
        self.round = None
        self.records = []  # the round's target models, in load order
        self.loaded: LoadedModels | None = None
        self.draft: DraftRef | None = None
        # A round change noticed (after a sync or a lead's change): its round and target models,
        # and the load request of those models; the switch waits for that load to answer.
        self.pending_round = None
        self.pending_records: list = []
        self._pending_load: int | None = None
        self.original: Original | None = None
        self.last_prediction: PredictionResult | None = None
        self.last_outputs: list[ModelOutput] = []
        self.prediction_text: dict | None = None  # the inputs the last prediction is for
        self.pending_submit = False
        self.frozen_outputs: list[ModelOutput] | None = None
        self.pinned = False
        self._active_s = 0.0
        self._last_change = None
        self._autosave = QTimer(self, singleShot=True, interval=desk.settings.draft_autosave_ms)
        self._autosave.timeout.connect(self.save_draft)
        self.rounds = RoundFollower(self)
        self.pairs = PairController(self)

        editor = view.editor
        editor.content_changed.connect(self._content_changed)
        editor.text_edited.connect(self._text_edited)
        editor.next_context_requested.connect(self.next_context)
        editor.prompt_requested.connect(self.prompt)
        view.submit_requested.connect(self.submit)
        view.discard_requested.connect(self.discard)
        view.form.confirmed.connect(self._store)
        view.form.cancelled.connect(lambda: self.view.show_form(False))
        view.attribution.explain_requested.connect(self.pairs.explain)
        view.attribution.pinned_changed.connect(self.pairs.pin)
        view.warning.primary.clicked.connect(self._acknowledge_warning)
        view.draft_offer.primary.clicked.connect(self._restore_offered)
        view.draft_offer.secondary.clicked.connect(self._discard_offered)
        view.move_offer.primary.clicked.connect(self.rounds.move_to_current_round)
        view.move_offer.secondary.clicked.connect(self.rounds.keep_as_draft)
        inference.model_loaded.connect(self._models_loaded)
        inference.prediction_ready.connect(self._predicted)
        inference.attribution_ready.connect(self.pairs.attributed)
        inference.failed.connect(self._inference_failed)
        self._offered: list = []
        self.no_model_message = "This round has no target model yet: a lead can attach one (Round menu)."

    # --- task and round -------------------------------------------------------------------

    def set_task(self, task_code: str) -> None:
        desk = self.desk
        self.save_draft()
        self.task_code = task_code
        self.definition = definition = desk.tasks.definition_by_code(task_code)
        self.pending_round, self.pending_records, self._pending_load = None, [], None
        view = self.view
        view.round_notice.hide()
        view.move_offer.hide()
        view.editor.configure(editor_spec(definition))
        view.form.configure(form_fields(definition))
        view.show_form(False)
        view.guidelines.setMarkdown(definition.guidelines or "_This task has no guidelines._")
        view.prediction.clear("Type to see what the model predicts.")
        view.attribution.clear()
        view.attribution.set_labels(list(definition.labels))
        view.perturbation.clear()
        view.message.hide()
        self.original = None
        try:
            self.round = desk.tasks.round(task_code)
        except DynadeskError:
            self.round = None
            view.goal.setText("")
            view.set_locked(True, f"{definition.name} has no open round; a lead can open one (Round menu).")
            self.records = []
            return
        goal = self.round.goal_message or definition.description
        view.goal.setText(f"<b>Round {self.round.number}</b> · {goal}")
        self._load_models()
        warned = definition.content_warning and task_code not in desk.settings.acknowledged_warnings
        if warned:
            view.warning.show_message(f"<b>Content warning.</b> {definition.content_warning}", "I understand")
            view.side.setCurrentWidget(view.guidelines)
        else:
            view.warning.hide()
        view.set_locked(bool(warned), "Read the content warning and the guidelines first." if warned else "")
        self._new_example(after_submit=False)
        self._offer_drafts()

    def _load_models(self) -> None:
        self.records = self.desk.models.round_models(self.round.id)
        self.loaded = None
        self.last_prediction = None
        if not self.records:
            self.view.prediction.clear(self.no_model_message)
            self.status_changed.emit("No target model")
            return
        try:
            specs = [model_spec(record) for record in self.records]
        except TargetModelError as exc:
            self.view.prediction.clear(str(exc))
            return
        self.view.prediction.clear("Loading the target model…")
        self.status_changed.emit("Loading " + ", ".join(r.name for r in self.records) + "…")
        self._pending_load = None
        self.inference.load(specs)

    def reload_models(self) -> None:
        """The round's target models changed: load them, keeping what is on screen."""
        if self.round is not None:
            self._load_models()

    def follow_rounds(self) -> None:
        """The task's rounds may have changed: see RoundFollower.follow."""
        self.rounds.follow()

    def explain(self, target_kind: str = "predicted") -> None:
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
        ref, examples, person = self.draft, self.desk.examples, self.desk.current_person_id
        if ref is None or ref.author_id == person:
            return
        ref.author_id = person

        def give():
            if ref.id is not None:
                examples.give_draft(ref.id, person)

        self.db.submit(give, on_error=self._show_error)

    def _acknowledge_warning(self) -> None:
        settings = self.desk.settings
        if self.task_code not in settings.acknowledged_warnings:
            settings.acknowledged_warnings = [*settings.acknowledged_warnings, self.task_code]
            self.desk.save_settings()
        self.view.warning.hide()
        self.view.set_locked(False)
        self.view.editor.focus_first_written()

    # --- a new example ----------------------------------------------------------------------

    def _new_example(self, *, after_submit: bool, previous_label: str | None = None) -> None:
        person = self.desk.current_person_id
        context_id = self.draft.context_id if (after_submit and self.draft) else None
        self.draft = DraftRef(self.task_code, self.round.number, person, context_id=context_id)
        self.view.move_offer.hide()  # a new example belongs to the open round
        label = self.desk.rounds.starting_label(self.round.id, person, previous=previous_label,
                                                after_submit=after_submit) if self.definition.labels else None
        current = self.view.editor.content()
        written = {f.name: "" for f in self.definition.written_inputs}
        inputs = {**(current["inputs"] if after_submit else {}), **written}
        # Clearing is undoable, so the text of the example just stored is never out of reach.
        self.view.editor.set_content({"inputs": inputs, "label": label, "answer": None}, record_undo=after_submit)
        self.view.form.set_values({})
        self.view.form.set_label(label)
        self._active_s, self._last_change = 0.0, None
        self.pending_submit, self.frozen_outputs = False, None
        if not after_submit and self.definition.context_inputs:
            self.next_context()
        self.view.editor.focus_first_written()

    def next_context(self) -> None:
        if self.round is None:
            return
        rounds, round_id, person = self.desk.rounds, self.round.id, self.desk.current_person_id

        def show(context) -> None:
            if context is None:
                self.view.status.setText("This round has no contexts yet: a lead can import them (Round menu).")
                return
            self.draft = DraftRef(self.task_code, self.round.number, person, context_id=context.id)
            for spec in self.definition.context_inputs:
                self.view.editor.set_context(spec.name, context.text)

        self.db.submit(lambda: rounds.next_context(round_id, person), on_done=show, on_error=self._show_error)

    def prompt(self) -> None:
        """The prompt condition: start from a sentence of the round's prompts, and edit it."""
        rounds, round_id, person = self.desk.rounds, self.round.id, self.desk.current_person_id

        def show(context) -> None:
            if context is None:
                self.view.status.setText("This round has no prompts yet: a lead can import them (Round menu).")
                return
            self.draft = DraftRef(self.task_code, self.round.number, person, context_id=context.id,
                                  origin={"kind": "prompt", "context_id": str(context.id), "text": context.text})
            name = self.definition.written_inputs[0].name
            self.view.editor.set_content({"inputs": {name: context.text}}, record_undo=True)

        self.db.submit(lambda: rounds.next_context(round_id, person), on_done=show, on_error=self._show_error)

    # --- drafts -----------------------------------------------------------------------------

    def _content_changed(self, content: dict) -> None:
        now = time.monotonic()
        if self._last_change is not None and now - self._last_change < IDLE_GAP_S:
            self._active_s += now - self._last_change
        self._last_change = now
        self.view.form.set_label(content["label"])
        self._show_fooled()
        if self.original is not None:
            self.pairs.show_pair()  # a label change alone (Alt+N) must show in the pair's summary at once
        if self.draft is not None:
            self._autosave.start()

    def save_draft(self) -> None:
        """Store what the editor holds, exactly as typed (runs after a short pause in typing)."""
        self._autosave.stop()
        if self.draft is None or self.definition is None:
            return
        content = self.view.editor.content()
        if not any(content["inputs"].get(f.name, "").strip() for f in self.definition.written_inputs):
            return  # nothing written yet: no draft
        ref, examples, elapsed = self.draft, self.desk.examples, int(self._active_s * 1000)
        answer = Span.from_json(content["answer"])
        meta = self.view.form.values()

        def save():
            if ref.id is None:
                draft = examples.start_draft(ref.author_id, ref.task_code, ref.round_number, context_id=ref.context_id,
                                             perturbation_of=ref.perturbation_of, origin=ref.origin)
                ref.id = draft.id
            examples.save_draft(ref.id, inputs=content["inputs"], true_label=content["label"], answer=answer,
                                meta=meta, time_spent_ms=elapsed)

        self.db.submit(save, on_error=self._show_error)

    def _offer_drafts(self) -> None:
        examples, person, task_id = self.desk.examples, self.desk.current_person_id, self.round.task_id

        def find():
            return [d for d in examples.drafts(person) if d.task_id == task_id and (d.text.strip() or d.true_label)]

        def offer(drafts) -> None:
            self._offered = drafts
            if drafts:
                newest = drafts[0]
                more = f" (and {len(drafts) - 1} older)" if len(drafts) > 1 else ""
                snippet = " ".join(newest.text.split())[:80]
                self.view.draft_offer.show_message(
                    f"You have an unfinished example from {newest.updated_at.astimezone():%d %b %H:%M}{more}: "
                    f"“{snippet}”", "Restore it", "Discard")
            else:
                self.view.draft_offer.hide()

        self.db.submit(find, on_done=offer, on_error=self._show_error)

    def _restore_offered(self) -> None:
        if not self._offered:
            return
        draft = self._offered.pop(0)
        self.view.draft_offer.hide()
        number = self.desk.tasks.round_by_id(draft.round_id).number
        self.draft = DraftRef(self.task_code, number, draft.author_id, context_id=draft.context_id,
                              perturbation_of=draft.perturbation_of, origin=draft.origin, id=draft.id)
        self.view.editor.set_content({"inputs": dict(draft.inputs), "label": draft.true_label, "answer": draft.answer})
        self.view.form.set_values(draft.meta or {})
        self._active_s = draft.time_spent_ms / 1000
        if draft.perturbation_of:
            self.pairs.load_original(draft.perturbation_of)
        if self.round is not None and number != self.round.number:
            self.rounds.offer_move(number)
        else:
            self.view.move_offer.hide()
        self._text_edited()

    def _discard_offered(self) -> None:
        examples, drafts = self.desk.examples, list(self._offered)
        self._offered = []
        self.view.draft_offer.hide()
        self.db.submit(lambda: [examples.discard_draft(d.id) for d in drafts], on_error=self._show_error)

    def discard(self) -> None:
        ref, examples = self.draft, self.desk.examples
        self._autosave.stop()
        if ref is not None:
            self.db.submit(lambda: ref.id is not None and examples.discard_draft(ref.id), on_error=self._show_error)
        self.original = None
        self.view.perturbation.clear()
        self._new_example(after_submit=True)

    # --- live predictions -------------------------------------------------------------------

    def _text_edited(self) -> None:
        """Every keystroke asks for a prediction; the service keeps only the newest request."""
        if not self.records or self.loaded is None:
            return
        inputs = self.view.editor.content()["inputs"]
        if not any(inputs.get(f.name, "").strip() for f in self.definition.written_inputs):
            self.view.prediction.clear("Type to see what the model predicts.")
            self.last_prediction, self.prediction_text = None, None
            return
        self.view.prediction.set_stale(True)
        self.inference.predict(model_input(self.definition, inputs))
        self.view.attribution.set_stale(True)
        if self.pinned:
            self.pairs.explain(self.view.attribution.target_choice.currentData())

    def _models_loaded(self, loaded: LoadedModels) -> None:
        if self.pending_round is not None:
            if loaded.request_id != self._pending_load:
                return  # the models of the round that is no longer open
            self.loaded = loaded
            self.rounds.switch_round()
        self.loaded = loaded
        details = ", ".join(f"{name} on {device}" for name, device in zip(loaded.names, loaded.devices))
        self.status_changed.emit(details)
        self.view.prediction.clear("Type to see what the model predicts.")
        self._text_edited()

    def _predicted(self, result: PredictionResult) -> None:
        if self.definition is None or self.loaded is None:
            return  # e.g. an answer of a target that is no longer the round's
        self.last_prediction = result
        self.prediction_text = self.view.editor.content()["inputs"]
        try:
            self.last_outputs = [to_model_output(member, record)
                                 for member, record in zip(result.prediction.members, self.records)]
        except TargetModelError as exc:
            self.view.prediction.clear(str(exc))
            return
        self._show_fooled()
        self.status_changed.emit(
            f"{', '.join(self.loaded.names)} on {', '.join(sorted(set(self.loaded.devices)))} · "
            f"last prediction {result.prediction.latency_ms:.1f} ms")
        if self.original is not None:
            self.pairs.show_pair()
        if self.pending_submit:
            self.pending_submit = False
            self.submit()

    def _fooled(self, content: dict) -> bool | None:
        if not self.last_outputs or (not content["label"] and not content["answer"]):
            return None
        rule = FooledRule(self.round.fooled_rule)
        try:
            return is_fooled(self.definition, self.last_outputs, content["label"], Span.from_json(content["answer"]), rule)
        except ValueError:
            return None

    def _show_fooled(self) -> None:
        result = self.last_prediction
        if result is None or self.definition is None:
            return
        content = self.view.editor.content()
        members = result.prediction.members
        data = {"labels": list(self.definition.labels), "goal": content["label"], "fooled": self._fooled(content),
                "latency_ms": result.prediction.latency_ms, "device": ", ".join(sorted(set(self.loaded.devices))),
                "truncated": any(m.truncated for m in members),
                "members": [{"name": name, "label": m.label, "probabilities": m.probabilities,
                             "answer": m.answer.text if m.answer else None}
                            for name, m in zip(self.loaded.names, members)],
                "combined": {"label": result.prediction.label, "probabilities": result.prediction.probabilities,
                             "answer": members[0].answer.text if members and members[0].answer else None}}
        if self.definition.is_extractive and content["answer"] and data["combined"]["answer"] is not None:
            data["answer_f1"] = span_f1(data["combined"]["answer"], content["answer"]["text"])
        self.view.prediction.show_prediction(data)
        if self._current_prediction_matches():
            self.view.prediction.set_stale(False)

    def _current_prediction_matches(self) -> bool:
        return self.prediction_text == self.view.editor.content()["inputs"]

    def _inference_failed(self, failure: InferenceFailure) -> None:
        if failure.cancelled or failure.operation in ("job", "batch"):  # evaluation work reports its own
            return
        if failure.operation == "load":
            self.loaded = None
            if self.pending_round is not None:  # the round changes all the same; its model's problem is shown
                self.rounds.switch_round()
            self.view.prediction.clear(f"The target model could not be loaded: {failure.message}")
            self.status_changed.emit("Target model failed to load")
        elif failure.operation == "attribute":
            self.view.attribution.clear(f"No attributions: {failure.message}")
        else:
            self.view.prediction.clear(f"No prediction: {failure.message}")
        self.pending_submit = False

    # --- submitting -------------------------------------------------------------------------

    def submit(self) -> None:
        """Ctrl+Enter: check the example, freeze the outputs for exactly this text, ask for metadata."""
        if self.view.form_shown():
            self.view.form.confirm()
            return
        if self.definition is None or self.round is None or not self.view.submit_button.isEnabled():
            return
        content = self.view.editor.content()
        try:
            check_content(self.definition, Content(content["inputs"], content["label"], Span.from_json(content["answer"])),
                          require_metadata=False)
        except InvalidExample as exc:
            self._problem(str(exc))
            return
        if self.pending_round is not None:
            self._problem(f"Round {self.pending_round.number} is open — loading its target; your example is "
                          "kept as a draft.")
            return
        if self.draft is not None and self.draft.round_number != self.round.number:
            self.rounds.offer_move(self.draft.round_number)
            self._problem(f"Round {self.draft.round_number} is no longer open: move the example to round "
                          f"{self.round.number} or keep it as a draft (above).")
            return
        if self.records:
            if self.loaded is None:
                self._problem("The target model is not loaded yet; your example is kept as a draft.")
                return
            if not self._current_prediction_matches():
                self.pending_submit = True  # the prediction for this very text is on its way
                self.view.status.setText("Waiting for the model's prediction of this text…")
                self._text_edited()
                return
        self.frozen_outputs = list(self.last_outputs) if self.records else []
        self.view.form.set_label(content["label"] if self.definition.labels else None)
        self.view.show_form(True)
        fooled = self._fooled(content)
        self.view.status.setText("The model was fooled. Explain why, then store it." if fooled else
                                 "Explain your label, then store it.")

    def _store(self, meta: dict) -> None:
        content = self.view.editor.content()
        ref, examples, outputs = self.draft, self.desk.examples, self.frozen_outputs or []
        elapsed = int(self._active_s * 1000)
        payload = Content(content["inputs"], content["label"], Span.from_json(content["answer"]), meta)
        label = content["label"]

        def store():
            if ref.id is None:
                return examples.create(ref.author_id, ref.task_code, payload, outputs, round_number=ref.round_number,
                                       context_id=ref.context_id, perturbation_of=ref.perturbation_of,
                                       time_spent_ms=elapsed, origin=ref.origin)
            return examples.submit(ref.id, outputs, payload, time_spent_ms=elapsed)

        def stored(example) -> None:
            self.view.show_form(False)
            verdict = ("and it fooled the model" if example.model_fooled else "but the model was not fooled"
                       ) if example.model_fooled is not None else "(no target model)"
            pair = f" as a perturbation ({example.edit_distance} word(s) changed)" if example.perturbation_of else ""
            self.view.message.show_message(f"Stored{pair}, {verdict}.", "OK")
            self.example_stored.emit(example.id)
            self.original = None
            self.view.perturbation.clear()
            self._new_example(after_submit=True, previous_label=label)

        self._autosave.stop()
        self.db.submit(store, on_done=stored, on_error=self._store_failed)

    def _store_failed(self, error: BaseException) -> None:
        self.view.show_form(True)
        if isinstance(error, DynadeskError):
            self.view.form.problem.setText(str(error))
        else:
            self._show_error(error)

    # --- messages ---------------------------------------------------------------------------

    def _problem(self, text: str) -> None:
        self.view.status.setText(f"<span style='color:#b3261e'>{text}</span>")

    def _show_error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            self._problem(str(error))
        else:
            log.error("workspace error", exc_info=(type(error), error, error.__traceback__))
            self._problem(f"Unexpected error: {error}. Your draft is kept; details are in the log.")
