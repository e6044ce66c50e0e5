"""Evaluation: score models on every round, on data sets and functional test suites, on many
dimensions, and keep the evidence (DESIGN.md §1.7). Qt-free; long work takes a ``Progress``.

    choices = resolve_models(desk, ["default", "round:1", "a+b"])      # + makes an ensemble
    sets = round_sets(desk, "hate_speech") + [read_hatecheck_suite(path)]
    doc = evaluate(choices, sets, EvaluationOptions(), progress=Progress())
    write_document(doc, out / "evaluation.json")

The result is one JSON document holding every case, every prediction and every figure;
``compute_results(doc)`` recomputes every figure from the cases and predictions alone, and
``evaluate`` uses it too, so the stored figures are always reproducible. Timings (throughput,
latency, memory) are measurements and are stored as measured.
"""

from __future__ import annotations

import gc
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from app.core.io.documents import read_document
from app.core.services.evaluation_data import (
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
from app.core.services.evaluation_models import EvaluationError, ModelChoice, load_predictor
from app.core.services.evaluation_scoring import (
    DEFAULT_WEIGHTS,
    DIMENSIONS,
    compute_results,
    prefetch_metrics,
    round_matrix,
)
from app.core.storage.models import ModelRecord
from local_models.batch_run import DEFAULT_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from local_models.progress import Progress

FORMAT = "dynadesk-evaluation"
VERSION = 1


@dataclass
class EvaluationOptions:
    weights: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    identity_swap: bool = True
    robustness: bool = True
    swap_cases: int | None = 300  # cases sampled for identity swaps (None: all)
    robustness_cases: int | None = 300  # cases sampled for each spelling perturbation
    seed: int = 0
    batch_size: int = DEFAULT_BATCH_SIZE
    max_batch_tokens: int | None = DEFAULT_MAX_BATCH_TOKENS  # padded tokens per batch (None: no bound)
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

    outputs, stats = BatchRun(predictor, batch_size=options.batch_size, max_batch_tokens=options.max_batch_tokens,
                              latency_samples=options.latency_samples,
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
    prefetch_metrics()
    variants = derive_variants(sets, options)
    loader = loader or (lambda choice: load_predictor(choice, options.num_threads))
    if records is None and desk is not None:
        records = desk.models.all()
    records_by_id = {str(r.id): r for r in records or []}
    doc: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
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




def read_json(path: str | Path) -> dict[str, Any]:
    return read_document(path, FORMAT, "a Dynadesk evaluation file", error=EvaluationError)


