"""Typed errors of the model layer. Each carries a message written for the person at the desk;
the application shows ``str(error)`` as it is."""

from __future__ import annotations

from typing import Any


class ModelError(Exception):
    """Base of every failure the model layer expects and can explain."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class ModelNotFound(ModelError):
    """The path names no model file or folder."""


class UnsupportedModel(ModelError):
    """A model that Dynadesk cannot run: unknown format, architecture or task head."""


class UnsafeModelFile(ModelError):
    """Weights that could only be read by unpickling code, which Dynadesk never does."""


class CorruptModel(ModelError):
    """A model file that is truncated, damaged, or inconsistent with its configuration."""


class TokenizerMissing(ModelError):
    """No usable tokenizer was found for the model."""


class TokenizerMismatch(ModelError):
    """The tokenizer produces ids the model does not know."""


class LabelMismatch(ModelError):
    """The model's labels cannot be matched to the task's labels without a hand-made map."""

    def __init__(self, message: str, model_labels: list[str], task_labels: list[str]):
        super().__init__(message)
        self.model_labels = model_labels
        self.task_labels = task_labels


class DeviceUnavailable(ModelError):
    """The requested device cannot be used; Dynadesk never silently falls back to another."""


class InferenceFailed(ModelError):
    """The model failed while computing an answer."""


class UnsupportedOperation(ModelError):
    """The model cannot do what was asked (for example gradients from an ONNX model)."""


class InputTooLarge(ModelError):
    """An input beyond what Dynadesk will tokenize at all."""


class Cancelled(ModelError):
    """Long work stopped because its progress handle was cancelled."""


class ExportFailed(ModelError):
    """An ONNX export or quantization that did not produce a usable model."""


class ParityCheckFailed(ExportFailed):
    """The exported model does not keep the original's answers (fp32: the conversion check; int8: the
    parity rule of ``local_models.parity``). ``parity``: the int8 verdict's record, when one was measured."""

    def __init__(self, message: str, max_difference: float, parity: dict[str, Any] | None = None):
        super().__init__(message)
        self.max_difference = max_difference
        self.parity = parity


class TrainingFailed(ModelError):
    """Training could not start or finish (bad data, bad options)."""


class ModelChanged(ModelError):
    """The model's files no longer have the checksum they were registered with."""
