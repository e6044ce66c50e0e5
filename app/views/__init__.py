"""Typed view-models: frozen, Qt-free descriptions of what each page shows, built by pure functions
from domain objects. Besides ``app.core.domain``'s enums, this is the only part of ``app`` that widgets import."""
