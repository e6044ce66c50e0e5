"""The model leaderboard as text (``dynadesk rounds leaderboard``) and as HTML: a section of the
evaluation report (``evaluation_sections``, handed to evaluation_report.py, which imports nothing of the next
round) and a page of its own (``--html``). Self-contained, no scripts; every figure from the board
(leaderboard.py)."""

from __future__ import annotations

from collections.abc import Mapping
from html import escape
from pathlib import Path
from typing import Any

from app.core.errors import DynadeskError
from app.core.io.html_report import CSS as REPORT_CSS
from app.core.io.html_report import Section, scale_colour
from app.core.next_round.leaderboard_board import (
    FAILED,
    METRICS,
    MISSING,
    NO_FILES,
    STALE,
    Leaderboard,
    cell_detail,
    figure_text,
)

STALE_MARK = "*"
LEGEND = ("Models as rows, rounds as column groups; each round's figures are on its held-out split "
          "(about one decided example in ten, never trained on). \"Fooling now right\": of the split's "
          "validated fooling examples, the share the model now gets right.")


def _model_label(board: Leaderboard, row) -> str:
    marks = []
    if row.current:
        marks.append("current target")
    marks.append(f"target of round{'s' if len(row.rounds) > 1 else ''} {', '.join(map(str, row.rounds))}")
    return f"{row.name} ({'; '.join(marks)})"


def table_lines(board: Leaderboard) -> list[str]:
    """The board for a terminal: a header line per round group, a row per model; stale figures end in *."""
    from app.core.formatting import text_table

    if not board.rows or not board.columns:
        what = "no round has a target model" if not board.rows else "the task has no round"
        return [f"The {board.task_code} leaderboard is empty: {what}."]
    headers = ["model"]
    for _column in board.columns:  # the round's own name is on the group line above
        headers += [name for _key, name in METRICS]
    rows = []
    for row in board.rows:
        line = [("> " if row.current else "  ") + _model_label(board, row)]
        for column in board.columns:
            cell = board.cell(row, column)
            best = {metric: row.key in board.best(column, metric) for metric, _ in METRICS}
            for metric, _name in METRICS:
                if not cell.has_figures and metric != METRICS[0][0]:
                    line.append("")  # a state is said once per round
                    continue
                text = figure_text(cell, metric) + (STALE_MARK if cell.state == STALE else "")
                if metric == "accuracy" and cell.low is not None and cell.high is not None:
                    text += f" [{100 * cell.low:.0f}–{100 * cell.high:.0f}]"
                line.append(text + (" +" if best[metric] else ""))
        rows.append(line)
    table, widths = text_table(headers, rows)
    groups = ["".ljust(widths[0])]
    for i, column in enumerate(board.columns):
        span = sum(widths[1 + 3 * i: 4 + 3 * i]) + 4
        groups.append(column.header[:span].ljust(span))
    lines = ["  ".join(groups).rstrip(), *table, ""]
    lines.append("> the current target; [low–high] the 95 % bootstrap interval of accuracy; + best in its "
                 "column; * stale (the split changed since it was scored: --refresh scores it again).")
    counts = board.counts()
    if counts.get(MISSING):
        lines.append(f"{counts[MISSING]} cell(s) not scored yet.")
    if counts.get(NO_FILES):
        lines.append(f"{counts[NO_FILES]} cell(s): the model's files are not on this desk.")
    for column in (c for c in board.columns if c.suite):
        lines.append(column.rule)
        for row in board.rows:
            families = board.cell(row, column).families
            if families and board.cell(row, column).has_figures:
                lines.append(f"{row.name}, adaptive suite per topic family: "
                             + ", ".join(f"{family} {wrong} of {n} wrong" for family, wrong, n in families) + ".")
    for row in board.rows:
        for column in board.columns:
            cell = board.cell(row, column)
            if cell.state == FAILED:
                lines.append(f"{row.name}, {column.title.lower()}: {cell.note}.")
            if cell.has_figures and cell.overlap:
                lines.append(f"WARNING: {row.name}, {column.title.lower()}: {cell.overlap} held-out example(s) "
                             "appear in its training data.")
    return lines


CSS = """
table.leaderboard td.best{font-weight:bold;outline:2px solid #2e7d32;outline-offset:-2px}
table.leaderboard td.stale{color:#8a6d00;font-style:italic}table.leaderboard td.state{color:#777}
table.leaderboard tr.current td:first-child{font-weight:bold}table.leaderboard th.group{text-align:center}
"""


def render_section(board: Leaderboard) -> str:
    """The leaderboard as an HTML section (a heading, a legend, one table)."""
    out = ["<h2>Model leaderboard</h2>", f"<p class='muted'>{escape(LEGEND)} Best in each column outlined; "
           "stale figures (the split changed since they were scored) in italics; "
           "hover a cell for its n and 95 % interval.</p>"]
    if not board.rows or not board.columns:
        out.append("<p>" + escape(table_lines(board)[0]) + "</p>")
        return "\n".join(out)
    head = ["<tr><th rowspan='2'>Model</th>"]
    head += [f"<th class='group' colspan='{len(METRICS)}'>{escape(c.title)} <span class='muted'>"
             f"({escape(c.header.split('(', 1)[1])}</span></th>" for c in board.columns]
    head.append("</tr><tr>" + "".join(f"<th>{escape(name)}</th>" for _c in board.columns for _k, name in METRICS)
                + "</tr>")
    body = []
    for row in board.rows:
        cells = [f"<td>{escape(row.name)}" + (" <b>(current target)</b>" if row.current else "")
                 + f"<br><span class='muted'>round{'s' if len(row.rounds) > 1 else ''} "
                 f"{', '.join(map(str, row.rounds))}</span></td>"]
        for column in board.columns:
            cell = board.cell(row, column)
            tip = escape(cell_detail(row, column, cell))
            if not cell.has_figures:  # a state is said once, across the round's columns
                cells.append(f"<td class='state' colspan='{len(METRICS)}' title='{tip}'>"
                             f"{escape(figure_text(cell, METRICS[0][0]))}</td>")
                continue
            for metric, _name in METRICS:
                classes = ["num"] + (["best"] if row.key in board.best(column, metric) else []) \
                    + (["stale"] if cell.state == STALE else [])
                value = getattr(cell, metric)
                style = f" style='background:{scale_colour(value)}'" if metric != "macro_f1" and value is not None else ""
                text = escape(figure_text(cell, metric)) + (" (stale)" if cell.state == STALE else "")
                if metric == "accuracy":
                    text += f"<br><span class='muted'>[{escape(_interval(cell))}]</span>"
                cells.append(f"<td class='{' '.join(classes)}' title='{tip}'{style}>{text}</td>")
        body.append(f"<tr{' class=current' if row.current else ''}>{''.join(cells)}</tr>")
    out.append(f"<table class='leaderboard'>{''.join(head)}{''.join(body)}</table>")
    notes = [f"{escape(r.name)}: {escape(r.unavailable)}." for r in board.rows if r.unavailable]
    notes += [f"{escape(r.name)}, {escape(c.title.lower())}: {escape(board.cell(r, c).note)}." for r in board.rows
              for c in board.columns if board.cell(r, c).state == FAILED]
    notes += [f"{escape(r.name)}, {escape(c.title.lower())}: {board.cell(r, c).overlap} held-out example(s) appear in its "
              "training data; those figures are not test figures." for r in board.rows for c in board.columns
              if board.cell(r, c).has_figures and board.cell(r, c).overlap]
    if notes:
        out.append("<ul>" + "".join(f"<li>{n}</li>" for n in notes) + "</ul>")
    return "\n".join(out)


def evaluation_sections(doc: Mapping[str, Any]) -> list[Section]:
    """The evaluation report's leaderboard section, from the board an evaluation document carries (none
    when it carries none; a note when it cannot be read)."""
    if not doc.get("leaderboard"):
        return []
    try:
        return [Section(render_section(Leaderboard.from_json(doc["leaderboard"])), CSS)]
    except (DynadeskError, KeyError, TypeError, ValueError) as exc:  # a hand-edited or foreign document
        return [Section(f"<h2>Model leaderboard</h2><div class='note'>The leaderboard in this document cannot be "
                        f"read ({escape(str(exc))}); `dynadesk rounds leaderboard --html FILE` writes it anew.</div>")]


def _interval(cell) -> str:
    from app.core.formatting import pct

    return f"{pct(cell.low)} – {pct(cell.high)}"


def render_page(board: Leaderboard) -> str:
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Dynadesk leaderboard: "
            f"{escape(board.task_name)}</title><style>{REPORT_CSS}{CSS}</style></head><body>"
            f"<h1>Dynadesk leaderboard: {escape(board.task_name)}</h1>"
            f"<p class='muted'>Task <code>{escape(board.task_code)}</code>, read {escape(board.read_at)}.</p>"
            f"{render_section(board)}</body></html>")


def write_html(board: Leaderboard, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    part = path.with_name(path.name + ".part")
    part.write_text(render_page(board), encoding="utf-8")
    part.replace(path)
    return path


def write_json(board: Leaderboard, path: Path) -> Path:
    from app.core.io.documents import write_document

    return write_document(board.to_json(), Path(path))
