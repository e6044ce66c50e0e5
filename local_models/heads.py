"""What a model's outputs mean: one class per head kind, found by architecture or output names.

Adding a kind of model (token classification, say) means adding one class here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from local_models.errors import UnsupportedModel
from local_models.tokenization import EncodedBatch


@dataclass(frozen=True)
class AnswerSpan:
    """An extractive answer: characters ``start:end`` of the context (the pair's second text)."""

    start: int
    end: int
    text: str
    score: float


@dataclass(frozen=True)
class Decoded:
    label: str | None
    probabilities: dict[str, float]
    answer: AnswerSpan | None = None


class Head(ABC):
    kind: ClassVar[str]
    architecture_suffix: ClassVar[str]  # "ForSequenceClassification"
    output_names: ClassVar[tuple[str, ...]]
    pair_truncation: ClassVar[str] = "longest_first"
    has_labels: ClassVar[bool]

    def __init__(self, label_map: dict[int, str] | None = None):
        self.label_map = label_map or {}
        self.labels = list(dict.fromkeys(self.label_map.values()))  # task labels, in first-seen order

    @abstractmethod
    def decode(self, outputs: dict[str, np.ndarray], batch: EncodedBatch) -> list[Decoded]:
        ...


def softmax(logits: np.ndarray, axis: int = -1) -> np.ndarray:
    shifted = logits - logits.max(axis=axis, keepdims=True)
    exp = np.exp(shifted)
    out: np.ndarray = exp / exp.sum(axis=axis, keepdims=True)
    return out


class ClassificationHead(Head):
    kind = "classification"
    architecture_suffix = "ForSequenceClassification"
    output_names = ("logits",)
    has_labels = True

    def __init__(self, label_map: dict[int, str] | None = None):
        super().__init__(label_map)
        # columns of model classes that add up into each task label
        self._columns = np.zeros((len(self.label_map), len(self.labels)), dtype=np.float64)
        for index, label in self.label_map.items():
            self._columns[index, self.labels.index(label)] = 1.0

    def label_probabilities(self, outputs: dict[str, np.ndarray]) -> np.ndarray:
        """[batch, task labels]: model class probabilities summed per task label."""
        logits = outputs["logits"].astype(np.float64)
        if logits.shape[-1] != self._columns.shape[0]:
            raise UnsupportedModel(
                f"The model gives {logits.shape[-1]} scores per input but its configuration names "
                f"{self._columns.shape[0]} labels."
            )
        return softmax(logits) @ self._columns

    def decode(self, outputs: dict[str, np.ndarray], batch: EncodedBatch) -> list[Decoded]:
        probs = self.label_probabilities(outputs)
        return [
            Decoded(self.labels[int(row.argmax())], {label: float(p) for label, p in zip(self.labels, row)})
            for row in probs
        ]


class ExtractiveQAHead(Head):
    """Start and end logits over the tokens of the context, the second text of each pair."""

    kind = "extractive-qa"
    architecture_suffix = "ForQuestionAnswering"
    output_names = ("start_logits", "end_logits")
    pair_truncation = "only_second"
    has_labels = False
    max_answer_tokens = 30

    def decode(self, outputs: dict[str, np.ndarray], batch: EncodedBatch) -> list[Decoded]:
        start_p = softmax(outputs["start_logits"].astype(np.float64))
        end_p = softmax(outputs["end_logits"].astype(np.float64))
        decoded = []
        for i in range(len(batch)):
            segments = batch.segments(i)
            if len(segments) != 2:
                raise ValueError("an extractive QA model answers (question, context) pairs")
            context = segments[1]
            spans = batch.segment_offsets(i, 1)
            positions = np.array([p for p, s in enumerate(spans) if s is not None], dtype=np.int64)
            if positions.size == 0:
                decoded.append(Decoded(None, {}, None))
                continue
            s_scores, e_scores = start_p[i, positions], end_p[i, positions]
            # score[a, b] = P(start=a) * P(end=b), for a <= b < a + max_answer_tokens
            scores = np.triu(np.outer(s_scores, e_scores))
            scores = np.tril(scores, self.max_answer_tokens - 1)
            a, b = np.unravel_index(int(scores.argmax()), scores.shape)
            start, end = spans[positions[a]][0], spans[positions[b]][1]
            answer = AnswerSpan(start, end, context[start:end], float(scores[a, b]))
            decoded.append(Decoded(answer.text, {}, answer))
        return decoded


HEADS: list[type[Head]] = [ClassificationHead, ExtractiveQAHead]


def head_for_architecture(architecture: str) -> type[Head]:
    for head in HEADS:
        if architecture.endswith(head.architecture_suffix):
            return head
    kinds = ", ".join(f"*{h.architecture_suffix}" for h in HEADS)
    raise UnsupportedModel(f"Dynadesk runs {kinds} models; this one is a {architecture}.")


def head_for_outputs(names: Sequence[str]) -> type[Head]:
    for head in HEADS:
        if all(n in names for n in head.output_names):
            return head
    wanted = " or ".join("+".join(h.output_names) for h in HEADS)
    raise UnsupportedModel(f"The model's outputs ({', '.join(names)}) are not {wanted}.")
