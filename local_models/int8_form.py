"""The int8 form of a trained part (the default model, a promoted candidate), built from its recipe.

    form = prepare_int8_form(part_dir, torch_dir, fp32_dir, int8_folder(part_dir, root))
    form.folder   # the int8 ONNX folder, or None: the float model serves, and ``form.note`` says why

A trained part carries ``int8_recipe.json`` (``local_models.int8_search``): the recipe found on the
task's texts, the parity figures its graph got, that graph's sha256, and its answers on a few check
texts (``local_models.int8_check``). A desk has no task texts at first start, so it does not measure
again: it builds the graph from its own fp32 export with the same recipe and uses it when it is the
graph that was checked: the same bytes, or (another exporter or quantizer release) the same answers
on the check texts. Any other outcome (no recipe, a broken one, a recipe that records a refusal, other
answers) leaves the float model serving, with the reason recorded next to the cache (``REFUSAL_FILE``),
so later starts do not build again until the recipe or the toolchain's releases change.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_models.backends.base import METADATA_FILE, read_json_file
from local_models.errors import Cancelled, ExportFailed, ModelError, ParityCheckFailed
from local_models.files import file_sha256
from local_models.int8_search import (
    RECIPE_FILE,
    Int8Search,
    TaskTexts,
    read_recipe_file,
    search_int8,
    write_deferred_recipe_file,
    write_recipe_file,
)
from local_models.parity import MIN_TEXTS
from local_models.progress import Progress
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

REFUSAL_FILE = "int8-refused.json"
INT8_NOW, INT8_LATER = "now", "later"  # when a trained part's int8 search runs: in training, or after promotion
DEFERRED_TEXTS_FILE = "int8_texts.json"  # beside a part whose int8 search was deferred: the texts to run it on
DEFERRED_NOTE = ("int8 form deferred: the fp32 ONNX model serves until the int8 search has run and passed "
                 "(the desk's window runs it in the background, or `dynadesk rounds int8`)")


@dataclass(frozen=True)
class Int8Form:
    folder: Path | None
    note: str = ""  # why there is no int8 form, for the person at the desk


def recipe_key(part_dir: Path) -> str:
    """What the cached int8 form (or its refusal) was made from: the recipe file's sha256."""
    path = Path(part_dir) / RECIPE_FILE
    return file_sha256(path) if path.is_file() else "no recipe"


LEGACY_INT8_FOLDER = "onnx-int8"  # where releases before per-recipe folders built the int8 form


def int8_folder(part_dir: Path, root: Path) -> Path:
    """Where the int8 form of the part's current recipe lives under ``root``: a folder of its own per recipe
    (``onnx-int8-<recipe sha256, 12 digits>``), so that a form built from an earlier recipe, which a
    registered model (a round's target, the team's) may name, is never overwritten by a new recipe's other
    bytes. A form of the same recipe in the folder earlier releases used is taken where it is."""
    legacy = Path(root) / LEGACY_INT8_FOLDER
    key = recipe_key(part_dir)
    if key == "no recipe" or cached_int8_form(part_dir, legacy):
        return legacy
    return Path(root) / f"{LEGACY_INT8_FOLDER}-{key[:12]}"


def cached_int8_form(part_dir: Path, int8_dir: Path) -> bool:
    """An int8 folder built from the part's current recipe."""
    if not ((int8_dir / "model.onnx").is_file() and (int8_dir / METADATA_FILE).is_file()):
        return False
    try:
        export = read_json_file(int8_dir / METADATA_FILE, "model description").get("export") or {}
    except ModelError:
        return False
    return isinstance(export, dict) and export.get("int8_recipe_file_sha256") == recipe_key(part_dir)


def cached_refusal(part_dir: Path, root: Path) -> str | None:
    """The reason recorded when this recipe last gave no int8 form with these releases, or None (an upgraded
    exporter or quantizer may build the checked graph: it is tried again)."""
    from local_models.int8_check import toolchain_versions

    try:
        data = json.loads((root / REFUSAL_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("recipe") != recipe_key(part_dir):
        return None
    if data.get("toolchain") != toolchain_versions():
        return None
    return str(data.get("note") or "int8 was refused earlier")


def prepare_int8_form(part_dir: Path, torch_dir: Path, fp32_dir: Path, int8_dir: Path, *,
                      progress: Progress | None = None) -> Int8Form:
    """Build (once) the int8 form the part's recipe records, verified by its bytes or its answers; or say why not.
    ``fp32_dir``: the part's fp32 ONNX export (its graph is quantized, not exported again)."""
    from local_models.export import export_onnx

    progress = progress or Progress()
    root = int8_dir.parent
    key = recipe_key(part_dir)
    if cached_int8_form(part_dir, int8_dir):
        return Int8Form(int8_dir)
    refused = cached_refusal(part_dir, root)
    if refused is not None:
        return Int8Form(None, refused)
    try:
        recorded = read_recipe_file(part_dir)
        if recorded.deferred:  # not a verdict: nothing is remembered, the search runs later
            return Int8Form(None, _sentence(DEFERRED_NOTE))
        if not recorded.usable:
            raise ParityCheckFailed(recorded.reason or "the recipe records no int8 form that passed its check",
                                    float("nan"), recorded.parity)
        export_onnx(torch_dir, int8_dir, int8=True, recorded=recorded, graph=fp32_dir / "model.onnx",
                    progress=progress, replace=True)
        _note_recipe(int8_dir, key)
        return Int8Form(int8_dir)
    except ParityCheckFailed as exc:  # a verdict on this recipe here: remembered until the recipe changes
        note, remember = f"{_sentence(str(exc))} The ONNX model is fp32.", True
    except ValueError as exc:  # no recipe, or a broken one
        note, remember = f"{_sentence(str(exc))} The ONNX model is fp32.", True
    except ExportFailed as exc:  # the quantizer itself broke (a module missing): the next start tries again
        note, remember = f"{_sentence(str(exc))} The ONNX model is fp32.", False
    log.warning("no int8 form for %s: %s", part_dir, note)
    shutil.rmtree(int8_dir, ignore_errors=True)
    if remember:
        from local_models.int8_check import toolchain_versions

        (root / REFUSAL_FILE).write_text(json.dumps({"recipe": key, "note": note, "toolchain": toolchain_versions()})
                                         + "\n", encoding="utf-8")
    return Int8Form(None, note)


def _note_recipe(int8_dir: Path, key: str) -> None:
    """Which recipe file the folder was built from (read by ``cached_int8_form``)."""
    path = int8_dir / METADATA_FILE
    description = read_json_file(path, "model description")
    description.setdefault("export", {})["int8_recipe_file_sha256"] = key
    path.write_text(json.dumps(description, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _sentence(text: str) -> str:
    text = text.strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith(".") else text + "."


def record_int8_recipe(part_dir: Path, texts: TaskTexts, *, base_dir: Path | None = None,
                       model_dir: Path | None = None, progress: Progress | None = None) -> Int8Search:
    """Find the int8 recipe of a trained part on its task's texts and write it beside the part
    (``RECIPE_FILE``), passed or refused: desks then build the graph that was checked, and know it by its
    bytes or by its answers on the recipe's check texts.
    ``model_dir``: the part already assembled (else it is assembled in a temporary folder)."""
    progress = progress or Progress()
    part_dir = Path(part_dir)
    if len(texts.parity) < MIN_TEXTS:  # refused before any export: nothing to measure it on
        search = search_int8_without_graph(texts)
    else:
        try:
            search = _search_part(part_dir, texts, base_dir, model_dir, progress)
        except Cancelled:
            raise
        except ModelError as exc:  # the model trained; only its int8 form is missing, and the recipe says why
            search = Int8Search(None, None, None, "", reason=f"int8 not used: the int8 check could not run ({exc})",
                                texts=_counts(texts))
    write_recipe_file(part_dir, search)
    progress.say(_chosen(search))
    return search


def _chosen(search: Int8Search) -> str:
    return (f"int8 form chosen: {search.recipe.name} passed its parity check"
            if search.recipe is not None and search.passed else search.reason)


def defer_int8_recipe(part_dir: Path, texts: TaskTexts) -> None:
    """Leave the int8 search for later (``--int8 later``): the part records that its search is deferred
    and keeps the texts it will run on, so that the search, whenever it runs, is the one training would
    have run. The fp32 form serves meanwhile (``prepare_int8_form`` says so and remembers nothing)."""
    part_dir = Path(part_dir)
    document = {"parity": list(texts.parity), "calibration": list(texts.calibration), "source": texts.source}
    (part_dir / DEFERRED_TEXTS_FILE).write_text(json.dumps(document, ensure_ascii=False) + "\n", encoding="utf-8")
    write_deferred_recipe_file(part_dir, DEFERRED_NOTE, _counts(texts))


def deferred_texts(part_dir: Path) -> TaskTexts:
    """The texts a deferred search runs on; ``ValueError`` in words when they are missing or broken."""
    path = Path(part_dir) / DEFERRED_TEXTS_FILE
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
        return TaskTexts(tuple(map(_model_input, document["parity"])), tuple(map(_model_input, document["calibration"])),
                         str(document["source"]))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"the texts of the deferred int8 search ({path}) cannot be read ({exc}); train the "
                         "candidate again") from exc


def _model_input(value: object) -> ModelInput:
    """A text, or a pair (JSON keeps a pair as a list)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return (value[0], value[1])
    raise TypeError(f"not a text or a pair of texts: {str(value)[:40]!r}")


def run_deferred_search(part_dir: Path, model_dir: Path, fp32_file: Path, *,
                        progress: Progress | None = None) -> Int8Search:
    """The deferred search of a part, on the texts training kept, against its fp32 graph (already
    exported for the fp32 form that serves meanwhile); writes the recipe as training would have."""
    from local_models.engine import load_engine

    progress = progress or Progress()
    part_dir = Path(part_dir)
    texts = deferred_texts(part_dir)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dynadesk-int8-later-") as tmp:
        source = load_engine(model_dir, num_threads=None)
        try:
            search = search_int8(source, fp32_file, texts, Path(tmp), progress=progress)
        finally:
            source.close()
    write_recipe_file(part_dir, search)
    (part_dir / DEFERRED_TEXTS_FILE).unlink(missing_ok=True)
    progress.say(_chosen(search))
    return search


def _search_part(part_dir: Path, texts: TaskTexts, base_dir: Path | None, model_dir: Path | None,
                 progress: Progress) -> Int8Search:
    import tempfile

    from local_models.engine import load_engine
    from local_models.export import export_onnx
    from local_models.train import assemble

    with tempfile.TemporaryDirectory(prefix="dynadesk-int8-recipe-") as tmp:
        work = Path(tmp)
        if model_dir is None:
            model_dir = assemble(part_dir, work / "torch", base_dir=base_dir)
        progress.say("exporting to ONNX for the int8 check")
        fp32 = export_onnx(model_dir, work / "fp32", progress=progress.lines_only()).path / "model.onnx"
        source = load_engine(model_dir, num_threads=None)
        try:
            return search_int8(source, fp32, texts, work / "search", progress=progress)
        finally:
            source.close()


def add_int8_check(part_dir: Path, *, base_dir: Path | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """Record the check texts (``local_models.int8_check``) in a recipe made before recipes had them, without
    searching again: only where the recipe's graph is rebuilt byte for byte, so that this build is the one
    whose parity was checked. Returns the check; ``ValueError`` in words when it cannot be recorded here."""
    import tempfile

    from local_models.engine import load_engine
    from local_models.export import export_onnx
    from local_models.int8 import build_int8
    from local_models.int8_check import record_check
    from local_models.train import assemble

    progress = progress or Progress()
    part_dir = Path(part_dir)
    recorded = read_recipe_file(part_dir)
    if not recorded.usable or recorded.recipe is None:
        raise ValueError(f"the int8 recipe in {part_dir} records no int8 form that passed its check; there is "
                         "nothing to record check texts for")
    with tempfile.TemporaryDirectory(prefix="dynadesk-int8-check-") as tmp:
        work = Path(tmp)
        model_dir = assemble(part_dir, work / "torch", base_dir=base_dir)
        progress.say("exporting to ONNX to rebuild the checked int8 graph")
        fp32 = export_onnx(model_dir, work / "fp32", progress=progress.lines_only()).path / "model.onnx"
        graph = work / "int8.onnx"
        build_int8(fp32, graph, recorded.recipe)
        if file_sha256(graph) != recorded.int8_sha256:
            raise ValueError(f"the int8 graph built here (sha256 {file_sha256(graph)[:12]}) is not byte for byte the "
                             f"one whose parity was checked ({str(recorded.int8_sha256)[:12]}), so its answers are not "
                             "the checked graph's; make the recipe again (the whole search)")
        source = load_engine(model_dir, num_threads=None)
        try:
            check = record_check(source, graph, fp32=fp32)
        finally:
            source.close()
    document = {**recorded.document, "check": check}
    (part_dir / RECIPE_FILE).write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    progress.say(f"recorded {len(check['texts'])} check texts in {part_dir / RECIPE_FILE}")
    return check


def _counts(texts: TaskTexts) -> dict[str, object]:
    return {"parity": len(texts.parity), "calibration": len(texts.calibration), "source": texts.source}


def search_int8_without_graph(texts: TaskTexts) -> Int8Search:
    """The refusal for too few texts, without exporting anything."""
    return Int8Search(None, None, None, "", reason=(
        f"int8 not used: only {len(texts.parity):,} task texts to check it on ({texts.source}); the parity rule "
        f"needs at least {MIN_TEXTS:,}, so the float model serves"),
        texts=_counts(texts))


def split_texts(texts: Sequence[ModelInput], train: Sequence[int], held_out: Sequence[int], source: str, *,
                seed: int = 13, extra: Sequence[ModelInput] = ()) -> TaskTexts:
    """The texts of a training run for the int8 check: held-out texts to judge on, topped up with
    ``extra`` (the round's other examples) and then training texts when they are fewer than the rule
    needs; the rest of the training texts, shuffled with ``seed``, calibrate and select."""
    import random

    parity = [texts[i] for i in held_out] + list(extra)
    pool = [texts[i] for i in train]
    random.Random(seed).shuffle(pool)
    missing = max(0, MIN_TEXTS - len(parity))
    if missing:
        parity += pool[:missing]
        source += f", topped up with {min(missing, len(pool)):,} training texts"
    return TaskTexts(tuple(parity), tuple(pool[missing:]), source)
