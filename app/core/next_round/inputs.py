"""What the Next round dialog needs from the desk before it trains: each round's count of examples
a new model would learn from, the choices to start with (last use, else the current target's own
training data), where candidates are written, and a CSV file's columns. Qt-free.

The training itself is ``round_training.train_from_desk``, the comparison ``comparison.compare_candidate``
and the promotion ``promotion.promote_candidate``; this module only prepares their inputs.
"""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from sqlalchemy import select

from app.core.errors import DynadeskError
from app.core.storage.models import Example, Round
from app.core.tasks.splits import held_out_example

CANDIDATES_FOLDER = "candidates"
# _choose's reasons for leaving an example out that still count as "written in the round"
_NOT_WRITTEN = ("draft", "retracted", "variant_not_asked")  # a variant is counted apart (``variants``)


@dataclass(frozen=True)
class RoundCount:
    """One round, and how many of its examples a new model would take."""

    number: int
    status: str
    decided: int  # taken: decided, not flagged (their decided label)
    held_out: int  # of those, on the held-out side (never trained on; compared on)
    undecided: int  # taken only with "include undecided"
    left_out: int  # submitted but never taken: flagged, unknown label
    # imported data sets' examples, by data set name: taken (with their gold labels) only when named
    imported: Mapping[str, int] = field(default_factory=dict)
    # of those, on the held-out side: never trained on, whichever sets are named; compared on (held_out.py)
    imported_held_out: Mapping[str, int] = field(default_factory=dict)
    # the adaptive suite's validated variants in the round: taken only when asked for (on their seeds' sides)
    variants: int = 0
    variants_held_out: int = 0


@dataclass(frozen=True)
class BaseDefaults:
    """How to read base data, as last used or as the current target was trained on."""

    path: str  # "" when only the columns are known (the file itself is not on this desk)
    text_column: str
    label_column: str
    label_map: dict[str, str] | None
    html_unescape: bool
    source: str  # where these choices come from, for the user
    context_column: str = ""  # a pair task's context column (premise); "" for single texts


@dataclass(frozen=True)
class TrainDefaults:
    base: BaseDefaults | None
    start_from: str  # "target" or "base"
    round_weight: str  # "auto" or a number
    include_undecided: bool
    rounds: tuple[int, ...]  # the rounds chosen last time; () when never used
    warm_target: str | None  # the current target a warm start would start from; None when none can
    suite: str
    variants: bool = False  # trained on validated variants too, last time


def round_counts(desk: Any, task_code: str) -> list[RoundCount]:
    """Every round of the task with its count of decided examples (held-out ones among them) and of
    undecided ones, by the same rules training uses (``training_data._choose``, ``splits.held_out_example``)
    and the comparison scores by (``held_out.held_out_sets``)."""
    from app.core.next_round.held_out import _Row
    from app.core.next_round.training_data import _choose, _imported_names, imported_name

    task = desk.tasks.task(task_code)
    counts: dict[uuid.UUID, dict[str, int]] = {}
    with desk.db.read() as session:
        rounds = list(session.scalars(select(Round).where(Round.task_id == task.id).order_by(Round.number)))
        for round_ in rounds:
            counts[round_.id] = {"decided": 0, "held_out": 0, "undecided": 0, "left_out": 0, "variants": 0,
                                 "variants_held_out": 0}
        imported: dict[uuid.UUID, dict[str, int]] = {round_.id: {} for round_ in rounds}
        imported_held: dict[uuid.UUID, dict[str, int]] = {round_.id: {} for round_ in rounds}
        columns = [getattr(Example, name) for name in _Row._fields]
        found = [(values[0], _Row(*values[1:]))
                 for values in session.execute(select(Example.round_id, *columns).where(Example.task_id == task.id))]
        origins = {row.id: row.origin for _round_id, row in found}  # a pair's original lends its split group
        for round_id, row in found:
            label, source = _choose(cast(Example, row), True, set())
            tally = counts.get(round_id)
            if tally is None:
                continue
            if source == "variant_not_asked":
                label, source = _choose(cast(Example, row), False, set(), variants=True)
                if label is not None:
                    tally["variants"] += 1
                    tally["variants_held_out"] += held_out_example(row.id, row.perturbation_of, row.origin)
                continue
            if label is None and source == "imported_not_named":
                label, source = _choose(cast(Example, row), False, _imported_names(cast(Example, row)))
            if source == "imported" and label is not None:
                name = imported_name(row)
                imported[round_id][name] = imported[round_id].get(name, 0) + 1
                held = held_out_example(row.id, row.perturbation_of, row.origin,
                                        origins.get(row.perturbation_of) if row.perturbation_of else None)
                imported_held[round_id][name] = imported_held[round_id].get(name, 0) + held
            elif label is None:
                if source not in _NOT_WRITTEN:
                    tally["left_out"] += 1
            elif source == "undecided":
                tally["undecided"] += 1
            else:
                tally["decided"] += 1
                tally["held_out"] += held_out_example(row.id, row.perturbation_of, row.origin,
                                                      origins.get(row.perturbation_of) if row.perturbation_of else None)
        return [RoundCount(r.number, str(r.status), **counts[r.id], imported=imported[r.id],
                           imported_held_out=imported_held[r.id]) for r in rounds]


def candidates_dir(root: Path) -> Path:
    return Path(root) / CANDIDATES_FOLDER


def new_candidate_dir(root: Path, task_code: str, now: datetime | None = None) -> Path:
    """A folder that does not exist yet: <data>/candidates/<task>-<timestamp>[-n]."""
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    folder = candidates_dir(root) / f"{task_code}-{stamp}"
    n = 1
    while folder.exists():
        n += 1
        folder = candidates_dir(root) / f"{task_code}-{stamp}-{n}"
    return folder


def last_manifest(root: Path, task_code: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest candidate of the task trained on this desk (its folder and manifest), if any."""
    from app.core.next_round.round_training import MANIFEST_FILE, read_manifest

    folders = sorted(candidates_dir(root).glob(f"{task_code}-*/{MANIFEST_FILE}"),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for path in folders:
        try:
            manifest = read_manifest(path)
        except DynadeskError:
            continue  # a damaged manifest is not a reason to stop; the next older one may do
        if manifest.get("task") == task_code:
            return path.parent, manifest
    return None


def train_defaults(desk: Any, task_code: str) -> TrainDefaults:
    """The choices the dialog starts with: those of the last candidate trained here for the task, else
    the columns and label map the current target was trained with (its file name only: the file
    itself may be elsewhere)."""
    from app.core.next_round.round_training import current_targets, trained_folder
    from local_models.errors import ModelError
    from local_models.train_rounds import read_warm_start

    warm_target, trained_with = None, None
    for record in current_targets(desk, task_code):
        folder = trained_folder(desk, record)
        if folder is not None:
            warm_target = record.name
            try:
                trained_with = read_warm_start(folder).description.get("training", {}).get("data")
            except ModelError:
                trained_with = None
            break
    last = last_manifest(desk.root, task_code)
    if last is not None:
        folder, manifest = last
        options = manifest.get("options", {})
        recorded = options.get("base_data")
        base = None if not recorded else BaseDefaults(
            str(recorded.get("path", "")), str(recorded.get("text_column", "")), str(recorded.get("label_column", "")),
            recorded.get("label_map"), bool(recorded.get("html_unescape")), f"as last used (candidate {folder.name})",
            str(recorded.get("context_column") or ""))
        start = options.get("start_from") or ("target" if warm_target else "base")
        return TrainDefaults(base, start if warm_target else "base", str(options.get("round_weight", "auto")),
                             bool(options.get("include_undecided")), tuple(manifest.get("rounds", ())),
                             warm_target, "", options.get("variants") is not None)
    base = None
    if isinstance(trained_with, Mapping) and trained_with.get("text_column"):
        found = _training_file_here(trained_with)
        base = BaseDefaults(found, str(trained_with["text_column"]), str(trained_with.get("label_column", "")),
                            trained_with.get("label_map"), bool(trained_with.get("html_unescaped")),
                            f"from the current target's training data ({trained_with.get('file', 'its data file')})"
                            + ("" if found else ": choose that file, it is not where the target was trained from"),
                            str(trained_with.get("context_column") or ""))
    return TrainDefaults(base, "target" if warm_target else "base", "auto", False, (), warm_target, "")


def _training_file_here(trained_with: Mapping[str, Any]) -> str:
    """The file a target was trained on, where its description says it was and it is still that file
    (same sha256); "" otherwise."""
    from local_models.files import file_sha256

    recorded = trained_with.get("path")
    path = Path(str(recorded)) if recorded else None
    if path is None or not path.is_file():
        return ""
    try:
        same = not trained_with.get("sha256") or file_sha256(path) == trained_with["sha256"]
    except OSError:
        return ""
    return str(path) if same else ""


def task_inputs(definition: Any) -> tuple[str, str]:
    """The labels of a classification task's context input ("" when it reads single texts) and written input, as the
    dialog names the base data's columns after them."""
    context = " / ".join(f.label for f in definition.context_inputs)
    return context, " / ".join(f.label for f in definition.written_inputs) or "Text"


def csv_columns(path: Path) -> list[str]:
    """The header of a CSV file (for the column pickers); a clear error when it has none."""
    path = Path(path).expanduser()
    if not path.is_file():
        raise DynadeskError(f"There is no file at {path}; choose the base data CSV file.")
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            head = handle.read(64 * 1024)
    except (OSError, UnicodeDecodeError) as exc:
        raise DynadeskError(f"{path.name} is not a readable UTF-8 CSV file ({exc}).") from exc
    first = next(csv.reader(io.StringIO(head)), [])
    columns = [c.strip() for c in first if c.strip()]
    if not columns:
        raise DynadeskError(f"{path.name} has no header row; its first line must name the columns.")
    return columns


def format_label_map(mapping: Mapping[str, str] | None) -> str:
    """{"0": "hate", "1": "not hate"} -> "0=hate,1=not hate" (the form --label-map takes)."""
    return ",".join(f"{k}={v}" for k, v in (mapping or {}).items())
