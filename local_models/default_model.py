"""The default target model: assembled at first use from the base encoder package and the
small trained part shipped with Dynadesk, then exported to ONNX int8 and cached.

    model = prepare_default_model(part_dir, cache_dir)
    model.torch_dir   # Hugging Face folder (PyTorch; gradients for attributions)
    model.onnx_dir    # ONNX int8 folder, parity-checked against the PyTorch model

Both live under ``cache_dir/<name>-<fingerprint of the trained part>``: a new trained part
gets new folders, and an interrupted preparation leaves nothing that looks complete.
"""

from __future__ import annotations

import logging
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from local_models.backends.base import METADATA_FILE
from local_models.progress import Progress
from local_models.train import assemble, part_fingerprint, read_part_description

log = logging.getLogger(__name__)

DEFAULT_MODEL_SLUG = "hate-speech-r1"


@dataclass(frozen=True)
class PreparedModel:
    torch_dir: Path
    onnx_dir: Path | None
    onnx_int8: bool  # False when no int8 form passed its parity check (the notes say why) and fp32 serves
    description: dict[str, Any]  # the trained part's description: labels, training, held-out metrics
    notes: tuple[str, ...] = ()


def prepare_default_model(part_dir: Path, cache_dir: Path, *, base_dir: Path | None = None,
                          with_onnx: bool = True, progress: Progress | None = None,
                          slug: str = DEFAULT_MODEL_SLUG) -> PreparedModel:
    """Assemble (and export) the model once; later calls find the folders and return at once.

    ``slug`` names the cache folder: a promoted round's candidate goes through the same steps."""
    progress = progress or Progress()
    part_dir, cache_dir = Path(part_dir), Path(cache_dir)
    description = read_part_description(part_dir)
    root = cache_dir / f"{slug}-{part_fingerprint(part_dir)}"
    torch_dir = root / "torch"
    steps = STEPS if with_onnx else STEPS[:1]
    if not _complete(torch_dir, "model.safetensors"):
        _stage(progress, steps, 0)
        assemble(part_dir, torch_dir, base_dir=base_dir, replace=False)
    if not with_onnx:
        return _ready(progress, PreparedModel(torch_dir, None, False, description))

    from local_models.export import export_onnx
    from local_models.int8_form import cached_int8_form, cached_refusal, prepare_int8_form

    int8_dir, fp32_dir = root / "onnx-int8", root / "onnx-fp32"
    if cached_int8_form(part_dir, int8_dir):
        _repair_identity(int8_dir)
        return _ready(progress, PreparedModel(torch_dir, int8_dir, True, description))
    refused = cached_refusal(part_dir, root)
    if _complete(fp32_dir, "model.onnx") and refused is not None:
        _repair_identity(fp32_dir)
        return _ready(progress, PreparedModel(torch_dir, fp32_dir, False, description, (refused,)))
    progress.check()  # the desk closed while the model was being assembled
    if not _complete(fp32_dir, "model.onnx"):
        export_onnx(torch_dir, fp32_dir, int8=False, replace=False, progress=_stage(progress, steps, 1))
    progress.check()
    # the int8 form the trained part's recipe records, verified by its sha256 (local_models.int8_form)
    form = prepare_int8_form(part_dir, torch_dir, fp32_dir, int8_dir, progress=_stage(progress, steps, 2))
    if form.folder is not None:
        shutil.rmtree(fp32_dir, ignore_errors=True)  # only its int8 form is ever used
        return _ready(progress, PreparedModel(torch_dir, int8_dir, True, description))
    return _ready(progress, PreparedModel(torch_dir, fp32_dir, False, description, (form.note,)))


# What a first start does, and where each step ends in percent (from timings: the export is the long part)
STEPS = (("Assembling the model from the base encoder and its trained part", 20),
         ("Building its ONNX version and checking it", 75),
         ("Building its int8 version from the recorded recipe", 100))


def _stage(progress: Progress, steps: Sequence[tuple[str, int]], index: int) -> Progress:
    start = steps[index - 1][1] if index else 0
    text, end = steps[index]
    return progress.stage(index + 1, len(steps), text, start, end)


def _ready(progress: Progress, prepared: PreparedModel) -> PreparedModel:
    progress.report(100, 100)
    return prepared


def _repair_identity(folder: Path) -> None:
    """An export cached by an older Dynadesk still holds the exporter's notes (absolute source
    paths), which gave the same model another sha256 on every desk: strip them once. A quick
    look at the bytes keeps later starts from parsing the file."""
    from local_models.export import canonicalize_onnx_file, has_stale_build_details

    file = folder / "model.onnx"
    if not has_stale_build_details(file):
        return
    if canonicalize_onnx_file(file):
        log.info("removed build paths from %s: the model now has the same sha256 as on every other desk", file)


def _complete(folder: Path, weights: str) -> bool:
    return (folder / weights).is_file() and (folder / METADATA_FILE).is_file()


