"""Dynabench's figures: MER (model-fooling ÷ submitted) and vMER (validated as genuinely
fooling ÷ submitted), per round, annotator, target model and task.

An example counts as submitted unless it is a draft or retracted. It counts toward vMER
when it fooled the model and the decision on it is 'correct' (the author's label stands).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import String, and_, cast, func, select

from app.domain import ExampleStatus, Verdict
from app.storage.db import Database
from app.storage.models import Example, ModelOutputRow, ModelRecord, Person, Round, Task

COUNTED = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value)
Grouping = Literal["round", "annotator", "model", "task"]
GROUPINGS: tuple[Grouping, ...] = ("round", "annotator", "model", "task")


@dataclass(frozen=True)
class Figures:
    key: str
    name: str
    submitted: int
    fooled: int
    validated_fooling: int

    @property
    def mer(self) -> float | None:
        return self.fooled / self.submitted if self.submitted else None

    @property
    def vmer(self) -> float | None:
        return self.validated_fooling / self.submitted if self.submitted else None


def _sum_if(condition):
    return func.coalesce(func.sum(func.iif(condition, 1, 0)), 0)


class StatsService:
    def __init__(self, db: Database):
        self.db = db

    def figures(self, by: Grouping, *, task_id: uuid.UUID | None = None, round_id: uuid.UUID | None = None) -> list[Figures]:
        if by == "model":
            fooled = ModelOutputRow.fooled.is_(True)
            key, name, source = ModelOutputRow.model_id, ModelRecord.name, ModelOutputRow
        else:
            fooled = Example.model_fooled.is_(True)
            source = Example
            key, name = {
                "round": (Example.round_id, Task.name + " · round " + cast(Round.number, String)),
                "annotator": (Example.author_id, Person.display_name),
                "task": (Example.task_id, Task.name),
            }[by]
        query = select(
            key,
            name,
            func.count(),
            _sum_if(fooled),
            _sum_if(and_(fooled, Example.decided_verdict == Verdict.CORRECT.value)),
        )
        if source is ModelOutputRow:
            query = query.select_from(ModelOutputRow).join(Example, Example.id == ModelOutputRow.example_id).join(
                ModelRecord, ModelRecord.id == ModelOutputRow.model_id
            )
        else:
            query = query.select_from(Example)
            if by == "round":
                query = query.join(Round, Round.id == Example.round_id).join(Task, Task.id == Example.task_id)
            elif by == "annotator":
                query = query.join(Person, Person.id == Example.author_id)
            else:
                query = query.join(Task, Task.id == Example.task_id)
        query = query.where(Example.status.in_(COUNTED)).group_by(key, name).order_by(name)
        if task_id is not None:
            query = query.where(Example.task_id == task_id)
        if round_id is not None:
            query = query.where(Example.round_id == round_id)
        with self.db.read() as session:
            return [Figures(str(k), str(n), int(s), int(f), int(v)) for k, n, s, f, v in session.execute(query)]
