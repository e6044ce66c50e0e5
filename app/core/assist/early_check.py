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
request waits for at most the text in flight. It runs nicer than the caller (``HELPER_NICENESS``),
to take an idle core rather than the gradient pass's. Nothing here imports Qt.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace

from app.core.assist.base import GeneratorFn
from app.core.assist.types import Candidate, GenerationContext
from local_models.engine import Ensemble, EnsemblePrediction
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

# Off: measured side by side on the shared 2-core bench machine (bench "assist", 120 texts, four
# runs turn about, load 2.4-4.7 from other programs) it saved a core's time only when one was idle
# (whole call p95 -8 ms in one run) and otherwise cost it (+3 to +50 ms p95, +4 % CPU: the ~5 texts
# it can guess, the writer's and the rules', run beside the gradient pass and slow it). The bench
# keeps measuring it ("early check" row).
ENABLED = False
# The helper runs this much nicer than the caller, so that where the cores are busy it yields to
# the gradient pass the call waits for; measured, it still slowed the pass (median 25 -> 33 ms,
# against 46 -> 65 ms at the caller's niceness in a busier run)
HELPER_NICENESS = 5


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
        _be_nicer(HELPER_NICENESS)
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


def _be_nicer(by: int) -> None:
    """This thread (Linux keeps a niceness per thread) ``by`` nicer; elsewhere nothing."""
    if not sys.platform.startswith("linux") or by <= 0:
        return
    try:
        me = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, me, min(19, os.getpriority(os.PRIO_PROCESS, me) + by))
    except (AttributeError, OSError):
        pass


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
