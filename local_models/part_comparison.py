"""Two trained parts of the same base, side by side on the same texts: their class probabilities here.

A reproduction on another machine gets other bits (its kernels round otherwise); whether it still made the same
model is a question about predictions: both parts run here, through the same frozen states and the same batches,
so what differs is only what their weights make differ.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_models.frozen_cache import FrozenCache, frozen_states
from local_models.progress import Progress
from local_models.tokenization import ModelInput

BATCH = 32


@dataclass(frozen=True)
class PartDifference:
    texts: int
    labels_differing: int  # texts whose most likely label differs
    max_delta: float  # the largest |p_a - p_b| over every text and label
    worst: int | None  # the position of a text whose label differs (else of the one with the largest change)


def frozen_layer_count(part: Mapping[str, Any]) -> int:
    """The frozen layers below a trained part: the index of its lowest trained encoder layer."""
    layers = [int(name.split(".encoder.layer.")[1].split(".")[0]) for name in part if ".encoder.layer." in name]
    if not layers:
        raise ValueError("the trained part holds no encoder layer")
    return min(layers)


def probabilities(base_dir: Path, label_names: Sequence[str], parts: Sequence[Mapping[str, Any]],
                  texts: Sequence[ModelInput], *, max_length: int, num_threads: int,
                  cache: FrozenCache | None = None, progress: Progress | None = None) -> list[Any]:
    """Per part, a (texts x labels) float64 array of its probabilities; the frozen states are computed once
    (or read from ``cache``) and every part runs the very same batches."""
    import numpy as np
    import torch

    from local_models.tokenization import TextEncoder
    from local_models.train import _classification_model, _pad_states, _top_only

    torch.set_num_threads(num_threads)
    frozen = frozen_layer_count(parts[0])
    model = _classification_model(Path(base_dir), list(label_names), 0)
    encoder = TextEncoder.from_folder(Path(base_dir), max_length=max_length)
    states, _ = frozen_states(model, encoder, list(texts), frozen, base_dir=Path(base_dir), max_length=max_length,
                              num_threads=num_threads, progress=progress or Progress(), cache=cache)
    order = sorted(range(len(texts)), key=lambda i: states[i].shape[0])
    out = []
    model.eval()
    for part in parts:
        unexpected = model.load_state_dict(dict(part), strict=False).unexpected_keys
        if unexpected:
            raise ValueError(f"the trained part has tensors this base lacks, e.g. {unexpected[0]}")
        result = np.zeros((len(texts), len(label_names)))
        with _top_only(model, frozen), torch.inference_mode():
            for first in range(0, len(order), BATCH):
                chunk = order[first:first + BATCH]
                hidden, mask = _pad_states([states[i] for i in chunk])
                result[chunk] = model(inputs_embeds=hidden, attention_mask=mask).logits.double().softmax(-1).numpy()
        out.append(result)
    return out


def difference(first: Any, second: Any) -> PartDifference:
    """How two parts' probabilities on the same texts differ."""
    import numpy as np

    if not len(first):
        return PartDifference(0, 0, 0.0, None)
    deltas = np.abs(first - second)
    differing = np.flatnonzero(first.argmax(-1) != second.argmax(-1))
    worst = int(differing[0]) if len(differing) else int(deltas.max(-1).argmax())
    return PartDifference(len(first), int(len(differing)), float(deltas.max()), worst)
