"""The assistant's contract: what generators make, what the checker returns, what an example records.

Generators are plain functions ``(GenerationContext) -> list[Candidate]``; the checker runs every
candidate through the round's target (or ensemble) in one batch and ranks them. Nothing here imports Qt.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from app.core.domain import StrEnum
from app.core.text import EditOp, WordScore


class Goal(StrEnum):
    FOOL = "fool"  # keep the writer's label, change the model's prediction
    CONTRAST = "contrast"  # flip the true label with a minimal edit; the writer confirms the new label


class Generator(StrEnum):
    OBFUSCATION = "obfuscation"
    SUBSTITUTION = "substitution"  # gradient-guided (HotFlip-style), confirmed by a forward pass
    RULES = "rules"


class AssistantMode(StrEnum):
    """A round setting (``round.settings["assistant"]``)."""

    OFF = "off"
    ON = "on"
    AB = "ab"  # on for a random half of each writer's sessions


@dataclass(frozen=True)
class GenerationContext:
    text: str
    goal: Goal
    writer_label: str | None  # the label the writer gave (fool) or the one the edit should make true (contrast)
    model_label: str | None  # the target's current label for ``text``
    labels: tuple[str, ...]
    task_code: str
    words: tuple[WordScore, ...]  # attributions toward ``model_label``; empty when none are available
    lexicon: Any = None  # the task's word lists (shipped in resources/, extended by leads), see assist.lexicon
    # What the model reads: the full ModelInput (a (context, hypothesis) pair for NLI), ``text`` being
    # its segment ``segment``; generators edit ``text`` only (``assist.pipeline.with_written`` rebuilds).
    inputs: Any = None
    segment: int = 0
    gradients: Any = None  # an InferenceEngine with gradients (the target's PyTorch form), or None
    gradient_pass: Any = None  # local_models.hotflip.FirstOrder when the pipeline already made it
    text_label: str | None = None  # the writer's label for the text as it is now (contrast: before the edit)
    slurs: bool = False  # the writer asked for edits that put slurs into the text (description → slur)


@dataclass(frozen=True)
class Candidate:
    text: str
    generator: Generator
    edit_type: str  # e.g. "leetspeak", "homoglyph", "negation", "group_swap", "slur_to_description"
    note: str = ""  # what was changed, in words ("'idiots' → 'id1ots'")
    claimed_label: str | None = None  # contrast goal: the true label the edit is meant to produce


@dataclass(frozen=True)
class CheckedSuggestion:
    candidate: Candidate
    probabilities: Mapping[str, float]  # the target's (ensemble mean) probabilities for the new text
    predicted: str
    fools: bool  # the model's label differs from the label the text should have
    shift: float  # how far the model's probability of the label the text should have moved down
    edits: tuple[EditOp, ...] = field(default=())  # word diff from the writer's text


@dataclass(frozen=True)
class Assistance:
    """What an example records about the assistant (DESIGN §3 "assistance"); syncs and exports."""

    arm: str | None = None  # "on" / "off" when the round runs A-B or on; None when the assistant is off
    applied: bool = False
    generator: str | None = None
    edit_type: str | None = None
    applied_text: str | None = None  # the suggestion as applied, to measure the writer's later edits
    edit_distance: int | None = None  # words between the applied suggestion and the submitted text
    session: int | None = None  # the writer's session number in the round, which decided the arm (arms.py)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None and k != "applied_text"} | (
            {"applied": self.applied})


class Unavailable(enum.Enum):
    """Why a generator gave nothing (shown in the panel, never silently empty)."""

    NO_GRADIENTS = ("the target model's form has no gradients (ONNX) and its PyTorch form is not on this desk: "
                    "word substitution needs the PyTorch form")
    NO_ATTRIBUTIONS = "no attributions yet for this text"
    NO_RULES = "no rule applies to this text"
    NO_WORDS = "the text has no words that can be changed"
    NOT_FOR_GOAL = "this generator keeps the meaning, so it cannot make a contrast pair"
    FAILED = "this generator failed on this text (see the log)"
