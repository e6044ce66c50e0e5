"""The parts every Dynadesk HTML report is built from (the evaluation report, the comparison report and the
model leaderboard): one style sheet, tables, a red-to-green scale and horizontal bars. Self-contained pages: no
scripts, no files beside them, nothing fetched. Pure string building; the reports that use it import it, never
each other.

    page = f"<style>{CSS}</style>" + table(["Model", "Accuracy"], [["m1", "91.0 %"]]) + bar_chart(items, title="…")
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

from app.core.formatting import pct

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.warning{background:#fde2e1;border:2px solid #c62828;color:#7f1010;padding:.8em 1em;font-weight:bold;margin:1em 0}
.note{background:#f5f5f5;border-left:4px solid #999;padding:.5em 1em;margin:.6em 0}
.muted{color:#666}.chart{margin:.6em 0}details{margin:.6em 0}code{background:#f4f4f4;padding:0 .2em}
"""


@dataclass(frozen=True)
class Section:
    """A part of a report that another report renders (the leaderboard in the evaluation report): its HTML, and
    the style rules it adds to the page's."""

    html: str
    css: str = ""


def scale_colour(value: float | None) -> str:
    """Red (0) through yellow to green (1), light enough for black text; grey for no value."""
    if value is None:
        return "#eeeeee"
    v = max(0.0, min(1.0, value))
    red = 240 if v < 0.5 else int(240 - (v - 0.5) * 2 * 110)
    green = int(140 + v * 2 * 90) if v < 0.5 else 230
    return f"#{red:02x}{green:02x}a0"


def bar_chart(items: list[tuple[str, float | None, str]], *, title: str, width: int = 760) -> str:
    """Horizontal bars of values in 0..1 (label, value, note); an inline SVG."""
    row, left, right = 18, 230, 170
    height = 28 + row * len(items)
    span = width - left - right
    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">',
             f'<text x="0" y="12" font-weight="bold">{escape(title)}</text>']
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * span
        parts.append(f'<line x1="{x:.1f}" y1="20" x2="{x:.1f}" y2="{height - 4}" stroke="#ddd"/>')
        parts.append(f'<text x="{x:.1f}" y="{height}" text-anchor="middle" fill="#777" font-size="9">{int(tick * 100)}%</text>')
    for i, (label, value, note) in enumerate(items):
        y = 22 + i * row
        shown = label if len(label) <= 34 else label[:33] + "…"
        parts.append(f'<text x="{left - 6}" y="{y + 11}" text-anchor="end">{escape(shown)}</text>')
        if value is not None:
            parts.append(f'<rect x="{left}" y="{y + 2}" width="{max(value, 0) * span:.1f}" height="{row - 5}" '
                         f'fill="{scale_colour(value)}" stroke="#888" stroke-width="0.5"><title>{escape(label)}: '
                         f'{pct(value)} {escape(note)}</title></rect>')
        parts.append(f'<text x="{left + span + 4}" y="{y + 11}">{pct(value)} {escape(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    """A table whose cells are HTML already (escape text before); columns from ``numeric_from`` on are
    right-aligned figures."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"
