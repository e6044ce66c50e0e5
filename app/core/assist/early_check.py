"""Checking some texts early, on a second thread, while the caller's thread makes the gradient pass.

The gradient pass (one PyTorch thread) and the generators leave the second core idle; the check
then runs the candidates on both. A target that runs every text of a batch alone (a dynamically
quantized ONNX form, ``row_by_row``; see local_models/backends/row_pool.py) gives a text the same
answer in any batch, on any thread, at any time: one run of the same session on the same unpadded
inputs, which is what ``predict_one`` runs. So while the pass runs, a helper thread checks the
texts most likely to be asked: the writer's own, then the candidates of the generators that need
no attributions (the rules), in the order the pipeline interleaves them. The check takes a text's
answer from here when this thread has it (the same bits it would compute) and computes the rest.
A guess that the generators do not make again costs one text's run and changes nothing.

The helper stops between texts when told (the check begins, or the call is stopped): a newer
request waits for at most the text in flight. Threads here inherit the caller's niceness (Linux),
so a niced assistant lane stays niced. Nothing here imports Qt.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.core.assist.base import GeneratorFn
from app.core.assist.types import Candidate, GenerationContext
from local_models.engine import Ensemble, EnsemblePrediction
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

ENABLED = True  # False: everything is checked after the generators (kept for the bench's side by side)


def answers_alone_in_any_batch(models: Ensemble) -> bool:
    """Whether every member runs a batch's texts one at a time, each alone and unpadded, so that a
    text's answer is the same checked alone now as in the check's batches later, bit for bit."""
    return all(getattr(engine.runtime, "row_by_row", False) and engine.batch_tolerance == 0
               for engine in models.engines)


class EarlyCheck:
    """``start(guesses)`` checks ``guesses()``'s texts one at a time on a helper thread until
    ``stop()``; ``stop()`` returns {input: prediction} for the texts it finished."""

    def __init__(self, models: Ensemble):
        self._models = models
        self._stopping = threading.Event()
        self._answers: dict[ModelInput, EnsemblePrediction] = {}
        self._thread: threading.Thread | None = None

    def start(self, guesses: Callable[[], Sequence[ModelInput]]) -> EarlyCheck:
        self._thread = threading.Thread(target=self._run, args=(guesses,), name="assist-early-check", daemon=True)
        self._thread.start()
        return self

    def _run(self, guesses: Callable[[], Sequence[ModelInput]]) -> None:
        try:
            for item in guesses():
                if self._stopping.is_set():
                    return
                if item not in self._answers:
                    (self._answers[item],) = self._models.predict([item])
        except Exception:  # the check computes whatever is missing and reports any failure itself
            log.debug("early check stopped", exc_info=True)

    def stop(self) -> dict[ModelInput, EnsemblePrediction]:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        return dict(self._answers)


def rule_guesses(context: GenerationContext, generators: Sequence[GeneratorFn], original: ModelInput,
                 interleave: Callable[[Sequence[Sequence[Candidate]], str, int], list[Candidate]],
                 with_written: Callable[[ModelInput, int, str], ModelInput], limit: int) -> list[ModelInput]:
    """The writer's text, then what the generators make without attributions, gradients or the
    model's label (``context`` stripped of them), interleaved as the pipeline interleaves, at most
    ``limit`` candidates. Generators that need what was stripped say so and give nothing here."""
    bare = replace(context, words=(), gradients=None, gradient_pass=None, model_label=None)
    made: list[list[Candidate]] = []
    for generate in generators:
        try:
            made.append(list(generate(bare)))
        except Exception:  # GeneratorUnavailable, or a failure the real run reports
            continue
    return [original, *(with_written(original, context.segment, c.text)
                        for c in interleave(made, context.text, limit))]


__all__ = ["ENABLED", "EarlyCheck", "answers_alone_in_any_batch", "rule_guesses"]
