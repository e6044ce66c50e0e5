"""Evaluation: score models on every round, on data sets and functional test suites, on many
dimensions, and keep the evidence (DESIGN.md §1.7). Qt-free; long work takes a ``Progress``.

    choices = resolve_models(desk, ["default", "round:1", "a+b"])      # + makes an ensemble
    sets = round_sets(desk, "hate_speech") + [read_hatecheck_suite(path)]
    doc = evaluate(choices, sets, EvaluationOptions(), progress=Progress())
    write_json(doc, out / "evaluation.json")

The result is one JSON document holding every case, every prediction and every figure;
``compute_results(doc)`` recomputes every figure from the cases and predictions alone, and
``evaluate`` uses it too, so the stored figures are always reproducible. Timings (throughput,
latency, memory) are measurements and are stored as measured.
"""

from __future__ import annotations

import gc
import json
import logging
import platform
import statistics
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

from app.errors import DynadeskError
from app.services.evaluation_data import (
    PERTURBATIONS,
    TEXT_COLUMNS,
    EvalSet,
    EvaluationInputError,
    Variant,
    identity_swaps,
    normalised_text,
    read_training_texts,
    spelling_perturbations,
    text_key,
)
from app.storage.models import ModelRecord
from local_models.progress import Progress

log = logging.getLogger(__name__)

FORMAT = "dynadesk-evaluation"
VERSION = 1
DIMENSIONS = ("performance", "throughput", "memory", "fairness", "robustness")
# Performance counts most, the others once each, as Dynabench's default leaderboard weighting.
DEFAULT_WEIGHTS = {"performance": 4.0, "throughput": 1.0, "memory": 1.0, "fairness": 1.0, "robustness": 1.0}
THROUGHPUT_HALF = 100.0  # examples per second that score 0.5 on throughput
MEMORY_HALF_MB = 1024.0  # resident memory that scores 0.5 on memory
MIN_GROUP_CASES = 10  # target groups with fewer cases are listed but left out of the gap


class EvaluationError(DynadeskError):
    pass


@dataclass
class EvaluationOptions:
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    identity_swap: bool = True
    robustness: bool = True
    swap_cases: int | None = 300  # cases sampled for identity swaps (None: all)
    robustness_cases: int | None = 300  # cases sampled for each spelling perturbation
    seed: int = 0
    batch_size: int = 64
    latency_samples: int = 50
    num_threads: int | None = None
    training_data: str | None = None  # a training file to check against, for every model
    training_text_column: str | None = None

    def __post_init__(self) -> None:
        unknown = sorted(set(self.weights) - set(DIMENSIONS))
        if unknown:
            raise EvaluationError(f"Unknown weight(s) {', '.join(unknown)}; the dimensions are {', '.join(DIMENSIONS)}.")
        if any(w < 0 for w in self.weights.values()):
            raise EvaluationError("Weights cannot be negative.")
        self.weights = {**DEFAULT_WEIGHTS, **self.weights}
        if not any(self.weights.values()):
            raise EvaluationError("At least one weight must be above zero.")


@dataclass
class ModelChoice:
    """One model under test: a registered model, or several answering as an ensemble."""

    label: str  # as the user named it: "default", "round:2", "a+b"
    records: list[ModelRecord]

    @property
    def name(self) -> str:
        return " + ".join(r.name for r in self.records)

    def to_json(self) -> dict:
        return {"label": self.label, "name": self.name, "members": [
            {"id": str(r.id), "name": r.name, "format": r.format, "sha256": r.sha256, "path": r.path}
            for r in self.records]}


# --- choosing models --------------------------------------------------------------------------


def resolve_models(desk, specs: Sequence[str], task_code: str | None = None) -> list[ModelChoice]:
    """``default`` (the bundled model), ``round:N`` (that round's target models), a model's name,
    id or checksum prefix; ``a+b`` joins models into an ensemble."""
    from app.domain import ModelFormat
    from app.services import target_models

    if not specs:
        raise EvaluationError("Name at least one model (--models default, round:1, a model's name, or a+b).")
    records = desk.models.all()
    choices = []
    for spec in specs:
        members = []
        for part in [p.strip() for p in spec.split("+")]:
            if not part:
                raise EvaluationError(f"'{spec}' has an empty part; join models with +, as in a+b.")
            if part == "default":
                members.append(target_models.ensure_default_model(desk))
            elif part.startswith("round:"):
                members.extend(_round_models(desk, part, task_code or target_models.DEFAULT_TASK))
            else:
                members.append(_find_record(records, part))
        for record in members:
            if record.format == ModelFormat.IMPORTED.value:
                raise EvaluationError(f"{record.name} is known only by predictions recorded elsewhere; it cannot run here.")
        choices.append(ModelChoice(spec, members))
    return choices


def _round_models(desk, part: str, task_code: str) -> list[ModelRecord]:
    try:
        number = int(part.split(":", 1)[1])
    except ValueError:
        raise EvaluationError(f"'{part}' should be round:N with N a round number.") from None
    try:
        round_ = desk.tasks.round(task_code, number)
    except DynadeskError as exc:
        raise EvaluationError(str(exc)) from exc
    members = desk.models.round_models(round_.id)
    if not members:
        raise EvaluationError(f"Round {number} of {task_code} has no target model.")
    return members


def _find_record(records: list[ModelRecord], part: str) -> ModelRecord:
    exact = [r for r in records if r.name == part or str(r.id) == part]
    if len(exact) == 1:
        return exact[0]
    prefix = [r for r in records if len(part) >= 6 and (r.sha256.startswith(part) or str(r.id).startswith(part))]
    partial = prefix or [r for r in records if part.casefold() in r.name.casefold()]
    if len(partial) == 1:
        return partial[0]
    if not partial:
        known = "; ".join(r.name for r in records) or "none registered"
        raise EvaluationError(f"No registered model is called '{part}' (models: {known}).")
    raise EvaluationError(f"'{part}' matches {len(partial)} models ({'; '.join(r.name for r in partial)}); be more precise.")


def format_label(record: ModelRecord) -> str:
    """How a record's files hold the model: "PyTorch folder", "ONNX", "ONNX int8"."""
    if record.format != "onnx":
        return "PyTorch folder" if record.format == "hf-torch" else record.format
    quantization = ((record.provenance or {}).get("export") or {}).get("quantization") or ""
    return "ONNX int8" if "int8" in quantization or "int8" in record.name.casefold() else "ONNX"


def model_families(records: Sequence[ModelRecord]) -> list[list[ModelRecord]]:
    """Records grouped by the model they hold: an ONNX export (fp32 or int8) joins the record it
    was exported from (``provenance.parent_model``); the source first, then ONNX, then ONNX int8."""
    by_key = {key: r for r in records for key in (str(r.id), r.sha256)}

    def root(record: ModelRecord) -> ModelRecord:
        seen = set()
        while record.id not in seen:
            seen.add(record.id)
            parent = (record.provenance or {}).get("parent_model") or {}
            found = by_key.get(str(parent.get("id"))) or by_key.get(parent.get("sha256") or "")
            if found is None:
                break
            record = found
        return record

    families: dict = {}
    for record in records:
        families.setdefault(root(record).id, []).append(record)
    return [sorted(members, key=lambda r: (r.format == "onnx", format_label(r))) for members in families.values()]


def family_name(members: Sequence[ModelRecord]) -> str:
    """The name the family's records share, without a format suffix ("X, PyTorch", "X (ONNX int8)")."""
    name = members[0].name
    for suffix in (", PyTorch", " (PyTorch)", ", ONNX int8", ", ONNX fp32", " (ONNX int8)", " (ONNX)"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


# --- metrics ------------------------------------------------------------------------------------


def accuracy(gold: Sequence[str], predicted: Sequence[str]) -> float | None:
    if not gold:
        return None
    return sum(g == p for g, p in zip(gold, predicted)) / len(gold)


def macro_f1(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str] | None = None) -> float | None:
    """Unweighted mean of per-label F1 over ``labels`` (default: every label in gold or predicted,
    as scikit-learn's f1_score(average='macro') does); a label never predicted nor gold scores 0."""
    if not gold:
        return None
    labels = sorted(set(gold) | set(predicted)) if labels is None else list(labels)
    scores = []
    for label in labels:
        tp = sum(g == label and p == label for g, p in zip(gold, predicted))
        fp = sum(g != label and p == label for g, p in zip(gold, predicted))
        fn = sum(g == label and p != label for g, p in zip(gold, predicted))
        scores.append(2 * tp / (2 * tp + fp + fn) if tp else 0.0)
    return sum(scores) / len(scores)


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
    used = {d: weights.get(d, 0.0) for d, u in utility.items() if u is not None and weights.get(d, 0.0) > 0}
    total = sum(used.values())
    score = 100 * sum(utility[d] * w for d, w in used.items()) / total if total else None
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


# --- keeping tests out of training -----------------------------------------------------------------


def training_source(record: ModelRecord, records_by_id: dict[str, ModelRecord] | None = None) -> dict | None:
    """What the record says it was trained on (its own provenance, or its parent model's)."""
    provenance = record.provenance or {}
    data = (provenance.get("training") or {}).get("data")
    if not data and records_by_id:
        parent = records_by_id.get(str((provenance.get("parent_model") or {}).get("id")))
        if parent is not None:
            data = ((parent.provenance or {}).get("training") or {}).get("data")
    return dict(data) if data else None


def overlap_check(choice: ModelChoice, sets: list[EvalSet], options: EvaluationOptions,
                  records_by_id: dict[str, ModelRecord] | None = None) -> dict:
    """Which evaluation cases also appear (as normalised text) in the model's training data."""
    from local_models.files import file_sha256

    checks = []
    for record in choice.records:
        source = training_source(record, records_by_id) or {}
        path = options.training_data or source.get("path")
        entry: dict[str, Any] = {"model": record.name, "recorded": source or None, "file": path}
        if not path:
            entry["status"] = "unknown"
            entry["message"] = unknown_training_note(record.name, source.get("file"))
            checks.append(entry)
            continue
        try:
            texts = read_training_texts(Path(path), options.training_text_column or source.get("text_column"))
        except EvaluationInputError as exc:
            entry.update(status="unreadable", message=f"{record.name}: overlap not checked: {exc} Choose the "
                                                      "training file with Training… or --training-data PATH.")
            checks.append(entry)
            continue
        if source.get("sha256") and Path(path).is_file() and file_sha256(Path(path)) != source["sha256"]:
            entry["note"] = (f"{path} differs from the file {record.name} was trained on "
                             f"(checksum {source['sha256'][:12]}... recorded).")
        keys = {text_key(t) for t in texts if normalised_text(t)}
        overlapping = {s.key: [c.id for c in s.cases if text_key(c.text) in keys] for s in sets}
        total = sum(len(v) for v in overlapping.values())
        entry.update(status="overlap" if total else "clean", training_texts=len(texts), overlapping=total,
                     by_set={k: v for k, v in overlapping.items() if v})
        if total:
            where = ", ".join(f"{len(v)} in {k}" for k, v in overlapping.items() if v)
            entry["message"] = (f"WARNING: {total} evaluation case(s) also appear in the training data of "
                                f"{record.name} ({where}); their scores are not test scores.")
        else:
            entry["message"] = f"{record.name}: no evaluation case appears in its training data ({len(texts):,} texts)."
        checks.append(entry)
    return {"checks": checks, "overlapping": sum(c.get("overlapping", 0) for c in checks)}


def unknown_training_note(model_name: str, file_name: str | None) -> str:
    """Why the overlap was not checked, and how to name the training file so that it is."""
    named = (f"its record names the file {file_name} but not where it is" if file_name
             else "its record names no training file")
    return (f"{model_name}: overlap with its training data not checked: {named}. To check, choose "
            f"{'that file' if file_name else 'the file'} with Training… in the Evaluate tab or pass "
            "--training-data PATH to dynadesk eval (CSV or JSON lines; the text column is found by name: "
            f"{', '.join(TEXT_COLUMNS)}, or --training-text-column NAME).")


# --- running ------------------------------------------------------------------------------------


def derive_variants(sets: list[EvalSet], options: EvaluationOptions) -> list[Variant]:
    variants: list[Variant] = []
    for s in sets:
        if options.identity_swap and any(c.target for c in s.cases):
            variants += identity_swaps(s.key, s.cases, seed=options.seed, limit=options.swap_cases)
    if options.robustness:
        per_set = None if options.robustness_cases is None else max(1, options.robustness_cases // max(1, len(sets)))
        for s in sets:
            variants += spelling_perturbations(s.key, s.cases, seed=options.seed, limit=per_set)
    return variants


def distinct_inputs(sets: Sequence[EvalSet], variants: Sequence[Variant]) -> list:
    """Every case's and variant's model input, once each: a text shared by cases is computed once."""
    return list(dict.fromkeys([c.model_input for s in sets for c in s.cases] + [v.text for v in variants]))


def predict_all(predictor, inputs: list, sets: list[EvalSet], variants: list[Variant], options: EvaluationOptions,
                progress: Progress, before_mb: float | None) -> tuple[dict, dict, dict]:
    """One model's predictions of every case and variant; ``before_mb``: resident memory before
    the model was loaded, so that its memory figure includes the model."""
    from local_models.batch_run import BatchRun

    outputs, stats = BatchRun(predictor, batch_size=options.batch_size, latency_samples=options.latency_samples,
                              seed=options.seed).run(inputs, progress)
    answer = {item: {"label": p.label, "probabilities": {k: round(float(v), 6) for k, v in p.probabilities.items()}}
              for item, p in zip(inputs, outputs)}
    predictions = {s.key: {c.id: answer[c.model_input] for c in s.cases} for s in sets}
    variant_predictions = {v.id: answer[v.text]["label"] for v in variants}
    run = stats.to_json()
    run["distinct_inputs"] = len(inputs)
    run["threads"] = options.num_threads
    run["memory_mb"] = (stats.peak_rss_mb - before_mb) if stats.peak_rss_mb is not None and before_mb is not None else None
    return predictions, variant_predictions, run


def evaluate(choices: Sequence[ModelChoice], sets: Sequence[EvalSet], options: EvaluationOptions | None = None, *,
             task_code: str = "hate_speech", desk=None, records: Sequence[ModelRecord] | None = None,
             progress: Progress | None = None, loader=None) -> dict:
    """Run every model on every set (and the derived variants) and return the full document.

    ``loader(choice)`` returns a predictor (an engine or an ``Ensemble``) and is closed after use;
    by default the registered models are loaded from their files. ``records`` (or ``desk``) lets
    the overlap check find a parent model's training data; pass ``records`` off the database thread.
    """
    options = options or EvaluationOptions()
    progress = progress or Progress()
    sets = [s for s in sets if s.cases] or []
    if not sets:
        raise EvaluationError("There is nothing to evaluate on: no round has validated examples, and no suite "
                              "or data file was given.")
    if len({s.key for s in sets}) != len(sets):
        raise EvaluationError("Two evaluation sets have the same key.")
    variants = derive_variants(sets, options)
    loader = loader or (lambda choice: load_predictor(choice, options.num_threads))
    if records is None and desk is not None:
        records = desk.models.all()
    records_by_id = {str(r.id): r for r in records or []}
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "task": task_code, "options": asdict(options), "machine": {"platform": platform.platform(),
                                                                   "python": platform.python_version()},
        "sets": [s.to_json() for s in sets], "variants": [v.to_json() for v in variants], "models": [],
    }
    from local_models.batch_run import current_rss_mb

    inputs = distinct_inputs(sets, variants)
    for index, choice in enumerate(choices):
        progress.say(f"Loading {choice.name} …")
        before_mb = current_rss_mb()
        predictor = loader(choice)
        try:
            progress.say(f"Scoring {choice.name} on {sum(len(s.cases) for s in sets):,} cases "
                         f"and {len(variants):,} variants …")
            part = progress.part(index * len(inputs), len(inputs) * len(choices))
            predictions, variant_predictions, run = predict_all(predictor, inputs, sets, variants, options, part,
                                                                before_mb)
        finally:
            close = getattr(predictor, "close", None)
            if close is not None:
                close()
            gc.collect()
        entry = {"key": f"m{index + 1}", **choice.to_json(), "run": run, "predictions": predictions,
                 "variant_predictions": variant_predictions}
        entry["overlap"] = overlap_check(choice, sets, options, records_by_id)
        doc["models"].append(entry)
    doc["results"] = compute_results(doc)
    doc["matrix"] = round_matrix(doc)
    doc["warnings"] = [c["message"] for m in doc["models"] for c in m["overlap"]["checks"] if c["status"] == "overlap"]
    doc["notes"] = [c["message"] for m in doc["models"] for c in m["overlap"]["checks"] if c["status"] != "overlap"]
    return doc


def load_predictor(choice: ModelChoice, num_threads: int | None = None):
    from app.services.target_models import load_engine_for
    from local_models.engine import Ensemble

    engines = []
    try:
        for record in choice.records:
            engines.append(load_engine_for(record, num_threads=num_threads))
    except Exception:
        for engine in engines:
            engine.close()
        raise
    return Ensemble(engines)


# --- files ----------------------------------------------------------------------------------------


def write_json(doc: dict, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".part")
    tmp.write_text(json.dumps(doc, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def read_json(path: str | Path) -> dict:
    path = Path(path)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EvaluationError(f"{path} is not a readable evaluation file ({exc}).") from exc
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise EvaluationError(f"{path} is not a Dynadesk evaluation file.")
    return doc


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
            lines.append(f"  {name}: accuracy {_pct(f['accuracy'])}, macro-F1 {_num(f['macro_f1'])} (n={f['n']})")
            if f.get("functionalities"):
                ordered = sorted(f["functionalities"].items(), key=lambda kv: kv[1]["accuracy"])
                worst = ", ".join(k + " " + _pct(v["accuracy"]) for k, v in ordered[:3])
                best = ", ".join(k + " " + _pct(v["accuracy"]) for k, v in ordered[::-1][:3])
                lines.append(f"    worst: {worst}")
                lines.append(f"    best: {best}")
            if f.get("target_gap"):
                g = f["target_gap"]
                lines.append(f"    target-group gap {_pct(g['gap'])} ({g['best']} vs {g['worst']})")
        if r.get("identity_swap"):
            s = r["identity_swap"]
            lines.append(f"  identity swap: {_pct(s['consistency'])} unchanged over {s['variants']} swaps")
        if r.get("robustness"):
            rb = r["robustness"]
            lines.append(f"  spelling perturbations: accuracy {_pct(rb['accuracy'])} vs {_pct(rb['clean_accuracy'])} clean")
        run = r.get("run") or {}
        lines.append(f"  {run.get('items_per_second', 0):.0f} inputs/s, p95 latency {_num(run.get('latency_p95_ms'), 1)} ms, "
                     f"memory {_num(run.get('memory_mb'), 0)} MB")
        if len(r["sets"]) > 1:
            lines.append(f"  performance {_num(r['score']['utilities']['performance'])}: mean macro-F1 of "
                         f"{len(r['sets'])} sets, {PERFORMANCE_WEIGHTING}")
        lines.append(f"  score {_num(r['score']['score'], 1)} / 100")
    return lines


def _pct(value) -> str:
    return "–" if value is None else f"{100 * value:.1f}%"


def _num(value, digits: int = 3) -> str:
    return "–" if value is None else f"{value:.{digits}f}"
