"""The workspace's attributions and perturbations: explaining the text on screen, and the
original/edited pair a perturbation is compared by."""

from __future__ import annotations

import uuid

from app.core.domain import ModelOutput, Span
from app.core.services.target_models import model_input
from app.core.tasks.fooling import ensemble_label, mean_probabilities
from app.core.text import words
from app.gui.inference import AttributionResult, InferenceFailure
from app.views.create import (
    EditorContent,
    ExplainTarget,
    PairSide,
    PredictedView,
    attribution_changes,
    attribution_view,
    pair_view,
    written_segment,
)
from app.views.create_session import DraftRef, Original
from local_models.attribution import full_colour_scale


def words_scores(text: str, scored: list[tuple[int, int, float]]) -> list[tuple[str, float]]:
    """Scores of the model's word units, summed onto our own words by character overlap."""
    out = []
    for word in words(text):
        total = sum(score for start, end, score in scored if start < word.end and end > word.start)
        out.append((word.text, total))
    return out


class PairController:
    """Attributions and perturbations for a WorkspaceController: reads and changes its session,
    asks its inference service, and shows the results on its view."""

    def __init__(self, ws) -> None:
        self.ws = ws

    def explain(self, target_kind: ExplainTarget | str = ExplainTarget.PREDICTED) -> None:
        """Word attributions for the text on screen, toward the model's label or the annotator's.

        During a perturbation the original is explained first, toward the same label, so that
        the change per word can be shown.
        """
        session, view = self.ws.session, self.ws.view
        target_kind = ExplainTarget(target_kind)
        definition = session.definition
        if session.loaded is None or definition is None:
            view.clear_attribution("Attributions need a loaded target model.")
            return
        content = view.content()
        if not content.written(definition):
            view.clear_attribution("Write something first.")
            return
        target = content.label if target_kind is ExplainTarget.GOAL else None
        if len(definition.labels) == 2:
            target = definition.labels[0]  # one view: toward the other label is its mirror image
        elif target_kind is ExplainTarget.GOAL and not target:
            view.clear_attribution("Choose your label first, or explain the model's label.")
            return
        view.show_heatmap()
        original = session.original
        if session.explaining(target or self._predicted_label()):
            written = definition.written_inputs[0].name
            self._attribute(model_input(definition, {**content.inputs, written: original.text}), original.target)
            return
        self._attribute(model_input(definition, dict(content.inputs)), target)

    def _attribute(self, inputs, target: str | None) -> None:
        """Ask for the writer's attributions; a newer request (the next keystroke's) cancels this one."""
        self.ws.inference.attribute(inputs, target=target, on_done=self.attributed, on_failed=self._failed)

    def _predicted_label(self) -> str | None:
        last = self.ws.session.last_prediction
        return last.prediction.label if last else None

    def pin(self, pinned: bool) -> None:
        self.ws.session.pin(pinned)
        if pinned:
            self.explain(self.ws.view.explain_target())

    def _failed(self, failure: InferenceFailure) -> None:
        self.ws.view.clear_attribution(f"No attributions: {failure.message}")
        self.ws.session.prediction_failed()

    def attributed(self, result: AttributionResult) -> None:
        session, view = self.ws.session, self.ws.view
        attribution, definition = result.attribution, session.definition
        segment = written_segment(definition)
        original = session.original
        if original is not None and session.explaining_original:
            session.original_attributed(words_scores(  # raw: both texts on one scale, not each on its own
                original.text, [(w.start, w.end, w.raw) for w in attribution.words if w.segment == segment]))
            # now the edit, toward the same label
            self._attribute(model_input(definition, dict(view.content().inputs)), original.target)
            return
        texts = result.inputs if isinstance(result.inputs, tuple) else (result.inputs,)
        view.show_attribution(attribution_view(definition, attribution, texts))
        if original is not None:
            session.edit_attributed(words_scores(
                texts[segment], [(w.start, w.end, w.raw) for w in attribution.words if w.segment == segment]),
                attribution.units)
            self.show_pair()

    def start_from_text(self, text: str, label: str | None = None, *, origin: dict | None = None,
                        note: str | None = None) -> None:
        """Open the editor on a text from elsewhere (a case the model failed in an evaluation), with
        the model's prediction and attributions: a starting point for a new adversarial example."""
        session, view = self.ws.session, self.ws.view
        definition = session.definition
        if session.round is None or definition is None or not definition.written_inputs:
            self.ws._problem("This task has no open round to write an example in.")
            return
        self.ws.save_draft()
        session.perturbation_ended()
        person = self.ws.desk.current_person_id
        session.use_draft(DraftRef(session.task_code, session.round.number, person,
                                   origin=origin or {"kind": "evaluation"}))
        name = definition.written_inputs[0].name
        label = label if label in (definition.labels or []) else None
        view.show_content(EditorContent({name: text}, label), record_undo=True)
        view.set_metadata({}, label)
        self.ws.assist.example_started()
        if note:
            view.show_message(note)
        self.ws._text_edited()
        self.explain()

    def start_perturbation(self, example_id: uuid.UUID) -> None:
        """Open the editor on a copy of a submitted example, to make a minimal edit that flips its label."""
        self.ws.save_draft()
        self.load_original(example_id, start=True)

    def load_original(self, example_id: uuid.UUID, start: bool = False) -> None:
        examples, session, view = self.ws.desk.examples, self.ws.session, self.ws.view

        def show(example) -> None:
            if start:
                if session.round is None:
                    self.ws._problem("This task has no open round to add a perturbation to.")
                    return
                person = self.ws.desk.current_person_id
                session.use_draft(DraftRef(session.task_code, session.round.number, person,
                                           context_id=example.context_id, perturbation_of=example.id,
                                           origin={"kind": "perturbation", "of": str(example.id)}))
                view.show_content(EditorContent(dict(example.inputs), example.true_label,
                                                Span.from_json(example.answer)), record_undo=True)
                view.set_metadata({}, example.true_label)
                self.ws.assist.example_started()
            prediction = None
            if example.outputs:
                outputs = [ModelOutput(o.model_id, o.model_sha256, o.label, o.probabilities) for o in example.outputs]
                prediction = PredictedView(ensemble_label(outputs), mean_probabilities(outputs))
            session.perturbation_started(Original(example.id, example.text, example.true_label, prediction))
            view.show_message("Perturbation: make a minimal edit that flips the true label, then choose "
                              "the new label.")
            self.show_pair(bring_forward=True)
            self.ws._text_edited()

        self.ws.db.submit(lambda: examples.get(example_id), on_done=show, on_error=self.ws._show_error)

    def show_pair(self, *, bring_forward: bool = False) -> None:
        session = self.ws.session
        original, definition = session.original, session.definition
        content = self.ws.view.content()
        edited_text = "\n".join(content.inputs.get(f.name, "") for f in definition.written_inputs)
        prediction = None
        last = session.last_prediction
        if last is not None and session.matches(content.inputs):
            prediction = PredictedView(last.prediction.label, last.prediction.probabilities)
        changes, scale = None, None
        if original.attribution is not None and original.edited_attribution is not None:
            changes = attribution_changes(original.attribution, original.edited_attribution)
            scale = full_colour_scale([change.delta for change in changes])
        self.ws.view.show_pair(
            pair_view(definition.labels, original.text, edited_text, PairSide(original.label, original.prediction),
                      PairSide(content.label, prediction), original.target, changes, scale, original.units),
            bring_forward=bring_forward)
