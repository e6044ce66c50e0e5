"""Bundled resources: task definitions, icons, style sheets, the default model's trained head."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent
