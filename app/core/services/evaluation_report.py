"""A self-contained HTML report of an evaluation document: tables and inline SVG charts, no
scripts, no files beside it, nothing fetched. Every figure comes from the JSON document.

    write_html(doc, out / "report.html")
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape
from pathlib import Path

from app.core.formatting import num, pct
from app.core.io.html_report import CSS, Section, bar_chart, scale_colour, table
from app.core.services.evaluation_scoring import DIMENSIONS, PERFORMANCE_WEIGHTING
from app.core.wellbeing.blur import blurred


def render_html(doc: dict, *, blur_words: Sequence[str] = (), sections: Sequence[Section] = ()) -> str:
    """``blur_words``: the reader's, where they browse masked: the failing cases' texts show them as dots.
    ``sections``: parts another feature renders from the document, after the rounds table (the leaderboard:
    ``leaderboard_report.evaluation_sections``); this module imports none of them."""
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
    out.append(table(["Model", "Score (0–100)"] + [d.capitalize() for d in DIMENSIONS], rows))
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
    out.append(table(["Model", "Inputs/s (batched)", "Latency p50 ms", "Latency p95 ms", "Memory added MB",
                      "Peak RSS MB", "Distinct inputs", "Seconds"], rows))

    if doc["matrix"]["rows"]:
        out.append("<h2>Rounds × models</h2><p class='muted'>Accuracy / macro-F1 on each round's validated examples.</p>")
        head = "<tr><th>Round</th><th>n</th>" + "".join(f"<th>{escape(m['name'])}</th>" for m in models) + "</tr>"
        body = []
        for row in doc["matrix"]["rows"]:
            cells = "".join(
                f"<td class='num' style='background:{scale_colour(row['cells'][m['key']]['accuracy'])}'>"
                f"{pct(row['cells'][m['key']]['accuracy'])} / {num(row['cells'][m['key']]['macro_f1'])}</td>"
                for m in models)
            body.append(f"<tr><td>{escape(row['name'])}</td><td class='num'>{row['n']}</td>{cells}</tr>")
        all_cells = "".join(f"<td class='num'>{pct((doc['results'][m['key']].get('all_rounds') or {}).get('accuracy'))} / "
                            f"{num((doc['results'][m['key']].get('all_rounds') or {}).get('macro_f1'))}</td>" for m in models)
        body.append(f"<tr><th>All rounds</th><td></td>{all_cells}</tr>")
        out.append(f"<table>{head}{''.join(body)}</table>")

    for section in sections:  # e.g. the model leaderboard (app.core.next_round.leaderboard_report)
        out[0] = out[0].replace("</style>", section.css + "</style>")
        out.append(section.html)

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
                           + table(["Case", "Functionality", "Target", "Text", "Gold", "Predicted"], rows, 99)
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


def write_html(doc: dict, path: str | Path, *, blur_words: Sequence[str] = (), sections: Sequence[Section] = ()) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(doc, blur_words=blur_words, sections=sections), encoding="utf-8")
    return path
