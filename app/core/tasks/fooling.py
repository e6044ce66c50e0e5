"""Deciding whether the target model(s) were fooled, as the task and the round define it."""

from __future__ import annotations

import collections
import math
import re
import string
from collections.abc import Sequence

from app.core.domain import FooledRule, ModelOutput, Span
from app.core.errors import InvalidExample
from app.core.tasks.definition import FooledMetric, TaskDefinition

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_NO_PUNCTUATION = str.maketrans("", "", string.punctuation)  # in C: an answer may be a whole context long


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower-case, drop punctuation and articles, fold white space."""
    text = text.lower().translate(_NO_PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def span_f1(prediction: str, truth: str) -> float:
    """Word-overlap F1 between two answers, computed as the SQuAD evaluation script does."""
    pred_tokens = normalize_answer(prediction).split()
    true_tokens = normalize_answer(truth).split()
    if not pred_tokens or not true_tokens:
        return float(pred_tokens == true_tokens)
    common = collections.Counter(pred_tokens) & collections.Counter(true_tokens)
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision = overlap / len(pred_tokens)
    recall = overlap / len(true_tokens)
    return 2 * precision * recall / (precision + recall)


def mean_probabilities(outputs: Sequence[ModelOutput]) -> dict[str, float]:
    labels = sorted({label for out in outputs for label in out.probabilities})
    return {label: sum(out.probabilities.get(label, 0.0) for out in outputs) / len(outputs) for label in labels}


def ensemble_label(outputs: Sequence[ModelOutput]) -> str:
    """The label of the mean of the members' probabilities (the first member's label when none are given)."""
    mean = mean_probabilities(outputs)
    if not mean:
        return outputs[0].label
    return max(mean, key=mean.__getitem__)


# How far a model's probabilities may sum from 1 (float32 softmax rounding, with room to spare).
PROBABILITY_SUM_SLACK = 0.01


class InvalidOutput(InvalidExample, ValueError):
    """A model output no model gives (an unknown label, a probability outside 0–1): it is judged
    neither fooled nor not fooled. A ValueError too, as for the other outputs nothing can judge."""


def output_problem(definition: TaskDefinition, output: ModelOutput) -> str | None:
    """What makes ``output`` impossible for ``definition``'s task, in words, or None."""
    if definition.answer is not None:  # a model's answer is a span of the context: no longer than it may be
        spanned = next(f.max_chars for f in definition.inputs if f.name == definition.answer.span_of)
        answer = output.answer.text if output.answer else output.label
        if len(answer) > spanned:
            return (f"its answer has {len(answer):,} characters, more than the {spanned:,} its context may hold")
    labels = set(definition.labels)
    if labels and output.label not in labels:
        return f"its label {output.label[:80]!r} is not one of the task's labels ({', '.join(definition.labels)})"
    total = 0.0
    for label, p in output.probabilities.items():
        if labels and label not in labels:
            return f"it gives a probability for {label[:80]!r}, which is not one of the task's labels"
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) or not 0.0 <= p <= 1.0:
            return f"its probability of {label[:80]!r} is {p!r}; a probability is a number from 0 to 1"
        total += p
    if output.probabilities and total > 1.0 + PROBABILITY_SUM_SLACK:
        return f"its probabilities add up to {total:.3f}, more than 1"
    return None


def check_outputs(definition: TaskDefinition, outputs: Sequence[ModelOutput]) -> None:
    """Raises :class:`InvalidOutput` naming the first output no model could give."""
    for position, output in enumerate(outputs, start=1):
        problem = output_problem(definition, output)
        if problem:
            raise InvalidOutput(f"Model output {position} ({output.model_sha256[:12]}…) cannot be judged: {problem}.")


def is_fooled(
    definition: TaskDefinition,
    outputs: Sequence[ModelOutput],
    true_label: str | None = None,
    answer: Span | None = None,
    rule: FooledRule = FooledRule.MEAN,
) -> bool | None:
    """Whether the model(s) disagree with the annotator. ``None`` when there is no model output to judge.
    An output no model could give (:func:`output_problem`) raises :class:`InvalidOutput`."""
    if not outputs:
        return None
    check_outputs(definition, outputs)
    if definition.fooled.metric == FooledMetric.SPAN_F1:
        if answer is None:
            raise ValueError("an extractive example needs the annotator's answer span")
        scores = [span_f1(out.answer.text if out.answer else out.label, answer.text) for out in outputs]
        threshold = definition.fooled.threshold
        if rule == FooledRule.MEAN:
            return sum(scores) / len(scores) < threshold
        member_fooled = [score < threshold for score in scores]
    else:
        if true_label is None:
            raise ValueError("a classification example needs a true label")
        if rule == FooledRule.MEAN:
            return ensemble_label(outputs) != true_label
        member_fooled = [out.label != true_label for out in outputs]
    return all(member_fooled) if rule == FooledRule.ALL else any(member_fooled)
