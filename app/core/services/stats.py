"""Dynabench's figures: MER (model-fooling ÷ submitted) and vMER (validated as genuinely
fooling ÷ submitted), per round, annotator, target model and task.

What counts and how it divides is defined once, in ``app.core.tasks.figures``; this is its SQL on the desk.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select, text

from app.core.storage.db import Database
from app.core.storage.models import Example, ModelRecord, Person, Round, Task
from app.core.tasks import figures as rule

Grouping = Literal["round", "annotator", "model", "task"]
GROUPINGS: tuple[Grouping, ...] = ("round", "annotator", "model", "task")


@dataclass(frozen=True)
class Figures:
    key: str
    name: str
    submitted: int  # written on a desk: MER and vMER divide by these
    fooled: int
    validated_fooling: int
    imported: int = 0  # submitted examples of imported data sets, counted apart (``figures.is_imported``)

    @property
    def mer(self) -> float | None:
        return rule.mer(self.fooled, self.submitted)

    @property
    def vmer(self) -> float | None:
        return rule.vmer(self.validated_fooling, self.submitted)


# Per target model. CROSS JOIN fixes SQLite's loop order (examples outside, their outputs
# inside, both through covering indexes); the planner's own choice is five times slower. Run over
# every counted example, then over the imported ones alone (the source index finds the few).
_MODEL_COUNTS, _MODEL_COUNTED = rule.sqlite_counts("e.status", "o.fooled", "e.decided_verdict")


def _model_figures(extra: str) -> Any:
    return text(
        f"""
        SELECT o.model_id, {_MODEL_COUNTS}
        FROM examples AS e CROSS JOIN model_outputs AS o ON o.example_id = e.id
        WHERE {_MODEL_COUNTED} {extra}
          AND (:task_id IS NULL OR e.task_id = :task_id) AND (:round_id IS NULL OR e.round_id = :round_id)
        GROUP BY o.model_id
        """
    )


MODEL_FIGURES = _model_figures("")
IMPORTED_MODEL_FIGURES = _model_figures(f"AND {rule.sqlite_imported('e.source')}")
VARIANT_MODEL_FIGURES = _model_figures(f"AND {rule.sqlite_variants('e.source')}")
# The imported examples alone, per round, author or task: through the source index (the few imported
# rows), which SQLite's planner passes over for an index that spares it the GROUP BY's sort.
_COUNTS, _COUNTED = rule.sqlite_counts("status", "model_fooled", "decided_verdict")


def _sourced_figures(condition: str) -> dict[str, Any]:
    return {by: text(
        f"""
        SELECT {column}, {_COUNTS}
        FROM examples INDEXED BY ix_examples_source_external_id
        WHERE {_COUNTED} AND {condition}
          AND (:task_id IS NULL OR task_id = :task_id) AND (:round_id IS NULL OR round_id = :round_id)
        GROUP BY {column}
        """) for by, column in (("round", "round_id"), ("annotator", "author_id"), ("task", "task_id"))}


IMPORTED_FIGURES = _sourced_figures(rule.sqlite_imported("source"))
# The adaptive suite's variants, through the same index: generated, not written, so in no one's figures.
VARIANT_FIGURES = _sourced_figures(rule.sqlite_variants("source"))


class StatsService:
    def __init__(self, db: Database):
        self.db = db

    def figures(self, by: Grouping, *, task_id: uuid.UUID | None = None, round_id: uuid.UUID | None = None) -> list[Figures]:
        # Group on bare ids so that covering indexes answer (no table rows are read); names
        # are looked up afterwards for the few groups there are.
        with self.db.read() as session:
            params = {"task_id": task_id.hex if task_id else None, "round_id": round_id.hex if round_id else None}
            if by == "model":
                every = {uuid.UUID(k): rest for k, *rest in session.execute(MODEL_FIGURES, params)}
                imported = {uuid.UUID(k): rest for k, *rest in session.execute(IMPORTED_MODEL_FIGURES, params)}
                variants = {uuid.UUID(k): rest for k, *rest in session.execute(VARIANT_MODEL_FIGURES, params)}
            else:
                key = {"round": Example.round_id, "annotator": Example.author_id, "task": Example.task_id}[by]

                query = select(key, *rule.sql_status_counts(Example.model_fooled, Example.decided_verdict)) \
                    .where(rule.sql_in_figures(Example.status)).group_by(key)
                if task_id is not None:
                    query = query.where(Example.task_id == task_id)
                if round_id is not None:
                    query = query.where(Example.round_id == round_id)
                every = {k: rest for k, *rest in session.execute(query)}
                imported = {uuid.UUID(k): rest for k, *rest in session.execute(IMPORTED_FIGURES[by], params)}
                variants = {uuid.UUID(k): rest for k, *rest in session.execute(VARIANT_FIGURES[by], params)}
            counts = [(k, *rule.written_counts(v, imported.get(k, (0, 0, 0)), variants.get(k, (0, 0, 0))))
                      for k, v in every.items()]
            counts = [row for row in counts if any(row[1:])]  # a group of variants alone is in no figure
            names = self._names(session, by, [row[0] for row in counts])
        figures = [Figures(str(k), names.get(k, str(k)), s, f, v, i) for k, s, f, v, i in counts]
        return sorted(figures, key=lambda f: f.name)

    def suites(self, task_id: uuid.UUID | None = None) -> int:
        """How many functional test suites (HateCheck) the desk holds: test cases, which no figure here counts."""
        from sqlalchemy import func

        from app.core.storage.models import Suite

        query = select(func.count()).select_from(Suite)
        if task_id is not None:
            query = query.where(Suite.task_id == task_id)
        with self.db.read() as session:
            return int(session.scalar(query) or 0)

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


def group_names(session, by: Grouping, ids: list[uuid.UUID]) -> dict[uuid.UUID, str]:
    """Display names of rounds ("Task · round N"), annotators, models or tasks, by id."""
    return StatsService._names(session, by, ids)
