"""Promotion: a trained candidate becomes the target of a task's next round, in one action.

    promotion = promote_candidate(desk, "hate_speech", Path("runs/r2"), comparison=report)
    promotion.round_number, promotion.targets, promotion.parity_note

Steps, in an order that changes nothing until the last one can no longer fail:

1. Only an owner, or a lead where the task's policy allows it, may promote (``check_promoter``; checked
   first: nobody waits for an export that would be refused).
2. The promotion rule (``promotion_rule.judge``, over every split the comparison scored) refuses a
   candidate that is worse beyond its interval on any split with enough items, or that no split has
   enough items to judge, or that has no comparison at all; the refusal lists every split with its
   figures. ``force`` ("Promote anyway") overrides it only with a ``reason``, recorded with the figures
   in the lineage. A refusal goes to the desk log and, when the candidate already has a record (the
   comparison may have registered it), to that record's provenance under ``promotion_refusals``.
3. The candidate is prepared like the default model (``local_models.default_model``): assembled,
   exported to ONNX (int8 when it passes the parity check, else fp32). When even the fp32 export
   fails its check, the PyTorch model is the target and the reason is recorded.
4. ``RoundService.open_next`` closes the open round and opens the next with the candidate (and,
   ``with_current``, the old targets after it) in one unit of work: the same change a lead makes
   with ``dynadesk rounds open``. ``dynadesk sync publish T --round N`` sends it to the team.
5. The lineage (checked first against the provenance bound) goes into the target record's
   provenance under ``lineage``.

Qt-free; the export takes seconds, so the GUI calls this on a worker.
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app import __version__
from app.core import paths
from app.core.domain import RoundStatus, utcnow
from app.core.errors import DynadeskError
from app.core.limits import free_form_problem, max_bytes, text_problem
from app.core.next_round.promotion_rule import MAX_REASON_CHARS, may_promote, no_comparison_verdict
from app.core.next_round.round_training import MANIFEST_FILE
from app.core.services.target_models import TargetModelError, find_by_sha, register_model
from app.core.storage.models import ModelRecord
from local_models.engine import model_sha256
from local_models.errors import ExportFailed, ModelError
from local_models.progress import Progress
from local_models.train import is_trained_part

if TYPE_CHECKING:
    from app.core.desk import Desk
    from app.core.next_round.comparison import ComparisonReport
    from app.core.storage.models import Person

log = logging.getLogger(__name__)

CANDIDATE_SLUG = "candidate"
DEFERRED_KEY = "int8_deferred"  # in an fp32 form's provenance: where its trained part is, until the switch
MAX_REFUSALS_KEPT = 20
POLICY_KEY = "promotion_policy.{code}"  # in the desk's meta table: JSON of a PromotionPolicy
# A manifest's top-level entries up to this size are copied into the lineage (options, seed, metrics,
# versions); larger ones (example ids per split) are named, and the whole file is kept by its sha256.
MAX_MANIFEST_FIELD_BYTES = 16 * 1024
# The whole manifest is copied too while the provenance stays well inside its bound.
MAX_MANIFEST_COPY_BYTES = 1024 * 1024


class PromotionError(DynadeskError):
    """The candidate cannot be promoted (not a lead, a broken folder, no round to follow)."""


class PromotionRefused(PromotionError):
    """The promotion rule refuses the candidate; ``force`` with a reason overrides. ``lines``: the verdict
    sentence, then every split with its figures."""

    def __init__(self, message: str, lines: Sequence[str]):
        super().__init__(message)
        self.lines = list(lines)


@dataclass(frozen=True)
class Promotion:
    task_code: str
    previous_round: int | None  # the round closed (None when the latest round was already closed)
    round_number: int
    round_id: uuid.UUID
    candidate: ModelRecord  # the record that became the first target
    targets: list[ModelRecord]  # the new round's targets, in order
    onnx: bool  # False: the ONNX export failed its parity check and the PyTorch model serves
    parity_note: str
    forced: bool
    lineage: dict[str, Any] = field(default_factory=dict)

    def summary_lines(self) -> list[str]:
        lines = [f"Closed {self.task_code} round {self.previous_round}." if self.previous_round else
                 f"No open round of {self.task_code} to close.",
                 f"Opened {self.task_code} round {self.round_number} with target(s): "
                 + "; ".join(f"{m.name} ({m.sha256[:12]})" for m in self.targets) + ".",
                 f"Parity check: {self.parity_note}"]
        if self.forced:
            reason = (self.lineage.get("override") or {}).get("reason")
            lines.append("Promoted anyway over the promotion rule's refusal (recorded with the figures)"
                         + (f"; the reason given: {reason}" if reason else "") + ".")
        return lines


def promote_candidate(desk: Desk, task_code: str, model_dir: Path, *, with_current: bool = False, force: bool = False,
                      reason: str | None = None, comparison: ComparisonReport | None = None,
                      manifest: Path | None = None, actor_id: uuid.UUID | None = None,
                      progress: Progress | None = None) -> Promotion:
    """Make the trained candidate in ``model_dir`` the target of ``task_code``'s next round.

    Raises ``PromotionRefused`` (every split's figures in its message) when the promotion rule refuses
    it (``comparison`` None counts as nothing to judge by) and ``force`` is not given, and
    ``PromotionError`` for everything else that stops it, a ``force`` without a ``reason`` included; in
    every case the rounds are unchanged.
    """
    progress = progress or Progress()
    actor = check_promotable(desk, model_dir, actor_id, task_code=task_code)
    rounds = desk.tasks.rounds(task_code)
    current = rounds[-1] if rounds else None
    open_round = current if current is not None and current.status == RoundStatus.OPEN else None
    current_targets = desk.models.round_models(current.id) if current is not None else []
    model_dir = Path(model_dir).expanduser().resolve()
    manifest_path = _manifest_path(model_dir, manifest)
    manifest_lineage = _manifest_lineage(manifest_path) if manifest_path else None
    comparison_lineage = _comparison_lineage(comparison) if comparison is not None else None

    verdict = comparison.verdict if comparison is not None else no_comparison_verdict("none was made")
    refused_lines = verdict.lines() if verdict.refused else []
    if refused_lines and not force:
        _record_refusal(desk, task_code, comparison, refused_lines, actor)
        raise PromotionRefused(
            f"Round {current.number + 1 if current else 1} was not opened. " + "\n".join(refused_lines)
            + "\nPromote it anyway with --force --reason \"why\" (\"Promote anyway…\" in the dialog); the reason "
            "is recorded with these figures.", refused_lines)
    reason = (reason or "").strip()
    if refused_lines and not reason:
        raise PromotionError("Promoting anyway needs a reason (--reason \"why\"); it is recorded with the figures "
                             "in the model's lineage. " + refused_lines[0])
    problem = text_problem("the reason", reason, MAX_REASON_CHARS, multiline=True) if reason else None
    if problem:
        raise PromotionError(f"The reason cannot be recorded as it is: {problem}.")

    candidate, onnx, note = _register_candidate(desk, task_code, model_dir, progress)
    if any(m.id == candidate.id for m in current_targets):
        raise PromotionError(f"{candidate.name} ({candidate.sha256[:12]}) is already a target of {task_code} round "
                             f"{current.number if current else '?'}; train a new candidate first.")
    if comparison is not None and comparison.candidate_sha256 and comparison.candidate_sha256 not in (
            candidate.sha256, _parent_sha(candidate)):
        raise PromotionError(
            f"The comparison is of another model ({comparison.candidate_sha256[:12]}), not of this candidate "
            f"({candidate.sha256[:12]}); compare this candidate again, or pass the report made for it.")

    targets = [candidate.id] + ([m.id for m in current_targets] if with_current else [])
    lineage: dict[str, Any] = {
        "task": task_code,
        "round": (current.number + 1) if current else 1,
        "previous_round": current.number if current else None,
        "candidate_dir": str(model_dir),
        "parent_models": [{"id": str(m.id), "name": m.name, "sha256": m.sha256} for m in current_targets],
        "with_current": with_current,
        "ensemble": [str(m) for m in targets],
        "export": {"onnx": onnx, "note": note},
        "manifest": manifest_lineage,
        "comparison": comparison_lineage,
        "verdict": verdict.to_json(),
        "promoted_by": {"id": str(actor.id), "name": actor.display_name, "role": str(actor.role)},
        "promoted_at": utcnow().isoformat(),
        "forced": bool(refused_lines),
        "dynadesk_version": __version__,
    }
    if refused_lines:
        lineage["override"] = {"reason": reason, "refused_because": refused_lines,
                               "by": {"id": str(actor.id), "name": actor.display_name}}
    provenance = _with_lineage(candidate, lineage)  # checked against the bound before any round changes
    progress.check()
    new = desk.rounds.open_next(task_code, actor.id, targets, close_previous=True)
    candidate = update_provenance(desk, candidate.id, lambda _: provenance)  # the lineage of what happened
    if refused_lines:
        log.warning("%s promoted %s to %s round %s anyway over the promotion rule's refusal (reason: %s): %s",
                    actor.display_name, candidate.sha256[:12], task_code, new.number, reason, " | ".join(refused_lines))
    log.info("%s promoted %s (%s) to %s round %s", actor.display_name, candidate.name, candidate.sha256[:12],
             task_code, new.number)
    return Promotion(task_code, open_round.number if open_round else None, new.number, new.id, candidate,
                     desk.models.round_models(new.id), onnx, note, bool(refused_lines), lineage)


def check_promotable(desk: Desk, model_dir: Path, actor_id: uuid.UUID | None = None, *,
                     task_code: str | None = None) -> Person:
    """The person promoting, when they may promote ``model_dir``; checked before any costly work (comparing,
    exporting). Raises ``PromotionError`` for someone who may not promote (``check_promoter``) or for a
    folder that is not a trained candidate. Without ``task_code`` only the role is checked (an early
    check); ``promote_candidate`` always checks with the task."""
    actor = check_promoter(desk, task_code, actor_id)
    if not is_trained_part(Path(model_dir).expanduser()):
        raise PromotionError(
            f"{model_dir} is not a trained candidate: it lacks the files `dynadesk train --out DIR` writes "
            "(the trained part and its description). Point --model at that folder, or register another "
            "model with `dynadesk models add` and open a round with `dynadesk rounds open`.")
    return actor


def check_promoter(desk: Desk, task_code: str | None, actor_id: uuid.UUID | None = None) -> Person:
    """``promotion_rule.may_promote`` (the server applies the same one to a published round) with this desk's
    facts: the task's policy (``promotion_policy``; no task: not yet known, checked again with it) and whether
    the desk has a team server."""
    actor = desk.people.get(actor_id) if actor_id is not None else desk.current_person()
    if not may_promote(actor.role, True):
        raise PromotionError(f"Only owners (and leads, where the task's owner allows it) can promote a model; "
                             f"{actor.display_name} is an {actor.role}.")
    policy = task_code is None or promotion_policy(desk, task_code).leads_may_promote
    if not may_promote(actor.role, policy, team_server=bool(desk.settings.server_url)):
        raise PromotionError(
            f"Only the owner promotes a candidate to the next round of {task_code}: the task does not let leads "
            f"promote. Propose it to the owner instead (`dynadesk rounds propose --task {task_code} --model DIR`), "
            f"or ask the owner to allow it (`dynadesk rounds policy --task {task_code} --leads-may-promote yes`).")
    return actor


@dataclass(frozen=True)
class PromotionPolicy:
    """Who may promote a task's candidates, as the owner set it on the server (pulled at each sync) or,
    on a desk without a server, on this desk."""

    task_code: str
    leads_may_promote: bool = False
    set_by: str | None = None
    set_at: str | None = None  # ISO time


def promotion_policy(desk: Desk, task_code: str) -> PromotionPolicy:
    value = desk.db.get_meta(POLICY_KEY.format(code=task_code))
    if not value:
        return PromotionPolicy(task_code)
    try:
        data = json.loads(value)
        return PromotionPolicy(task_code, bool(data.get("leads_may_promote")), data.get("set_by"), data.get("set_at"))
    except (ValueError, AttributeError):
        log.warning("the promotion policy of %s on this desk is unreadable; leads may not promote", task_code)
        return PromotionPolicy(task_code)


def store_promotion_policy(desk: Desk, policy: PromotionPolicy) -> None:
    from app.core.storage.models import Meta

    value = json.dumps({"leads_may_promote": policy.leads_may_promote, "set_by": policy.set_by,
                        "set_at": policy.set_at})
    with desk.db.write() as session:
        session.merge(Meta(key=POLICY_KEY.format(code=policy.task_code), value=value))


def _register_candidate(desk: Desk, task_code: str, part_dir: Path, progress: Progress) -> tuple[ModelRecord, bool, str]:
    """The candidate's records, prepared like the default model: (the target record, is it ONNX, parity note)."""
    from local_models.default_model import prepare_default_model

    cache = paths.models_cache_dir(desk.root)
    refusal = None
    try:
        prepared = prepare_default_model(part_dir, cache, slug=CANDIDATE_SLUG, progress=progress)
    except ExportFailed as exc:  # the fp32 graph itself failed its check: the float model serves, as recorded
        refusal = f"the ONNX export was refused ({exc}); the PyTorch model is the target."
        prepared = prepare_default_model(part_dir, cache, with_onnx=False, slug=CANDIDATE_SLUG)  # assembled: at once
    except ModelError as exc:
        raise PromotionError(f"The candidate in {part_dir} could not be prepared: {exc}") from exc
    name = str(prepared.description.get("name") or part_dir.name)
    try:
        torch_record = register_model(desk, prepared.torch_dir, name=f"{name}, PyTorch", task_code=task_code,
                                      format="hf-torch", provenance={"trained_part": str(part_dir)})
    except TargetModelError as exc:
        raise PromotionError(f"The candidate in {part_dir} cannot serve task '{task_code}': {exc}") from exc
    if refusal is not None:
        log.warning("candidate %s: %s", torch_record.sha256[:12], refusal)
        return _with_note(desk, torch_record, refusal), False, refusal
    assert prepared.onnx_dir is not None  # prepared with_onnx
    note = " ".join(prepared.notes) or (_int8_note(prepared.onnx_dir) if prepared.onnx_int8 else "fp32 ONNX.")
    flavour = "ONNX int8" if prepared.onnx_int8 else "ONNX fp32"
    existing = find_by_sha(desk, model_sha256(prepared.onnx_dir, format="onnx"))
    if existing is not None:
        return existing, True, note
    try:
        record = register_model(desk, prepared.onnx_dir, name=f"{name}, {flavour}", task_code=task_code, format="onnx",
                                provenance={"parent_model": {"id": str(torch_record.id), "sha256": torch_record.sha256},
                                            "notes": list(prepared.notes), **deferred_marker(part_dir, prepared)})
    except TargetModelError as exc:
        raise PromotionError(f"The candidate's ONNX version could not be registered: {exc}") from exc
    return record, True, note


def deferred_marker(part_dir: Path, prepared: Any) -> dict[str, Any]:
    """The provenance entry of an fp32 form registered while its part's int8 search waits; {} otherwise."""
    from local_models.int8_search import read_recipe_file

    if prepared.onnx_int8:
        return {}
    try:
        deferred = read_recipe_file(Path(part_dir)).deferred
    except ValueError:
        return {}
    return {DEFERRED_KEY: {"trained_part": str(Path(part_dir).resolve())}} if deferred else {}


def _int8_note(onnx_dir: Path) -> str:
    """The int8 check's figures, as the export recorded them."""
    from app.core.int8_status import int8_detail
    from local_models.export import read_export_description

    return (int8_detail(read_export_description(onnx_dir)) or "int8 passed the parity check") + "."


def _with_note(desk: Desk, record: ModelRecord, note: str) -> ModelRecord:
    return update_provenance(desk, record.id, lambda p: p if note in p.get("notes", []) else
                              {**p, "notes": [*p.get("notes", []), note]})


def _parent_sha(record: ModelRecord) -> str | None:
    parent = (record.provenance or {}).get("parent_model") or {}
    return parent.get("sha256") if isinstance(parent, dict) else None


def _manifest_path(model_dir: Path, manifest: Path | None) -> Path | None:
    if manifest is not None:
        path = Path(manifest).expanduser().resolve()
        if not path.is_file():
            raise PromotionError(f"There is no manifest at {path}; pass the manifest.json `dynadesk train` wrote.")
        return path
    default = model_dir / MANIFEST_FILE
    return default if default.is_file() else None


def _manifest_lineage(path: Path) -> dict[str, Any]:
    """The manifest by its sha256, its small entries copied, and the whole of it while that stays small."""
    raw = path.read_bytes()
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PromotionError(f"{path} is not a readable JSON manifest ({exc}); pass the manifest.json "
                             "`dynadesk train` wrote, or leave --manifest out.") from exc
    if not isinstance(data, dict):
        raise PromotionError(f"{path} is not a training manifest (a JSON object).")
    fields: dict[str, Any] = {}
    omitted: list[str] = []
    for key, value in data.items():
        if len(json.dumps(value, default=str).encode("utf-8")) <= MAX_MANIFEST_FIELD_BYTES:
            fields[key] = value
        else:
            omitted.append(key)
    lineage: dict[str, Any] = {"path": str(path), "sha256": hashlib.sha256(raw).hexdigest(), "fields": fields,
                               "omitted_fields": omitted}
    if omitted and len(raw) <= MAX_MANIFEST_COPY_BYTES:
        lineage["contents"] = data
    return lineage


def _comparison_lineage(comparison: ComparisonReport) -> dict[str, Any]:
    pooled = comparison.pooled
    document = json.dumps(comparison.document, sort_keys=True, default=str).encode("utf-8")
    return {
        "worse": bool(comparison.worse),  # refused by the promotion rule
        "splits": [s.to_json() for s in comparison.verdict.splits],
        "pooled": {key: getattr(pooled, key) for key in
                   ("split", "metric", "current", "candidate", "difference", "low", "high", "items")},
        "summary": comparison.summary_lines(),
        "candidate_sha256": comparison.candidate_sha256,
        "current_sha256s": list(comparison.current_sha256s),
        "document_sha256": hashlib.sha256(document).hexdigest(),
    }


def _record_refusal(desk: Desk, task_code: str, comparison: ComparisonReport | None, lines: list[str],
                    actor: Person) -> None:
    sha = comparison.candidate_sha256 if comparison is not None else ""
    log.warning("promotion of %s to the next round of %s refused by the promotion rule: %s",
                (sha or "?")[:12], task_code, " | ".join(lines))
    record = find_by_sha(desk, sha) if sha else None
    if record is None:
        return
    refusal = {"task": task_code, "at": utcnow().isoformat(), "by": {"id": str(actor.id), "name": actor.display_name},
               "summary": lines}
    update_provenance(desk, record.id, lambda p: {
        **p, "promotion_refusals": [*p.get("promotion_refusals", []), refusal][-MAX_REFUSALS_KEPT:]})


def _with_lineage(record: ModelRecord, lineage: dict[str, Any]) -> dict[str, Any]:
    """The record's provenance with ``lineage`` added, within the bound a server checks: a manifest
    copied whole is dropped first (its sha256 and small fields stay); anything larger refuses."""
    out = {**(record.provenance or {}), "lineage": lineage}
    manifest = lineage.get("manifest") or {}
    if free_form_problem("provenance", out) and manifest.get("contents") is not None:
        lineage["manifest"] = {k: v for k, v in manifest.items() if k != "contents"}
        out = {**(record.provenance or {}), "lineage": lineage}
    problem = free_form_problem("provenance", out)
    if problem:
        raise PromotionError(f"The lineage would not fit the model record ({problem}; a record carries at most "
                             f"{max_bytes('provenance') // (1024 * 1024)} MiB); nothing was changed.")
    return out


def update_provenance(desk: Desk, model_id: uuid.UUID,
                       change: Callable[[dict[str, Any]], dict[str, Any]]) -> ModelRecord:
    with desk.db.write() as session:
        record = session.get(ModelRecord, model_id)
        if record is None:
            raise PromotionError(f"There is no registered model with id {model_id}.")
        record.provenance = change(dict(record.provenance or {}))
        record.bump()
        return record


def promotion_lineage(record: ModelRecord) -> Mapping[str, Any] | None:
    """The lineage a promotion wrote on ``record``, if any."""
    lineage = (record.provenance or {}).get("lineage")
    return lineage if isinstance(lineage, dict) else None


__all__ = ["Promotion", "PromotionError", "PromotionPolicy", "PromotionRefused", "check_promotable", "check_promoter",
           "promote_candidate", "promotion_lineage", "promotion_policy", "store_promotion_policy"]
