"""The workspace's attributions and perturbations: explaining the text on screen, and the
original/edited pair a perturbation is compared by."""

from __future__ import annotations

import uuid

from app.domain import ModelOutput
from app.gui.inference import AttributionResult
from app.gui.workspace_records import DraftRef, Original
from app.services.target_models import model_input
from app.tasks.fooling import ensemble_label, mean_probabilities
from app.text import diff_pieces, word_alignment, word_edits, words
from local_models.attribution import full_colour_scale


def words_scores(text: str, scored: list[tuple[int, int, float]]) -> list[tuple[str, float]]:
    """Scores of the model's word units, summed onto our own words by character overlap."""
    out = []
    for word in words(text):
        total = sum(score for start, end, score in scored if start < word.end and end > word.start)
        out.append((word.text, total))
    return out


class PairController:
    """Attributions and perturbations for a WorkspaceController, whose state it reads and sets."""

    def __init__(self, ws) -> None:
        self.ws = ws
        self.attribution_for = "original"  # during a perturbation, which text an attribution is for

    def explain(self, target_kind: str = "predicted") -> None:
        """Word attributions for the text on screen, toward the model's label or the annotator's.

        During a perturbation the original is explained first, toward the same label, so that
        the change per word can be shown.
        """
        if self.ws.loaded is None or self.ws.definition is None:
            self.ws.view.attribution.clear("Attributions need a loaded target model.")
            return
        content = self.ws.view.editor.content()
        if not any(content["inputs"].get(f.name, "").strip() for f in self.ws.definition.written_inputs):
            self.ws.view.attribution.clear("Write something first.")
            return
        target = content["label"] if target_kind == "goal" else None
        if len(self.ws.definition.labels) == 2:
            target = self.ws.definition.labels[0]  # one view: toward the other label is its mirror image
        elif target_kind == "goal" and not target:
            self.ws.view.attribution.clear("Choose your label first, or explain the model's label.")
            return
        self.ws.view.side.setCurrentWidget(self.ws.view.attribution)
        original = self.ws.original
        if original is not None:
            original.target = target or self._predicted_label()
            original.attribution = original.edited_attribution = None
            self.attribution_for = "original"
            written = self.ws.definition.written_inputs[0].name
            self.ws.inference.attribute(model_input(self.ws.definition, {**content["inputs"], written: original.text}),
                                        target=original.target)
            return
        self.attribution_for = "edited"
        self.ws.inference.attribute(model_input(self.ws.definition, content["inputs"]), target=target)

    def _predicted_label(self) -> str | None:
        return self.ws.last_prediction.prediction.label if self.ws.last_prediction else None

    def pin(self, pinned: bool) -> None:
        self.ws.pinned = pinned
        if pinned:
            self.explain(self.ws.view.attribution.target_choice.currentData())

    def attributed(self, result: AttributionResult) -> None:
        attribution = result.attribution
        if self.ws.original is not None and self.attribution_for == "original":
            self.ws.original.attribution = words_scores(  # raw: both texts on one scale, not each on its own
                self.ws.original.text, [(w.start, w.end, w.raw) for w in attribution.words if w.segment == self._written_segment()])
            self.attribution_for = "edited"  # now the edit, toward the same label
            self.ws.inference.attribute(model_input(self.ws.definition, self.ws.view.editor.content()["inputs"]),
                                        target=self.ws.original.target)
            return
        names = self._segment_names()
        segments = []
        texts = result.inputs if isinstance(result.inputs, tuple) else (result.inputs,)
        for index, text in enumerate(texts):
            segments.append({"name": names[index] if index < len(names) else f"Text {index + 1}", "text": text,
                             "words": [{"text": w.text, "start": w.start, "end": w.end, "score": w.score, "raw": w.raw,
                                        "seen": w.seen} for w in attribution.words if w.segment == index]})
        self.ws.view.attribution.show_attribution({
            "segments": segments, "target": attribution.target, "predicted": attribution.predicted,
            "method": attribution.method + (f" ({attribution.n_steps} steps)" if attribution.n_steps else ""),
            "latency_ms": attribution.latency_ms, "truncated": attribution.truncated,
            "convergence_delta": attribution.convergence_delta,
            "scale": attribution.scale, "units": attribution.units,
        })
        if self.ws.original is not None:
            written = texts[self._written_segment()]
            self.ws.original.edited_attribution = words_scores(
                written, [(w.start, w.end, w.raw) for w in attribution.words if w.segment == self._written_segment()])
            self.ws.original.units = attribution.units
            self.show_pair()

    def _segment_names(self) -> list[str]:
        definition = self.ws.definition
        written = " / ".join(f.label for f in definition.written_inputs)
        if definition.is_extractive:
            return [written, definition.context_inputs[0].label]
        if definition.context_inputs:
            return [definition.context_inputs[0].label, written]
        return [written]

    def _written_segment(self) -> int:
        return 1 if self.ws.definition.context_inputs and not self.ws.definition.is_extractive else 0

    # --- perturbations ----------------------------------------------------------------------

    def start_from_text(self, text: str, label: str | None = None, *, origin: dict | None = None,
                        note: str | None = None) -> None:
        """Open the editor on a text from elsewhere (a case the model failed in an evaluation), with
        the model's prediction and attributions: a starting point for a new adversarial example."""
        if self.ws.round is None or self.ws.definition is None or not self.ws.definition.written_inputs:
            self.ws._problem("This task has no open round to write an example in.")
            return
        self.ws.save_draft()
        self.ws.original = None
        person = self.ws.desk.current_person_id
        self.ws.draft = DraftRef(self.ws.task_code, self.ws.round.number, person, origin=origin or {"kind": "evaluation"})
        name = self.ws.definition.written_inputs[0].name
        label = label if label in (self.ws.definition.labels or []) else None
        self.ws.view.editor.set_content({"inputs": {name: text}, "label": label, "answer": None}, record_undo=True)
        self.ws.view.form.set_values({})
        self.ws.view.form.set_label(label)
        if note:
            self.ws.view.message.show_message(note, "OK")
        self.ws._text_edited()
        self.explain()

    def start_perturbation(self, example_id: uuid.UUID) -> None:
        """Open the editor on a copy of a submitted example, to make a minimal edit that flips its label."""
        self.ws.save_draft()
        self.load_original(example_id, start=True)

    def load_original(self, example_id: uuid.UUID, start: bool = False) -> None:
        examples = self.ws.desk.examples

        def load():
            return examples.get(example_id)

        def show(example) -> None:
            if start:
                if self.ws.round is None:
                    self.ws._problem("This task has no open round to add a perturbation to.")
                    return
                person = self.ws.desk.current_person_id
                self.ws.draft = DraftRef(self.ws.task_code, self.ws.round.number, person, context_id=example.context_id,
                                         perturbation_of=example.id, origin={"kind": "perturbation", "of": str(example.id)})
                self.ws.view.editor.set_content({"inputs": dict(example.inputs), "label": example.true_label,
                                                 "answer": example.answer}, record_undo=True)
                self.ws.view.form.set_values({})
            outputs = example.outputs
            prediction = None
            if outputs:
                probabilities = mean_probabilities([ModelOutput(o.model_id, o.model_sha256, o.label, o.probabilities)
                                                    for o in outputs])
                prediction = {"label": ensemble_label([ModelOutput(o.model_id, o.model_sha256, o.label, o.probabilities)
                                                       for o in outputs]), "probabilities": probabilities}
            self.ws.original = Original(example.id, example.text, example.true_label, prediction)
            self.ws.view.side.setCurrentWidget(self.ws.view.perturbation)
            self.ws.view.message.show_message("Perturbation: make a minimal edit that flips the true label, then choose "
                                              "the new label.", "OK")
            self.show_pair()
            self.ws._text_edited()

        self.ws.db.submit(load, on_done=show, on_error=self.ws._show_error)

    def show_pair(self) -> None:
        original = self.ws.original
        content = self.ws.view.editor.content()
        edited_text = "\n".join(content["inputs"].get(f.name, "") for f in self.ws.definition.written_inputs)
        prediction = None
        if self.ws.last_prediction is not None and self.ws._current_prediction_matches():
            prediction = {"label": self.ws.last_prediction.prediction.label,
                          "probabilities": self.ws.last_prediction.prediction.probabilities}
        changes, scale = None, None
        if original.attribution is not None and original.edited_attribution is not None:
            changes = [{"word": word, "before": before, "after": after}
                       for word, before, after in word_alignment(original.attribution, original.edited_attribution)]
            changes.sort(key=lambda c: -abs((c["after"] or 0.0) - (c["before"] or 0.0)))  # biggest moves first
            scale = full_colour_scale([(c["after"] or 0.0) - (c["before"] or 0.0) for c in changes])
        self.ws.view.perturbation.show_pair({
            "labels": list(self.ws.definition.labels), "target": original.target,
            "diff": diff_pieces(original.text, edited_text), "edit_distance": word_edits(original.text, edited_text)[1],
            "original": {"label": original.label, "prediction": original.prediction},
            "edited": {"label": content["label"], "prediction": prediction},
            "attribution_change": changes, "scale": scale, "units": original.units,
        })
