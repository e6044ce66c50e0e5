"""What a back-end is, and the registry that finds one for a path.

A back-end declares what it can do as class attributes (``supports_gradients``, ``exportable``,
``devices``); the engine and the application read those attributes and never ask which format
a model is. Adding a back-end means adding one class decorated with ``@register_backend``.
"""

from __future__ import annotations

import json
import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from local_models.errors import CorruptModel, ModelNotFound, UnsupportedModel, UnsupportedOperation
from local_models.heads import Head
from local_models.tokenization import EncodedBatch, TextEncoder

log = logging.getLogger(__name__)

METADATA_FILE = "dynadesk_model.json"  # provenance written by Dynadesk's training and export


@dataclass
class Runtime(ABC):
    """A loaded model, ready to answer. Not thread-safe: one thread uses it at a time."""

    backend: type[Backend]
    path: Path
    head_type: type[Head]
    model_labels: list[str]  # the model's own class names, by output index
    encoder: TextEncoder
    device: str  # the device actually in use, read back from the runtime, never assumed
    sha256: str
    architecture: str
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def supports_gradients(self) -> bool:
        return self.backend.supports_gradients

    @abstractmethod
    def run(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        """Raw outputs (``logits``; or ``start_logits`` and ``end_logits``) as float arrays."""

    def last_hidden_state(self, batch: EncodedBatch) -> np.ndarray:
        """The encoder's last hidden state, [batch, tokens, hidden], for sentence embeddings."""
        raise UnsupportedOperation(f"{self.path.name} ({self.backend.name}) cannot give its hidden states.")

    def close(self) -> None:  # noqa: B027 - a no-op by default; runtimes holding sessions override it
        """Let go of memory and sessions early; the runtime is unusable afterwards."""


class Backend(ABC):
    name: ClassVar[str]  # stored as ModelRecord.format
    description: ClassVar[str]
    supports_gradients: ClassVar[bool] = False
    exportable: ClassVar[bool] = False  # can be exported to ONNX
    priority: ClassVar[int] = 0  # higher is asked first by backend_for

    @classmethod
    @abstractmethod
    def recognises(cls, path: Path) -> bool:
        """Whether ``path`` looks like this back-end's model (cheap: names and headers only)."""

    @classmethod
    @abstractmethod
    def devices(cls) -> list[str]:
        """Devices this back-end can run on here; "cpu" always comes first."""

    @classmethod
    @abstractmethod
    def load(cls, path: Path, *, device: str = "cpu", tokenizer_dir: Path | None = None,
             max_length: int | None = None, num_threads: int | None = None) -> Runtime:
        """Check the files, then load them; every problem is a ``ModelError``."""

    @classmethod
    @abstractmethod
    def model_files(cls, path: Path, tokenizer_dir: Path | None = None) -> list[tuple[str, Path]]:
        """(name, file) for every file that shapes the model's answers: its checksum covers them."""


_BACKENDS: dict[str, type[Backend]] = {}


def register_backend(cls: type[Backend]) -> type[Backend]:
    if cls.name in _BACKENDS and _BACKENDS[cls.name] is not cls:
        raise ValueError(f"a back-end named {cls.name!r} is already registered")
    _BACKENDS[cls.name] = cls
    return cls


def backends() -> list[type[Backend]]:
    return sorted(_BACKENDS.values(), key=lambda b: -b.priority)


def backend_named(name: str) -> type[Backend]:
    try:
        return _BACKENDS[name]
    except KeyError:
        known = ", ".join(sorted(_BACKENDS))
        raise UnsupportedModel(f"Unknown model format '{name}'. Dynadesk runs: {known}.") from None


def backend_for(path: Path) -> type[Backend]:
    path = Path(path)
    if not path.exists():
        raise ModelNotFound(f"There is no model at {path}.")
    for backend in backends():
        if backend.recognises(path):
            return backend
    described = "; ".join(f"{b.name}: {b.description}" for b in backends())
    raise UnsupportedModel(f"{path} is not a model Dynadesk can run ({described}).")


def read_json_file(path: Path, what: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CorruptModel(f"The {what} {path} is not valid JSON ({exc}).") from exc
    except RecursionError:  # nested deeper than any reader can follow
        raise CorruptModel(f"The {what} {path} is nested too deep to read; it is not a Dynadesk model "
                           "description.") from None
    if not isinstance(data, dict):
        raise CorruptModel(f"The {what} {path} does not hold a JSON object.")
    return data


def labels_from_config(config: dict[str, Any], count: int | None = None) -> list[str]:
    """The class names of a Hugging Face config, by output index."""
    raw = config.get("id2label")
    if isinstance(raw, dict) and raw:
        try:
            by_index = {int(k): str(v) for k, v in raw.items()}
        except ValueError as exc:
            raise CorruptModel(f"id2label has a key that is not an output index ({exc}).") from exc
        if sorted(by_index) != list(range(len(by_index))):
            raise CorruptModel(f"id2label must number the outputs 0..{len(by_index) - 1}; it has {sorted(by_index)}.")
        return [by_index[i] for i in range(len(by_index))]
    n = count if count is not None else int(config.get("num_labels", 2))
    return [f"LABEL_{i}" for i in range(n)]
