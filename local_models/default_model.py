"""The default target model: assembled at first use from the base encoder package and the
small trained part shipped with Dynadesk, then exported to ONNX int8 and cached.

    model = prepare_default_model(part_dir, cache_dir)
    model.torch_dir   # Hugging Face folder (PyTorch; gradients for attributions)
    model.onnx_dir    # ONNX int8 folder, parity-checked against the PyTorch model

A first start takes the two halves apart: ``prepare_torch_form`` (seconds) lets the model answer
from PyTorch, and ``prepare_fast_forms`` (the export, tens of seconds) runs in the background
(``local_models.child_process``); ``prepared_fast_form`` says, without work, whether it is done.

Both live under ``cache_dir/<name>-<fingerprint of the trained part>``: a new trained part
gets new folders, and an interrupted preparation leaves nothing that looks complete.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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

    ``slug`` names the cache folder: a promoted round's candidate goes through the same steps.
    The two halves also run apart: :func:`prepare_torch_form` (seconds: the model answers) and
    :func:`prepare_fast_forms` (the ONNX export and int8 attempt, tens of seconds, in the background)."""
    progress = progress or Progress()
    steps = STEPS if with_onnx else STEPS[:1]
    torch_form = _assemble(part_dir, cache_dir, base_dir, progress, steps, slug)
    if not with_onnx:
        return _ready(progress, torch_form)
    return _fast_forms(part_dir, torch_form, progress, steps, 1)


def prepare_torch_form(part_dir: Path, cache_dir: Path, *, base_dir: Path | None = None,
                       progress: Progress | None = None, slug: str = DEFAULT_MODEL_SLUG) -> PreparedModel:
    """The quick half: the PyTorch folder (a few seconds, most of it importing torch), which
    answers at once while the ONNX forms are prepared."""
    progress = progress or Progress()
    return _ready(progress, _assemble(part_dir, cache_dir, base_dir, progress, STEPS[:1], slug))


def prepare_fast_forms(part_dir: Path, cache_dir: Path, *, base_dir: Path | None = None,
                       progress: Progress | None = None, slug: str = DEFAULT_MODEL_SLUG) -> PreparedModel:
    """The slow half: the ONNX fp32 export, then the int8 attempt (assembling first if needed).
    Resumes what an interrupted run left: a finished fp32 export is not built again, and
    a half-written folder is a hidden staging folder that nothing reads."""
    progress = progress or Progress()
    torch_form = _assemble(part_dir, cache_dir, base_dir, progress, FAST_FORM_STEPS[:1], slug)
    _sweep_abandoned_staging(torch_form.torch_dir.parent)
    return _fast_forms(part_dir, torch_form, progress, FAST_FORM_STEPS, 1)


def prepare_deferred_int8(part_dir: Path, cache_dir: Path, *, base_dir: Path | None = None,
                          progress: Progress | None = None, slug: str = DEFAULT_MODEL_SLUG) -> PreparedModel:
    """A part promoted with its int8 search deferred (``--int8 later``): run the search on the texts
    training kept (against the fp32 graph that serves meanwhile), then build the int8 form as any
    desk does. The fp32 folder stays: it is a registered model until its round switches. Progress
    comes in four stages (the model and its fp32 graph are usually there from the promotion)."""
    from local_models.export import export_onnx
    from local_models.int8_form import run_deferred_search

    progress = progress or Progress()
    part_dir, cache_dir = Path(part_dir), Path(cache_dir)
    torch_dir = default_model_root(part_dir, cache_dir, slug) / "torch"
    progress.step(1, 4, "the model from its trained part")
    if not _complete(torch_dir, "model.safetensors"):
        assemble(part_dir, torch_dir, base_dir=base_dir, replace=False)
    torch_form = PreparedModel(torch_dir, None, False, read_part_description(part_dir))
    fp32_dir = torch_dir.parent / "onnx-fp32"
    exporting = progress.step(2, 4, "its fp32 ONNX form")
    if not _complete(fp32_dir, "model.onnx"):
        export_onnx(torch_dir, fp32_dir, int8=False, replace=False, progress=exporting)
    progress.check()
    run_deferred_search(part_dir, torch_dir, fp32_dir / "model.onnx", progress=progress.step(3, 4, "int8 search", "texts"))
    progress.check()
    building = progress.step(4, 4, "building the int8 form the search chose")
    return _ready(building, _int8_step(part_dir, torch_form, building.lines_only(), keep_fp32=True))


def prepared_fast_form(part_dir: Path, cache_dir: Path, *, slug: str = DEFAULT_MODEL_SLUG) -> PreparedModel | None:
    """The fast form already prepared (or fetched) in the cache, without doing any work; None when not yet."""
    part_dir, cache_dir = Path(part_dir), Path(cache_dir)
    root = default_model_root(part_dir, cache_dir, slug)
    torch_dir = root / "torch"
    if not _complete(torch_dir, "model.safetensors"):
        return None
    return _finished_onnx(part_dir, PreparedModel(torch_dir, None, False, read_part_description(part_dir)))


def default_model_root(part_dir: Path, cache_dir: Path, slug: str = DEFAULT_MODEL_SLUG) -> Path:
    """The cache folder of one trained part's forms (torch/, onnx-int8-<recipe>/ or onnx-fp32/)."""
    return Path(cache_dir) / f"{slug}-{part_fingerprint(Path(part_dir))}"


def _assemble(part_dir: Path, cache_dir: Path, base_dir: Path | None, progress: Progress,
              steps: Sequence[tuple[str, int]], slug: str) -> PreparedModel:
    part_dir, cache_dir = Path(part_dir), Path(cache_dir)
    description = read_part_description(part_dir)
    torch_dir = default_model_root(part_dir, cache_dir, slug) / "torch"
    if not _complete(torch_dir, "model.safetensors"):
        _stage(progress, steps, 0)
        assemble(part_dir, torch_dir, base_dir=base_dir, replace=False)
    return PreparedModel(torch_dir, None, False, description)


def _finished_onnx(part_dir: Path, torch_form: PreparedModel) -> PreparedModel | None:
    from local_models.int8_form import cached_int8_form, cached_refusal, int8_folder

    torch_dir, description = torch_form.torch_dir, torch_form.description
    root = torch_dir.parent
    int8_dir, fp32_dir = int8_folder(part_dir, root), root / "onnx-fp32"
    if cached_int8_form(part_dir, int8_dir):
        _repair_identity(int8_dir)
        return PreparedModel(torch_dir, int8_dir, True, description)
    refused = cached_refusal(part_dir, root)
    if _complete(fp32_dir, "model.onnx") and refused is not None:
        _repair_identity(fp32_dir)
        return PreparedModel(torch_dir, fp32_dir, False, description, (refused,))
    return None


def _fast_forms(part_dir: Path, torch_form: PreparedModel, progress: Progress, steps: Sequence[tuple[str, int]],
                first: int) -> PreparedModel:
    from local_models.export import export_onnx

    finished = _finished_onnx(part_dir, torch_form)
    if finished is not None:
        return _ready(progress, finished)
    torch_dir = torch_form.torch_dir
    fp32_dir = torch_dir.parent / "onnx-fp32"
    progress.check()  # the desk closed while the model was being assembled
    if not _complete(fp32_dir, "model.onnx"):
        # a fused recipe quantizes the fused graph: exported once, it is also the fp32 form (faster than the plain one)
        export_onnx(torch_dir, fp32_dir, int8=False, replace=False, fused=_recipe_is_fused(part_dir),
                    progress=_stage(progress, steps, first))
    progress.check()
    return _ready(progress, _int8_step(part_dir, torch_form, _stage(progress, steps, first + 1)))


def _recipe_is_fused(part_dir: Path) -> bool:
    from local_models.int8_search import read_recipe_file

    try:
        recorded = read_recipe_file(part_dir)
    except ValueError:  # no recipe or a broken one: the int8 step says so
        return False
    return recorded.usable and recorded.recipe is not None and recorded.recipe.fused


def _int8_step(part_dir: Path, torch_form: PreparedModel, progress: Progress, *,
               keep_fp32: bool = False) -> PreparedModel:
    """The int8 form the trained part's recipe records, verified by its sha256
    (``local_models.int8_form``); fp32 (saying why) when there is none."""
    from local_models.int8_form import int8_folder, prepare_int8_form

    torch_dir, description = torch_form.torch_dir, torch_form.description
    root = torch_dir.parent
    int8_dir, fp32_dir = int8_folder(part_dir, root), root / "onnx-fp32"
    form = prepare_int8_form(part_dir, torch_dir, fp32_dir, int8_dir, progress=progress)
    if form.folder is not None:
        if not keep_fp32:
            shutil.rmtree(fp32_dir, ignore_errors=True)  # only its int8 form is ever used
        return PreparedModel(torch_dir, int8_dir, True, description)
    return PreparedModel(torch_dir, fp32_dir, False, description, (form.note,))


def _sweep_abandoned_staging(root: Path, *, older_than_s: float = 3600) -> None:
    """Staging folders of a preparation that was killed are never read; remove those left untouched
    for an hour (a live export writes into its own at least that often)."""
    now = time.time()
    for folder in root.glob(".*"):
        if not folder.is_dir():
            continue
        try:
            newest = max([folder.stat().st_mtime, *(p.stat().st_mtime for p in folder.rglob("*"))])
        except OSError:
            continue
        if now - newest > older_than_s:
            shutil.rmtree(folder, ignore_errors=True)


# What a first start does, and where each step ends in percent (from timings: the export is the long part)
STEPS = (("Assembling the model from the base encoder and its trained part", 20),
         ("Building its ONNX version and checking it", 75),
         ("Building its int8 version from the recorded recipe", 100))
# The same steps when the PyTorch form already answers and only the fast forms are prepared
FAST_FORM_STEPS = (("Assembling the model from the base encoder and its trained part", 5),
                   ("Building its ONNX version and checking it", 70),
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


