"""Domain vocabulary shared by storage, services, sync and the GUI."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

MAX_ROUND_NUMBER = 10_000  # a round number beyond this is a typo or a hostile file


# str() and format() give the value; kept under this name for the modules that import it from here
StrEnum = enum.StrEnum


class Role(StrEnum):
    ANNOTATOR = "annotator"
    LEAD = "lead"
    OWNER = "owner"


class ExampleStatus(StrEnum):
    DRAFT = "draft"
    SUBMITTED = "submitted"
    RETRACTED = "retracted"
    FLAGGED = "flagged"


class Verdict(StrEnum):
    CORRECT = "correct"
    INCORRECT = "incorrect"
    FLAGGED = "flagged"


class ValidationMode(StrEnum):
    PEER = "peer"
    LEAD = "lead"


class ValidationState(StrEnum):
    """Where an example stands in validation; stored on the example for fast review queries."""

    UNVALIDATED = "unvalidated"
    IN_PROGRESS = "in_progress"
    DECIDED = "decided"


class ReviewAction(StrEnum):
    """A lead's review of an example; also the example's ``review_state`` after it."""

    ACCEPTED = "accepted"
    RETURNED = "returned"


class RoundStatus(StrEnum):
    OPEN = "open"
    CLOSED = "closed"


class ModelFormat(StrEnum):
    HF_TORCH = "hf-torch"
    ONNX = "onnx"
    IMPORTED = "imported"  # predictions recorded elsewhere (e.g. ANLI's adversary); no runnable model


class FooledRule(StrEnum):
    """How an ensemble's outputs decide whether the model was fooled."""

    MEAN = "mean"
    ALL = "all"
    ANY = "any"


class SyncState(StrEnum):
    LOCAL = "local"  # never leaves this desk (drafts)
    PENDING = "pending"
    SYNCED = "synced"


def new_id() -> uuid.UUID:
    return uuid.uuid4()


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Span:
    """A character span of a context, as chosen by an annotator or predicted by a QA model."""

    start: int
    end: int
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"start": self.start, "end": self.end, "text": self.text}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> Span | None:
        return None if data is None else cls(int(data["start"]), int(data["end"]), str(data["text"]))


@dataclass(frozen=True)
class ModelOutput:
    """What one target model said about one example, as stored with it."""

    model_id: uuid.UUID
    model_sha256: str
    label: str
    probabilities: dict[str, float] = field(default_factory=dict)
    latency_ms: float | None = None
    answer: Span | None = None  # extractive QA only
