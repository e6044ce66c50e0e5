"""Training the next target from the desk (``dynadesk train --task T --rounds 1,2``), with its manifest.

The manifest (``manifest.json`` in the output folder) records what made the model: the example ids
of every split and a sha256 of every (text, label), the base data file's sha256, the parent model's
sha256, every option and the seed, the Dynadesk version and git revision, and the metrics.
``reproduce`` re-reads the same desk data from it, refuses when the data's hashes differ, and trains
the same weights again (bit for bit on the machine the manifest records: training is seeded, and the CPU,
its vector instructions, torch and the thread count are recorded; ``app.core.next_round.reproduction`` says
how close a run on another machine came).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import func, select

from app.core import paths
from app.core.errors import DynadeskError
from app.core.io.documents import read_document, write_document
from app.core.next_round.training_data import CONFLICT_POLICY, TrainingDataError, TrainingSet, training_set
from app.core.storage.models import ModelRecord, Round
from local_models.errors import ModelError
from local_models.files import file_sha256
from local_models.frozen_cache import FrozenCache
from local_models.progress import Progress
from local_models.train import TRAINED_PART_FILE, LabelledData, TrainingConfig, default_base_dir, stratified_split
from local_models.train_rounds import (
    DEFAULT_ROUND_SHARE,
    MAX_ROUND_WEIGHT,
    MODEL_FOLDER,
    RoundRows,
    RoundTrainingResult,
    WarmStart,
    auto_round_weight,
    read_warm_start,
    tensors_sha256,
    train_with_rounds,
)

MANIFEST_FILE = "manifest.json"
MANIFEST_FORMAT = "dynadesk-training-manifest"
FROM_TARGET, FROM_BASE = "target", "base"
# How the default was chosen (one seed, CPU, 2026-11-24): Davidson et al. as base data (24,783 tweets), 300
# HateCheck cases of 80 % of its templates as a simulated round, every case of the other templates (423, split
# by templ_id) held out; warm start from the shipped default model. Macro-F1 on the held-out cases / the base
# test split: parent 0.622 / 0.713; weight 1: 0.681 / 0.706; auto (22): 0.753 / 0.721; 100: 0.763 / 0.720.
MEASURED_ROUND_WEIGHTS = {
    "note": "Round examples together carry a quarter of the training loss (auto). Measured once (one seed): "
            "base Davidson 2017, 300 HateCheck cases as the round, 423 cases of held-out templates; held-out / "
            "base-test macro-F1: parent 0.622/0.713, weight 1 0.681/0.706, auto 22 0.753/0.721, 100 0.763/0.720.",
    "held_out_macro_f1": {"parent": 0.6221, "1": 0.6807, "auto_22": 0.7526, "100": 0.7629},
    "base_test_macro_f1": {"parent": 0.7131, "1": 0.7055, "auto_22": 0.7205, "100": 0.7197},
}


@dataclass
class BaseDataOptions:
    path: str
    text_column: str
    label_column: str
    label_map: dict[str, str] | None = None
    html_unescape: bool = False
    context_column: str | None = None  # a pair task's context (e.g. premise): rows are read as (context, text)


@dataclass
class RoundTrainingOptions:
    task: str
    rounds: list[int]
    base_data: BaseDataOptions | None = None
    start_from: str | None = None  # "target", "base", or None: the target when it was trained by Dynadesk
    include_undecided: bool = False
    imported: list[str] = field(default_factory=list)
    round_weight: str = "auto"  # "auto" (DEFAULT_ROUND_SHARE of the loss) or a number
    # train on validated variants too, each weighing this many written round examples; None: not at all
    variants: float | None = None
    encoder: str | None = None  # base encoder folder; None: the packaged all-MiniLM-L6-v2
    frozen_cache: bool = True  # keep the frozen layers' outputs in the desk's cache across runs (same weights)
    int8: str = "now"  # "now": the int8 search runs in training; "later": after promotion, in the background
    name: str = ""
    config: TrainingConfig = field(default_factory=TrainingConfig)


@dataclass
class Parent:
    kind: str  # "target" or "base"
    record: ModelRecord | None = None
    warm: WarmStart | None = None


def current_targets(desk: Any, task_code: str) -> list[ModelRecord]:
    """The target models of the task's latest round."""
    task = desk.tasks.task(task_code)
    with desk.db.read() as session:
        latest = session.scalar(select(func.max(Round.number)).where(Round.task_id == task.id))
        round_ = session.scalar(select(Round).where(Round.task_id == task.id, Round.number == latest))
        return list(round_.target_models) if round_ is not None else []


def trained_folder(desk: Any, record: ModelRecord) -> Path | None:
    """The Dynadesk-trained model folder behind a target: its own (PyTorch) or its parent's (ONNX)."""
    from app.core.services.target_models import find_by_sha

    candidates = [record]
    parent_sha = ((record.provenance or {}).get("parent_model") or {}).get("sha256")
    parent = find_by_sha(desk, parent_sha) if parent_sha else None
    if parent is not None:
        candidates.append(parent)
    for candidate in candidates:
        folder = Path(candidate.path) if candidate.path else None
        if folder is not None and candidate.format == "hf-torch" and (folder / "model.safetensors").is_file():
            try:
                read_warm_start(folder)
            except ModelError:
                continue
            return folder
    return None


def choose_parent(desk: Any, options: RoundTrainingOptions) -> Parent:
    if options.start_from == FROM_BASE:
        return Parent(FROM_BASE)
    for record in current_targets(desk, options.task):
        folder = trained_folder(desk, record)
        if folder is not None:
            return Parent(FROM_TARGET, record, read_warm_start(folder))
    if options.start_from == FROM_TARGET:
        raise DynadeskError(f"The current round of '{options.task}' has no target trained by Dynadesk to start "
                            "from; train from the base encoder with --from base.")
    return Parent(FROM_BASE)


def read_base_data(options: BaseDataOptions | None) -> LabelledData | None:
    if options is None:
        return None
    from app.core.io.training import read_labelled_csv

    return read_labelled_csv(Path(options.path), options.text_column, options.label_column,
                             label_map=options.label_map, unescape_html=options.html_unescape,
                             context_column=options.context_column)


def base_file_split(data: TrainingSet, base: LabelledData | None,
                    config: TrainingConfig) -> tuple[list[int], list[int], list[int]] | None:
    """The kept base rows' parts as the base file's own seeded split makes them (``stratified_split`` over every
    row of the file, as plain training and the comparison's base test split do), so that rows left out by
    de-duplication do not shift the split, and the base test split a comparison scores is never trained on."""
    if base is None or not data.base:
        return None
    train, dev, test = stratified_split(base.labels, config)
    part = {**{i: 0 for i in train}, **{i: 1 for i in dev}, **{i: 2 for i in test}}
    split: tuple[list[int], list[int], list[int]] = ([], [], [])
    for position, example in enumerate(data.base):
        split[part[int(example.id.split(":", 1)[1])]].append(position)
    return split


def round_rows(data: TrainingSet, base: LabelledData | None, config: TrainingConfig | None = None) -> RoundRows:
    index = {name: i for i, name in enumerate(data.labels)}
    source: dict[str, Any] = {"task": data.task, "rounds": data.rounds, "summary": data.summary()}
    if base is not None:  # the keys evaluation's overlap check reads: it then checks the base file's texts
        source.update({k: base.source.get(k) for k in ("file", "path", "sha256", "text_column", "label_column",
                                                       "label_map", "html_unescaped", "rows_used")})
        if base.source.get("context_column"):
            source["context_column"] = base.source["context_column"]
    return RoundRows(list(data.labels), data.texts("base"), [index[x] for x in data.labels_of("base")],
                     data.texts("train"), [index[x] for x in data.labels_of("train")],
                     data.texts("held_out"), [index[x] for x in data.labels_of("held_out")],
                     [e.round or 0 for e in data.held_out], source,
                     base_file_split(data, base, config) if config is not None else None,
                     data.texts("variants"), [index[x] for x in data.labels_of("variants")])


def round_weight_for(requested: str, data: TrainingSet, config: TrainingConfig) -> tuple[float, dict[str, Any]]:
    """The per-example weight of a round example against a base example, and how it was chosen."""
    base_train = round(len(data.base) * (1 - config.dev_fraction - config.test_fraction))
    if requested == "auto":
        value = auto_round_weight(base_train, len(data.train))
        how = {"requested": "auto", "round_share": DEFAULT_ROUND_SHARE, "max": MAX_ROUND_WEIGHT,
               "measured": MEASURED_ROUND_WEIGHTS}
    else:
        try:
            value = float(requested)
        except ValueError:
            raise DynadeskError(f"--round-weight '{requested}' is neither 'auto' nor a number.") from None
        if not 0 < value <= 10_000:
            raise DynadeskError("--round-weight must be a positive number (1 weighs a round example like a base one).")
        how = {"requested": requested}
    return value, {"scheme": "sample_weight", "value": value, **how,
                   "base_train_rows": base_train, "round_train_rows": len(data.train)}


def train_from_desk(desk: Any, options: RoundTrainingOptions, out_dir: Path, *, progress: Progress | None = None,
                    expected: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Select, train, assemble and write the manifest; returns the manifest. With ``expected`` (a
    manifest) the data and the parent must hash as recorded there."""
    out_dir = Path(out_dir)
    if out_dir.exists() and any(out_dir.iterdir()) and not (out_dir / MANIFEST_FILE).is_file():
        raise DynadeskError(f"{out_dir} is a folder with other files in it; give a new or empty folder for --out.")
    base = read_base_data(options.base_data)
    if options.variants is not None:
        from app.core.next_round.variant_training import parse_variant_weight

        options.variants = parse_variant_weight(options.variants)
    data = training_set(desk, options.task, options.rounds, include_undecided=options.include_undecided,
                        imported=options.imported, base=base, variants=options.variants is not None)
    if not data.train and not data.base:
        raise TrainingDataError(f"Rounds {', '.join(map(str, data.rounds))} of '{options.task}' have no decided "
                                f"examples to train on (left out: {data.excluded or 'none'}).")
    if expected is not None:
        check_same_data(expected, data, base)
    if expected is not None:
        parent = expected_parent(desk, expected)
    else:
        parent = choose_parent(desk, options)
    encoder = Path(options.encoder) if options.encoder else None
    if parent.warm is not None and encoder is None:
        recorded = parent.warm.description.get("base", {}).get("path")
        encoder = Path(recorded) if recorded else None
    encoder = encoder or default_base_dir()
    weight, weighting = round_weight_for(options.round_weight, data, options.config)
    if expected is not None:
        weight = float(expected["weighting"]["value"])
        weighting = expected["weighting"]
    rows = round_rows(data, base, options.config)
    variant_weight = weight * (options.variants or 0.0)
    manifest: dict[str, Any] = {}

    def write_manifest(staging: Path, result: RoundTrainingResult) -> None:
        from safetensors.torch import load_file

        manifest.update(build_manifest(options, data, base, parent, encoder, weighting, result, rows))
        if data.with_variants:
            from app.core.next_round.variant_training import variants_manifest

            manifest["variants"] = variants_manifest(
                ({"id": e.id, **data.variant_origins[e.id]} for e in data.variants), float(options.variants or 0.0),
                variant_weight, data.variants_left_out)
        # the weights' own checksum: the file's header may list its metadata in another order from run to run
        manifest["output"]["trained_tensors_sha256"] = tensors_sha256(load_file(str(staging / TRAINED_PART_FILE)))
        write_document(manifest, staging / MANIFEST_FILE)

    cache = FrozenCache(paths.frozen_states_cache_dir(desk.root)) if options.frozen_cache else None
    train_with_rounds(rows, out_dir, config=options.config, round_weight=weight, weighting=weighting,
                      base_dir=encoder, warm=parent.warm, name=options.name or f"{options.task} rounds "
                      f"{','.join(map(str, data.rounds))}", progress=progress, before_install=write_manifest,
                      frozen_cache=cache, int8=options.int8, variant_weight=variant_weight)
    return manifest


def build_manifest(options: RoundTrainingOptions, data: TrainingSet, base: LabelledData | None, parent: Parent,
                   encoder: Path, weighting: dict[str, Any], result: RoundTrainingResult,
                   rows: RoundRows) -> dict[str, Any]:
    from app.core.about import version_info

    info = version_info()
    base_ids = data.ids("base")
    round_ids = data.ids("train")
    rows_ids = base_ids + round_ids + data.ids("variants")  # the trainer's row order (train_rounds.combined)

    def ids_of(indices: Sequence[int]) -> list[str]:
        return [rows_ids[i] for i in indices]

    options_json = asdict(options)
    options_json.pop("config")
    return {
        "format": MANIFEST_FORMAT, "format_version": 1,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "dynadesk": {"version": info["version"], "revision": info["revision"]},
        "task": data.task, "rounds": data.rounds, "labels": data.labels,
        "options": options_json, "config": asdict(options.config), "seed": options.config.seed,
        "data": {
            "splits": {"train": round_ids, "held_out": data.ids("held_out"), "base": base_ids,
                       **({"variants": data.ids("variants")} if data.with_variants else {}),
                       **{name: ids_of(idx) for name, idx in result.splits.items()}},
            "hashes": data.hashes(),
            "base_file": None if base is None else {"file": base.source["file"], "sha256": base.source["sha256"],
                                                    "path": base.source["path"]},
            "summary": data.summary(),
            "conflicts": [{"text": c.text, "members": [{"id": i, "label": lb} for i, lb in c.members]}
                          for c in data.conflicts],
            "conflict_policy": CONFLICT_POLICY,
            "duplicates": [{"id": d.id, "kept": d.kept} for d in data.duplicates],
        },
        "parent": {"kind": parent.kind,
                   "model_id": str(parent.record.id) if parent.record else None,
                   "model_sha256": parent.record.sha256 if parent.record else None,
                   "path": str(parent.warm.source) if parent.warm else None,
                   "trained_tensors_sha256": parent.warm.tensors_sha256 if parent.warm else None},
        "encoder": {"path": str(encoder), "weights_sha256": file_sha256(encoder / "model.safetensors")},
        "weighting": weighting,
        "output": {"trained_part": ".", "model": MODEL_FOLDER, "trained_part_sha256": result.trained_part_sha256},
        "metrics": result.report.metrics,
        "frozen_cache": result.report.frozen_cache,  # whether the frozen layers' outputs came from the cache
        # the CPU, its vector instructions, torch and threads: the same bits are due only where they match
        "machine": result.report.description["training"]["machine"],
    }


def read_manifest(path: Path) -> dict[str, Any]:
    return read_document(path, MANIFEST_FORMAT, "a Dynadesk training manifest")


def options_from_manifest(manifest: Mapping[str, Any]) -> RoundTrainingOptions:
    recorded = dict(manifest["options"])
    base = recorded.pop("base_data", None)
    return RoundTrainingOptions(**recorded, base_data=BaseDataOptions(**base) if base else None,
                                config=TrainingConfig(**manifest["config"]))


def check_same_data(expected: Mapping[str, Any], data: TrainingSet, base: LabelledData | None) -> None:
    """Refuse, with what changed, when the desk's data no longer hashes as the manifest recorded."""
    recorded_base = (expected["data"].get("base_file") or {}).get("sha256")
    current_base = base.source["sha256"] if base is not None else None
    if recorded_base != current_base:
        raise DynadeskError(f"The base data file is not the one the manifest records (sha256 "
                            f"{str(recorded_base)[:12]}..., now {str(current_base)[:12]}...); it cannot be reproduced.")
    problems = []
    for split in ("train", "held_out", "base", "variants"):
        before, now = expected["data"]["splits"].get(split, []), data.ids(split)
        if before != now:
            problems.append(f"{split}: {len(set(now) - set(before))} added, {len(set(before) - set(now))} gone"
                            + ("" if set(before) != set(now) else ", order changed"))
    old, new = expected["data"]["hashes"], data.hashes()
    changed = [i for i in old if i in new and old[i] != new[i]]
    if changed:
        problems.append(f"{len(changed)} example(s) have another text or label now (e.g. {changed[0]})")
    if problems:
        raise DynadeskError("The desk's training data differs from the manifest's, so the model cannot be "
                            "reproduced: " + "; ".join(problems) + ".")


def expected_parent(desk: Any, expected: Mapping[str, Any]) -> Parent:
    recorded = expected["parent"]
    if recorded["kind"] == FROM_BASE:
        return Parent(FROM_BASE)
    record = None
    if recorded.get("model_id"):
        record = next((r for r in desk.models.all() if str(r.id) == recorded["model_id"]), None)
    warm = read_warm_start(Path(recorded["path"]))
    if warm.tensors_sha256 != recorded["trained_tensors_sha256"]:
        raise DynadeskError(f"The parent model at {recorded['path']} is not the one the manifest records (its "
                            "trained tensors differ); it cannot be reproduced.")
    return Parent(FROM_TARGET, record, warm)


def reproduce(desk: Any, manifest_path: Path, out_dir: Path, *, progress: Progress | None = None,
              frozen_cache: bool | None = None, int8: str | None = None) -> dict[str, Any]:
    """Train again from a manifest, on the same desk data (refused when it differs). ``frozen_cache`` (None: as
    the manifest's run did) only decides whether the frozen layers' outputs are kept for later runs; ``int8``
    (None: as recorded) only when the int8 search runs."""
    manifest = read_manifest(manifest_path)
    options = options_from_manifest(manifest)
    if frozen_cache is not None:
        options.frozen_cache = frozen_cache
    if int8 is not None:
        options.int8 = int8
    recorded_encoder = manifest["encoder"]
    if options.encoder is None and Path(recorded_encoder["path"]).resolve() != default_base_dir().resolve():
        options.encoder = recorded_encoder["path"]
    encoder = Path(options.encoder) if options.encoder else default_base_dir()
    if file_sha256(encoder / "model.safetensors") != recorded_encoder["weights_sha256"]:
        raise DynadeskError(f"The base encoder at {encoder} is not the one the manifest records.")
    return train_from_desk(desk, options, out_dir, progress=progress, expected=manifest)


def parse_rounds(spec: str) -> list[int]:
    try:
        numbers = sorted({int(part) for part in spec.split(",") if part.strip()})
    except ValueError:
        raise DynadeskError(f"--rounds '{spec}' is not a list of round numbers such as 1,2.") from None
    if not numbers or numbers[0] < 1:
        raise DynadeskError(f"--rounds '{spec}' names no round (round numbers start at 1).")
    return numbers

