"""Compare before promoting: a candidate model against the open round's target(s), on every split the
desk has: each round's held-out split (exactly what the candidate's training held out, ``held_out.py``),
the base data's test split, every functional suite of the task and the adaptive suite of validated
variants (``suite_split.py``: only the variants of held-out seeds when a compared model trained on variants),
each difference with a paired bootstrap 95 % interval (``bootstrap.py``), the adaptive suite's also per topic
family. Qt-free; long work takes a ``Progress``.

    report = compare_candidate(desk, "hate_speech", Path("candidate"), base_test=Path("davidson.csv"),
                               base_options=BaseTestOptions("tweet", "class", {"0": "hate", ...}))
    report.verdict                   # the promotion rule's (promotion_rule.py): refused, its sentence, every split
    json_path, html_path = write_report(report, out_dir)   # comparison_report.py: the JSON and the HTML page

Without ``base_test``, the base data file the candidate's manifest names is its base test split, when
this desk has that very file; its test split is the one training held out (the manifest's seed).

Both models are run by the evaluation service (``evaluation.evaluate``: the same loading,
batching and overlap check); this module picks the items and computes the paired differences.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from app.core.errors import DynadeskError
from app.core.formatting import pct
from app.core.io.documents import read_document
from app.core.next_round.promotion_rule import Verdict, judge
from app.core.services.bootstrap import CONFIDENCE, paired_bootstrap
from app.core.services.evaluation_data import Case, EvalSet, EvaluationInputError, resample_units
from app.core.storage.models import ModelRecord
from local_models.progress import Progress

FORMAT = "dynadesk-comparison"
VERSION = 1
BASE_KEY = "base-test"
POOLED_SPLIT = "held-out"  # every round's held-out split taken together
FOOLING_METRIC = "fooling_right"  # share of the round's validated fooling examples the model gets right
METRIC_NAMES = {"accuracy": "accuracy", "macro_f1": "macro-F1", FOOLING_METRIC: "fooling examples now right"}
DEFAULT_BASE_SPLIT_SEED = 13  # dynadesk train's default seed: the default model's test split


class ComparisonError(DynadeskError):
    pass


class NothingToCompare(ComparisonError):
    """No held-out example, base test file or suite to compare on."""


@dataclass(frozen=True)
class Difference:
    split: str
    metric: str
    current: float | None
    candidate: float | None
    difference: float | None
    low: float | None
    high: float | None
    items: int


@dataclass(frozen=True)
class ComparisonReport:
    task_code: str
    candidate_sha256: str
    current_sha256s: tuple[str, ...]
    differences: tuple[Difference, ...]
    pooled: Difference
    document: dict[str, Any]

    @property
    def verdict(self) -> Verdict:
        """The promotion rule over every split (``promotion_rule.judge``)."""
        names = {s["key"]: s["name"] for s in self.document.get("splits", []) if "key" in s}
        return judge(self.differences, names)

    @property
    def worse(self) -> bool:
        """True when the promotion rule refuses the candidate: a split with enough items is worse beyond
        its interval, or no split has enough items (``promotion_rule``)."""
        return self.verdict.refused

    def summary_lines(self) -> list[str]:
        """What a refusal prints: the verdict sentence (naming the worst split), then every split's figures."""
        return self.verdict.lines()


@dataclass(frozen=True)
class BaseTestOptions:
    """How to read the base data (a labelled CSV, as ``dynadesk train`` reads it) and which rows to score."""

    text_column: str
    label_column: str
    label_map: Mapping[str, str] | None = None
    unescape_html: bool = False
    split: Literal["test", "all"] = "test"  # "test": the seeded stratified test split of dynadesk train
    split_seed: int = DEFAULT_BASE_SPLIT_SEED
    context_column: str | None = None  # a pair task's context column (e.g. premise): rows are (context, text) pairs


def describe(d: Difference) -> str:
    """One line: split, metric, current -> candidate, difference [low, high] (n)."""
    metric = METRIC_NAMES.get(d.metric, d.metric)
    if d.items == 0 or d.difference is None:
        return f"{d.split} {metric}: no items"
    return (f"{d.split} {metric}: {pct(d.current)} -> {pct(d.candidate)}, difference {signed_points(d.difference)} "
            f"[{signed_points(d.low)}, {signed_points(d.high)}] (n={d.items})")


def signed_points(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:+.1f} pt"


def compare_candidate(desk: Any, task_code: str, candidate_dir: Path, *, rounds: Sequence[int] | None = None,
                      base_test: Path | None = None, suite: Path | None = None, seed: int = 0,
                      resamples: int = 2000, progress: Progress | None = None,
                      base_options: BaseTestOptions | None = None, num_threads: int | None = None,
                      ) -> ComparisonReport:
    """Score the candidate model folder and the open round's target model(s) (an ensemble when the
    round has several) on the same items, and return every difference with its interval."""
    from app.core.next_round.held_out import held_out_sets
    from app.core.services.evaluation import EvaluationOptions, evaluate
    from app.core.services.evaluation_data import read_hatecheck_suite, stored_suite_sets
    from app.core.services.evaluation_models import ModelChoice

    progress = progress or Progress()
    if resamples < 100:
        raise ComparisonError(f"{resamples} resamples are too few for a 95 % interval; use at least 100.")
    definition = desk.tasks.definition_by_code(task_code)
    if definition.is_extractive:
        raise ComparisonError(f"{definition.name} is an extractive QA task; comparison scores classifiers.")
    open_round, targets = _current_targets(desk, task_code)
    current = ModelChoice("current", targets)
    candidate_path, candidate = _candidate_record(desk, Path(candidate_dir))
    manifest = _candidate_manifest(Path(candidate_dir))
    base_test, base_options = _base_test_of(manifest, base_test, base_options)
    try:
        held = held_out_sets(desk, task_code, "all" if rounds is None else rounds, manifest=manifest)
        held_out = held.sets
        sets = list(held_out)
        if base_test is not None:
            sets.append(_base_set(Path(base_test), base_options, definition))
        stored = stored_suite_sets(desk, task_code)
        if suite is not None:
            from local_models.files import file_sha256

            sha = file_sha256(Path(suite))
            if not any(s.source.endswith(f"sha256 {sha}") for s in stored):  # imported already: scored once
                sets.append(read_hatecheck_suite(Path(suite)))
        sets += stored
        adaptive = _adaptive_split(desk, task_code, manifest, targets)
        if adaptive is not None:
            sets.append(adaptive.eval_set)
    except EvaluationInputError as exc:
        raise ComparisonError(str(exc)) from exc
    _check_gold_labels(sets, definition.labels)
    if not any(s.cases for s in sets):
        raise NothingToCompare(
            f"There is nothing to compare on: no round of {task_code} has held-out examples"
            " (about one example in ten is held out), and no base test file or suite was given.")
    labels = list(definition.labels)

    def loader(choice: ModelChoice) -> Any:
        from app.core.services.evaluation_models import load_predictor
        from local_models.engine import Ensemble, load_engine
        from local_models.errors import ModelError

        if choice is current:
            return load_predictor(choice, num_threads)
        try:
            return Ensemble([load_engine(candidate_path, task_labels=labels, num_threads=num_threads,
                                         name=candidate.name)])
        except ModelError as exc:
            raise ComparisonError(f"The candidate {candidate_dir} cannot be loaded: {exc}") from exc

    options = EvaluationOptions(identity_swap=False, robustness=False, seed=seed, latency_samples=0,
                                num_threads=num_threads)
    records = desk.models.all()
    choices = [ModelChoice("candidate", [candidate]), current]  # a candidate that cannot load fails first
    evaluation = evaluate(choices, [s for s in sets if s.cases], options, task_code=task_code, records=records,
                          progress=progress, loader=loader)
    evaluation["warnings"], evaluation["notes"] = _overlap(choices, sets, options, records)
    evaluation["notes"] += held.notes + ([adaptive.rule] if adaptive is not None else [])
    document = _document(task_code, sets, held_out, evaluation, current, open_round.number, candidate, seed, resamples, rounds,
                         base_test, base_options, suite)
    if adaptive is not None:
        document["adaptive_suite"] = _adaptive_document(adaptive, document, seed, resamples)
    return report_from_document(document)


def _adaptive_split(desk: Any, task_code: str, manifest: Mapping[str, Any] | None,
                    targets: Sequence[ModelRecord]) -> Any:
    """The adaptive suite's split (None when the task has no validated variant): every validated variant, or
    only those of held-out seeds when the candidate or the current target trained on variants."""
    from app.core.next_round.suite_split import adaptive_suite_split, trained_on_variants

    taken = [str(v.get("id")) for v in ((manifest or {}).get("variants") or {}).get("taken") or []]
    split = adaptive_suite_split(desk, task_code, held_out_only=trained_on_variants(manifest, targets),
                                 exclude_ids=taken)
    return split if split.validated else None


def _adaptive_document(adaptive: Any, document: Mapping[str, Any], seed: int, resamples: int) -> dict[str, Any]:
    """The suite's rule and, per topic family, each model's wrong answers and the accuracy difference with
    its paired interval (what the report's family table shows)."""
    from app.core.next_round.suite_split import family_rows

    cases = adaptive.eval_set.cases
    split = next(s for s in document["splits"] if s["key"] == adaptive.eval_set.key)
    labels = {model: {item["id"]: item[model]["label"] for item in split["items"]} for model in ("current", "candidate")}
    rows = family_rows(cases, labels) if cases else []
    for row in rows:
        chosen = [c for c in cases if (c.functionality or "written") == row["family"]]
        interval = paired_bootstrap([c.gold for c in chosen], [labels["current"][c.id] for c in chosen],
                                    [labels["candidate"][c.id] for c in chosen], "accuracy",
                                    groups=resample_units(chosen), resamples=resamples, seed=seed,
                                    stream=f"{adaptive.eval_set.key}:{row['family']}")
        row.update({"difference": interval.difference, "low": interval.low, "high": interval.high})
    return {**adaptive.to_json(), "families": rows}


def _overlap(choices: Sequence[Any], sets: Sequence[EvalSet], options: Any,
             records: Sequence[ModelRecord]) -> tuple[list[str], list[str]]:
    """(warnings, notes) of the training-data overlap check, without the base data's test split: it
    comes from the very file the models were trained on, so the file contains it by design; the
    seeded split keeps it out of training."""
    from app.core.services.evaluation import overlap_check

    checked = [s for s in sets if s.cases and s.key != BASE_KEY]
    by_id = {str(r.id): r for r in records}
    checks = [c for choice in choices for c in overlap_check(choice, checked, options, by_id)["checks"]] if checked else []
    warnings = [c["message"] for c in checks if c["status"] == "overlap"]
    notes = [c["message"] for c in checks if c["status"] != "overlap"]
    if any(s.key == BASE_KEY for s in sets):
        notes.append("The base data's test split is not checked for overlap: it is part of the training file, "
                     "and dynadesk train's seeded split keeps it out of training.")
    return warnings, notes


def _current_targets(desk: Any, task_code: str) -> tuple[Any, list[ModelRecord]]:
    open_round = desk.tasks.round(task_code)  # the newest open round; NotFound names the task
    records: list[ModelRecord] = desk.models.round_models(open_round.id)
    if not records:
        raise ComparisonError(f"Round {open_round.number} of {task_code} has no target model to compare with; "
                              f"attach one with dynadesk rounds attach --task {task_code} --model NAME.")
    return open_round, records


def _candidate_record(desk: Any, folder: Path) -> tuple[Path, ModelRecord]:
    """The model folder to load (a trained part is assembled first, as registering does) and an
    unsaved record naming it; its provenance lets the overlap check find its training data."""
    from app.core.services.target_models import TargetModelError, assemble_trained_part
    from local_models.engine import model_sha256
    from local_models.errors import ModelError
    from local_models.train import is_trained_part, read_part_description

    folder = folder.expanduser()
    if not folder.is_dir():
        raise ComparisonError(f"There is no model folder at {folder}; name the folder dynadesk train --out wrote.")
    description: dict[str, Any] = {}
    try:
        path = folder.resolve()
        if is_trained_part(path):
            description = read_part_description(path)
            path = assemble_trained_part(desk, path)
        sha = model_sha256(path)
    except (ModelError, TargetModelError) as exc:
        raise ComparisonError(f"The candidate {folder} is not a usable model: {exc}") from exc
    provenance = {k: description[k] for k in ("training", "metrics", "base") if k in description}
    name = str(description.get("name") or folder.name)
    record = ModelRecord(id=uuid.uuid5(uuid.NAMESPACE_URL, f"dynadesk-candidate:{sha}"), name=f"{name} (candidate)",
                         format="hf-torch", sha256=sha, path=str(path), provenance=provenance)
    return path, record


def _candidate_manifest(folder: Path) -> dict[str, Any] | None:
    """The training manifest beside a candidate (``dynadesk train --out`` writes it), or None."""
    from app.core.next_round.round_training import MANIFEST_FILE, read_manifest

    path = Path(folder).expanduser() / MANIFEST_FILE
    if not path.is_file():
        return None
    try:
        return read_manifest(path)
    except DynadeskError as exc:
        raise ComparisonError(f"The candidate's manifest cannot be read ({exc}); it says what training held "
                              "out, so the comparison does not guess.") from exc


def _base_test_of(manifest: Mapping[str, Any] | None, base_test: Path | None,
                  options: BaseTestOptions | None) -> tuple[Path | None, BaseTestOptions | None]:
    """The base test file and how to read it: as given, else the base data the manifest names (when this
    desk has that very file). Either way, when the file is the one the candidate was trained on, its test
    split is the one training held out: the seed in the manifest."""
    from local_models.files import file_sha256

    if not manifest:
        return base_test, options
    recorded = (manifest.get("options") or {}).get("base_data") or {}
    sha = ((manifest.get("data") or {}).get("base_file") or {}).get("sha256")
    seed = (manifest.get("config") or {}).get("seed", manifest.get("seed"))
    if base_test is None and recorded.get("path") and Path(recorded["path"]).is_file():
        base_test = Path(recorded["path"])
        options = BaseTestOptions(recorded["text_column"], recorded["label_column"], recorded.get("label_map"),
                                  bool(recorded.get("html_unescape")), context_column=recorded.get("context_column"))
        if sha and file_sha256(base_test) != sha:
            return None, None  # another file under that name now: not what training split
    same = base_test is not None and sha and file_sha256(Path(base_test)) == sha
    if same and options is not None and options.split == "test" and isinstance(seed, int):
        options = replace(options, split_seed=seed)
    return base_test, options


def _base_set(path: Path, options: BaseTestOptions | None, definition: Any) -> EvalSet:
    """The base data's test split (or all of it), read by the one reader of labelled files; a pair task's
    rows as (context, text) pairs, as its model reads them."""
    from app.core.io.training import read_labelled_csv
    from local_models.errors import TrainingFailed
    from local_models.train import TrainingConfig, stratified_split

    if options is None:
        raise ComparisonError(f"Say how to read {path.name}: its text and label columns (--text-column, "
                              "--label-column) and, when its labels are codes, --label-map.")
    if bool(definition.context_inputs) != bool(options.context_column):
        raise ComparisonError(
            f"{definition.name} reads (context, text) pairs: name {path.name}'s context column too (--context-column)."
            if definition.context_inputs else
            f"{definition.name} reads single texts: {path.name} takes a text column only (no --context-column).")
    try:
        data = read_labelled_csv(path, options.text_column, options.label_column, label_map=options.label_map,
                                 unescape_html=options.unescape_html, context_column=options.context_column)
        indices = (stratified_split(data.labels, TrainingConfig(seed=options.split_seed))[2]
                   if options.split == "test" else list(range(len(data.texts))))
    except TrainingFailed as exc:
        raise ComparisonError(str(exc)) from exc
    cases = [_base_case(i, data.texts[i], data.label_names[data.labels[i]]) for i in indices]
    what = f"test split (seed {options.split_seed})" if options.split == "test" else "all rows"
    return EvalSet(BASE_KEY, f"{path.name}, {what}", "dataset", cases, str(path))


def _base_case(row: int, item: Any, gold: str) -> Case:
    """A base row as a case: a person reads the written text; the model reads the pair."""
    if isinstance(item, str):
        return Case(f"row-{row}", item, gold)
    return Case(f"row-{row}", item[1], gold, input=list(item))


def _check_gold_labels(sets: Sequence[EvalSet], task_labels: Sequence[str]) -> None:
    for eval_set in sets:
        unknown = sorted({c.gold for c in eval_set.cases} - set(task_labels))
        if unknown:
            raise ComparisonError(
                f"{eval_set.name} has labels the task does not know ({', '.join(unknown)}; the task's are "
                f"{', '.join(task_labels)}). A base data file's labels are mapped with --label-map, "
                "e.g. \"0=hate,1=not hate\"; a suite must use the task's labels.")


def _differences(split: str, cases: Sequence[Case], current: Mapping[str, Any], candidate: Mapping[str, Any],
                 *, seed: int, resamples: int, fooling: bool) -> list[Difference]:
    gold = [c.gold for c in cases]
    now = [current[c.id]["label"] for c in cases]
    new = [candidate[c.id]["label"] for c in cases]
    groups = resample_units(cases)
    out = []
    for metric in ("accuracy", "macro_f1"):
        interval = paired_bootstrap(gold, now, new, metric, groups=groups, resamples=resamples, seed=seed, stream=split)
        out.append(Difference(split, metric, **asdict(interval)))
    if fooling:
        chosen = [i for i, c in enumerate(cases) if c.extra.get("fooled")]
        interval = paired_bootstrap([gold[i] for i in chosen], [now[i] for i in chosen], [new[i] for i in chosen],
                                    "accuracy", groups=[groups[i] for i in chosen], resamples=resamples, seed=seed,
                                    stream=f"{split}:fooling")
        out.append(Difference(split, FOOLING_METRIC, **asdict(interval)))
    return out


def _document(task_code: str, sets: Sequence[EvalSet], held_out: Sequence[EvalSet], evaluation: dict[str, Any],
              current: Any, current_round: int, candidate: ModelRecord, seed: int, resamples: int, rounds: Sequence[int] | None,
              base_test: Path | None, base_options: BaseTestOptions | None, suite: Path | None) -> dict[str, Any]:
    from local_models.files import file_sha256

    candidate_entry, current_entry = evaluation["models"]
    splits: list[dict[str, Any]] = []
    differences: list[Difference] = []
    for eval_set in sets:
        now = current_entry["predictions"].get(eval_set.key, {})
        new = candidate_entry["predictions"].get(eval_set.key, {})
        is_round = eval_set.kind == "round"
        items = [{"id": c.id, "text": c.text, "gold": c.gold, **({"fooled": bool(c.extra.get("fooled"))} if is_round else {}),
                  **({"functionality": c.functionality} if c.functionality else {}),
                  **({"templ_id": c.extra["templ_id"]} if c.extra.get("templ_id") else {}),
                  **({"perturbation_of": c.extra["perturbation_of"]} if c.extra.get("perturbation_of") else {}),
                  **({"group": c.extra["group"]} if c.extra.get("group") else {}),
                  "current": now[c.id], "candidate": new[c.id]} for c in eval_set.cases]
        splits.append({"key": eval_set.key, "name": eval_set.name, "kind": eval_set.kind, "source": eval_set.source,
                       **({"round": int(eval_set.key.rsplit("-", 1)[1])} if is_round else {}), "items": items})
        differences += _differences(eval_set.key, eval_set.cases, now, new, seed=seed, resamples=resamples,
                                    fooling=is_round)
    pooled_cases = [c for s in held_out for c in s.cases]
    by_id_now = {c: p for s in held_out for c, p in current_entry["predictions"].get(s.key, {}).items()}
    by_id_new = {c: p for s in held_out for c, p in candidate_entry["predictions"].get(s.key, {}).items()}
    pooled_rows = _differences(POOLED_SPLIT, pooled_cases, by_id_now, by_id_new, seed=seed, resamples=resamples,
                               fooling=True)
    pooled = pooled_rows[0]
    verdict = judge(pooled_rows + differences, {str(s["key"]): str(s["name"]) for s in splits})
    document: dict[str, Any] = {
        "format": FORMAT, "version": VERSION, "task": task_code,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "current": {"name": current.name, "round": current_round, "members": [{"id": str(r.id), "name": r.name, "format": r.format,
                                                        "sha256": r.sha256, "path": r.path} for r in current.records]},
        "candidate": {"name": candidate.name, "sha256": candidate.sha256, "path": candidate.path},
        "options": {"seed": seed, "resamples": resamples, "confidence": CONFIDENCE, "interval": "paired bootstrap, percentile; split groups and perturbation pairs drawn together",
                    "rounds": list(rounds) if rounds is not None else "all",
                    "base_test": str(base_test) if base_test else None,
                    "base_test_sha256": file_sha256(Path(base_test)) if base_test else None,
                    "base_options": ({**asdict(base_options), "label_map": dict(base_options.label_map or {}) or None}
                                     if base_options and base_test else None),
                    "suite": str(suite) if suite else None,
                    "suite_sha256": file_sha256(Path(suite)) if suite else None},
        "splits": splits,
        "differences": [asdict(d) for d in pooled_rows + differences],
        "pooled": asdict(pooled),
        "worse": verdict.refused,  # refused by the promotion rule (the name older reports used)
        "verdict": verdict.to_json(),
        "evaluation": {"results": {"current": evaluation["results"][current_entry["key"]],
                                   "candidate": evaluation["results"][candidate_entry["key"]]}, "warnings": evaluation["warnings"], "notes": evaluation["notes"],
                       "runs": {"current": current_entry["run"], "candidate": candidate_entry["run"]}},
    }
    return document


def report_from_document(document: Mapping[str, Any]) -> ComparisonReport:
    """The report a comparison document describes (as ``compare_candidate`` made it, or read back)."""
    if document.get("format") != FORMAT:
        raise ComparisonError("This is not a Dynadesk comparison report.")
    differences = tuple(Difference(**d) for d in document["differences"])
    return ComparisonReport(
        task_code=document["task"], candidate_sha256=document["candidate"]["sha256"],
        current_sha256s=tuple(m["sha256"] for m in document["current"]["members"]),
        differences=differences, pooled=Difference(**document["pooled"]), document=dict(document))


def read_report(path: Path) -> ComparisonReport:
    """A comparison report written by ``comparison_report.write_report`` (its JSON file, or the folder holding it)."""
    path = Path(path)
    if path.is_dir():
        path = path / JSON_NAME
    document = read_document(path, FORMAT, "a comparison report", error=ComparisonError,
                             hint=" Pass the comparison.json that `dynadesk rounds compare --out DIR` wrote (or DIR).")
    try:
        return report_from_document(document)
    except (KeyError, TypeError, ValueError) as exc:
        raise ComparisonError(f"{path} is not a comparison report: its {exc} is missing or malformed.") from exc


JSON_NAME = "comparison.json"
