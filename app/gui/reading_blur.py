"""The model's part of the blur in reading views: the words the target model attributes
most to hate, asked of the inference service's explanation lane once an example is on screen, and
masked when they arrive. The word list's masks are shown at once (they come with the example's
view-model); nothing here runs on the writer's keystroke path."""

from __future__ import annotations

import uuid
from collections.abc import Callable

from PySide6.QtCore import QObject

from app.core.text import WordScore
from app.gui.inference import AttributionResult, InferenceService, Reply
from app.views.wellbeing import BlurView, hateful_label, with_model_words


class ModelWords(QObject):
    """Asks for one example's attributions at a time; a newer example's request replaces (cancels) the older."""

    def __init__(self, inference: InferenceService | None, parent: QObject | None = None):
        super().__init__(parent)
        self.inference = inference
        self._reply: Reply | None = None

    def request(self, example_id: uuid.UUID, blur: BlurView | None, labels: tuple[str, ...],
                on_words: Callable[[uuid.UUID, BlurView], None]) -> None:
        """Ask for the model's words of the example's text (the one the target model reads alone:
        a single written text, or a perturbation's edit); ``on_words(example_id, blur)`` when they come."""
        self.cancel()
        label = hateful_label(labels)
        if self.inference is None or blur is None or not blur.masked or label is None or not blur.texts:
            return
        index = len(blur.texts) - 1  # the written text, or the pair's edited half

        def arrived(result: AttributionResult) -> None:
            scores = [WordScore(w.text, w.start, w.end, w.score) for w in result.attribution.words if w.segment == 0]
            on_words(example_id, with_model_words(blur, {index: scores}))

        # failed: no model loaded, or it failed; the word list's masks stay
        self._reply = self.inference.attribute_for_reading(blur.texts[index].text, target=label, on_done=arrived,
                                                           on_failed=lambda _failure: None)

    def cancel(self) -> None:
        if self._reply is not None:
            self._reply.cancel()
            self._reply = None
