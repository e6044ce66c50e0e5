"""The assistant's pipeline: generate candidate edits, check every one against the target, rank.

    result = suggest(models, definition, inputs, goal=Goal.FOOL, writer_label="hate")
    result.suggestions      # CheckedSuggestion, fooling ones first, then by how far they moved the model,
                            # the best of each edit type first (assist.ranking)
    result.original         # the model's probabilities for the writer's own text
    result.unavailable      # {Generator: Unavailable}: why a generator gave nothing

Only the written part of the input is edited (the hypothesis of an NLI pair; the context stays).
Every candidate, and the writer's own text, go through the round's target (or ensemble) in a few
batches (the caller's checkpoint between them), and "fools" is decided by the task's one definition (``app.core.tasks.fooling.is_fooled``)
with the round's fooled rule. Runs on the caller's thread (``assist.early_check``, off, would check
a few texts on a helper thread during the gradient pass); nothing here imports Qt.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.core.assist import early_check
from app.core.assist.base import GeneratorFn, GeneratorUnavailable, generator_of
from app.core.assist.early_check import EarlyCheck, answers_alone_in_any_batch, rule_guesses
from app.core.assist.ranking import rank
from app.core.assist.types import (
    Candidate,
    CheckedSuggestion,
    GenerationContext,
    Generator,
    Goal,
    Unavailable,
)
from app.core.domain import FooledRule, ModelOutput
from app.core.tasks.definition import InputKind, TaskDefinition
from app.core.tasks.fooling import is_fooled
from app.core.text import WordScore, word_edits, words
from local_models.engine import Ensemble, EnsemblePrediction, InferenceEngine
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

DEFAULT_LIMIT = 64
# A text longer than this is not a sentence someone is writing: suggestions would take seconds.
MAX_WRITTEN_CHARS = 2000
# Texts per batch of the check, with the caller's checkpoint between batches: a newer request
# waits for at most one batch (~8 ms for the default int8 model on 2 threads). A row-by-row
# (int8) target answers each text alone (or, with per-text batches, the same in any batch), so
# batches of any size give the same answers.
CHECK_CHUNK = 16
ATTRIBUTION_METHOD = "ablation"  # without a gradient form: one batched forward pass on the target
# True: when the gradient pass aims at another label than the model's, word ablation on the target
# gives the attributions (the way before the second backward; kept for the bench's side by side)
ABLATION_WHEN_DISAGREEING = False


class AssistError(ValueError):
    """The assistant cannot work on this input; the message says what is wrong and what to do."""


@dataclass(frozen=True)
class SuggestionSet:
    text: str  # the written text the suggestions edit
    goal: Goal
    writer_label: str | None
    original: Mapping[str, float]  # the target's (ensemble mean) probabilities for the writer's text
    original_label: str | None
    suggestions: tuple[CheckedSuggestion, ...]
    unavailable: Mapping[Generator, Unavailable] = field(default_factory=dict)
    generated: int = 0  # distinct candidates the generators made, before the cap
    timings_ms: Mapping[str, float] = field(default_factory=dict)  # attributions, generate, check, total
    checked_early: int = 0  # of the texts checked, how many while the gradient pass ran (early_check)

    @property
    def fooling(self) -> tuple[CheckedSuggestion, ...]:
        return tuple(s for s in self.suggestions if s.fools)


# Inputs: which part the writer wrote -------------------------------------------------------

def written_segment(definition: TaskDefinition) -> int:
    """Which text of the model's input the writer wrote: 0 for a single text, 1 for (context, text)."""
    if definition.is_extractive:
        raise AssistError(f"The assistant suggests edits for labelled tasks; '{definition.code}' asks for an "
                          "answer span. Write the question yourself.")
    has_context = any(f.kind == InputKind.CONTEXT for f in definition.inputs)
    return 1 if has_context else 0


def written_text(inputs: ModelInput, segment: int) -> str:
    if isinstance(inputs, str):
        if segment != 0:
            raise AssistError("This task reads a context and a written text; give both (context, text).")
        return inputs
    if not isinstance(inputs, tuple) or len(inputs) != 2 or not all(isinstance(x, str) for x in inputs):
        raise AssistError("The input is a text or a (context, text) pair of strings.")
    if segment == 0:
        raise AssistError("This task reads one written text, not a pair.")
    return inputs[segment]


def with_written(inputs: ModelInput, segment: int, text: str) -> ModelInput:
    """``inputs`` with its written part replaced by ``text`` (the context kept as it is)."""
    if isinstance(inputs, str):
        return text
    first, second = inputs
    return (text, second) if segment == 0 else (first, text)


# Attributions ------------------------------------------------------------------------------

def word_scores(attributions: Any, segment: int) -> tuple[WordScore, ...]:
    """The written part's words from a ``local_models.attribution.Attribution`` or a sequence of
    ``WordScore`` (taken as they are)."""
    if attributions is None:
        return ()
    scored = getattr(attributions, "words", attributions)
    out = []
    for w in scored:
        if isinstance(w, WordScore):
            out.append(w)
        elif getattr(w, "segment", segment) == segment and getattr(w, "seen", True):
            out.append(WordScore(w.text, w.start, w.end, float(w.score)))
    return tuple(out)


def _attributions(models: Ensemble, gradients: InferenceEngine | None, inputs: ModelInput, segment: int,
                  aim: str | None) -> tuple[tuple[WordScore, ...], str | None, Any]:
    """Word scores toward the model's label when the caller has none, and the model's label.

    With a gradient form: gradient × input from the forward pass that word substitution needs
    anyway (kept for it); when that pass aims at another label than the model's (the model already
    disagrees with the writer), from the gradient toward the model's label through the same forward
    (a second backward, about 11 ms on a tweet, or none for a model of two labels; ablation takes 10-90 ms). Otherwise: word ablation on the target,
    one batched pass."""
    from local_models.hotflip import first_order

    gradient_pass = None
    if gradients is not None and gradients.supports_gradients:
        try:
            gradient_pass = first_order(gradients, inputs, segment=segment, target=aim,
                                        also_predicted=not ABLATION_WHEN_DISAGREEING)
        except Exception:  # substitution will say why; attributions come from ablation then
            log.warning("no gradient pass for the assistant", exc_info=True)
        toward = gradient_pass if gradient_pass is None or gradient_pass.target == gradient_pass.predicted \
            else gradient_pass.toward_predicted
        if toward is not None:
            scores = tuple(WordScore(u.text, u.start, u.end, score) for u, score in toward.word_scores())
            return scores, toward.target, gradient_pass
    try:
        attribution = models.engines[0].attribute(inputs, method=ATTRIBUTION_METHOD,
                                                  segments=None if isinstance(inputs, str) else [segment])
    except Exception:  # a model that cannot explain still gets checked suggestions
        log.warning("no attributions for the assistant", exc_info=True)
        return (), None, gradient_pass
    return word_scores(attribution, segment), attribution.predicted, gradient_pass


# Checking ----------------------------------------------------------------------------------

def _outputs(prediction: EnsemblePrediction) -> list[ModelOutput]:
    """What ``is_fooled`` judges: one output per member, as an example stores them."""
    return [ModelOutput(model_id=uuid.uuid5(uuid.NAMESPACE_OID, m.model_sha), model_sha256=m.model_sha,
                        label=m.label or "", probabilities=dict(m.probabilities))
            for m in prediction.members]


def _interleave(per_generator: Sequence[Sequence[Candidate]], original: str, limit: int) -> list[Candidate]:
    """One from each generator in turn (each gives its best first), the writer's own text and
    duplicates dropped, at most ``limit``: no generator crowds out the others."""
    seen = {original}
    out: list[Candidate] = []
    queues = [list(c) for c in per_generator]
    position = 0
    while len(out) < limit and any(position < len(q) for q in queues):
        for queue in queues:
            if position < len(queue) and len(out) < limit:
                candidate = queue[position]
                if candidate.text not in seen and candidate.text.strip():
                    seen.add(candidate.text)
                    out.append(candidate)
        position += 1
    return out


def check(models: Ensemble, definition: TaskDefinition, inputs: ModelInput, segment: int,
          candidates: Sequence[Candidate], *, goal: Goal, writer_label: str | None,
          rule: FooledRule = FooledRule.MEAN, checkpoint: Callable[[], None] | None = None,
          chunk: int = CHECK_CHUNK, known: Mapping[ModelInput, EnsemblePrediction] | None = None,
          ) -> tuple[EnsemblePrediction, list[CheckedSuggestion]]:
    """The writer's text and every candidate through ``models``, ``chunk`` texts per batch with
    ``checkpoint`` called between the batches (a newer request stops a long check); ranked suggestions.
    ``known``: answers already computed for some of these inputs, each alone (``early_check``: only
    for targets whose batches answer every text as alone, so they are the answers a batch gives)."""
    original_text = written_text(inputs, segment)
    everything = [inputs, *(with_written(inputs, segment, c.text) for c in candidates)]
    known = known or {}
    batch = [item for item in everything if item not in known]
    predictions: list[EnsemblePrediction] = []
    if batch and batch[0] is inputs and any(engine.batch_tolerance > 0 for engine in models.engines):
        # a batch answers within a tolerance of each text alone: the writer's text runs alone, so
        # its probabilities are the ones its prediction shows
        predictions, batch = models.predict(batch[:1]), batch[1:]
    for first in range(0, len(batch), max(1, chunk)):
        if (first or predictions) and checkpoint is not None:
            checkpoint()
        predictions += models.predict(batch[first:first + chunk])
    computed = iter(predictions)
    answers = [known[item] if item in known else next(computed) for item in everything]
    original, rest = answers[0], answers[1:]
    checked = []
    for candidate, prediction in zip(candidates, rest):
        truth = candidate.claimed_label or writer_label if goal == Goal.CONTRAST else writer_label
        # without a label to judge by (a contrast pair whose new label is not known yet), the
        # movement is measured on the model's own label and nothing counts as fooling
        judged = truth if truth is not None else original.label
        fools = bool(truth is not None and is_fooled(definition, _outputs(prediction), true_label=truth, rule=rule))
        shift = float(original.probabilities.get(judged or "", 0.0) - prediction.probabilities.get(judged or "", 0.0))
        edits, _ = word_edits(original_text, candidate.text)
        checked.append(CheckedSuggestion(candidate, dict(prediction.probabilities), prediction.label or "",
                                         fools, shift, tuple(edits)))
    # fooling first, then by the largest move, the best of each edit type before a second of any
    return original, rank(checked, text_label=writer_label if goal == Goal.FOOL else None)


# The pipeline ------------------------------------------------------------------------------

def suggest(models: Ensemble | InferenceEngine, definition: TaskDefinition, inputs: ModelInput, *, goal: Goal | str,
            writer_label: str | None, attributions: Any = None, lexicon: Any = None,
            gradients: InferenceEngine | None = None, limit: int = DEFAULT_LIMIT,
            rule: FooledRule | str = FooledRule.MEAN,
            generators: Sequence[GeneratorFn] | None = None,
            checkpoint: Callable[[], None] | None = None, text_label: str | None = None,
            slurs: bool = False) -> SuggestionSet:
    """Checked, ranked suggestions for the writer's text.

    ``models``: the round's target (an Ensemble, or one engine). ``inputs``: what the model reads
    (``app.core.services.target_models.model_input``). ``writer_label``: fool: the label the writer
    gave; contrast: the label the edit should make true (candidates may claim their own).
    ``text_label``: the writer's label for the text as it is now (contrast: before the edit; fool:
    the same as ``writer_label``, its default).
    ``attributions``: word scores toward the model's label (an ``Attribution`` or ``WordScore``s);
    when not given: gradient × input from ``gradients``' one backward pass (which HotFlip reuses),
    else word ablation on the target. ``gradients``: an engine with gradients (the target's PyTorch
    form, the ONNX record's ``provenance.parent_model``) for word substitution; without one,
    substitution reports ``Unavailable.NO_GRADIENTS``. ``rule``: the round's fooled rule. ``generators``: defaults to
    ``assist.generators.GENERATORS``. ``checkpoint`` is called between the steps (attributions,
    each generator, the check, and the check's batches of ``CHECK_CHUNK`` texts); it may raise
    (``Cancelled``) to stop when a newer request came. ``slurs``: the writer asked for
    description → slur edits (off by default).
    """
    started = time.perf_counter()
    goal = Goal(goal)
    rule = FooledRule(rule)
    ensemble = models if isinstance(models, Ensemble) else Ensemble([models])
    segment = written_segment(definition)
    text = written_text(inputs, segment)
    for given in (writer_label, text_label):
        if given is not None and given not in definition.labels:
            raise AssistError(f"'{given}' is not a label of {definition.name} ({', '.join(definition.labels)}).")
    if goal == Goal.FOOL and text_label is None:
        text_label = writer_label
    if goal == Goal.FOOL and writer_label is None:
        raise AssistError("Choose the label your text has first: suggestions keep it and try to fool the model.")
    if limit < 1:
        raise AssistError("Ask for at least one suggestion (limit ≥ 1).")
    if len(text) > MAX_WRITTEN_CHARS:
        raise AssistError(f"The text has {len(text)} characters; the assistant works on texts of up to "
                          f"{MAX_WRITTEN_CHARS}. Shorten it, or ask for suggestions on one sentence.")
    if not words(text):
        return SuggestionSet(text, goal, writer_label, {}, None, (), {g: Unavailable.NO_WORDS for g in Generator},
                             timings_ms={"total": (time.perf_counter() - started) * 1000})
    if generators is None:
        from app.core.assist.generators import GENERATORS

        generators = GENERATORS

    timings: dict[str, float] = {}
    pause = checkpoint or _nothing
    early = None
    if early_check.ENABLED and answers_alone_in_any_batch(ensemble):
        # while this thread makes the gradient pass and the candidates, the other core checks the
        # writer's text and the rules' candidates (the same answers the check would compute)
        guess_context = GenerationContext(text=text, goal=goal, writer_label=writer_label, model_label=None,
                                          labels=tuple(definition.labels), task_code=definition.code, words=(),
                                          lexicon=lexicon, inputs=inputs, segment=segment, text_label=text_label,
                                          slurs=slurs)
        chosen = generators
        early = EarlyCheck(ensemble).start(
            lambda: rule_guesses(guess_context, chosen, inputs, _interleave, with_written, limit))
    try:
        scores = word_scores(attributions, segment)
        model_label = getattr(attributions, "predicted", None)
        gradient_pass = None
        if not scores:
            began = time.perf_counter()
            # the pass aims where substitution will: away from the text's present label
            aim = writer_label if goal == Goal.FOOL else text_label
            scores, model_label, gradient_pass = _attributions(ensemble, gradients, inputs, segment, aim)
            timings["attributions"] = (time.perf_counter() - began) * 1000
        pause()
        context = GenerationContext(text=text, goal=goal, writer_label=writer_label, model_label=model_label,
                                    labels=tuple(definition.labels), task_code=definition.code, words=scores,
                                    lexicon=lexicon, inputs=inputs, segment=segment, gradients=gradients,
                                    gradient_pass=gradient_pass, text_label=text_label, slurs=slurs)

        began = time.perf_counter()
        per_generator: list[list[Candidate]] = []
        unavailable: dict[Generator, Unavailable] = {}
        for generate in generators:
            pause()
            try:
                per_generator.append(list(generate(context)))
            except GeneratorUnavailable as exc:
                unavailable[generator_of(generate)] = exc.reason
            except Exception:  # one broken generator must not take the others' suggestions away
                log.exception("assistant generator %s failed", getattr(generate, "__name__", generate))
                unavailable[generator_of(generate)] = Unavailable.FAILED
        generated = len({c.text for cs in per_generator for c in cs} - {text})
        candidates = _interleave(per_generator, text, limit)
        timings["generate"] = (time.perf_counter() - began) * 1000

        pause()
        began = time.perf_counter()
        known = early.stop() if early is not None else {}
        original, checked = check(ensemble, definition, inputs, segment, candidates, goal=goal,
                                  writer_label=writer_label, rule=rule, checkpoint=pause, known=known)
        timings["check"] = (time.perf_counter() - began) * 1000
        timings["total"] = (time.perf_counter() - started) * 1000
        return SuggestionSet(text, goal, writer_label, dict(original.probabilities), original.label, tuple(checked),
                             unavailable, generated, timings,
                             sum(item in known for item in (inputs, *(with_written(inputs, segment, c.text)
                                                                      for c in candidates))))
    finally:
        if early is not None:
            early.stop()  # stopped early: the helper ends after the text in flight


def _nothing() -> None:
    return None
