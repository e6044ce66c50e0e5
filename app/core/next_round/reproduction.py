"""Training again from a manifest (``dynadesk train --manifest``), and saying how close it came.

On the machine the manifest records (the same CPU and vector instructions, torch build and thread count) the
recipe gives the same bits. Elsewhere the matrix products round otherwise (AVX2, AVX-512 and AMX kernels sum in
different orders), so the weights differ in their last bits and the question becomes whether it is the same
model: the recorded trained part (beside the manifest) and the new one both run here over every text the run
did not train on (the base dev and test splits, the round's dev and held-out examples). The outcome is one of:

- bit for bit: the trained part's sha256 is the recorded one;
- within tolerance: another machine, the same label on every held-out text and no probability moved by more
  than ``TOLERANCE``;
- different: anything else (another label somewhere, a larger change, different bits on the recorded machine
  itself, or no recorded part to compare with), with the figures; never a silent difference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core import paths
from app.core.next_round.round_training import (
    options_from_manifest,
    read_base_data,
    read_manifest,
    reproduce,
)
from app.core.next_round.training_data import training_set
from local_models import machine
from local_models.files import file_sha256
from local_models.frozen_cache import FrozenCache
from local_models.part_comparison import PartDifference, difference, probabilities
from local_models.progress import Progress
from local_models.tokenization import ModelInput
from local_models.train import TRAINED_PART_FILE
from local_models.train_rounds import tensors_sha256

TOLERANCE = 0.01  # the largest change of a held-out probability that still counts as the same model
BIT_FOR_BIT, WITHIN_TOLERANCE, DIFFERENT = "bit for bit", "within tolerance", "different"
# what the run did not train on: every held-out text it can be judged by
HELD_OUT_SPLITS = ("base_dev", "base_test", "round_dev", "held_out")


@dataclass(frozen=True)
class Reproduction:
    outcome: str  # BIT_FOR_BIT, WITHIN_TOLERANCE or DIFFERENT
    sentence: str
    manifest: dict[str, Any]  # the new run's
    recorded_machine: dict[str, Any] | None
    machine_changes: list[str] = field(default_factory=list)
    difference: PartDifference | None = None

    @property
    def reproduced(self) -> bool:
        return self.outcome != DIFFERENT


def reproduce_and_check(desk: Any, manifest_path: Path, out_dir: Path, *, progress: Progress | None = None,
                        frozen_cache: bool | None = None, int8: str | None = None) -> Reproduction:
    """Train again from the manifest (see ``round_training.reproduce``) and compare with what it records."""
    manifest_path = Path(manifest_path)
    recorded = read_manifest(manifest_path)
    # read before training: --out may be the recorded folder itself
    recorded_part = recorded_trained_part(manifest_path.parent, recorded)
    manifest = reproduce(desk, manifest_path, out_dir, progress=progress, frozen_cache=frozen_cache, int8=int8)
    return judge(desk, recorded, recorded_part, manifest, Path(out_dir), progress=progress)


def recorded_trained_part(folder: Path, recorded: Mapping[str, Any]) -> dict[str, Any] | str:
    """The recorded run's trained tensors (beside its manifest), or why they cannot be had."""
    from safetensors.torch import load_file

    path = Path(folder) / recorded["output"].get("trained_part", ".") / TRAINED_PART_FILE
    if not path.is_file():
        return f"the recorded trained part is not beside the manifest (no {path})"
    if file_sha256(path) != recorded["output"]["trained_part_sha256"]:
        return f"the trained part beside the manifest ({path}) is not the one it records"
    return dict(load_file(str(path)))


def judge(desk: Any, recorded: Mapping[str, Any], recorded_part: dict[str, Any] | str, manifest: dict[str, Any],
          out_dir: Path, *, progress: Progress | None = None) -> Reproduction:
    before, now = recorded.get("machine"), manifest["machine"]
    changes = machine.changes(before, now)
    where = _where(before, now, changes)
    from safetensors.torch import load_file

    # the tensors' checksum, not the file's: a file's header may order its metadata otherwise from run to run
    new_sha = tensors_sha256(load_file(str(out_dir / TRAINED_PART_FILE)))
    old_sha = (tensors_sha256(recorded_part) if not isinstance(recorded_part, str)
               else recorded["output"].get("trained_tensors_sha256"))
    if old_sha is None:  # a manifest made before the tensors' checksum was recorded, its part not at hand
        new_sha, old_sha = manifest["output"]["trained_part_sha256"], recorded["output"]["trained_part_sha256"]
    if new_sha == old_sha:
        return Reproduction(BIT_FOR_BIT, f"Reproduced bit for bit (trained tensors sha256 {new_sha[:12]}...). "
                                         f"{where}", manifest, before, changes)
    bits = f"The trained tensors' sha256 is {new_sha[:12]}..., the recorded ones' {old_sha[:12]}...."
    if isinstance(recorded_part, str):
        return Reproduction(DIFFERENT, f"Not reproduced: {bits} Its predictions cannot be compared: "
                                       f"{recorded_part}. {where}", manifest, before, changes)

    ids, texts = held_out_texts(desk, manifest)
    config = manifest["config"]
    used_cache = (manifest.get("frozen_cache") or {}).get("used")
    first, second = probabilities(
        Path(manifest["encoder"]["path"]), manifest["labels"],
        [recorded_part, load_file(str(out_dir / TRAINED_PART_FILE))], texts, max_length=config["max_length"],
        num_threads=config["num_threads"], progress=progress,
        cache=FrozenCache(paths.frozen_states_cache_dir(desk.root)) if used_cache else None)
    found = difference(first, second)
    figures = f"max |Δp| {found.max_delta:.2g} (tolerance {TOLERANCE:g})"
    if not found.texts:
        return Reproduction(DIFFERENT, f"Not reproduced: {bits} The run held no text out to compare the two on. "
                                       f"{where}", manifest, before, changes, found)
    same = found.labels_differing == 0 and found.max_delta <= TOLERANCE
    if same and changes:
        return Reproduction(WITHIN_TOLERANCE, f"Reproduced within tolerance: same labels on every held-out text "
                                              f"({found.texts:,}), {figures}. {bits} {where}",
                            manifest, before, changes, found)
    if same:
        sentence = (f"Not reproduced bit for bit on the machine the manifest records: {bits} The predictions are "
                    f"close (same labels on every held-out text ({found.texts:,}), {figures}), but here the same "
                    f"bits were due, so something unrecorded differs. {where}")
    else:
        worst = ids[found.worst] if found.worst is not None else "?"
        labels = (f"{found.labels_differing:,} of {found.texts:,} held-out texts get another label (e.g. {worst})"
                  if found.labels_differing else f"every held-out text ({found.texts:,}) keeps its label")
        sentence = f"Not reproduced: {labels}, {figures}. {bits} {where}"
    return Reproduction(DIFFERENT, sentence, manifest, before, changes, found)


def held_out_texts(desk: Any, manifest: Mapping[str, Any]) -> tuple[list[str], list[ModelInput]]:
    """The ids and texts (or pairs) of what the run did not train on, read from the desk as the run read them."""
    options = options_from_manifest(manifest)
    data = training_set(desk, options.task, options.rounds, include_undecided=options.include_undecided,
                        imported=options.imported, base=read_base_data(options.base_data),
                        variants=options.variants is not None)
    text_of = {e.id: e.text for e in data.base + data.train + data.held_out}
    splits = manifest["data"]["splits"]
    ids = list(dict.fromkeys(i for name in HELD_OUT_SPLITS for i in splits.get(name) or []))
    return ids, [text_of[i] for i in ids]


def _where(before: Mapping[str, Any] | None, now: Mapping[str, Any], changes: list[str]) -> str:
    if not changes:
        return f"Same machine as recorded: {machine.summary(now)}."
    return (f"Recorded on {machine.summary(before)}; here {machine.summary(now)} ({'; '.join(changes)}).")
