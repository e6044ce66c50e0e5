"""What the Evaluate tab shows and sends, as typed values: the model choices, the settings of a run,
and an evaluation document's overview and per-model, per-set details with their text formatted.

Built by pure functions from the evaluation document (app/core/services/evaluation.py writes it) and model
records; the scoring's definitions (its dimensions, how sets are weighted, the failing cases) are
handed in by the controller, because widgets import this module and the services reach the storage layer."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from app.core.formatting import MISSING, num, pct
from app.core.wellbeing.blur import mask_spans, masked_text

SMALL_SET = 30  # fewer cases than this: one case moves the set's F1 by several points


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """An entry of the model list: a model to tick, or (``formats``) one model held in several formats."""

    key: str
    name: str
    detail: str = ""  # the tooltip
    checked: bool = False
    formats: tuple[ModelChoice, ...] = ()


class _Record(Protocol):
    id: Any
    name: str
    format: str
    sha256: str


def model_choice(members: Sequence[_Record], labels: Sequence[str], family: str, name: str = "", *,
                 checked: bool = False) -> ModelChoice:
    """One entry per model (``name``, or the ``family`` name its records share); a model held in several
    formats (``labels``: "ONNX int8", ...) lists them under it, the fastest (ONNX, int8 before fp32)
    ticked when ``checked``."""
    def detail(record: Any) -> str:
        return f"{record.name}: {record.format}, sha256 {record.sha256[:12]}…"

    if len(members) == 1:
        return ModelChoice(str(members[0].id), name or members[0].name, detail(members[0]), checked)
    fastest = min(range(len(members)), key=lambda i: ("ONNX int8", "ONNX").index(labels[i])
                  if labels[i].startswith("ONNX") else 9)
    return ModelChoice(
        "", name or family, f"{family}: one model in {len(members)} formats; tick the ones to evaluate.",
        formats=tuple(ModelChoice(str(r.id), label, detail(r), checked and i == fastest)
                      for i, (r, label) in enumerate(zip(members, labels))))


@dataclass(frozen=True, slots=True)
class Weight:
    dimension: str
    default: float

    @property
    def title(self) -> str:
        return self.dimension.capitalize()


def weights(dimensions: Sequence[str], defaults: Mapping[str, float]) -> tuple[Weight, ...]:
    return tuple(Weight(d, defaults[d]) for d in dimensions)


@dataclass(frozen=True, slots=True)
class EvaluationSettings:
    """What the user asked to run."""

    models: tuple[str, ...]  # keys of the ticked choices
    rounds: bool  # every round's validated examples
    suite: str  # a HateCheck-format file, or ""
    data: str  # a labelled data file, or ""
    training_data: str
    identity_swap: bool
    robustness: bool
    weights: tuple[tuple[str, float], ...]  # (dimension, weight)

    def weight_map(self) -> dict[str, float]:
        return dict(self.weights)


@dataclass(frozen=True, slots=True)
class GridCell:
    text: str
    shade: float | None = None  # 0 (red) .. 1 (green) behind the text, or none
    right: bool = False  # figures align right


@dataclass(frozen=True, slots=True)
class Grid:
    headers: tuple[str, ...]
    rows: tuple[tuple[GridCell, ...], ...]


def grid_cell(value: object, shade: float | None = None) -> GridCell:
    text = str(value)
    return GridCell(text, shade, isinstance(value, str) and text[:1].isdigit() or text == MISSING)


def grid(headers: Sequence[str], rows: Sequence[Sequence[object]],
         shades: Sequence[Sequence[float | None]] | None = None) -> Grid:
    return Grid(tuple(headers), tuple(
        tuple(grid_cell(value, shades[r][c] if shades else None) for c, value in enumerate(row))
        for r, row in enumerate(rows)))


@dataclass(frozen=True, slots=True)
class Choice:
    key: str
    name: str


@dataclass(frozen=True, slots=True)
class OverviewView:
    """Warnings, the summary table, the round matrix and the model and set choices of a document."""

    warnings: tuple[str, ...]
    summary: Grid
    explanation: str  # rich text under the summary
    matrix: Grid
    models: tuple[Choice, ...]
    sets: tuple[Choice, ...]
    preferred_set: int = 0  # the set shown first: the suite when there is one
    report: bool = True


@dataclass(frozen=True, slots=True)
class AccuracyBar:
    name: str
    accuracy: float | None
    label: str  # "83.3% of 12"


@dataclass(frozen=True, slots=True)
class FailingCase:
    id: str
    functionality: str
    target: str
    text: str
    gold: str
    predicted: str
    confidence: str


@dataclass(frozen=True, slots=True)
class DetailsView:
    """One model on one set: figures (rich text), charts and failing cases."""

    figures: str
    functionalities: tuple[AccuracyBar, ...]
    targets: tuple[AccuracyBar, ...]
    failing: tuple[FailingCase, ...]
    failing_table: Grid


def set_label(eval_set: Mapping[str, Any]) -> str:
    """A set's short name: "Round 2", "test_suite_cases_dev", "held-out.csv" (the count goes beside it)."""
    return str(eval_set["name"]).split(" (")[0]


def performance_note(sets: Sequence[Mapping[str, Any]], weighting: str) -> str:
    """How Performance is weighted, with each set's size: a few round examples count as much as a suite."""
    sized = ", ".join(f"{set_label(s)} (n={len(s['cases']):,})" for s in sets)
    if len(sets) == 1:
        return f"<b>Performance</b> = macro-F1 on {sized}."
    note = (f"<b>Performance</b> = mean of the macro-F1 of {len(sets)} sets, {weighting}: "
            f"{sized}. Each set's own F1 is in its column.")
    small = [set_label(s) for s in sets if len(s["cases"]) < SMALL_SET]
    if small:
        note += f" {', '.join(small)}: under {SMALL_SET} cases, a rough figure that still counts fully."
    return note


def elide(name: str, width: int = 36) -> str:
    """Headers do not elide by themselves: keep the start and the end (where ONNX / PyTorch is)."""
    return name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width // 2):]


def build_overview(doc: Mapping[str, Any], dimensions: Sequence[str], weighting: str) -> OverviewView:
    """The summary, matrix and choices of an evaluation document (``dimensions`` of the score,
    performance first; ``weighting``: how the sets' F1 make Performance)."""
    models = doc["models"]
    sets = [s for s in doc["sets"] if s["cases"]]
    rest = [d for d in dimensions if d != "performance"]
    headers = (["Model", "Score", f"Performance\nmean of {len(sets)} sets" if len(sets) > 1 else "Performance"]
               + [f"{set_label(s)}\nF1, n={len(s['cases']):,}" for s in sets]
               + [d.capitalize() for d in rest] + ["Inputs/s", "p95 ms", "Memory MB"])
    rows, colours = [], []
    for m in models:
        r = doc["results"][m["key"]]
        u = r["score"]["utilities"]
        run = r.get("run") or {}
        f1s = [r["sets"][s["key"]]["macro_f1"] for s in sets]
        rows.append([m["name"], num(r["score"]["score"], 1), num(u["performance"], 2)] + [num(f, 2) for f in f1s]
                    + [num(u[d], 2) for d in rest]
                    + [f"{run.get('items_per_second', 0):.0f}", num(run.get("latency_p95_ms"), 1),
                       num(run.get("memory_mb"), 0)])
        colours.append([None, None, u["performance"]] + f1s + [u[d] for d in rest] + [None, None, None])
    weights_used = doc["options"]["weights"]
    first = doc["results"][models[0]["key"]]
    lines = ["<b>Score</b> = 100 × Σ weight × utility ÷ Σ weight (weights: "
             + ", ".join(f"{d} {weights_used[d]:g}" for d in dimensions) + ")."]
    lines.append(performance_note(sets, weighting))
    if first.get("identity_swap"):
        s = first["identity_swap"]
        lines.append(f"Identity swap ({models[0]['name']}): prediction unchanged in {pct(s['consistency'])} "
                     f"of {s['variants']} swaps.")
    if first.get("robustness"):
        rb = first["robustness"]
        kinds = ", ".join(f"{k.replace('_', ' ')} {pct(v['accuracy'])}" for k, v in rb["kinds"].items())
        lines.append(f"Spelling perturbations: accuracy {pct(rb['accuracy'])} vs {pct(rb['clean_accuracy'])} clean ({kinds}).")
    notes = doc.get("notes") or []
    lines += [f"<span style='color:#555'>{n}</span>" for n in notes]
    m_headers = ["Round", "n"] + [elide(m["name"]) for m in models]
    m_rows, m_colours = [], []
    for row in doc["matrix"]["rows"]:
        cells = [row["cells"][m["key"]] for m in models]
        m_rows.append([row["name"], str(row["n"])] + [f"{pct(c['accuracy'])} / F1 {num(c['macro_f1'], 2)}" for c in cells])
        m_colours.append([None, None] + [c["accuracy"] for c in cells])
    if doc["matrix"]["rows"]:
        totals = [doc["results"][m["key"]].get("all_rounds") or {} for m in models]
        m_rows.append(["All rounds", str(sum(r["n"] for r in doc["matrix"]["rows"]))]
                      + [f"{pct(t.get('accuracy'))} / F1 {num(t.get('macro_f1'), 2)}" for t in totals])
        m_colours.append([None, None] + [t.get("accuracy") for t in totals])
    else:
        m_rows.append(["(no round has validated examples yet)", ""] + ["" for _ in models])
        m_colours.append([None] * (2 + len(models)))
    all_sets = tuple(Choice(s["key"], s["name"]) for s in doc["sets"])
    return OverviewView(
        warnings=tuple(doc.get("warnings") or ()), summary=grid(headers, rows, colours),
        explanation="<br>".join(lines), matrix=grid(m_headers, m_rows, m_colours),
        models=tuple(Choice(m["key"], m["name"]) for m in models), sets=all_sets,
        preferred_set=next((i for i, s in enumerate(all_sets) if s.key == "suite"), 0))


FAILING_HEADERS = ("Case", "Functionality", "Target", "Text", "Gold", "Predicted", "p")


def build_details(doc: Mapping[str, Any], model_key: str, set_key: str,
                  failing: Sequence[Mapping[str, Any]], *, blur_words: Sequence[str] = ()) -> DetailsView:
    """One model on one set; ``failing``: its failing cases (evaluation_scoring.failing_cases);
    ``blur_words``: the task's blur list where the reader browses masked (the table's text shows them
    as dots; the case opened in Create is the writer's own, unmasked)."""
    f = doc["results"][model_key]["sets"][set_key]
    parts = [f"Accuracy <b>{pct(f['accuracy'])}</b>, macro-F1 <b>{num(f['macro_f1'])}</b> over {f['n']} cases."]
    if f.get("target_gap"):
        g = f["target_gap"]
        parts.append(f"Largest gap between target groups: <b>{pct(g['gap'])}</b> ({g['best']} vs {g['worst']}).")
    if f.get("pairs"):
        p = f["pairs"]
        parts.append(f"Pairs: both right in {pct(p['consistency'])} of {p['n']}; prediction flipped with the label "
                     f"in {pct(p['flip_sensitivity'])} of {p['label_flipping']}.")
    functionalities = sorted((f.get("functionalities") or {}).items(), key=lambda kv: (kv[1]["accuracy"], kv[0]))
    rows = [[r["id"], r.get("functionality") or "", r.get("target") or "", r["text"], r["gold"], r["predicted"],
             num(r.get("confidence"), 2)] for r in failing]
    return DetailsView(
        figures=" ".join(parts),
        functionalities=tuple(AccuracyBar(k, v["accuracy"], f"{pct(v['accuracy'])} of {v['n']}")
                              for k, v in functionalities),
        targets=tuple(AccuracyBar(k, v["accuracy"], f"{pct(v['accuracy'])} of {v['n']}")
                      for k, v in (f.get("targets") or {}).items()),
        failing=tuple(FailingCase(id=str(case_id), functionality=functionality, target=target, text=str(text),
                                  gold=str(gold), predicted=str(predicted), confidence=confidence)
                      for case_id, functionality, target, text, gold, predicted, confidence in rows),
        failing_table=grid(FAILING_HEADERS, [[*r[:3], _masked(str(r[3]), blur_words), *r[4:]] for r in rows]),
    )


def _masked(text: str, words: Sequence[str]) -> str:
    return masked_text(text, mask_spans(text, words)) if words else text
