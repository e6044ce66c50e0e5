"""The model's part of the blur in reading views: the words the target model attributes
most to hate, asked of the inference service's explanation lane once an example is on screen, and
masked when they arrive. The word list's masks are shown at once (they come with the example's
view-model); nothing here runs on the writer's keystroke path."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from PySide6.QtCore import QObject

from app.core.assist.types import WordScore
from app.gui.inference import AttributionResult, InferenceFailure, InferenceService
from app.views.wellbeing import BlurView, hateful_label, with_model_words


class ModelWords(QObject):
    """Asks for one example's attributions at a time; a newer example's request replaces the older."""

    def __init__(self, inference: InferenceService | None, parent: QObject | None = None):
        super().__init__(parent)
        self.inference = inference
        self._pending: tuple[int, uuid.UUID, int, BlurView, Callable] | None = None
        if inference is not None:
            inference.attribution_ready.connect(self._arrived)
            inference.failed.connect(self._failed)

    def request(self, example_id: uuid.UUID, blur: BlurView | None, labels: tuple[str, ...],
                on_words: Callable[[uuid.UUID, BlurView], None]) -> None:
        """Ask for the model's words of the example's text (the one the target model reads alone:
        a single written text, or a perturbation's edit); ``on_words(example_id, blur)`` when they come."""
        self._pending = None
        label = hateful_label(labels)
        if self.inference is None or blur is None or not blur.masked or label is None or not blur.texts:
            return
        index = len(blur.texts) - 1  # the written text, or the pair's edited half
        request_id = self.inference.attribute_for_reading(blur.texts[index].text, target=label)
        self._pending = (request_id, example_id, index, blur, on_words)

    def cancel(self) -> None:
        self._pending = None

    def _arrived(self, result: AttributionResult) -> None:
        pending = self._pending
        if pending is None or pending[0] != result.request_id:
            return
        _request, example_id, index, blur, on_words = pending
        self._pending = None
        scores = [WordScore(w.text, w.start, w.end, w.score) for w in result.attribution.words if w.segment == 0]
        on_words(example_id, with_model_words(blur, {index: scores}))

    def _failed(self, failure: InferenceFailure) -> None:
        if self._pending is not None and failure.request_id == self._pending[0]:
            self._pending = None  # no model loaded, or it failed: the word list's masks stay
