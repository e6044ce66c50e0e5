"""How figures read on screen and in reports: one definition of a percentage, of a number and of a text table."""

from __future__ import annotations

MISSING = "–"  # a figure that cannot be computed (no data), never shown as 0


def pct(value: float | None) -> str:
    return MISSING if value is None else f"{100 * value:.1f}%"


def num(value: float | None, digits: int = 3) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def text_table(headers: list[str], rows: list[list[str]]) -> tuple[list[str], list[int]]:
    """A plain-text table: the header line, a rule, a line per row (columns padded, no cell can steer the
    terminal), and the columns' widths (for a line above the header that spans them)."""
    from app.core.text import printable

    cells = [[printable(str(c)) for c in row] for row in [headers, *rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return lines, widths


def size_text(n: int) -> str:
    """A size in bytes as people read it: 512 bytes, 3 KiB, 120.4 MiB, 4.0 GiB."""
    if n >= 2**30:
        return f"{n / 2**30:.1f} GiB"
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB" if n >= 1024 else f"{n} bytes"
