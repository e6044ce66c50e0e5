"""How figures read on screen and in reports: one definition of a percentage and of a number."""

from __future__ import annotations

MISSING = "–"  # a figure that cannot be computed (no data), never shown as 0


def pct(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f}%"


def num(value: float | None, digits: int = 3) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"
