"""The target's PyTorch form, for the assistant's word substitution when the target runs as ONNX.

An ONNX target (the default model's int8 form) has no gradients; the PyTorch model it was
exported from does. It is loaded on the explanation lane at the first suggestion that needs it
(never on the GUI thread, never on the prediction lane) and kept for the next ones; every
suggestion is still checked against the target itself. A new target replaces it at the next use.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger(__name__)


class GradientForm:
    """Which PyTorch form to use (set from the GUI thread), and the engine loaded for it (on the lane)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._wanted: tuple[str, Any] | None = None  # (key, ModelSpec)
        self._loaded: tuple[str, Any] | None = None  # (key, InferenceEngine or None when it failed to load)

    def want(self, key: str | None, spec: Any = None) -> None:
        """Use the model of ``spec`` (``key`` names it); None: no gradient form."""
        with self._lock:
            self._wanted = (key, spec) if key is not None else None

    def engine(self) -> Any:
        """The engine for the wanted form, loading it the first time (explanation lane only)."""
        with self._lock:
            wanted, loaded = self._wanted, self._loaded
        if loaded is not None and (wanted is None or loaded[0] != wanted[0]):
            if loaded[1] is not None:
                loaded[1].close()
            loaded = None
        if wanted is not None and loaded is None:
            try:
                loaded = (wanted[0], wanted[1].load())
            except Exception:  # substitution then says it needs the PyTorch form; the rest still runs
                log.warning("the target's PyTorch form could not be loaded for word substitution", exc_info=True)
                loaded = (wanted[0], None)
        with self._lock:
            self._loaded = loaded
        return loaded[1] if loaded is not None else None

    def close(self) -> None:
        with self._lock:
            loaded, self._loaded, self._wanted = self._loaded, None, None
        if loaded is not None and loaded[1] is not None:
            loaded[1].close()
