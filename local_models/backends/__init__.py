"""The model back-ends. Importing this package registers each of them."""

from local_models.backends import hf_torch, onnx  # noqa: F401
from local_models.backends.base import Backend, Runtime, backend_for, backend_named, backends, register_backend

__all__ = ["Backend", "Runtime", "backend_for", "backend_named", "backends", "register_backend"]
