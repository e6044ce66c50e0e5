"""A comparison report's files: its JSON document and its HTML page, in the evaluation report's style
(app.core.io.html_report): self-contained, no scripts, every figure from the report's document.

    json_path, html_path = write_report(report, out_dir, blur_words=desk.reading_words(code, browsing=True))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from pathlib import Path
from typing import Any

from app.core.formatting import pct
from app.core.io.documents import write_document
from app.core.io.html_report import CSS, table
from app.core.next_round.comparison import JSON_NAME, METRIC_NAMES, ComparisonReport, Difference
from app.core.next_round.promotion_rule import BETTER, WORSE, difference_state
from app.core.wellbeing.blur import blurred

HTML_NAME = "comparison.html"
STATE_COLOURS = {WORSE: "#c62828", BETTER: "#2e7d32"}  # the rest (unclear, too few to judge) grey


def write_report(report: ComparisonReport, directory: Path, *, blur_words: Sequence[str] = ()) -> tuple[Path, Path]:
    """comparison.json (every item, both models' predictions, every figure) and comparison.html, whose
    example lists are masked with ``blur_words`` (the reader's: ``Desk.reading_words``)."""
    directory = Path(directory)
    json_path = write_document(report.document, directory / JSON_NAME)
    html_path = directory / HTML_NAME
    part = html_path.with_suffix(".html.part")
    part.write_text(render_html(report, blur_words=blur_words), encoding="utf-8")
    part.replace(html_path)
    return json_path, html_path


def _points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def interval_chart(rows: list[Difference], *, title: str, width: int = 760) -> str:
    """Each difference as a dot with its interval, on a shared axis in percentage points; zero marked."""
    shown = [d for d in rows if d.difference is not None]
    if not shown:
        return ""
    row, left, right = 18, 260, 150
    height = 34 + row * len(shown)
    bound = max(0.05, *(abs(v) for d in shown for v in (d.low, d.high, d.difference) if v is not None))
    span = width - left - right

    def x(value: float) -> float:
        return left + (value + bound) / (2 * bound) * span

    parts = [f'<svg class="chart" role="img" aria-label="{escape(title)}" width="{width}" height="{height}" '
             f'xmlns="http://www.w3.org/2000/svg" font-family="sans-serif" font-size="11">',
             f'<text x="0" y="12" font-weight="bold">{escape(title)}</text>',
             f'<line x1="{x(0):.1f}" y1="20" x2="{x(0):.1f}" y2="{height - 12}" stroke="#888"/>',
             f'<text x="{x(-bound):.1f}" y="{height}" fill="#777" font-size="9">{_points(-bound)} pt</text>',
             f'<text x="{x(bound):.1f}" y="{height}" text-anchor="end" fill="#777" font-size="9">{_points(bound)} pt</text>']
    for i, d in enumerate(shown):
        assert d.difference is not None
        y = 22 + i * row + row / 2
        colour = STATE_COLOURS.get(difference_state(d.low, d.high, d.items), "#555")
        parts.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(d.split)} {escape(d.metric)}</text>')
        if d.low is not None and d.high is not None:
            parts.append(f'<line x1="{x(d.low):.1f}" y1="{y:.1f}" x2="{x(d.high):.1f}" y2="{y:.1f}" '
                         f'stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<circle cx="{x(d.difference):.1f}" cy="{y:.1f}" r="3.5" fill="{colour}"/>')
        parts.append(f'<text x="{left + span + 6}" y="{y + 4:.1f}">{_points(d.difference)} '
                     f'[{_points(d.low)}, {_points(d.high)}] n={d.items}</text>')
    parts.append("</svg>")
    return "".join(parts)


def family_table_rows(adaptive: Mapping[str, Any] | None) -> list[list[str]]:
    """The adaptive suite's per-family rows (family, n, current wrong, candidate wrong, accuracy current ->
    candidate, difference [interval]), as the CLI and the HTML page show them."""
    rows = []
    for row in (adaptive or {}).get("families") or []:
        now, new = row.get("current") or {}, row.get("candidate") or {}
        rows.append([str(row["family"]), f"{row['n']:,}", f"{now.get('wrong', 0):,}", f"{new.get('wrong', 0):,}",
                     f"{pct(now.get('accuracy'))} → {pct(new.get('accuracy'))}",
                     f"{_points(row.get('difference'))} [{_points(row.get('low'))}, {_points(row.get('high'))}]"])
    return rows


FAMILY_HEADERS = ["topic family", "n", "current wrong", "candidate wrong", "accuracy", "difference, points [95 %]"]


def adaptive_suite_html(adaptive: Mapping[str, Any] | None) -> list[str]:
    """The adaptive suite's section: which variants were scored (the rule) and the per-family table."""
    if not adaptive:
        return []
    out = ["<h2>Adaptive suite, per topic family</h2>", f"<p class='muted'>{escape(str(adaptive['rule']))} "
           "A topic's variants are resampled together (one seed, one unit). A family with few variants says "
           "little: the promotion rule judges the suite as a whole, as one more split.</p>"]
    rows = [[escape(cell) for cell in row] for row in family_table_rows(adaptive)]
    out.append(table(FAMILY_HEADERS, rows, numeric_from=1) if rows else
               "<p>No validated variant on the side scored.</p>")
    return out


def render_html(report: ComparisonReport, *, blur_words: Sequence[str] = ()) -> str:
    """``blur_words``: the reader's, where they browse masked: the example lists show them as dots."""
    doc: dict[str, Any] = report.document
    options = doc["options"]
    out = ["<!DOCTYPE html><html><head><meta charset='utf-8'>",
           f"<title>Comparison: {escape(doc['candidate']['name'])}</title><style>{CSS}</style></head><body>",
           f"<h1>{escape(doc['candidate']['name'])} against the current target</h1>",
           f"<p class='muted'>Task {escape(doc['task'])}, {escape(doc['created_at'])}. Current target: "
           f"{escape(doc['current']['name'])} ({', '.join(escape(m['sha256'][:12]) for m in doc['current']['members'])}). "
           f"Candidate sha256 {escape(report.candidate_sha256[:12])}. Intervals: {escape(options['interval'])}, "
           f"{int(options['confidence'] * 100)} %, {options['resamples']:,} resamples, seed {options['seed']}.</p>"]
    verdict = report.verdict  # the promotion rule: its sentence names the worst split; every split listed
    out.append(f"<div class='{'warning' if verdict.refused else 'note'}'>{escape(verdict.sentence)}<ul>"
               + "".join(f"<li>{escape(s.line())}</li>" for s in verdict.splits) + "</ul></div>")
    for warning in doc["evaluation"].get("warnings", []):
        out.append(f"<div class='warning'>{escape(warning)}</div>")
    rows = [[escape(d.split), escape(METRIC_NAMES.get(d.metric, d.metric)), pct(d.current), pct(d.candidate),
             _points(d.difference) + (" pt" if d.difference is not None else ""), f"[{_points(d.low)}, {_points(d.high)}]", f"{d.items:,}"]
            for d in report.differences]
    out.append("<h2>Differences (candidate − current)</h2>")
    out.append(table(["split", "metric", "current", "candidate", "difference", "95 % interval", "n"], rows,
                      numeric_from=2))
    out.append(interval_chart([d for d in report.differences if d.metric == "accuracy"],
                              title="Accuracy difference per split, with its interval"))
    out.append("<p class='muted'>“fooling examples now right”: of the round's held-out examples validated as "
               "fooling the model they were written against, the share each model labels correctly; the rest "
               "still fool it.</p>")
    out += adaptive_suite_html(doc.get("adaptive_suite"))
    out.append("<h2>Items on which the two models differ</h2>")
    if blur_words:
        out.append("<p class='muted'>Texts are shown with the task's blur words masked (•), as the reader's "
                   "wellbeing settings ask; comparison.json holds them in full.</p>")
    for split in doc["splits"]:
        differing = [item for item in split["items"] if item["current"]["label"] != item["candidate"]["label"]]
        body = [[escape(item["id"]), escape(blurred(item["text"], blur_words)[:200]), escape(item["gold"]),
                 escape(item["current"]["label"]), escape(item["candidate"]["label"])] for item in differing]
        out.append(f"<details><summary>{escape(split['name'])}: {len(differing)} of {len(split['items'])} items "
                   "answered differently</summary>")
        if body:
            out.append(table(["id", "text", "gold", "current", "candidate"], body, numeric_from=99))
        out.append("</details>")
    for note in doc["evaluation"].get("notes", []):
        out.append(f"<p class='muted'>{escape(note)}</p>")
    out.append("</body></html>")
    return "\n".join(out)
