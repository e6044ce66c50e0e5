"""Imported cases as a round's examples, written against the round's target models: the targets' answers are
recorded with each example, as the Create tab records them, so "fooled the model" means what it means for
examples written on the desk. Runs before the import's unit of work opens (loading and running a model takes
a while; nothing is held open meanwhile)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.core.domain import ModelOutput
from app.core.errors import DynadeskError


def target_outputs(desk: Any, task_code: str | None, round_number: int, texts: Sequence[str],
                   report: Any) -> list[list[ModelOutput]]:
    """Every target's output per text, in order; no outputs (with a warning in ``report``) when the round does
    not exist yet or has no target that can run here."""
    none: list[list[ModelOutput]] = [[] for _ in texts]
    if not texts:
        return none
    if not task_code:
        raise DynadeskError("Say which task to import into (--task).")
    try:
        round_ = desk.tasks.round(task_code, round_number)
    except DynadeskError:
        report.warnings.append(f"round {round_number} of {task_code} is new, so it has no target model: the "
                               "examples are stored without model outputs (none of them counts as fooling a model); import the "
                               "file again once the round has its target, and they get its answers")
        return none
    targets = [r for r in desk.models.round_models(round_.id) if r.format != "imported"]
    if not targets:
        report.warnings.append(f"round {round_number} of {task_code} has no target model that runs on this desk: "
                               "the examples are stored without model outputs; import the file again once it has "
                               "one, and they get its answers")
        return none
    outputs = none
    for record in targets:
        try:
            answers = desk.models.answers(record, texts)
        except DynadeskError as exc:
            raise DynadeskError(f"The round's target {record.name} cannot run to answer the imported examples: "
                                f"{exc}") from exc
        outputs = [known + [answer] for known, answer in zip(outputs, answers)]
    return outputs
