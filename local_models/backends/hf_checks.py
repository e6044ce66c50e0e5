"""Checks of a Hugging Face model folder that read only config.json, the weight index and the
weights' headers: they run before transformers builds anything.

transformers allocates what config.json says, and only then finds that the weights do not fit:
a config claiming 100000 layers or ten million labels took minutes and gigabytes to fail. Here
the config is held against the tensors' names and shapes first, so such a folder is refused in
a moment with a message that says which claim is wrong.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from local_models.errors import CorruptModel, UnsafeModelFile

# Sizes and counts of the common encoder configs (with the names DistilBERT and GPT-2 use).
SIZE_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
    "max_position_embeddings", "num_labels", "embedding_size", "dim", "hidden_dim", "n_layers",
    "n_heads", "n_layer", "n_head", "n_embd", "n_positions", "d_model", "num_layers",
)
LAYER_FIELDS = ("num_hidden_layers", "n_layers", "n_layer", "num_layers")
# The output projection of a classification head, by the names transformers gives it.
LABEL_TENSORS = ("classifier.out_proj.weight", "classifier.weight", "score.weight",
                 "classification_head.out_proj.weight", "logits_proj.weight")
_LAYER_INDEX = re.compile(r"(?:^|\.)(?:layer|layers|h|block)\.(\d+)\.")
_FIELD_TYPE = re.compile(r"Field '(\w+)' expected (\w+), got \w+ \(value: (.*)\)")
_TYPE_WORDS = {"int": "a whole number", "float": "a number", "str": "text", "bool": "true or false"}

Shapes = dict[str, tuple[int, ...]]


def _shown(value: object) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_config_fields(config: dict[str, Any], config_file: Path) -> None:
    """Sizes and counts must be whole numbers of at least 1 (``true`` and ``3.0`` are not)."""
    for name in SIZE_FIELDS:
        if name in config:
            value = config[name]
            if type(value) is not int or value < 1:
                raise CorruptModel(f"{config_file}: {name} must be a whole number of at least 1; "
                                   f"it is {_shown(value)}.")
    architectures = config.get("architectures")
    if architectures is not None and not (
            isinstance(architectures, list) and all(isinstance(a, str) for a in architectures)):
        raise CorruptModel(f"{config_file}: architectures must be a list of class names; "
                           f"it is {_shown(architectures)}.")


def config_problem(exc: BaseException) -> str:
    """transformers' complaint about a config value, in words (its messages name exception classes)."""
    text = str(exc)
    found = _FIELD_TYPE.search(text)
    if found:
        field, wanted, value = found.groups()
        return f"{field} must be {_TYPE_WORDS.get(wanted, wanted)}; it is {value}"
    lines = [line.strip() for line in text.splitlines() if line.strip()] or [exc.__class__.__name__]
    return re.sub(r"^\w+(Error|Exception): ", "", lines[-1])[:300]


def weights_root(folder: Path) -> Path:
    """The folder a model's weights must lie in. A Hugging Face cache snapshot keeps its files as
    links into the repository's blobs/ folder, so there it is the repository folder."""
    folder = folder.resolve()
    return folder.parent.parent if folder.parent.name == "snapshots" else folder


def indexed_weight_file(folder: Path, name: object, index_name: str) -> Path:
    """A file named in a weight index, which must lie inside the model folder."""
    if not isinstance(name, str) or not name:
        raise CorruptModel(f"{folder / index_name} names a weight file {_shown(name)} that is not a file name.")
    if (PurePosixPath(name).is_absolute() or PureWindowsPath(name).is_absolute() or "\\" in name
            or ".." in PurePosixPath(name).parts):
        raise UnsafeModelFile(
            f"{folder / index_name} names {name!r}, a file outside the model folder; Dynadesk reads a "
            "model's weights only from its own folder."
        )
    return folder / name


def check_inside(folder: Path, file: Path) -> None:
    """Refuse a weight file that is a link to somewhere outside the model folder."""
    root = weights_root(folder)
    target = file.resolve()
    if target != root and root not in target.parents:
        raise UnsafeModelFile(
            f"The weight file {file} is a link to {target}, outside the model folder; Dynadesk reads a "
            "model's weights only from its own folder."
        )


def check_config_fits_weights(config: dict[str, Any], shapes: Shapes, weights: str, *, labelled: bool) -> None:
    """Hold the layer and label counts of config.json against the tensors in the weights.

    ``weights`` names the weights in messages ("model.safetensors"). Runs before transformers
    builds the config or the model, which would allocate what the config says.
    """
    layer_field = next((name for name in LAYER_FIELDS if name in config), None)
    if layer_field is not None:
        layers = config[layer_field]
        held = {match.group(1) for key in shapes if (match := _LAYER_INDEX.search(key))}
        if held and layers > len(held):
            raise CorruptModel(f"config.json says {layers} hidden layers ({layer_field}) but {weights} "
                               f"holds weights for {len(held)}.")
        if not held and layers > len(shapes):  # every layer needs at least one tensor
            raise CorruptModel(f"config.json says {layers} hidden layers ({layer_field}) but {weights} "
                               f"holds only {len(shapes)} tensors.")
    if not labelled:
        return
    id2label = config.get("id2label")
    named = len(id2label) if isinstance(id2label, dict) and id2label else None
    declared = config.get("num_labels")
    if named is not None and declared is not None and named != declared:
        raise CorruptModel(f"config.json gives num_labels {declared} but id2label names {named} labels.")
    count = named if named is not None else declared
    if count is None:
        return
    field = "id2label" if named is not None else "num_labels"
    head = next((name for name in LABEL_TENSORS if name in shapes), None)
    if head is not None and shapes[head] and shapes[head][0] != count:
        raise CorruptModel(f"{field} of config.json gives {count} labels, which does not match the "
                           f"classifier weights' {shapes[head][0]} rows ({head} in {weights}).")
    widest = max((max(shape) for shape in shapes.values() if shape), default=0)
    if head is None and count > widest:  # every label needs its own row in some tensor
        raise CorruptModel(f"{field} of config.json gives {count} labels, but no tensor in {weights} "
                           f"has that many rows.")


def check_skeleton_fits(model_cls: Any, folder: Path, shapes: Shapes) -> None:
    """Build the model on the meta device (shapes only, no memory) and compare every tensor the
    weights hold with the shape the config gives it."""
    import torch

    config_file = folder / "config.json"
    try:
        config = model_cls.config_class.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:  # transformers' validation raises many kinds
        raise CorruptModel(f"{config_file} is not a configuration transformers accepts: "
                           f"{config_problem(exc)}.") from exc
    try:
        with torch.device("meta"):
            skeleton = model_cls(config)
    except Exception as exc:  # a model class rejects sizes that do not fit together
        raise CorruptModel(f"{config_file} describes a model that cannot be built: {config_problem(exc)}.") from exc
    wanted = {name: tuple(tensor.shape) for name, tensor in skeleton.state_dict().items()}
    prefix = skeleton.base_model_prefix + "."
    for key, shape in shapes.items():
        name = key if key in wanted else prefix + key
        if name in wanted and wanted[name] != shape:
            raise CorruptModel(f"The weights in {folder} do not fit its config.json: {key} is {list(shape)} "
                               f"in the weights but the config makes it {list(wanted[name])}.")
    # A tensor the weights leave out would be allocated at the config's size: a real model lacks at
    # most a few small ones (transformers names them after loading), never more than it holds.
    held = {key if key in wanted else prefix + key for key in shapes}
    lacking = sorted(((math.prod(shape), name) for name, shape in wanted.items() if name not in held), reverse=True)
    holds = sum(math.prod(shape) for shape in shapes.values())
    if sum(size for size, _ in lacking) > holds:
        largest = lacking[0][1]
        raise CorruptModel(f"The weights in {folder} hold {holds:,} parameters; config.json asks for "
                           f"{sum(size for size, _ in lacking):,} more that they lack ({largest} "
                           f"{list(wanted[largest])}); it is not a trained model of that kind.")
