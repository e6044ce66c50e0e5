"""The server's judgement of "fooled" and the verdict rules of a validation."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from app.core.domain import FooledRule, ModelOutput, Span, Verdict
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.fooling import is_fooled
from sync.protocol import ExampleRecord, ValidationRecord
from sync.server.models import Example
from sync.server.store.batch import PendingRow


@dataclass(frozen=True)
class Judgement:
    """Whether a round's target models were fooled by an example, as the server judges it.
    ``fooled`` is None (not counted as fooling) unless there is exactly one output of each target
    and nothing else; ``outputs`` are the example's outputs, each with its own ``fooled``."""

    fooled: bool | None
    outputs: list[dict]
    targets: list[str]
    foreign: list[str]  # sha256 of outputs whose model is not a target
    repeated: bool  # a target answered twice
    missing: list[str]  # targets without an output


def judge(definition: TaskDefinition, targets: Sequence[str], rule: str, true_label: str | None, answer: Span | None,
          outputs: Sequence[dict]) -> Judgement:
    """The server's judgement, with the desk's one definition of "fooled" (``is_fooled``), from the
    outputs in wire form (model sha256, label, probabilities, answer), never from their ``fooled``."""
    targets = list(targets)
    shas = [o["model_sha256"] for o in outputs]
    models = [ModelOutput(uuid.UUID(str(o["model"])), o["model_sha256"], o["label"], dict(o.get("probabilities") or {}),
                          o.get("latency_ms"), Span.from_json(o.get("answer"))) for o in outputs]
    foreign = [sha for sha in shas if sha not in targets]
    repeated = len(set(shas)) != len(shas)
    missing = [sha for sha in targets if sha not in shas]
    if foreign or repeated:  # refused unjudged: only the round's targets, once each, are worth the work
        return Judgement(None, list(outputs), targets, foreign, repeated, missing)
    judged = [{**wire, "fooled": is_fooled(definition, [model], true_label, answer)}  # each on its own, as desks do
              for wire, model in zip(outputs, models)]
    fooled = None
    if targets and not missing:
        fooled = is_fooled(definition, models, true_label, answer, FooledRule(rule))
    return Judgement(fooled, judged, targets, foreign, repeated, missing)


def judgement_note(e: Example | PendingRow, r: ExampleRecord) -> dict | None:
    """The server's "fooled", for a push result, when it is not what the author's desk sent."""
    return None if e.model_fooled is r.model_fooled else {"model_fooled": e.model_fooled}


def verdict_problem(definition: TaskDefinition, example: Example | PendingRow, r: ValidationRecord) -> str | None:
    """The verdict rules of ``ValidationService`` that do not depend on what else arrived first."""
    if r.verdict == Verdict.INCORRECT:
        if not r.corrected_label:
            return "An 'incorrect' verdict needs the corrected label."
        if definition.labels and r.corrected_label not in definition.labels:
            return f"The corrected label must be one of: {', '.join(definition.labels)}."
        if r.corrected_label == (example.true_label if definition.labels else (example.answer or {}).get("text")):
            return "The corrected label is the same as the author's; choose 'correct' instead."
        if not (r.reason or "").strip():
            return "An 'incorrect' verdict needs an explanation."
    elif r.corrected_label:
        return f"A '{r.verdict.value}' verdict has no corrected label."
    if r.verdict == Verdict.FLAGGED and not (r.reason or "").strip():
        return "A flag needs a reason."
    return None
