"""Proposals: a lead's trained candidate travels to the owner through the server, and the owner promotes
it in one action. No file is handed between people. Qt-free; network work takes a ``SyncHandle``
(progress, cancel), model work a ``Progress``.

    summary = propose_candidate(desk, client, "hate_speech", Path("runs/r2"), report)      # the lead
    listing = list_proposals(desk, client, "hate_speech")                                  # the owner
    outcome = promote_proposal(desk, client, summary.id)  # download, check, compare, promote, publish, mark

Promoting, step by step, each step changing nothing until it can no longer fail:
1. The proposal and the task's policy come from the server; who may promote is checked on this desk
   (``check_promoter``) and again by the server when the round is published.
2. The files are downloaded into a staging folder, each checked against its sha256, and the list against
   the proposal's ``files_sha256``; only a whole, verified folder is moved into place (``proposals/ID``).
3. The candidate is compared again on this desk (``compare_candidate``, with the proposal's base test
   file and suite when this desk has the same files); with nothing to compare on here, the proposer's
   report decides. ``promote_candidate`` applies the promotion rule (``promotion_rule``); ``force`` with a
   ``reason`` overrides it, recorded in the lineage and in the proposal's decision, which carries the
   figures it was judged on: the server judges them again with the same rule.
4. The proposal is marked promoted (who, when, which round, forced or not), then the new round is published
   as ``dynadesk sync publish T --round N`` does (``SyncClient.publish``); an owner's publish also closes
   the round it replaced, a lead's only adds the new one (the server limits a lead to that round).
   Run again after a failure in step 4, it finishes the same promotion instead of promoting twice.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

from app.core.domain import Role
from app.core.errors import DynadeskError
from app.core.next_round.comparison import ComparisonReport, Difference, describe
from app.core.next_round.promotion import (
    Promotion,
    PromotionPolicy,
    check_promoter,
    promotion_lineage,
    store_promotion_policy,
)
from app.core.next_round.round_training import MANIFEST_FILE, read_manifest
from local_models.files import file_sha256
from local_models.progress import Progress
from sync.proposal_wire import (
    MAX_PROPOSAL_FILES,
    PartFileName,
    ProposalCreate,
    ProposalDecision,
    ProposalFile,
    ProposalList,
    ProposalWire,
    TaskPolicies,
    TaskPolicyUpdate,
    TaskPolicyWire,
    file_name_clash,
)
from sync.protocol import manifest_sha256
from sync.transport import Damaged, NotAllowed, Offline, SyncError, SyncHandle

if TYPE_CHECKING:
    from app.core.desk import Desk
    from sync.client import SyncClient

log = logging.getLogger(__name__)

PROPOSALS_DIR = "proposals"  # in the desk folder: each downloaded proposal's verified files
META_DIR = ".proposal"  # inside a downloaded proposal: its record and the proposer's comparison report
REPORT_NAME = "comparison.json"
MAX_FIGURE_ROWS = 120
_PART_NAME: TypeAdapter[str] = TypeAdapter(PartFileName)


class ProposalError(SyncError):
    """A proposal that cannot be made, fetched or promoted as asked on this desk; the message says what to do.
    What the server refuses raises the error its status maps to (``sync.transport.refusal``)."""


@dataclass(frozen=True)
class ProposalSummary:
    """A proposal as the CLI and the GUI show it."""

    id: uuid.UUID
    task: str
    team: str
    proposer: str
    created_at: datetime
    name: str
    rounds_trained_on: tuple[int, ...]
    compared_with_round: int | None
    state: str
    worse: bool | None  # refused by the promotion rule; None: proposed without a comparison
    pooled: Difference | None
    differences: tuple[Difference, ...]
    files: int
    size: int
    note: str | None = None
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    promoted_round: int | None = None
    forced: bool = False
    sentence: str = ""  # the promotion rule's verdict on the proposer's figures

    @classmethod
    def from_wire(cls, wire: ProposalWire) -> ProposalSummary:
        figures = wire.figures or {}
        pooled = _difference(figures.get("pooled"))
        differences = tuple(d for d in (_difference(row) for row in figures.get("differences") or []) if d is not None)
        return cls(id=wire.id, task=wire.task, team=wire.team, proposer=wire.proposer, created_at=wire.created_at,
                   name=wire.name, rounds_trained_on=tuple(wire.rounds_trained_on),
                   compared_with_round=wire.compared_with_round, state=wire.state,
                   worse=bool(figures["worse"]) if "worse" in figures else None, pooled=pooled,
                   differences=differences, files=len(wire.files), size=wire.size, note=wire.note,
                   decided_by=wire.decided_by, decided_at=wire.decided_at, reason=wire.reason,
                   promoted_round=wire.promoted_round, forced=wire.forced,
                   sentence=str(figures.get("verdict") or "")[:500])

    def headline(self) -> tuple[Difference, ...]:
        """The figures a list shows: accuracy and macro-F1 on the held-out splits taken together, or, when
        the proposer's desk had no held-out example, on the first split that had items (the base test)."""
        if self.pooled is not None and self.pooled.items:
            split = self.pooled.split
        else:
            split = next((d.split for d in self.differences if d.items), None)
        return tuple(d for d in self.differences if d.split == split and d.metric in ("accuracy", "macro_f1"))

    def detail_lines(self) -> list[str]:
        """Every difference of the comparison with its interval, one per line."""
        if not self.differences:
            return ["Proposed without a comparison report."]
        return [describe(d) for d in self.differences]


@dataclass(frozen=True)
class ProposalListing:
    task: str
    proposals: tuple[ProposalSummary, ...]
    leads_may_promote: bool


@dataclass(frozen=True)
class ProposalPromotion:
    """What promoting a proposal did."""

    proposal: ProposalSummary  # as the server now holds it: promoted, by whom, when
    round_number: int
    previous_round: int | None
    promotion: Promotion | None  # None when an earlier run had promoted it on this desk already
    comparison_note: str
    published: dict[str, int]  # result status -> records

    def summary_lines(self) -> list[str]:
        lines = [self.comparison_note]
        if self.promotion is not None:
            lines += self.promotion.summary_lines()
        else:
            lines.append(f"Round {self.round_number} already had this candidate as its target on this desk.")
        lines.append("Published: " + ", ".join(f"{n} {status.replace('_', ' ')}" for status, n in
                                               self.published.items()) + ".")
        lines.append(f"Proposal {self.proposal.id} is marked promoted (round {self.round_number}).")
        return lines


def _difference(row: Any) -> Difference | None:
    if not isinstance(row, dict):
        return None
    try:
        return Difference(split=str(row["split"]), metric=str(row["metric"]), current=_number(row.get("current")),
                          candidate=_number(row.get("candidate")), difference=_number(row.get("difference")),
                          low=_number(row.get("low")), high=_number(row.get("high")), items=int(row.get("items") or 0))
    except (KeyError, TypeError, ValueError):
        return None


def _number(value: Any) -> float | None:
    return None if value is None else float(value)


def key_figures(report: ComparisonReport) -> dict[str, Any]:
    """What a proposal carries of its comparison report: every difference with its interval (the
    whole report, with each prediction, travels as a file)."""
    return {"candidate_sha256": report.candidate_sha256, "current_sha256s": list(report.current_sha256s),
            "worse": bool(report.worse), "verdict": report.verdict.sentence, "pooled": asdict(report.pooled),
            "differences": [asdict(d) for d in report.differences[:MAX_FIGURE_ROWS]],
            "names": {s["key"]: s["name"] for s in report.document.get("splits", [])[:MAX_FIGURE_ROWS]
                      if isinstance(s, dict) and "key" in s},
            "summary": report.summary_lines()[:40]}


def candidate_files(model_dir: Path) -> list[tuple[str, Path]]:
    """The files of a candidate folder as ``dynadesk train`` writes it, named relative to it (hidden
    names and unfinished ``.part`` files left out)."""
    from local_models.train import is_trained_part

    folder = Path(model_dir).expanduser()
    if not folder.is_dir() or not is_trained_part(folder):
        raise ProposalError(f"{model_dir} is not a trained candidate: it lacks the files `dynadesk train --out DIR` "
                            "writes (the trained part and its description). Propose the folder that command wrote.")
    named = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts) or path.name.endswith(".part"):
            continue
        if path.is_symlink():
            raise ProposalError(f"{relative} in {folder} is a link; propose a folder of plain files.")
        if path.is_file():
            name = relative.as_posix()
            try:
                _PART_NAME.validate_python(name)
            except ValueError:
                raise ProposalError(f"{folder} holds a file named '{name}', which a proposal cannot carry (letters, "
                                    "digits, '.', '_' and '-', at most three folders deep); move it out.") from None
            named.append((name, path))
    if len(named) > MAX_PROPOSAL_FILES:
        raise ProposalError(f"{folder} holds {len(named)} files; a proposal carries at most {MAX_PROPOSAL_FILES}.")
    return named


def _manifest_rounds(model_dir: Path, task_code: str) -> list[int]:
    path = model_dir / MANIFEST_FILE
    if not path.is_file():
        return []
    try:
        manifest = read_manifest(path)
    except DynadeskError as exc:
        raise ProposalError(str(exc)) from exc
    if manifest.get("task") not in (None, task_code):
        raise ProposalError(f"{model_dir} was trained for task '{manifest['task']}', not '{task_code}'.")
    rounds = manifest.get("rounds")
    return sorted({int(r) for r in rounds if isinstance(r, int) and r >= 1}) if isinstance(rounds, list) else []


def propose_candidate(desk: Desk, client: SyncClient, task_code: str, model_dir: Path,
                      comparison: ComparisonReport | Path | None, *, note: str | None = None,
                      handle: SyncHandle | None = None) -> ProposalSummary:
    """Offer the candidate in ``model_dir`` (the folder ``dynadesk train`` wrote, with its manifest.json)
    to the owner of ``task_code``: its files and the comparison report (a report, or the path of its
    JSON file or folder) are uploaded, then the proposal names them. Leads and owners; the server checks."""
    from app.core.io.documents import write_document
    from app.core.next_round.comparison import read_report

    handle = handle or SyncHandle()
    model_dir = Path(model_dir).expanduser().resolve()
    files = candidate_files(model_dir)
    rounds = _manifest_rounds(model_dir, task_code)
    desk.tasks.definition_by_code(task_code)  # an unknown task is named now, not after the upload
    report = read_report(Path(comparison)) if isinstance(comparison, (str, Path)) else comparison
    if report is not None and report.task_code != task_code:
        raise ProposalError(f"The comparison report is of task '{report.task_code}', not '{task_code}'.")
    me = client.me(handle)
    if me.role.value not in ("lead", "owner"):
        raise NotAllowed(f"Only leads and owners propose a candidate; {me.display_name} is an {me.role.value} "
                      "on this server.")
    listed = []
    total = sum(path.stat().st_size for _, path in files)
    done = 0
    for name, path in files:
        sha = file_sha256(path)
        client.upload_blob(path, sha, handle, what=f"{name} of the candidate")
        listed.append(ProposalFile(name=name, sha256=sha, size=path.stat().st_size))
        done += path.stat().st_size
        handle.progress("upload", done, total)
    report_file = None
    if report is not None:
        with tempfile.TemporaryDirectory(prefix="dynadesk-proposal-") as scratch:
            written = write_document(report.document, Path(scratch) / REPORT_NAME)
            sha = file_sha256(written)
            client.upload_blob(written, sha, handle, what="the comparison report")
            report_file = ProposalFile(name=REPORT_NAME, sha256=sha, size=written.stat().st_size)
    compared_with = (report.document.get("current") or {}).get("round") if report is not None else None
    request = ProposalCreate(
        id=uuid.uuid4(), name=_candidate_name(model_dir), rounds_trained_on=rounds,
        compared_with_round=compared_with if isinstance(compared_with, int) else None, files=listed,
        files_sha256=manifest_sha256((f.name, f.sha256) for f in listed), comparison=report_file,
        figures=key_figures(report) if report is not None else {}, note=note)
    content = client.request("POST", f"/tasks/{task_code}/proposals", handle, ok=(200, 201),
                             body=request.model_dump(mode="json")).content
    summary = ProposalSummary.from_wire(ProposalWire.model_validate_json(content))
    log.info("proposed %s for %s as proposal %s", summary.name, task_code, summary.id)
    return summary


def _candidate_name(model_dir: Path) -> str:
    from local_models.train import read_part_description

    try:
        name = str(read_part_description(model_dir).get("name") or model_dir.name)
    except Exception:  # a broken description: the folder's name still says which candidate it is
        name = model_dir.name
    return name[:200] or "candidate"


def list_proposals(desk: Desk, client: SyncClient, task_code: str,
                   handle: SyncHandle | None = None) -> ProposalListing:
    """A task's proposals, newest first (owners see every team's, leads their own team's). The task's
    policy comes with them and is kept on this desk."""
    listing = ProposalList.model_validate_json(client.request("GET", f"/tasks/{task_code}/proposals", handle).content)
    store_promotion_policy(desk, PromotionPolicy(task_code, listing.leads_may_promote,
                                                 *_policy_origin(desk, task_code, listing.leads_may_promote)))
    return ProposalListing(listing.task, tuple(ProposalSummary.from_wire(p) for p in listing.proposals),
                           listing.leads_may_promote)


def _policy_origin(desk: Desk, task_code: str, allowed: bool) -> tuple[str | None, str | None]:
    from app.core.next_round.promotion import promotion_policy

    held = promotion_policy(desk, task_code)
    return (held.set_by, held.set_at) if held.leads_may_promote == allowed else (None, None)


def fetch_proposal(client: SyncClient, proposal_id: uuid.UUID | str, handle: SyncHandle | None = None) -> ProposalWire:
    return ProposalWire.model_validate_json(client.request("GET", f"/proposals/{_id(proposal_id)}", handle).content)


def _id(value: uuid.UUID | str) -> uuid.UUID:
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value).strip())
    except ValueError:
        raise ProposalError(f"'{value}' is not a proposal id; `dynadesk rounds proposals --task T` lists them.") from None


def proposal_folder(desk: Desk, proposal_id: uuid.UUID) -> Path:
    return Path(desk.root) / PROPOSALS_DIR / str(proposal_id)


def download_proposal(desk: Desk, client: SyncClient, wire: ProposalWire, handle: SyncHandle | None = None) -> Path:
    """The proposal's files in ``proposals/ID`` on this desk, every one checked against its sha256. A
    file that does not match (damaged on the server or on the way) leaves nothing installed."""
    handle = handle or SyncHandle()
    if manifest_sha256((f.name, f.sha256) for f in wire.files) != wire.files_sha256:
        raise ProposalError(f"The server's file list of proposal {wire.id} does not add up to its checksum; "
                            "nothing was downloaded. Ask the proposer to propose the candidate again.")
    clash = file_name_clash([f.name for f in wire.files])
    if clash:  # checked before anything is written: no staging folder is left behind
        raise ProposalError(f"The files of proposal {wire.id} cannot share one folder ({clash}); nothing was "
                            "downloaded. Ask the proposer to propose the candidate again.")
    final = proposal_folder(desk, wire.id)
    wanted = [(f.name, f) for f in wire.files] + ([(f"{META_DIR}/{REPORT_NAME}", wire.comparison)]
                                                  if wire.comparison else [])
    if (final / META_DIR / ".complete").is_file() and all(_matches(final / name, f) for name, f in wanted):
        return final
    staging = final.with_name(f".{wire.id}.partial")
    try:
        return _download_into(client, wire, wanted, staging, final, handle)
    except OSError as exc:  # a full disk, a folder not writable: nothing half-made stays
        shutil.rmtree(staging, ignore_errors=True)
        raise ProposalError(f"Proposal {wire.id} could not be written on this desk ({exc}); nothing was installed "
                            "and no round changed.") from exc


def _download_into(client: SyncClient, wire: ProposalWire, wanted: list[tuple[str, ProposalFile]], staging: Path,
                   final: Path, handle: SyncHandle) -> Path:
    staging.mkdir(parents=True, exist_ok=True)
    total, done = sum(f.size for _, f in wanted), 0
    for name, f in wanted:
        target = staging / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if not _matches(target, f):
            try:
                # a stored blob is named by its content: arriving damaged twice, it is damaged on the server
                client.download_blob(f.sha256, target, handle, damaged_attempts=2)
            except SyncError as exc:
                shutil.rmtree(staging, ignore_errors=True)
                damaged = isinstance(exc, Damaged)
                raise ProposalError(
                    f"{name} of proposal {wire.id} could not be downloaded whole ({exc}). Nothing was installed "
                    "and no round changed. " + (f"The copy on the server does not match its sha256: ask "
                                                f"{wire.proposer} to propose the candidate again." if damaged
                                                else "Try again when the connection is steady.")) from exc
        done += f.size
        handle.progress("download", done, total)
    (staging / META_DIR).mkdir(exist_ok=True)
    (staging / META_DIR / "proposal.json").write_text(wire.model_dump_json(indent=2), encoding="utf-8")
    (staging / META_DIR / ".complete").write_text(wire.files_sha256, encoding="utf-8")
    if final.exists():
        shutil.rmtree(final)
    os.replace(staging, final)
    return final


def _matches(path: Path, f: ProposalFile) -> bool:
    return path.is_file() and path.stat().st_size == f.size and file_sha256(path) == f.sha256


def _compare_here(desk: Desk, task_code: str, folder: Path, force: bool,
                  progress: Progress) -> tuple[ComparisonReport | None, str]:
    """The candidate compared again on this desk, with the proposal's base test file and suite when this
    desk has the very same files; with nothing to compare on here, the proposer's report."""
    from app.core.next_round.comparison import BaseTestOptions, NothingToCompare, compare_candidate, read_report

    proposed = read_report(folder / META_DIR / REPORT_NAME) if (folder / META_DIR / REPORT_NAME).is_file() else None
    options = (proposed.document.get("options") or {}) if proposed is not None else {}
    base_test = _same_file(options.get("base_test"), options.get("base_test_sha256"))
    suite = _same_file(options.get("suite"), options.get("suite_sha256"))
    base_options = None
    if base_test is not None and isinstance(options.get("base_options"), dict):
        base_options = BaseTestOptions(**options["base_options"])
    rounds = options.get("rounds") if isinstance(options.get("rounds"), list) else None
    try:
        report = compare_candidate(desk, task_code, folder, rounds=rounds, base_test=base_test, suite=suite,
                                   base_options=base_options, seed=int(options.get("seed") or 0),
                                   resamples=int(options.get("resamples") or 2000), progress=progress)
    except NothingToCompare as exc:
        if proposed is not None:
            return proposed, (f"{exc} The proposer's comparison decides: "
                              + "; ".join(proposed.summary_lines()[:2]))
        if not force:
            raise ProposalError(f"{exc} The proposal came without a comparison either. Promote it without one "
                                "with --force (\"Promote anyway\"; recorded).") from exc
        return None, f"{exc} Promoted without a comparison (forced)."
    used = [what for what, path in (("the base test file", base_test), ("the suite", suite)) if path is not None]
    return report, ("Compared again on this desk" + (f" (held-out splits and {' and '.join(used)})" if used else
                                                     " (held-out splits)") + ": " + report.summary_lines()[0])


def _same_file(path: Any, sha256: Any) -> Path | None:
    if not path or not sha256:
        return None
    candidate = Path(str(path))
    return candidate if candidate.is_file() and file_sha256(candidate) == sha256 else None


def _promoted_here(desk: Desk, task_code: str, folder: Path) -> tuple[int, int | None, bool] | None:
    """(round, previous round, forced) when this desk already promoted the candidate in ``folder``."""
    rounds = desk.tasks.rounds(task_code)
    if not rounds:
        return None
    targets = desk.models.round_models(rounds[-1].id)
    lineage = promotion_lineage(targets[0]) if targets else None
    if lineage and lineage.get("candidate_dir") == str(folder.resolve()):
        return rounds[-1].number, lineage.get("previous_round"), bool(lineage.get("forced"))
    return None


def _judged_here(desk: Desk, task_code: str, folder: Path) -> tuple[dict[str, Any], str | None]:
    """The figures this desk's earlier promotion of ``folder`` was judged on, and its override reason, as its
    lineage recorded them (every judged split with its figures); none when it recorded no comparison."""
    rounds = desk.tasks.rounds(task_code)
    targets = desk.models.round_models(rounds[-1].id) if rounds else []
    lineage = (promotion_lineage(targets[0]) if targets else None) or {}
    reason = (lineage.get("override") or {}).get("reason")
    splits = (lineage.get("comparison") or {}).get("splits") or []
    differences = [{"split": s["split"], **f} for s in splits if isinstance(s, dict) for f in s.get("figures") or []
                   if isinstance(f, dict)]
    names = {s["split"]: s["name"] for s in splits if isinstance(s, dict) and "split" in s and "name" in s}
    return ({"differences": differences[:MAX_FIGURE_ROWS], "names": names} if differences else {}), reason


def promote_proposal(desk: Desk, client: SyncClient, proposal_id: uuid.UUID | str, *, with_current: bool = False,
                     force: bool = False, reason: str | None = None, progress: Progress | None = None,
                     handle: SyncHandle | None = None) -> ProposalPromotion:
    """Download, check, compare, promote, publish, mark: the owner's one action (module docstring).
    Raises ``PromotionRefused`` (figures in its message) when the promotion rule refuses the candidate and
    not ``force`` (with a ``reason``);
    ``Offline`` when the server cannot be reached; ``Refused`` (``sync.transport.refusal``) when it refuses;
    ``ProposalError``/``PromotionError`` for the rest."""
    from app.core.next_round.promotion import promote_candidate

    handle = handle or SyncHandle()
    progress = progress or Progress()
    wire = fetch_proposal(client, proposal_id, handle)
    pull_policies(desk, client, handle)
    folder = proposal_folder(desk, wire.id)
    done = _promoted_here(desk, wire.task, folder) if folder.is_dir() else None
    if wire.state == "promoted" and (done is None or done[0] != wire.promoted_round):
        raise ProposalError(f"Proposal {wire.id} was promoted already: it became the target of {wire.task} round "
                            f"{wire.promoted_round} ({wire.decided_by}, {wire.decided_at:%Y-%m-%d %H:%M} UTC). "
                            "Sync to bring that round here.")
    if wire.state in ("declined", "superseded"):
        raise ProposalError(f"Proposal {wire.id} is {wire.state}" + (f" ({wire.reason})" if wire.reason else "")
                            + "; only an open proposal is promoted. The lead can propose a new candidate.")
    actor = check_promoter(desk, wire.task)  # before any download; the server checks again at publish
    promotion = None
    if done is None:
        progress.say("Downloading the proposal's files…")
        folder = download_proposal(desk, client, wire, handle)
        progress.say("Comparing the candidate on this desk…")
        comparison, note = _compare_here(desk, wire.task, folder, force, progress)
        promotion = promote_candidate(desk, wire.task, folder, with_current=with_current, force=force,
                                      reason=reason, comparison=comparison, progress=progress)
        done = (promotion.round_number, promotion.previous_round, promotion.forced)
        judged = key_figures(comparison) if comparison is not None else {}
        override = (promotion.lineage.get("override") or {}).get("reason")
    else:
        note = "This desk had promoted the proposal already; finishing its publication."
        judged, override = _judged_here(desk, wire.task, folder)
    round_number, previous, forced = done
    # Marked first: the server lets a lead publish only the round their own promotion claimed. The figures it
    # was judged on go along: the server applies the same rule to them.
    decision = ProposalDecision(state="promoted", round_number=round_number, forced=forced,
                                reason=(override or "promoted anyway (no reason recorded)")[:500] if forced else None,
                                figures=judged)
    # A lead adds the new round; closing the previous one, which every team works in, is the owner's.
    rounds = [n for n in (previous, round_number) if n is not None] if actor.role == Role.OWNER else [round_number]
    progress.say(f"Publishing round {round_number}…")
    try:
        decided = ProposalWire.model_validate_json(client.request(
            "POST", f"/proposals/{wire.id}/decision", handle, body=decision.model_dump(mode="json")).content)
        response = client.publish(wire.task, rounds, handle=handle)
    except Offline as exc:
        raise ProposalError(f"Round {round_number} is open on this desk, but the server could not be reached to "
                            f"publish it ({exc}). Run `dynadesk rounds promote --proposal {wire.id}` again when "
                            "it can: it publishes the round and marks the proposal, promoting nothing twice.") from exc
    refused = [r for r in response.results if r.status in ("rejected", "deferred", "conflict")]
    if refused:
        raise ProposalError(
            f"Round {round_number} is open on this desk, but the server did not take all of it: "
            + "; ".join(f"{r.record}: {r.status}: {r.reason or ''}" for r in refused[:5])
            + f". Run `dynadesk rounds promote --proposal {wire.id}` again to finish (nothing is promoted twice).")
    published = {s: response.count(s) for s in ("stored", "already_stored") if response.count(s)}
    return ProposalPromotion(ProposalSummary.from_wire(decided), round_number, previous, promotion, note, published)


def decline_proposal(client: SyncClient, proposal_id: uuid.UUID | str, reason: str,
                     handle: SyncHandle | None = None) -> ProposalSummary:
    if not reason.strip():
        raise ProposalError("Say why the proposal is declined (--reason); the lead reads it.")
    decision = ProposalDecision(state="declined", reason=reason.strip()[:500])
    content = client.request("POST", f"/proposals/{_id(proposal_id)}/decision", handle,
                             body=decision.model_dump(mode="json")).content
    return ProposalSummary.from_wire(ProposalWire.model_validate_json(content))


def _policy(wire: TaskPolicyWire) -> PromotionPolicy:
    return PromotionPolicy(wire.task, wire.leads_may_promote, wire.set_by,
                           wire.set_at.isoformat() if wire.set_at else None)


def set_promotion_policy(desk: Desk, client: SyncClient, task_code: str, leads_may_promote: bool,
                         handle: SyncHandle | None = None) -> PromotionPolicy:
    """The owner's "leads may promote" for a task, on the server (which enforces it) and on this desk."""
    content = client.request("PUT", f"/tasks/{task_code}/policy", handle,
                             body=TaskPolicyUpdate(leads_may_promote=leads_may_promote).model_dump(mode="json")).content
    policy = _policy(TaskPolicyWire.model_validate_json(content))
    store_promotion_policy(desk, policy)
    return policy


def pull_policies(desk: Desk, client: SyncClient, handle: SyncHandle | None = None) -> list[PromotionPolicy]:
    """Every task's policy from the server, kept on this desk (an older server without policies: none)."""
    response = client.request("GET", "/policies", handle, ok=(200, 404))
    if response.status_code == 404:
        return []
    known = {t.code for t in desk.tasks.tasks()}
    pulled = [_policy(p) for p in TaskPolicies.model_validate_json(response.content).policies]
    for policy in pulled:
        if policy.task_code in known:
            store_promotion_policy(desk, policy)
    return pulled


__all__ = ["ProposalError", "ProposalListing", "ProposalPromotion", "ProposalSummary", "candidate_files",
           "decline_proposal", "download_proposal", "fetch_proposal", "key_figures", "list_proposals",
           "promote_proposal", "propose_candidate", "pull_policies", "set_promotion_policy"]
