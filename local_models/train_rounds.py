"""Training the next round's target: base data plus a round's examples, weighted, warm-started.

``train_with_rounds`` runs ``local_models.train.train_classifier`` with ``RoundHooks``, which
- split the rows: the base data's rows stratified into train/dev/test by the seed, as plain
  training does; the round examples to train on all go to training (without base data a seeded
  tenth of them is the dev set that picks the best epoch); the held-out round examples are never
  trained on and are scored at the end, per round;
- weigh every round example by ``round_weight`` against a base example in the loss (a per-example
  sample weight on top of the class weights), so that a few hundred validated examples can move a
  model trained on tens of thousands; generated variants of round examples (validated like them) weigh
  ``variant_weight`` and are trained on only, never part of a dev or test set;
- start the trained tensors from a parent's trained part (warm start) instead of the base encoder.

Nothing here reads files of ours beyond model folders; the caller hands in texts and labels.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_models.backends.base import METADATA_FILE, read_json_file
from local_models.errors import TrainingFailed
from local_models.files import file_sha256, install_dir, make_staging_dir
from local_models.frozen_cache import FrozenCache
from local_models.int8_form import INT8_LATER, INT8_NOW, defer_int8_recipe, record_int8_recipe, split_texts
from local_models.int8_search import TaskTexts
from local_models.progress import Progress
from local_models.tokenization import ModelInput
from local_models.train import (
    TRAINED_PART_FILE,
    LabelledData,
    TrainingConfig,
    TrainingReport,
    assemble,
    classification_metrics,
    default_base_dir,
    is_trained_part,
    stratified_split,
    train_classifier,
)

MODEL_FOLDER = "model"  # inside the output folder: the assembled model the engine loads
# The default weight: round examples together carry this share of the training loss, never less than a
# base example's weight (measured once: app.core.next_round.round_training.MEASURED_ROUND_WEIGHTS).
DEFAULT_ROUND_SHARE = 0.25
MAX_ROUND_WEIGHT = 100.0


@dataclass
class RoundRows:
    """Texts (or pairs) and labels (indices into ``label_names``) of the three parts, in a fixed order."""

    label_names: list[str]
    base_texts: list[ModelInput]  # texts, or (context, text) pairs for a pair task
    base_labels: list[int]
    round_texts: list[ModelInput]
    round_labels: list[int]
    held_out_texts: list[ModelInput]
    held_out_labels: list[int]
    held_out_rounds: list[int]  # the round of each held-out row, for per-round metrics
    source: dict[str, Any]
    # positions in base_texts of the base train/dev/test parts, when the caller fixes them (e.g. as the base
    # file's own seeded split, so its test rows stay the test rows another model was scored on); None: split here
    base_split: tuple[list[int], list[int], list[int]] | None = None
    # generated, validated variants of round examples: trained on only (never dev or test), with their own weight
    variant_texts: list[ModelInput] = field(default_factory=list)
    variant_labels: list[int] = field(default_factory=list)


def auto_round_weight(base_train: int, round_train: int, share: float = DEFAULT_ROUND_SHARE) -> float:
    """The per-example weight that gives the round examples ``share`` of the total weight, between 1
    and ``MAX_ROUND_WEIGHT`` (1 without base data: nothing to weigh against)."""
    if not base_train or not round_train:
        return 1.0
    weight = share / (1 - share) * base_train / round_train
    return float(min(MAX_ROUND_WEIGHT, max(1.0, round(weight, 4))))


@dataclass
class WarmStart:
    """A parent's trained tensors, by name, and what they were trained as."""

    tensors: dict[str, Any]
    description: dict[str, Any]
    source: Path
    tensors_sha256: str

    @property
    def train_layers(self) -> int:
        layers = {name.split(".encoder.layer.")[1].split(".")[0] for name in self.tensors if ".encoder.layer." in name}
        return len(layers)


def read_warm_start(folder: Path) -> WarmStart:
    """The trained tensors of a Dynadesk-trained model: a trained part (``dynadesk train``'s folder)
    or an assembled model folder whose description names its trained tensors."""
    from safetensors import safe_open

    folder = Path(folder)
    if is_trained_part(folder):
        weights, description = folder / TRAINED_PART_FILE, read_json_file(folder / METADATA_FILE, "trained part")
        names = None
    elif (folder / METADATA_FILE).is_file() and (folder / "model.safetensors").is_file():
        weights, description = folder / "model.safetensors", read_json_file(folder / METADATA_FILE, "model description")
        names = description.get("trained_tensors")
        if not names:
            raise TrainingFailed(f"{folder} was not trained by Dynadesk (its description names no trained tensors); "
                                 "train from the base encoder with --from base.")
    else:
        raise TrainingFailed(f"{folder} holds neither a trained part nor a Dynadesk-trained model folder; "
                             "train from the base encoder with --from base.")
    with safe_open(str(weights), framework="pt") as handle:
        keys = set(handle.keys())
        wanted = sorted(keys if names is None else names)
        absent = [n for n in wanted if n not in keys]
        if absent:
            raise TrainingFailed(f"{weights} lacks the trained tensors {absent[:3]} its description names.")
        tensors = {name: handle.get_tensor(name) for name in wanted}
    return WarmStart(tensors, description, folder, tensors_sha256(tensors))


def tensors_sha256(tensors: dict[str, Any]) -> str:
    """A checksum of named tensors that does not depend on the file they came from."""
    import hashlib

    digest = hashlib.sha256()
    for name in sorted(tensors):
        tensor = tensors[name].contiguous()
        digest.update(f"{name}:{tensor.dtype}:{tuple(tensor.shape)}\n".encode())
        digest.update(tensor.numpy().tobytes())
    return digest.hexdigest()


class RoundHooks:
    """What ``train_classifier`` asks of a round training run (its ``hooks`` argument)."""

    def __init__(self, rows: RoundRows, round_weight: float, warm: WarmStart | None, weighting: dict[str, Any],
                 variant_weight: float = 1.0):
        self.rows, self.round_weight, self.warm, self.weighting = rows, round_weight, warm, weighting
        self.variant_weight = variant_weight
        n_base, n_round, n_variant = len(rows.base_texts), len(rows.round_texts), len(rows.variant_texts)
        self.base_idx = list(range(n_base))
        self.round_idx = list(range(n_base, n_base + n_round))
        self.variant_idx = list(range(n_base + n_round, n_base + n_round + n_variant))
        first_held = n_base + n_round + n_variant
        self.held_idx = list(range(first_held, first_held + len(rows.held_out_texts)))
        self.splits: dict[str, list[int]] = {}

    def split(self, data: LabelledData, config: TrainingConfig) -> tuple[list[int], list[int], list[int]]:
        if self.base_idx:
            base_train, dev, test = self.rows.base_split or stratified_split(self.rows.base_labels, config)
            train = base_train + self.round_idx + self.variant_idx
            self.splits = {"base_train": base_train, "base_dev": dev, "base_test": test, "round_dev": []}
        else:
            shuffled = self.round_idx[:]
            random.Random(config.seed).shuffle(shuffled)
            cut = max(1, round(len(shuffled) * config.dev_fraction))
            dev, train = sorted(shuffled[:cut]), sorted(shuffled[cut:]) + self.variant_idx
            if not train or not self.held_idx:
                raise TrainingFailed("Without base data, training needs round examples to train on and held-out "
                                     "ones to test on; decide more examples or give --base data.")
            test = self.held_idx
            self.splits = {"base_train": [], "base_dev": [], "base_test": [], "round_dev": dev}
        return train, dev, test

    def prepare(self, model: Any) -> None:
        if self.warm is None:
            return
        import torch

        trainable = {name: p for name, p in model.named_parameters() if p.requires_grad}
        if set(trainable) != set(self.warm.tensors):
            raise TrainingFailed(
                f"The parent model's trained tensors do not match this run's ({len(self.warm.tensors)} vs "
                f"{len(trainable)}, e.g. {sorted(set(trainable) ^ set(self.warm.tensors))[:2]}); use --from base.")
        with torch.no_grad():
            for name, param in trainable.items():
                source = self.warm.tensors[name]
                if tuple(source.shape) != tuple(param.shape):
                    raise TrainingFailed(f"The parent's {name} has shape {tuple(source.shape)}, not "
                                         f"{tuple(param.shape)}; use --from base.")
                param.copy_(source)

    def loss(self, logits: Any, targets: Any, chunk: Sequence[int], class_weights: Any) -> Any:
        """Class- and sample-weighted cross entropy, normalised by the batch's total weight (equal to
        ``CrossEntropyLoss(weight=class_weights)`` when every sample weight is 1)."""
        import torch

        per_example = torch.nn.functional.cross_entropy(logits, targets, weight=class_weights, reduction="none")
        first_round, first_variant = len(self.base_idx), len(self.base_idx) + len(self.round_idx)
        samples = torch.tensor([self.variant_weight if i >= first_variant else self.round_weight if i >= first_round
                                else 1.0 for i in chunk], dtype=per_example.dtype)
        return (per_example * samples).sum() / (class_weights[targets] * samples).sum()

    def evaluate(self, predict: Callable[[list[int]], list[int]]) -> dict[str, Any]:
        if not self.held_idx:
            return {"held_out": None, "held_out_per_round": {}}
        names = self.rows.label_names
        predicted = dict(zip(self.held_idx, predict(self.held_idx)))
        offset = self.held_idx[0]
        gold = {i: self.rows.held_out_labels[i - offset] for i in self.held_idx}
        per_round: dict[str, Any] = {}
        for number in sorted(set(self.rows.held_out_rounds)):
            idx = [i for i in self.held_idx if self.rows.held_out_rounds[i - offset] == number]
            per_round[str(number)] = classification_metrics([gold[i] for i in idx], [predicted[i] for i in idx], names)
        return {"held_out": classification_metrics([gold[i] for i in self.held_idx],
                                                   [predicted[i] for i in self.held_idx], names),
                "held_out_per_round": per_round}

    def describe(self) -> dict[str, Any]:
        return {"rounds": {"weighting": self.weighting, "warm_start": None if self.warm is None else {
            "from": str(self.warm.source), "tensors_sha256": self.warm.tensors_sha256},
            "rows": {"base": len(self.base_idx), "round": len(self.round_idx), "held_out": len(self.held_idx),
                     **({"variants": len(self.variant_idx)} if self.variant_idx else {})},
            "source": self.rows.source}}


def int8_texts(rows: RoundRows, hooks: RoundHooks, splits: dict[str, list[int]], seed: int) -> TaskTexts:
    """Held-out texts (base dev/test, round dev, held-out rounds) and the round's examples judge the
    int8 form; the base training texts calibrate it."""
    texts = combined(rows).texts
    base_train = set(hooks.splits.get("base_train", []))
    held = [i for i in sorted(set(splits.get("dev", [])) | set(splits.get("test", [])) | set(hooks.held_idx))]
    rounds = [i for i in hooks.round_idx if i not in held]
    return split_texts(texts, sorted(base_train), held + rounds,
                       "this training run's held-out texts and the round's examples", seed=seed)


def combined(rows: RoundRows) -> LabelledData:
    labels = rows.base_labels + rows.round_labels + rows.variant_labels + rows.held_out_labels
    return LabelledData(rows.base_texts + rows.round_texts + rows.variant_texts + rows.held_out_texts, labels,
                        list(rows.label_names),
                        dict(rows.source))


@dataclass
class RoundTrainingResult:
    report: TrainingReport
    out_dir: Path
    model_dir: Path  # the assembled model, loadable by local_models' engine
    splits: dict[str, list[int]]  # row indices of base_train/base_dev/base_test/round_dev
    trained_part_sha256: str


def train_with_rounds(rows: RoundRows, out_dir: Path, *, config: TrainingConfig, round_weight: float,
                      weighting: dict[str, Any], base_dir: Path | None = None, warm: WarmStart | None = None,
                      name: str = "", progress: Progress | None = None, frozen_cache: FrozenCache | None = None,
                      before_install: Callable[[Path, RoundTrainingResult], None] | None = None,
                      int8: str = INT8_NOW, variant_weight: float = 1.0) -> RoundTrainingResult:
    """Train into a staging folder, assemble the model beside the trained part, let ``before_install``
    add its files (the manifest), then move the whole folder into place: a cancelled or failed run
    leaves nothing half-written at ``out_dir``. ``int8``: search the int8 recipe now (``INT8_NOW``), or
    leave the search with its texts for after promotion (``INT8_LATER``)."""
    if int8 not in (INT8_NOW, INT8_LATER):
        raise TrainingFailed(f"int8 is '{INT8_NOW}' or '{INT8_LATER}', not '{int8}'.")
    out_dir = Path(out_dir)
    base_dir = Path(base_dir) if base_dir else default_base_dir()
    if warm is not None:
        expected = warm.description.get("base", {}).get("weights_sha256")
        if expected and expected != file_sha256(base_dir / "model.safetensors"):
            raise TrainingFailed(f"The parent model was trained on another base encoder than {base_dir}; give its "
                                 "base with --encoder, or use --from base.")
        parent_labels = [warm.description["id2label"][str(i)] for i in range(len(warm.description["id2label"]))]
        if parent_labels != rows.label_names:
            raise TrainingFailed(f"The parent model answers {', '.join(parent_labels)}, not the task's "
                                 f"{', '.join(rows.label_names)}; use --from base.")
        config.train_layers = warm.train_layers
    hooks = RoundHooks(rows, round_weight, warm, weighting, variant_weight)
    progress = progress or Progress()
    stages = 4 if int8 == INT8_NOW else 3  # frozen layers, training, assembling (and the int8 search)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging_dir(out_dir)
    try:
        report = train_classifier(combined(rows), staging, base_dir=base_dir, config=config, name=name,
                                  progress=progress, hooks=hooks, frozen_cache=frozen_cache, stage_count=stages)
        progress.step(3, stages, "assembling the model")
        assemble(staging, staging / MODEL_FOLDER, base_dir=base_dir)
        # the int8 recipe, checked on this run's held-out texts and the round's examples (local_models.int8_form)
        texts = int8_texts(rows, hooks, report.splits, config.seed)
        if int8 == INT8_LATER:
            defer_int8_recipe(staging, texts)
            progress.say("int8 search deferred: it runs after promotion, while the fp32 form serves")
        else:
            record_int8_recipe(staging, texts, model_dir=staging / MODEL_FOLDER,
                               progress=progress.step(4, stages, "int8 search", "texts"))
        result = RoundTrainingResult(report, out_dir, out_dir / MODEL_FOLDER, hooks.splits,
                                     file_sha256(staging / TRAINED_PART_FILE))
        if before_install is not None:
            before_install(staging, result)
        install_dir(staging, out_dir, replace=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return result
