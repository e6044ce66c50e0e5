"""A self-contained HTML report of an evaluation document: tables and inline SVG charts, no
scripts, no files beside it, nothing fetched. Every figure comes from the JSON document.

    write_html(doc, out / "report.html")
"""

from __future__ import annotations

from html import escape
from pathlib import Path
from typing import Sequence

from app.core.errors import DynadeskError
from app.core.formatting import num, pct
from app.core.services.evaluation_scoring import DIMENSIONS, PERFORMANCE_WEIGHTING
from app.core.wellbeing.blur import blurred

CSS = """
body{font-family:system-ui,-apple-system,'Segoe UI',sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{margin-top:2em;border-bottom:1px solid #ddd;padding-bottom:.2em}h3{margin-top:1.4em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #ddd;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.num{text-align:right;font-variant-numeric:tabular-nums}
.warning{background:#fde2e1;border:2px solid #c62828;color:#7f1010;padding:.8em 1em;font-weight:bold;margin:1em 0}
.note{background:#f5f5f5;border-left:4px solid #999;padding:.5em 1em;margin:.6em 0}
.muted{color:#666}.chart{margin:.6em 0}details{margin:.6em 0}code{background:#f4f4f4;padding:0 .2em}
"""




def _colour(value: float | None) -> str:
    """Red (0) through yellow to green (1), light enough for black text."""
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
                         f'fill="{_colour(value)}" stroke="#888" stroke-width="0.5"><title>{escape(label)}: '
                         f'{pct(value)} {escape(note)}</title></rect>')
        parts.append(f'<text x="{left + span + 4}" y="{y + 11}">{pct(value)} {escape(note)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def _table(headers: list[str], rows: list[list[str]], numeric_from: int = 1) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f'<td class="num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>" for i, c in enumerate(r))
        + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(doc: dict, *, blur_words: Sequence[str] = ()) -> str:
    """``blur_words``: the reader's, where they browse masked: the failing cases' texts show them as dots."""
    models = doc["models"]
    sets = {s["key"]: s for s in doc["sets"]}
    out = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>Dynadesk evaluation</title>"
           f"<style>{CSS}</style></head><body>",
           "<h1>Dynadesk evaluation</h1>",
           f"<p class='muted'>Task <code>{escape(doc['task'])}</code>, {escape(doc['created_at'])}, "
           f"{escape(doc['machine']['platform'])}. Every figure below is recomputable from the per-case "
           "predictions in the JSON file written beside this report.</p>"]
    for warning in doc.get("warnings", []):
        out.append(f"<div class='warning'>{escape(warning)}</div>")
    for note in doc.get("notes", []):
        out.append(f"<div class='note'>{escape(note)}</div>")

    out.append("<h2>Summary</h2>")
    rows = []
    for m in models:
        r = doc["results"][m["key"]]
        u = r["score"]["utilities"]
        rows.append([escape(m["name"]), num(r["score"]["score"], 1)] + [num(u[d], 3) for d in DIMENSIONS])
    out.append(_table(["Model", "Score (0–100)"] + [d.capitalize() for d in DIMENSIONS], rows))
    weights = doc["options"]["weights"]
    out.append("<p class='muted'>Score = 100 × Σ weight × utility ÷ Σ weight over the dimensions measured; weights: "
               + ", ".join(f"{d} {weights[d]:g}" for d in DIMENSIONS) + ". See docs/evaluation.md.</p>")
    out.append("<p class='muted'>Performance = mean of the sets' macro-F1, " + escape(PERFORMANCE_WEIGHTING) + ": "
               + "; ".join(escape(m["name"]) + ": " + ", ".join(
                   f"{escape(sets[part['set']]['name'])} {num(part['macro_f1'])} (n={part['n']:,})"
                   for part in (doc["results"][m["key"]].get("performance") or {}).get("sets", []))
                   for m in models) + ".</p>")
    rows = []
    for m in models:
        run = doc["results"][m["key"]]["run"] or {}
        rows.append([escape(m["name"]), f"{run.get('items_per_second', 0):.0f}", num(run.get("latency_p50_ms"), 1),
                     num(run.get("latency_p95_ms"), 1), num(run.get("memory_mb"), 0), num(run.get("peak_rss_mb"), 0),
                     str(run.get("distinct_inputs", "")), num(run.get("seconds"), 1)])
    out.append(_table(["Model", "Inputs/s (batched)", "Latency p50 ms", "Latency p95 ms", "Memory added MB",
                       "Peak RSS MB", "Distinct inputs", "Seconds"], rows))

    if doc["matrix"]["rows"]:
        out.append("<h2>Rounds × models</h2><p class='muted'>Accuracy / macro-F1 on each round's validated examples.</p>")
        head = "<tr><th>Round</th><th>n</th>" + "".join(f"<th>{escape(m['name'])}</th>" for m in models) + "</tr>"
        body = []
        for row in doc["matrix"]["rows"]:
            cells = "".join(
                f"<td class='num' style='background:{_colour(row['cells'][m['key']]['accuracy'])}'>"
                f"{pct(row['cells'][m['key']]['accuracy'])} / {num(row['cells'][m['key']]['macro_f1'])}</td>"
                for m in models)
            body.append(f"<tr><td>{escape(row['name'])}</td><td class='num'>{row['n']}</td>{cells}</tr>")
        all_cells = "".join(f"<td class='num'>{pct((doc['results'][m['key']].get('all_rounds') or {}).get('accuracy'))} / "
                            f"{num((doc['results'][m['key']].get('all_rounds') or {}).get('macro_f1'))}</td>" for m in models)
        body.append(f"<tr><th>All rounds</th><td></td>{all_cells}</tr>")
        out.append(f"<table>{head}{''.join(body)}</table>")

    if doc.get("leaderboard"):  # every model the task has had, on every round's held-out split (leaderboard.py)
        from app.core.next_round.leaderboard_board import Leaderboard
        from app.core.next_round.leaderboard_report import CSS as LEADERBOARD_CSS, render_section

        out[0] = out[0].replace("</style>", LEADERBOARD_CSS + "</style>")
        try:
            out.append(render_section(Leaderboard.from_json(doc["leaderboard"])))
        except (DynadeskError, KeyError, TypeError, ValueError) as exc:  # a hand-edited or foreign document
            out.append(f"<h2>Model leaderboard</h2><div class='note'>The leaderboard in this document cannot be "
                       f"read ({escape(str(exc))}); `dynadesk rounds leaderboard --html FILE` writes it anew.</div>")

    for m in models:
        r = doc["results"][m["key"]]
        out.append(f"<h2>{escape(m['name'])}</h2>")
        for key, f in r["sets"].items():
            s = sets[key]
            out.append(f"<h3>{escape(s['name'])}</h3>")
            out.append(f"<p>Accuracy <b>{pct(f['accuracy'])}</b>, macro-F1 <b>{num(f['macro_f1'])}</b> over {f['n']} cases. "
                       + "; ".join(f"{escape(k)}: {pct(v['accuracy'])} of {v['n']}" for k, v in f["per_label"].items())
                       + ".</p>")
            if f.get("functionalities"):
                items = sorted(f["functionalities"].items(), key=lambda kv: kv[1]["accuracy"])
                out.append(bar_chart([(k, v["accuracy"], f"of {v['n']} ({v['gold']})") for k, v in items],
                                     title="Accuracy per functionality (worst first)"))
            if f.get("targets"):
                out.append(bar_chart([(k, v["accuracy"], f"of {v['n']}") for k, v in f["targets"].items()],
                                     title="Accuracy per target group"))
                gap = f.get("target_gap")
                if gap:
                    out.append(f"<p>Largest gap between target groups: <b>{pct(gap['gap'])}</b> "
                               f"({escape(gap['best'])} vs {escape(gap['worst'])}; groups with ≥ {gap['min_cases']} cases).</p>")
            if f.get("pairs"):
                p = f["pairs"]
                out.append(f"<p>Pairs: {p['n']}; both halves right in <b>{pct(p['consistency'])}</b>; of the "
                           f"{p['label_flipping']} pairs whose labels differ, the prediction flipped in "
                           f"<b>{pct(p['flip_sensitivity'])}</b>.</p>")
            failing = [c for c in s["cases"] if c["id"] in set(f["failing"])]
            if failing:
                preds = m["predictions"][key]
                rows = [[escape(c["id"]), escape(c.get("functionality") or ""), escape(c.get("target") or ""),
                         escape(blurred(c["text"], blur_words)), escape(c["gold"]), escape(preds[c["id"]]["label"])] for c in failing[:300]]
                more = f" (first 300 of {len(failing)})" if len(failing) > 300 else ""
                out.append(f"<details><summary>{len(failing)} failing case(s){more}</summary>"
                           + _table(["Case", "Functionality", "Target", "Text", "Gold", "Predicted"], rows, 99)
                           + "</details>")
        swap = r.get("identity_swap")
        if swap:
            out.append("<h3>Identity swap</h3>")
            out.append(f"<p>{swap['cases']} sentences naming a group, each rewritten to name the others "
                       f"({swap['variants']} swaps): the prediction stayed the same in <b>{pct(swap['consistency'])}</b>.</p>")
            out.append(bar_chart([(k, v["accuracy"], f"of {v['n']}") for k, v in swap["groups"].items()],
                                 title="Accuracy when the sentence names this group"))
        robust = r.get("robustness")
        if robust:
            out.append("<h3>Robustness to spelling</h3>")
            items = [("clean (same cases)", robust["clean_accuracy"], "")] + [
                (k.replace("_", " "), v["accuracy"], f"flips {pct(v['flip_rate'])}") for k, v in robust["kinds"].items()]
            out.append(bar_chart(items, title="Accuracy under spelling perturbations"))
        out.append("<h3>Training data overlap</h3><ul>")
        for check in m["overlap"]["checks"]:
            style = " class='warning'" if check["status"] == "overlap" else ""
            out.append(f"<li{style}>{escape(check['message'])}</li>")
        out.append("</ul>")
    out.append("</body></html>")
    return "\n".join(out)


def write_html(doc: dict, path: str | Path, *, blur_words: Sequence[str] = ()) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(doc, blur_words=blur_words), encoding="utf-8")
    return path
