"""Evaluation figures from cases and predictions alone: metrics, fairness and robustness, weighted scores, summaries."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

from app.core.formatting import num, pct
from app.core.services.evaluation_data import PERTURBATIONS, EvalSet, Variant

DIMENSIONS = ("performance", "throughput", "memory", "fairness", "robustness")
# Performance counts most, the others once each, as Dynabench's default leaderboard weighting.
DEFAULT_WEIGHTS = {"performance": 4.0, "throughput": 1.0, "memory": 1.0, "fairness": 1.0, "robustness": 1.0}
THROUGHPUT_HALF = 100.0  # examples per second that score 0.5 on throughput
MEMORY_HALF_MB = 1024.0  # resident memory that scores 0.5 on memory
MIN_GROUP_CASES = 10  # target groups with fewer cases are listed but left out of the gap



def prefetch_metrics() -> None:
    """Import scikit-learn's metrics on a background thread: the import takes about 2 s, which an
    evaluation otherwise pays after its predictions; started first, it overlaps them (the model
    releases the interpreter while it computes)."""
    import importlib
    import sys
    import threading

    if "sklearn.metrics" not in sys.modules:
        threading.Thread(target=importlib.import_module, args=("sklearn.metrics",), name="prefetch-sklearn",
                         daemon=True).start()


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float | None:
    """scikit-learn's accuracy_score; None without cases."""
    if not gold:
        return None
    from sklearn.metrics import accuracy_score  # a second to import: only when figures are computed

    return float(accuracy_score(gold, predicted))


def macro_f1(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str] | None = None) -> float | None:
    """scikit-learn's f1_score(average='macro') over ``labels`` (default: every label in gold or
    predicted); a label never predicted nor gold scores 0. None without cases."""
    if not gold:
        return None
    from sklearn.metrics import f1_score

    return float(f1_score(gold, predicted, labels=None if labels is None else list(labels), average="macro",
                          zero_division=0))


def _group_figures(items: list[tuple[str | None, bool]]) -> dict[str, dict]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for key, correct in items:
        if key:
            groups[key].append(correct)
    return {k: {"n": len(v), "correct": sum(v), "accuracy": sum(v) / len(v)} for k, v in sorted(groups.items())}


def _gap(groups: dict[str, dict], minimum: int = MIN_GROUP_CASES) -> dict | None:
    counted = {k: v for k, v in groups.items() if v["n"] >= minimum}
    if len(counted) < 2:
        return None
    best = max(counted, key=lambda k: counted[k]["accuracy"])
    worst = min(counted, key=lambda k: counted[k]["accuracy"])
    return {"gap": counted[best]["accuracy"] - counted[worst]["accuracy"], "best": best, "worst": worst,
            "groups_counted": len(counted), "min_cases": minimum}


def set_figures(eval_set: EvalSet, predictions: dict[str, dict]) -> dict:
    """Every figure of one set from its cases and one model's predictions of them."""
    cases = eval_set.cases
    gold = [c.gold for c in cases]
    predicted = [predictions[c.id]["label"] for c in cases]
    correct = {c.id: g == p for c, g, p in zip(cases, gold, predicted)}
    figures: dict[str, Any] = {
        "n": len(cases), "correct": sum(correct.values()), "accuracy": accuracy(gold, predicted),
        "macro_f1": macro_f1(gold, predicted),
        "per_label": {label: {"n": gold.count(label), "accuracy": accuracy(
            [g for g in gold if g == label], [p for g, p in zip(gold, predicted) if g == label])}
            for label in sorted(set(gold))},
        "confusion": {f"{g} -> {p}": n for (g, p), n in sorted(Counter(zip(gold, predicted)).items())},
        "failing": [c.id for c in cases if not correct[c.id]],
    }
    if any(c.functionality for c in cases):
        groups = _group_figures([(c.functionality, correct[c.id]) for c in cases])
        for name, entry in groups.items():
            golds = {c.gold for c in cases if c.functionality == name}
            entry["gold"] = golds.pop() if len(golds) == 1 else "mixed"
        figures["functionalities"] = groups
    if any(c.target for c in cases):
        figures["targets"] = _group_figures([(c.target, correct[c.id]) for c in cases])
        figures["target_gap"] = _gap(figures["targets"])
    if eval_set.pairs:
        pairs = [(a, b) for a, b in eval_set.pairs if a in correct and b in correct]
        by_id = {c.id: c for c in cases}
        flipping = [(a, b) for a, b in pairs if by_id[a].gold != by_id[b].gold]
        figures["pairs"] = {
            "n": len(pairs),
            "consistency": sum(correct[a] and correct[b] for a, b in pairs) / len(pairs) if pairs else None,
            "label_flipping": len(flipping),
            "flip_sensitivity": (sum(predictions[a]["label"] != predictions[b]["label"] for a, b in flipping)
                                 / len(flipping)) if flipping else None,
        }
    return figures


def swap_figures(variants: list[Variant], sets: dict[str, EvalSet], predictions: dict, variant_predictions: dict) -> dict | None:
    swaps = [v for v in variants if v.kind == "identity_swap"]
    if not swaps:
        return None
    cases = {(k, c.id): c for k, s in sets.items() for c in s.cases}
    same, items, originals = [], [], set()
    for v in swaps:
        case = cases[(v.set, v.case)]
        original = predictions[v.set][v.case]["label"]
        label = variant_predictions[v.id]
        same.append(label == original)
        items.append((v.group, label == case.gold))
        if (v.set, v.case) not in originals:
            originals.add((v.set, v.case))
            items.append((case.target, original == case.gold))
    groups = _group_figures(items)
    return {"variants": len(swaps), "cases": len(originals), "consistency": sum(same) / len(same),
            "changed": len(same) - sum(same), "groups": groups, "gap": _gap(groups, minimum=1)}


def robustness_figures(variants: list[Variant], sets: dict[str, EvalSet], predictions: dict, variant_predictions: dict) -> dict | None:
    noisy = [v for v in variants if v.kind in PERTURBATIONS]
    if not noisy:
        return None
    gold = {(k, c.id): c.gold for k, s in sets.items() for c in s.cases}
    kinds = {}
    for kind in PERTURBATIONS:
        chosen = [v for v in noisy if v.kind == kind]
        if not chosen:
            continue
        clean = [predictions[v.set][v.case]["label"] == gold[(v.set, v.case)] for v in chosen]
        perturbed = [variant_predictions[v.id] == gold[(v.set, v.case)] for v in chosen]
        changed = [variant_predictions[v.id] != predictions[v.set][v.case]["label"] for v in chosen]
        kinds[kind] = {"n": len(chosen), "clean_accuracy": sum(clean) / len(clean),
                       "accuracy": sum(perturbed) / len(perturbed), "flip_rate": sum(changed) / len(changed)}
    all_clean = [predictions[v.set][v.case]["label"] == gold[(v.set, v.case)] for v in noisy]
    all_noisy = [variant_predictions[v.id] == gold[(v.set, v.case)] for v in noisy]
    clean_acc, noisy_acc = sum(all_clean) / len(all_clean), sum(all_noisy) / len(all_noisy)
    return {"kinds": kinds, "n": len(noisy), "clean_accuracy": clean_acc, "accuracy": noisy_acc,
            "ratio": noisy_acc / clean_acc if clean_acc else None}


PERFORMANCE_WEIGHTING = "each set counts equally, whatever its number of cases"


def performance_parts(figures: dict) -> list[dict]:
    """What the performance utility averages: each set's macro-F1 and its number of cases."""
    return [{"set": key, "n": s["n"], "macro_f1": s["macro_f1"]} for key, s in figures["sets"].items()
            if s["macro_f1"] is not None]


def utilities(figures: dict) -> dict[str, float | None]:
    """Each dimension on a 0..1 scale, higher is better (docs/evaluation.md gives the reasons)."""
    f1s = [part["macro_f1"] for part in performance_parts(figures)]
    run = figures.get("run") or {}
    speed, memory = run.get("items_per_second"), run.get("memory_mb")
    gaps = [s["target_gap"]["gap"] for s in figures["sets"].values() if s.get("target_gap")]
    fairness_parts = ([1 - max(gaps)] if gaps else []) + (
        [figures["identity_swap"]["consistency"]] if figures.get("identity_swap") else [])
    robust = figures.get("robustness")
    return {
        "performance": statistics.mean(f1s) if f1s else None,
        "throughput": speed / (speed + THROUGHPUT_HALF) if speed else None,
        "memory": MEMORY_HALF_MB / (max(memory, 0.0) + MEMORY_HALF_MB) if memory is not None else None,
        "fairness": statistics.mean(fairness_parts) if fairness_parts else None,
        "robustness": min(1.0, robust["ratio"]) if robust and robust["ratio"] is not None else None,
    }


def weighted_score(utility: dict[str, float | None], weights: dict[str, float]) -> dict:
    known = {d: u for d, u in utility.items() if u is not None}
    used = {d: weights.get(d, 0.0) for d in known if weights.get(d, 0.0) > 0}
    total = sum(used.values())
    score = 100 * sum(known[d] * w for d, w in used.items()) / total if total else None
    left_out = [d for d in DIMENSIONS if weights.get(d, 0.0) > 0 and utility.get(d) is None]
    return {"score": score, "weights": dict(weights), "utilities": utility, "left_out": left_out}


def compute_results(doc: dict) -> dict:
    """Every figure of the document, from its cases, variants, predictions and run measurements."""
    sets = {s["key"]: EvalSet.from_json(s) for s in doc["sets"]}
    variants = [Variant(**v) for v in doc.get("variants", [])]
    weights = doc["options"]["weights"]
    results = {}
    for model in doc["models"]:
        predictions = model["predictions"]
        figures: dict[str, Any] = {"sets": {k: set_figures(s, predictions[k]) for k, s in sets.items()}}
        figures["run"] = model.get("run")
        figures["identity_swap"] = swap_figures(variants, sets, predictions, model.get("variant_predictions", {}))
        figures["robustness"] = robustness_figures(variants, sets, predictions, model.get("variant_predictions", {}))
        round_keys = [k for k, s in sets.items() if s.kind == "round" and s.cases]
        if round_keys:
            gold = [c.gold for k in round_keys for c in sets[k].cases]
            pred = [predictions[k][c.id]["label"] for k in round_keys for c in sets[k].cases]
            figures["all_rounds"] = {"n": len(gold), "accuracy": accuracy(gold, pred), "macro_f1": macro_f1(gold, pred)}
        figures["score"] = weighted_score(utilities(figures), weights)
        figures["performance"] = {"weighting": PERFORMANCE_WEIGHTING, "sets": performance_parts(figures)}
        results[model["key"]] = figures
    return results


def round_matrix(doc: dict) -> dict:
    """Rounds x models: accuracy, macro-F1 and size of each round for each model."""
    rounds = [s for s in doc["sets"] if s["kind"] == "round"]
    rows = []
    for s in rounds:
        cells = {}
        for model in doc["models"]:
            f = doc["results"][model["key"]]["sets"][s["key"]]
            cells[model["key"]] = {"accuracy": f["accuracy"], "macro_f1": f["macro_f1"], "n": f["n"]}
        rows.append({"set": s["key"], "name": s["name"], "n": len(s["cases"]), "cells": cells})
    return {"rows": rows, "models": [m["key"] for m in doc["models"]]}



def failing_cases(doc: dict, model_key: str, set_key: str) -> list[dict]:
    """The set's cases the model got wrong, with what it said (for lists and the workspace)."""
    eval_set = next(s for s in doc["sets"] if s["key"] == set_key)
    model = next(m for m in doc["models"] if m["key"] == model_key)
    by_id = {c["id"]: c for c in eval_set["cases"]}
    rows = []
    for case_id in doc["results"][model_key]["sets"][set_key]["failing"]:
        case, prediction = by_id[case_id], model["predictions"][set_key][case_id]
        rows.append({**case, "predicted": prediction["label"],
                     "confidence": prediction["probabilities"].get(prediction["label"])})
    return rows


def summary_lines(doc: dict) -> list[str]:
    """A few lines per model for a terminal."""
    lines = []
    for model in doc["models"]:
        r = doc["results"][model["key"]]
        lines.append(f"{model['name']}")
        for key, f in r["sets"].items():
            name = next(s["name"] for s in doc["sets"] if s["key"] == key)
            lines.append(f"  {name}: accuracy {pct(f['accuracy'])}, macro-F1 {num(f['macro_f1'])} (n={f['n']})")
            if f.get("functionalities"):
                ordered = sorted(f["functionalities"].items(), key=lambda kv: kv[1]["accuracy"])
                worst = ", ".join(k + " " + pct(v["accuracy"]) for k, v in ordered[:3])
                best = ", ".join(k + " " + pct(v["accuracy"]) for k, v in ordered[::-1][:3])
                lines.append(f"    worst: {worst}")
                lines.append(f"    best: {best}")
            if f.get("target_gap"):
                g = f["target_gap"]
                lines.append(f"    target-group gap {pct(g['gap'])} ({g['best']} vs {g['worst']})")
        if r.get("identity_swap"):
            s = r["identity_swap"]
            lines.append(f"  identity swap: {pct(s['consistency'])} unchanged over {s['variants']} swaps")
        if r.get("robustness"):
            rb = r["robustness"]
            lines.append(f"  spelling perturbations: accuracy {pct(rb['accuracy'])} vs {pct(rb['clean_accuracy'])} clean")
        run = r.get("run") or {}
        lines.append(f"  {run.get('items_per_second', 0):.0f} inputs/s, p95 latency {num(run.get('latency_p95_ms'), 1)} ms, "
                     f"memory {num(run.get('memory_mb'), 0)} MB")
        if len(r["sets"]) > 1:
            lines.append(f"  performance {num(r['score']['utilities']['performance'])}: mean macro-F1 of "
                         f"{len(r['sets'])} sets, {PERFORMANCE_WEIGHTING}")
        lines.append(f"  score {num(r['score']['score'], 1)} / 100")
    return lines
