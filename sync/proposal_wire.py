"""Proposals and task policies on the wire: a lead's trained candidate for a task, offered to the owner
with its files (by sha256), its manifest and its comparison report; and the owner's "leads may promote".

A proposal's files are uploaded first as blobs (``PUT /v1/blobs/{sha256}``, as a published model's
are); the proposal names them. Its key figures (the comparison's differences with their intervals)
travel in the proposal itself, so a list of proposals needs no download; the whole report travels
as a blob.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

from pydantic import AwareDatetime, Field, StringConstraints, model_validator

from app.core.limits import Bound
from sync.protocol import Code, Count, FreeJson, Hex64, Name, Short, ShownName, Strict, Team

# A file of a trained candidate folder, relative to it: plain names in at most three sub-folders.
PartFileName = Annotated[str, StringConstraints(
    pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}(/[A-Za-z0-9][A-Za-z0-9._-]{0,199}){0,3}$"), Bound.line(803)]
MAX_PROPOSAL_FILES = 200
PROPOSAL_STATES = ("open", "promoted", "declined", "superseded")
ProposalState = Literal["open", "promoted", "declined", "superseded"]


def file_name_clash(names: list[str]) -> str | None:
    """Why ``names`` cannot all be files of one folder (one named twice, also as letter case goes on some
    file systems, or one a folder of another), or None."""
    seen: dict[str, str] = {}
    for name in names:
        folded = name.casefold()
        if folded in seen:
            return f"'{seen[folded]}' and '{name}' are the same file name"
        seen[folded] = name
    for name in names:
        parts = name.casefold().split("/")
        for depth in range(1, len(parts)):
            folder = "/".join(parts[:depth])
            if folder in seen:
                return f"'{seen[folder]}' is a file, and '{name}' needs it to be a folder"
    return None


class ProposalFile(Strict):
    name: PartFileName
    sha256: Hex64
    size: Annotated[int, Field(ge=0, le=8 * 1024**3)]


class ProposalCreate(Strict):
    """What a lead's desk sends after uploading the files. ``id`` is made on the desk: sending the
    same proposal again returns the one stored."""

    id: uuid.UUID
    name: Name
    rounds_trained_on: list[Annotated[int, Field(ge=1, le=10**6)]] = Field(default_factory=list, max_length=1000)
    compared_with_round: Annotated[int, Field(ge=1, le=10**6)] | None = None
    files: list[ProposalFile] = Field(min_length=1, max_length=MAX_PROPOSAL_FILES)
    files_sha256: Hex64  # manifest_sha256 of (name, sha256): the list arrived as it was sent
    comparison: ProposalFile | None = None  # the comparison report (JSON), a blob
    # The report's key figures (see sync.proposals); the whole report travels as a file.
    figures: FreeJson = Field(default_factory=dict)
    note: Short | None = None

    @model_validator(mode="after")
    def _distinct_files(self) -> ProposalCreate:
        clash = file_name_clash([f.name for f in self.files])
        if clash:
            raise ValueError(f"the proposal's files cannot share one folder: {clash}")
        return self


class ProposalDecision(Strict):
    state: Literal["promoted", "declined"]
    reason: Short | None = None
    round_number: Annotated[int, Field(ge=1, le=10**6)] | None = None  # the round it became the target of
    forced: bool = False  # promoted anyway over the promotion rule's refusal; ``reason`` says why
    # The key figures (sync.proposals.key_figures) of the comparison the promotion was judged on: the server
    # applies the promotion rule to them again. Empty: the proposal's own figures are judged.
    figures: FreeJson = Field(default_factory=dict)


class ProposalWire(Strict):
    id: uuid.UUID
    task: Code
    team: Team
    proposer_id: uuid.UUID
    proposer: ShownName
    created_at: AwareDatetime
    name: Name
    rounds_trained_on: list[int]
    compared_with_round: int | None
    files: list[ProposalFile]
    files_sha256: Hex64
    comparison: ProposalFile | None
    figures: FreeJson
    note: Short | None
    state: ProposalState
    decided_by: ShownName | None = None
    decided_at: AwareDatetime | None = None
    reason: Short | None = None
    promoted_round: int | None = None
    forced: bool = False
    size: Count = 0  # bytes of all its files


class ProposalList(Strict):
    task: Code
    proposals: list[ProposalWire]
    leads_may_promote: bool


class TaskPolicyUpdate(Strict):
    leads_may_promote: bool


class TaskPolicyWire(Strict):
    task: Code
    leads_may_promote: bool
    set_by: ShownName | None = None
    set_at: AwareDatetime | None = None


class TaskPolicies(Strict):
    policies: list[TaskPolicyWire]
