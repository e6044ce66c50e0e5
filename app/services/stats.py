"""Dynabench's figures: MER (model-fooling ÷ submitted) and vMER (validated as genuinely
fooling ÷ submitted), per round, annotator, target model and task.

An example counts as submitted unless it is a draft or retracted. It counts toward vMER
when it fooled the model and the decision on it is 'correct' (the author's label stands).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import and_, func, select, text

from app.domain import ExampleStatus, Verdict
from app.storage.db import Database
from app.storage.models import Example, ModelRecord, Person, Round, Task

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


# Per target model. CROSS JOIN fixes SQLite's loop order (examples outside, their outputs
# inside, both through covering indexes); the planner's own choice is five times slower.
MODEL_FIGURES = text(
    f"""
    SELECT o.model_id, count(*), sum(o.fooled IS 1), sum(o.fooled IS 1 AND e.decided_verdict = '{Verdict.CORRECT.value}')
    FROM examples AS e CROSS JOIN model_outputs AS o ON o.example_id = e.id
    WHERE e.status IN ({", ".join(f"'{s}'" for s in COUNTED)})
      AND (:task_id IS NULL OR e.task_id = :task_id) AND (:round_id IS NULL OR e.round_id = :round_id)
    GROUP BY o.model_id
    """
)


def _sum_if(condition):
    return func.coalesce(func.sum(func.iif(condition, 1, 0)), 0)


class StatsService:
    def __init__(self, db: Database):
        self.db = db

    def figures(self, by: Grouping, *, task_id: uuid.UUID | None = None, round_id: uuid.UUID | None = None) -> list[Figures]:
        # Group on bare ids so that covering indexes answer (no table rows are read); names
        # are looked up afterwards for the few groups there are.
        with self.db.read() as session:
            if by == "model":
                counts = session.execute(MODEL_FIGURES, {
                    "task_id": task_id.hex if task_id else None, "round_id": round_id.hex if round_id else None,
                }).all()
                counts = [(uuid.UUID(k), s, f, v) for k, s, f, v in counts]
            else:
                key = {"round": Example.round_id, "annotator": Example.author_id, "task": Example.task_id}[by]
                fooled = Example.model_fooled.is_(True)
                query = (
                    select(key, func.count(), _sum_if(fooled),
                           _sum_if(and_(fooled, Example.decided_verdict == Verdict.CORRECT.value)))
                    .where(Example.status.in_(COUNTED))
                    .group_by(key)
                )
                if task_id is not None:
                    query = query.where(Example.task_id == task_id)
                if round_id is not None:
                    query = query.where(Example.round_id == round_id)
                counts = session.execute(query).all()
            names = self._names(session, by, [row[0] for row in counts])
        figures = [Figures(str(k), names.get(k, str(k)), int(s), int(f), int(v)) for k, s, f, v in counts]
        return sorted(figures, key=lambda f: f.name)

    @staticmethod
    def _names(session, by: Grouping, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
        if by == "round":
            rows = session.execute(select(Round.id, Task.name, Round.number).join(Task, Task.id == Round.task_id)
                                   .where(Round.id.in_(ids)))
            return {rid: f"{name} · round {number}" for rid, name, number in rows}
        table: Any
        table, column = {"annotator": (Person, Person.display_name), "model": (ModelRecord, ModelRecord.name),
                         "task": (Task, Task.name)}[by]
        return dict(session.execute(select(table.id, column).where(table.id.in_(ids))).all())
