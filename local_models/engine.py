"""The inference engine: Qt-free, one loaded model (or an ensemble) answering texts and pairs.

    engine = load_engine(path, task_labels=["hate", "not hate"])
    engine.predict(["some text"])                     -> [Prediction]
    engine.predict_batched(texts, progress=Progress())  -> [Prediction], cancellable
    engine.attribute("some text", target="hate")      -> Attribution (one score per word)
    Ensemble([a, b]).predict(["some text"])           -> [EnsemblePrediction]

The GUI's inference service owns the engines. Predictions and attributions of one engine may
run on two threads at once (the service's prediction and explanation lanes): onnxruntime
sessions and eval-mode torch modules answer concurrent calls, and the gradient method replaces
the embedding output for its own thread only. Loading and closing stay on one thread.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

import local_models.backends  # noqa: F401  (registers the back-ends)
from local_models.backends.base import Backend, Runtime, backend_for, backend_named
from local_models.errors import (
    InferenceFailed,
    LabelMismatch,
    ModelError,
    TokenizerMismatch,
    UnsupportedModel,
)
from local_models.heads import AnswerSpan, ClassificationHead, Head
from local_models.labels import resolve_label_map
from local_models.progress import Progress
from local_models.quiet import first_line
from local_models.tokenization import EncodedBatch, ModelInput, TextEncoder

if TYPE_CHECKING:
    from local_models.attribution import Attribution

log = logging.getLogger(__name__)

SELF_CHECK_TEXT = "Dynadesk checks that this model answers."
# A text in a batch whose two most likely labels are closer than this (probability) is answered
# alone where batches answer only close to each text alone: a label could change only if a
# probability moved by half of it, 6x the largest move measured (1.6e-3 on 7,511 assistant
# candidates, the default int8 model)
LABEL_GUARD = 0.02


def default_num_threads() -> int:
    """Intra-op threads per model call: half the cores, at most 4.

    On the 2-core machines this is one thread. Measured there (bench_models, "threads" rows):
    a second thread makes a quiet machine's fp32 and PyTorch calls 25-30 % faster and int8
    calls no faster, but as soon as anything else wants a core (the GUI thread repainting while
    the annotator types, another program) two spinning threads are 2x (onnxruntime) to 20x
    (PyTorch's OpenMP) slower. One thread keeps the tail short and leaves the GUI its core.
    """
    return max(1, min(4, (os.cpu_count() or 2) // 2))


@dataclass(frozen=True)
class Prediction:
    """One model's answer to one input.

    ``label`` is a task label (classification) or the answer text (extractive QA).
    ``truncated`` says the input was longer than the model reads; ``seen_chars`` gives, per
    segment, how many of its characters the model read.
    """

    label: str | None
    probabilities: dict[str, float]
    latency_ms: float
    model_sha: str
    truncated: bool = False
    seen_chars: tuple[int, ...] = ()
    answer: AnswerSpan | None = None


@dataclass(frozen=True)
class EnsemblePrediction:
    """Every member's answer, and the mean of their probabilities (empty for extractive QA)."""

    members: tuple[Prediction, ...]
    label: str | None
    probabilities: dict[str, float]
    latency_ms: float

    @property
    def truncated(self) -> bool:
        return any(m.truncated for m in self.members)


class InferenceEngine:
    def __init__(self, runtime: Runtime, label_map: dict[int, str] | None = None, name: str = ""):
        self.runtime = runtime
        self.name = name or runtime.path.name
        self.head: Head = runtime.head_type(label_map if runtime.head_type.has_labels else None)

    @property
    def sha256(self) -> str:
        return self.runtime.sha256

    @property
    def format(self) -> str:
        return self.runtime.backend.name

    @property
    def backend(self) -> type[Backend]:
        return self.runtime.backend

    @property
    def device(self) -> str:
        return self.runtime.device

    @property
    def kind(self) -> str:
        return self.head.kind

    @property
    def labels(self) -> list[str]:
        """The task labels this engine answers with, in order (empty for extractive QA)."""
        return list(self.head.labels)

    @property
    def supports_gradients(self) -> bool:
        return self.runtime.supports_gradients

    @property
    def max_length(self) -> int:
        return self.runtime.encoder.max_length

    @property
    def encoder(self) -> TextEncoder:
        return self.runtime.encoder

    def encode(self, inputs: Sequence[ModelInput]) -> EncodedBatch:
        return self.runtime.encoder.encode(inputs)

    def forward(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        """Raw outputs for an encoded batch; any runtime failure becomes ``InferenceFailed``.

        Where the runtime's batch answers sit within a tolerance of each text's answer alone (a
        dynamically quantized model run as one batch of its per-text graph), a text whose two most
        likely labels are closer than ``LABEL_GUARD`` is answered alone: its label is the one it gets
        alone, and the same in every batch."""
        try:
            outputs = self.runtime.run(batch)
            if len(batch) > 1 and getattr(self.runtime, "batch_tolerance", 0.0) > 0 \
                    and isinstance(self.head, ClassificationHead):
                outputs = self._settle_close_labels(batch, outputs)
            return outputs
        except ModelError:
            raise
        except Exception as exc:
            raise InferenceFailed(f"The model {self.name} failed on this input: {first_line(exc)}") from exc

    def _settle_close_labels(self, batch: EncodedBatch, outputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        assert isinstance(self.head, ClassificationHead)
        probabilities = np.sort(self.head.label_probabilities(outputs), axis=-1)
        margins = probabilities[:, -1] - probabilities[:, -2] if probabilities.shape[-1] > 1 \
            else np.ones(len(batch))
        close = [int(i) for i in np.flatnonzero(margins < LABEL_GUARD)]
        if not close:
            return outputs
        alone = self.runtime.run_alone(batch, close)  # type: ignore[attr-defined]
        settled = {name: value.copy() for name, value in outputs.items()}
        for name, value in alone.items():
            settled[name][close] = value
        return settled

    @property
    def batch_tolerance(self) -> float:
        """0 when a text gets the same answer in any batch as alone, bit for bit; else how far (logits)
        it may sit from that answer (labels are always the same: see ``forward``)."""
        return float(getattr(self.runtime, "batch_tolerance", 0.0))

    def label_probabilities(self, batch: EncodedBatch) -> np.ndarray:
        """[batch, labels] probabilities of the task labels (classification models only)."""
        if not isinstance(self.head, ClassificationHead):
            raise UnsupportedModel(f"{self.name} answers with spans, not labels.")
        return self.head.label_probabilities(self.forward(batch))

    def predict(self, inputs: Sequence[ModelInput]) -> list[Prediction]:
        """One prediction per text or pair, computed as one batch."""
        if isinstance(inputs, (str, tuple)):
            raise TypeError("predict takes a list of texts or pairs; use predict_one for a single input")
        if not inputs:
            return []
        start = time.perf_counter()
        batch = self.encode(inputs)
        decoded = self.head.decode(self.forward(batch), batch)
        latency = (time.perf_counter() - start) * 1000 / len(batch)
        return [
            Prediction(d.label, d.probabilities, latency, self.sha256, batch.truncated[i], batch.seen_chars[i], d.answer)
            for i, d in enumerate(decoded)
        ]

    def predict_one(self, item: ModelInput) -> Prediction:
        return self.predict([item])[0]

    def predict_batched(self, inputs: Sequence[ModelInput], *, batch_size: int = 32,
                        progress: Progress | None = None) -> list[Prediction]:
        """Predictions for many inputs, in their order, in batches of similar length.

        ``progress`` gets (done, total) after each batch; cancelling it stops the work with
        ``Cancelled`` before the next batch. ``latency_ms`` is each item's share of its batch.
        """
        progress = progress or Progress()
        order = sorted(range(len(inputs)), key=lambda i: _char_length(inputs[i]))
        results: list[Prediction | None] = [None] * len(inputs)
        progress.report(0, len(inputs))
        for first in range(0, len(order), batch_size):
            progress.check()
            chunk = order[first:first + batch_size]
            for i, prediction in zip(chunk, self.predict([inputs[i] for i in chunk])):
                results[i] = prediction
            progress.report(min(first + batch_size, len(order)), len(inputs))
        return results  # type: ignore[return-value]

    def embed(self, inputs: Sequence[ModelInput], *, batch_size: int = 32,
              progress: Progress | None = None) -> np.ndarray:
        """Sentence embeddings, [inputs, hidden]: the last hidden state averaged over each input's
        real tokens (padding left out), in batches of similar length; cancellable like
        :meth:`predict_batched`. ``UnsupportedOperation`` when the model cannot give its hidden states."""
        progress = progress or Progress()
        order = sorted(range(len(inputs)), key=lambda i: _char_length(inputs[i]))
        rows: list[np.ndarray | None] = [None] * len(inputs)
        progress.report(0, len(inputs))
        for first in range(0, len(order), batch_size):
            progress.check()
            chunk = order[first:first + batch_size]
            batch = self.encode([inputs[i] for i in chunk])
            try:
                hidden = self.runtime.last_hidden_state(batch)
            except ModelError:
                raise
            except Exception as exc:
                raise InferenceFailed(f"The model {self.name} failed on this input: {first_line(exc)}") from exc
            mask = batch.attention_mask[..., None].astype(np.float32)
            pooled = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1.0)
            for i, row in zip(chunk, pooled):
                rows[i] = row
            progress.report(min(first + batch_size, len(order)), len(inputs))
        if not rows:
            return np.zeros((0, 0), dtype=np.float32)
        return np.stack(rows).astype(np.float32)  # type: ignore[arg-type]

    def attribute(self, item: ModelInput, *, target: str | None = None, method: str = "auto",
                  **options: Any) -> Attribution:
        """Word-level attribution for ``target`` (default: the predicted label); see attribution.py."""
        from local_models.attribution import attribute

        return attribute(self, item, target=target, method=method, **options)

    def close(self) -> None:
        self.runtime.close()

    def __repr__(self) -> str:
        return f"<InferenceEngine {self.name} {self.format} on {self.device} sha={self.sha256[:12]}>"


def load_engine(
    path: str | os.PathLike[str],
    *,
    format: str | None = None,
    device: str = "cpu",
    tokenizer_dir: str | os.PathLike[str] | None = None,
    task_labels: Sequence[str] | None = None,
    label_map: Mapping[str, str] | None = None,
    max_length: int | None = None,
    num_threads: int | None = None,
    name: str = "",
) -> InferenceEngine:
    """Check and load a model, map its labels onto the task's, and make sure it answers.

    ``format`` names a back-end ("hf-torch", "onnx"); without it, the registry picks the one
    that recognises the path. ``label_map`` maps the model's outputs (by index or by name)
    onto ``task_labels`` when their names differ. Every problem is a ``ModelError``.
    """
    path = Path(path)
    backend = backend_named(format) if format else backend_for(path)
    runtime = backend.load(path, device=device, tokenizer_dir=Path(tokenizer_dir) if tokenizer_dir else None,
                           max_length=max_length, num_threads=num_threads or default_num_threads())
    outputs = _self_check(runtime)
    mapping = None
    if runtime.head_type.has_labels:
        count = outputs[runtime.head_type.output_names[0]].shape[-1]
        if not runtime.model_labels:
            runtime.model_labels = [f"LABEL_{i}" for i in range(count)]
        if count != len(runtime.model_labels):
            raise UnsupportedModel(
                f"{path} gives {count} scores per input but names {len(runtime.model_labels)} labels "
                f"({', '.join(runtime.model_labels)}); its files do not belong together."
            )
        mapping = resolve_label_map(runtime.model_labels, task_labels, label_map)
    return InferenceEngine(runtime, mapping, name=name)


def model_sha256(path: str | os.PathLike[str], *, format: str | None = None,
                 tokenizer_dir: str | os.PathLike[str] | None = None) -> str:
    """The checksum a loaded model would have, from its files alone (nothing is loaded)."""
    from local_models.files import files_sha256

    backend = backend_named(format) if format else backend_for(Path(path))
    return files_sha256(backend.model_files(Path(path), Path(tokenizer_dir) if tokenizer_dir else None))


def _self_check(runtime: Runtime) -> dict[str, np.ndarray]:
    """Run the model once on a plain text, then once with the tokenizer's largest id, so that a
    model that cannot run, or a tokenizer from another model, fails at load and not mid-typing."""
    batch = runtime.encoder.encode([SELF_CHECK_TEXT] if runtime.head_type.has_labels
                                   else [(SELF_CHECK_TEXT, SELF_CHECK_TEXT)])
    try:
        outputs = runtime.run(batch)
    except ModelError:
        raise
    except Exception as exc:
        raise UnsupportedModel(f"{runtime.path} loads but does not run: {first_line(exc)}") from exc
    for name, value in outputs.items():
        if not np.all(np.isfinite(value)):
            raise UnsupportedModel(f"{runtime.path} answers with non-numbers (NaN or infinity) in {name}.")
    batch.input_ids[0, 1] = runtime.encoder.vocab_size - 1
    try:
        runtime.run(batch)
    except Exception as exc:
        raise TokenizerMismatch(
            f"The tokenizer used with {runtime.path} produces ids the model does not have "
            f"({first_line(exc)}); give the tokenizer that belongs to this model."
        ) from exc
    return outputs


class Ensemble:
    """Several engines answering together: each member's output, and the mean probabilities."""

    def __init__(self, engines: Sequence[InferenceEngine]):
        if not engines:
            raise ValueError("an ensemble needs at least one model")
        kinds = {e.kind for e in engines}
        if len(kinds) > 1:
            raise UnsupportedModel("An ensemble mixes classification and extractive QA models.")
        labelled = [e for e in engines if e.labels]
        if labelled and any(set(e.labels) != set(labelled[0].labels) for e in labelled):
            names = "; ".join(f"{e.name}: {', '.join(e.labels)}" for e in labelled)
            raise LabelMismatch(f"The ensemble's models answer with different labels ({names}).",
                                labelled[0].labels, labelled[-1].labels)
        self.engines = list(engines)
        self.labels = list(engines[0].labels)

    def predict(self, inputs: Sequence[ModelInput]) -> list[EnsemblePrediction]:
        per_member = [engine.predict(inputs) for engine in self.engines]
        return [self._combine(tuple(m[i] for m in per_member)) for i in range(len(inputs))]

    def predict_batched(self, inputs: Sequence[ModelInput], *, batch_size: int = 32,
                        progress: Progress | None = None) -> list[EnsemblePrediction]:
        progress = progress or Progress()
        total = len(inputs) * len(self.engines)
        per_member = []
        for k, engine in enumerate(self.engines):
            part = progress.part(k * len(inputs), total)
            per_member.append(engine.predict_batched(inputs, batch_size=batch_size, progress=part))
        return [self._combine(tuple(m[i] for m in per_member)) for i in range(len(inputs))]

    def _combine(self, members: tuple[Prediction, ...]) -> EnsemblePrediction:
        latency = sum(m.latency_ms for m in members)
        if not self.labels:
            return EnsemblePrediction(members, None, {}, latency)
        mean = {label: float(np.mean([m.probabilities[label] for m in members])) for label in self.labels}
        label = max(self.labels, key=lambda l: mean[l])  # ties go to the first label
        return EnsemblePrediction(members, label, mean, latency)

    def close(self) -> None:
        for engine in self.engines:
            engine.close()


@dataclass(frozen=True)
class ModelSpec:
    """Everything needed to load one model, as plain data that can cross threads."""

    path: Path
    format: str | None = None
    device: str = "cpu"
    tokenizer_dir: Path | None = None
    task_labels: tuple[str, ...] | None = None
    label_map: dict[str, str] | None = field(default=None, hash=False)
    expected_sha256: str | None = None
    max_length: int | None = None
    num_threads: int | None = None
    name: str = ""

    def load(self) -> InferenceEngine:
        from local_models.errors import ModelChanged

        engine = load_engine(
            self.path, format=self.format, device=self.device, tokenizer_dir=self.tokenizer_dir,
            task_labels=self.task_labels, label_map=self.label_map, max_length=self.max_length,
            num_threads=self.num_threads, name=self.name,
        )
        if self.expected_sha256 and engine.sha256 != self.expected_sha256:
            engine.close()
            raise ModelChanged(
                f"The files of {self.name or self.path} changed since the model was registered "
                f"(checksum {engine.sha256[:12]}..., registered {self.expected_sha256[:12]}...). "
                "Register the changed model as a new model."
            )
        return engine


def _char_length(item: ModelInput) -> int:
    return len(item) if isinstance(item, str) else len(item[0]) + len(item[1])
