"""The desk application, in layers: ``cli`` and ``gui`` (the shell, on top), ``views`` (typed view-models for the
widgets) and ``core`` (the Qt-free ground floor that sync builds on). pyproject.toml's layers contract keeps them so."""

# The one place for the version: pyproject.toml reads it from here (the bundle carries no package metadata).
__version__ = "0.2.0"
