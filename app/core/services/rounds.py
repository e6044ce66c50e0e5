"""Rounds: their target models, goal settings, contexts and prompts, and how contexts are served.

Only leads and owners change rounds. Annotators read a round's description and goal message.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from sqlalchemy import delete, func, select, update

from app.core.assist.types import AssistantMode
from app.core.domain import ExampleStatus, FooledRule, ModelFormat, Role, RoundStatus, utcnow
from app.core.errors import DynadeskError, ImportProblem, NotFound
from app.core.io.rows import csv_table, json_lines, read_text
from app.core.limits import record_problems
from app.core.services.models import ModelService
from app.core.services.tasks import TaskService
from app.core.storage.db import Database
from app.core.storage.models import Context, Example, ModelRecord, Person, Round, RoundModel, Task
from app.core.tasks import figures
from app.core.text import content_hash

LabelStart = Literal["blank", "fixed", "random"]
ContextPolicy = Literal["least_used", "random", "least_fooled"]
POLICIES: tuple[ContextPolicy, ...] = ("least_used", "random", "least_fooled")
MAX_CONTEXT_CHARS = 50_000


class RoundSettings(BaseModel):
    """What a round decides beyond its models: how the goal label starts, how contexts are served."""

    model_config = ConfigDict(extra="ignore")

    label_start: LabelStart = "blank"
    fixed_label: str | None = None
    keep_label_after_submit: bool = True
    context_policy: ContextPolicy = "least_used"
    context_tag: str | None = None  # serve only contexts with this tag
    # The writing assistant: off until a lead turns it on, so a round already running keeps the
    # conditions its figures were collected under (see app.core.assist.arms for A-B).
    assistant: AssistantMode = AssistantMode.OFF

    @model_validator(mode="after")
    def _fixed_needs_label(self) -> RoundSettings:
        if self.label_start == "fixed" and not self.fixed_label:
            raise ValueError("a fixed goal label needs 'fixed_label'")
        return self


@dataclass(frozen=True)
class RoundSummary:
    id: uuid.UUID
    task_code: str
    number: int
    status: str
    description: str
    goal_message: str
    fooled_rule: str
    settings: RoundSettings
    models: list[tuple[uuid.UUID, str, str]]  # id, name, sha256
    opened_at: object
    closed_at: object
    contexts: int
    examples: int  # written on desks (MER's denominator)
    fooled: int
    imported: int = 0  # imported data sets' examples, counted apart


@dataclass(frozen=True)
class ContextStats:
    id: uuid.UUID
    text: str
    tag: str
    source: str
    times_used: int
    examples: int
    fooled: int

    @property
    def fooling_rate(self) -> float | None:
        return figures.mer(self.fooled, self.examples)


@dataclass
class ContextImportReport:
    added: int = 0
    duplicates: int = 0
    problems: list[ImportProblem] | None = None

    def summary(self) -> str:
        text = f"Added {self.added} context(s); {self.duplicates} were already in the round."
        if self.problems:
            text += f" Skipped {len(self.problems)} empty or oversized line(s): " + "; ".join(
                str(p) for p in self.problems[:10])
        return text


class RoundService:
    def __init__(self, db: Database, tasks: TaskService, models: ModelService):
        self.db = db
        self.tasks = tasks
        self.models = models
        # Per (round, person): contexts not yet served in the current pass of a random policy.
        self._bags: dict[tuple[uuid.UUID, uuid.UUID], list[uuid.UUID]] = {}

    def settings(self, round_: Round) -> RoundSettings:
        return RoundSettings.model_validate(round_.settings or {})

    def summary(self, task_code: str, number: int | None = None) -> RoundSummary:
        """Round ``number`` of the task, or its latest round."""
        round_ = self.tasks.round(task_code, number) if number is not None else self._latest(task_code)
        return self.summary_by_id(round_.id)

    def summary_by_id(self, round_id: uuid.UUID) -> RoundSummary:
        round_ = self.tasks.round_by_id(round_id)
        task_code = self.tasks.task_code(round_.task_id)
        with self.db.read() as session:
            contexts = session.scalar(select(func.count()).where(Context.round_id == round_.id)) or 0
            examples, fooled, _validated, imported = session.execute(
                select(*figures.sql_counts(Example.model_fooled, Example.decided_verdict, Example.source))
                .where(Example.round_id == round_.id, figures.sql_in_figures(Example.status))
            ).one()
        models = [(m.id, m.name, m.sha256) for m in self.models.round_models(round_.id)]
        return RoundSummary(round_.id, task_code, round_.number, round_.status, round_.description,
                            round_.goal_message, round_.fooled_rule, self.settings(round_), models,
                            round_.opened_at, round_.closed_at, contexts, int(examples), int(fooled), int(imported))

    def target_candidates(self, task_code: str) -> list[ModelRecord]:
        """Models that can serve as this task's targets: runnable, and for this task or any."""
        task_id = self.tasks.task(task_code).id
        return [m for m in self.models.all() if m.format != ModelFormat.IMPORTED and m.task_id in (task_id, None)]

    def _latest(self, task_code: str) -> Round:
        rounds = self.tasks.rounds(task_code)
        if not rounds:
            raise NotFound(f"Task '{task_code}' has no rounds.")
        return rounds[-1]

    def context_stats(self, round_id: uuid.UUID, *, limit: int | None = None) -> list[ContextStats]:
        """Each context with how often it was served and how often it led to a fooling example."""
        submitted, fooled, _validated, _imported = figures.sql_counts(Example.model_fooled, Example.decided_verdict,
                                                                      Example.source)
        per_context = (
            select(Example.context_id.label("context_id"), submitted.label("examples"), fooled.label("fooled"))
            .where(Example.round_id == round_id, figures.sql_submitted(Example.status, Example.source),
                   Example.context_id.is_not(None))
            .group_by(Example.context_id)
            .subquery()
        )
        query = (
            select(Context.id, Context.text, Context.tag, Context.source, Context.times_used,
                   func.coalesce(per_context.c.examples, 0), func.coalesce(per_context.c.fooled, 0))
            .outerjoin(per_context, per_context.c.context_id == Context.id)
            .where(Context.round_id == round_id)
            .order_by(Context.times_used.desc(), Context.created_at)
        )
        if limit is not None:
            query = query.limit(limit)
        with self.db.read() as session:
            return [ContextStats(*row) for row in session.execute(query)]

    def _require_lead(self, session, person_id: uuid.UUID) -> Person:
        person = session.get(Person, person_id)
        if person is None:
            raise NotFound(f"There is no profile with id {person_id}.")
        if person.role not in (Role.LEAD, Role.OWNER):
            raise DynadeskError(f"Only leads and owners can change rounds; {person.display_name} is an {person.role}.")
        return person

    def update(self, round_id: uuid.UUID, by: uuid.UUID, *, description: str | None = None,
               goal_message: str | None = None, fooled_rule: FooledRule | str | None = None,
               settings: RoundSettings | None = None) -> Round:
        with self.db.write() as session:
            self._require_lead(session, by)
            round_ = self._round(session, round_id)
            if description is not None:
                round_.description = description.strip()
            if goal_message is not None:
                round_.goal_message = goal_message.strip()
            if fooled_rule is not None:
                round_.fooled_rule = FooledRule(fooled_rule).value
            if settings is not None:
                self._check_labels(round_, settings)
                round_.settings = settings.model_dump(mode="json")
            round_.bump()
            return round_

    def set_models(self, round_id: uuid.UUID, by: uuid.UUID, model_ids: Sequence[uuid.UUID]) -> None:
        """The round's target models, in order; two or more make an ensemble."""
        with self.db.write() as session:
            self._require_lead(session, by)
            round_ = self._round(session, round_id)
            if round_.status != RoundStatus.OPEN:
                raise DynadeskError(f"Round {round_.number} is closed; its target models are part of its record.")
            self._require_models(session, model_ids)
            session.execute(delete(RoundModel).where(RoundModel.round_id == round_id))
            session.add_all(RoundModel(round_id=round_id, model_id=m, position=i) for i, m in enumerate(model_ids))
            round_.bump()

    def replace_target(self, round_id: uuid.UUID, old: uuid.UUID, new: uuid.UUID) -> bool:
        """An open round served by ``old`` (a promoted candidate's fp32 form) takes ``new`` (the same
        model's int8 form) in its place, at the same position. A round that no longer has ``old`` (a lead
        changed it, a sync brought another target) or that closed meanwhile is left alone."""
        with self.db.write() as session:
            round_ = self._round(session, round_id)
            if round_.status != RoundStatus.OPEN:
                return False
            rows = list(session.scalars(select(RoundModel).where(RoundModel.round_id == round_id)
                                        .order_by(RoundModel.position)))
            ids = [r.model_id for r in rows]
            if old not in ids or new in ids:
                return False
            self._require_models(session, [new])
            order = [new if m == old else m for m in ids]
            session.execute(delete(RoundModel).where(RoundModel.round_id == round_id))
            session.flush()
            session.add_all(RoundModel(round_id=round_id, model_id=m, position=i) for i, m in enumerate(order))
            round_.bump()
            return True

    def untouched_first_round(self, task_code: str) -> Round | None:
        """Round 1 of the task as the desk created it (open, never changed, no models), if it is so."""
        with self.db.read() as session:
            return self._untouched_first_round(session, task_code)

    def adopt_first_models(self, task_code: str, model_ids: Sequence[uuid.UUID]) -> bool:
        """First start: untouched round 1 takes these target models. A round a lead has changed
        (even by removing its models) is left alone, so this never overrides a decision."""
        with self.db.write() as session:
            round_ = self._untouched_first_round(session, task_code)
            if round_ is None:
                return False
            self._require_models(session, model_ids)
            session.add_all(RoundModel(round_id=round_.id, model_id=m, position=i) for i, m in enumerate(model_ids))
            round_.bump()
            return True

    def first_stand_in(self, task_code: str) -> uuid.UUID | None:
        """The one target model of round 1 as the first start left it (adopted, changed by nobody
        since): the stand-in that ``replace_first_stand_in`` may swap for a faster form."""
        with self.db.read() as session:
            round_ = self._first_round_as_adopted(session, task_code)
            if round_ is None:
                return None
            targets = list(session.scalars(select(RoundModel.model_id).where(RoundModel.round_id == round_.id)))
            return targets[0] if len(targets) == 1 else None

    def replace_first_stand_in(self, task_code: str, stand_in: uuid.UUID, model_id: uuid.UUID) -> bool:
        """First start, later: round 1 served by ``stand_in`` (the model's PyTorch form, adopted so
        that it answered at once) takes ``model_id`` (the same model's faster form) instead. A round
        that anyone changed since (a lead, a sync from the team's server) is left alone."""
        with self.db.write() as session:
            round_ = self._first_round_as_adopted(session, task_code)
            if round_ is None:
                return False
            targets = list(session.scalars(select(RoundModel.model_id).where(RoundModel.round_id == round_.id)))
            if targets != [stand_in]:
                return False
            self._require_models(session, [model_id])
            session.execute(delete(RoundModel).where(RoundModel.round_id == round_.id))
            session.add(RoundModel(round_id=round_.id, model_id=model_id, position=0))
            round_.bump()
            return True

    @staticmethod
    def _first_round(session, task_code: str) -> Round | None:
        return session.scalar(select(Round).join(Task, Task.id == Round.task_id)
                              .where(Task.code == task_code, Round.number == 1))

    @classmethod
    def _first_round_as_adopted(cls, session, task_code: str) -> Round | None:
        round_ = cls._first_round(session, task_code)
        # adopt_first_models took it from revision 1 to 2; any later change bumps it again
        if round_ is None or round_.status != RoundStatus.OPEN or round_.revision != 2:
            return None
        return round_

    @classmethod
    def _untouched_first_round(cls, session, task_code: str) -> Round | None:
        round_ = cls._first_round(session, task_code)
        if round_ is None or round_.status != RoundStatus.OPEN or round_.revision != 1:
            return None
        if session.scalar(select(RoundModel.model_id).where(RoundModel.round_id == round_.id).limit(1)):
            return None
        return round_

    def close(self, round_id: uuid.UUID, by: uuid.UUID) -> Round:
        with self.db.write() as session:
            self._require_lead(session, by)
            round_ = self._round(session, round_id)
            if round_.status == RoundStatus.CLOSED:
                raise DynadeskError(f"Round {round_.number} is already closed.")
            round_.status = RoundStatus.CLOSED.value
            round_.closed_at = utcnow()
            round_.bump()
            return round_

    def open_next(self, task_code: str, by: uuid.UUID, model_ids: Sequence[uuid.UUID], *,
                  description: str | None = None, goal_message: str | None = None,
                  close_previous: bool = True) -> Round:
        """Open round N+1 with new target models, copying the previous round's settings.

        Earlier rounds and their data stay as they are, available for evaluation.
        """
        if not model_ids:
            raise DynadeskError("A new round needs at least one target model.")
        task = self.tasks.task(task_code)
        with self.db.write() as session:
            self._require_lead(session, by)
            previous = session.scalar(select(Round).where(Round.task_id == task.id).order_by(Round.number.desc()))
            number = previous.number + 1 if previous else 1
            new = Round(
                task_id=task.id,
                number=number,
                description=description if description is not None else f"{task.name}: round {number}",
                goal_message=goal_message if goal_message is not None else (previous.goal_message if previous else ""),
                fooled_rule=previous.fooled_rule if previous else FooledRule.MEAN.value,
                settings=dict(previous.settings) if previous else {},
            )
            self._require_models(session, model_ids)
            session.add(new)
            session.flush()
            for position, model_id in enumerate(model_ids):
                session.add(RoundModel(round_id=new.id, model_id=model_id, position=position))
            if close_previous and previous is not None and previous.status == RoundStatus.OPEN:
                previous.status = RoundStatus.CLOSED.value
                previous.closed_at = utcnow()
                previous.bump()
            return new

    def _check_labels(self, round_: Round, settings: RoundSettings) -> None:
        definition = self.tasks.definition(round_.task_id)
        if settings.fixed_label and settings.fixed_label not in definition.labels:
            raise DynadeskError(f"'{settings.fixed_label}' is not a label of this task ({', '.join(definition.labels)}).")
        if settings.label_start != "blank" and definition.is_extractive:
            raise DynadeskError("Extractive tasks have no goal label to start from.")

    @staticmethod
    def _require_models(session, model_ids: Sequence[uuid.UUID]) -> None:
        if len(set(model_ids)) != len(model_ids):
            raise DynadeskError("A model can appear only once in a round's ensemble.")
        for model_id in model_ids:
            if session.get(ModelRecord, model_id) is None:
                raise NotFound(f"There is no registered model with id {model_id}.")

    @staticmethod
    def _round(session, round_id: uuid.UUID) -> Round:
        round_ = session.get(Round, round_id)
        if round_ is None:
            raise NotFound(f"There is no round with id {round_id}.")
        return round_

    def import_contexts(self, round_id: uuid.UUID, by: uuid.UUID, path: str | Path, *, format: str | None = None,
                        column: str | None = None, tag: str = "") -> ContextImportReport:
        """Contexts from a text file (one per line), a CSV column, or JSONL ({"text", "tag", ...} or strings)."""
        path = Path(path)
        format = format or {".csv": "csv", ".jsonl": "jsonl", ".json": "jsonl"}.get(path.suffix.lower(), "txt")
        rows = list(self._context_rows(path, format, column, tag))
        skipped: list[ImportProblem] = []
        report = ContextImportReport(problems=skipped)
        with self.db.write() as session:
            self._require_lead(session, by)
            self._round(session, round_id)
            existing = set(session.scalars(select(Context.content_hash).where(Context.round_id == round_id)))
            for line, text, row_tag, data in rows:
                text = text.strip()
                if not text or len(text) > MAX_CONTEXT_CHARS:
                    skipped.append(ImportProblem(line, "empty" if not text else f"longer than {MAX_CONTEXT_CHARS:,} characters"))
                    continue
                problems = record_problems("context", {"data": data})
                if problems:  # no server would take the context when its round is published
                    skipped.append(ImportProblem(line, "; ".join(problems)))
                    continue
                digest = content_hash(text)
                if digest in existing:
                    report.duplicates += 1
                    continue
                existing.add(digest)
                session.add(Context(round_id=round_id, text=text, data=data, tag=row_tag[:200],
                                    source=f"{path.name}:{line}"[:500], content_hash=digest))
                report.added += 1
        return report

    def _context_rows(self, path: Path, format: str, column: str | None, tag: str):
        text = read_text(path)
        if format == "txt":
            for line, raw in enumerate(text.splitlines(), start=1):
                yield line, raw, tag, None
        elif format == "csv":
            columns, rows = csv_table(text)
            if column not in columns:
                raise DynadeskError(f"{path}: choose the column that holds the contexts with --column "
                                    f"(one of: {', '.join(columns) or 'no columns found'}).")
            for line, row in rows:
                if isinstance(row, ImportProblem):
                    raise DynadeskError(f"{path}, {row}.")
                yield line, row[column], tag, None
        elif format == "jsonl":
            for line, item in json_lines(text):
                if isinstance(item, ImportProblem):
                    raise DynadeskError(f"{path}, {item}.")
                if isinstance(item, str):
                    yield line, item, tag, None
                elif isinstance(item, dict) and isinstance(item.get(column or "text"), str):
                    data = {k: v for k, v in item.items() if k not in (column or "text", "tag")} or None
                    yield line, item[column or "text"], str(item.get("tag") or tag), data
                else:
                    raise DynadeskError(f"{path}, line {line}: expected a string or an object with a '{column or 'text'}' field.")
        else:
            raise DynadeskError(f"Unknown context format '{format}'; use txt, csv or jsonl.")

    def next_context(self, round_id: uuid.UUID, person_id: uuid.UUID, *, policy: ContextPolicy | None = None,
                     tag: str | None = None, rng: random.Random | None = None) -> Context | None:
        """Serve the next context under the round's policy, and count the serve.

        Serves are counted (not only submissions), and ties are broken at random, so that
        skipping never brings the same handful back: a long session sees the whole pool.
        """
        rng = rng or random.Random()
        with self.db.write() as session:
            round_ = self._round(session, round_id)
            settings = self.settings(round_)
            policy = policy or settings.context_policy
            tag = tag if tag is not None else settings.context_tag
            if policy not in POLICIES:
                raise DynadeskError(f"Unknown context policy '{policy}'; choose one of {', '.join(POLICIES)}.")
            pool = select(Context.id).where(Context.round_id == round_id)
            if tag:
                pool = pool.where(Context.tag == tag)
            if policy == "random":
                chosen = self._from_bag(session, (round_id, person_id), list(session.scalars(pool)), rng)
            else:
                candidates = self._ranked(session, round_id, pool, policy)
                chosen = rng.choice(candidates) if candidates else None
            if chosen is None:
                return None
            session.execute(update(Context).where(Context.id == chosen).values(times_used=Context.times_used + 1))
            context = session.get(Context, chosen)
            session.refresh(context)
            return context

    def _ranked(self, session, round_id: uuid.UUID, pool, policy: ContextPolicy) -> list[uuid.UUID]:
        """The contexts that tie for first place under the policy."""
        if policy == "least_used":
            least = session.scalar(select(func.min(Context.times_used)).where(Context.id.in_(pool)))
            return list(session.scalars(pool.where(Context.times_used == least)))
        # least fooled: the lowest share of fooling examples so far; never-used contexts count as 0
        stats = session.execute(
            select(Context.id, Context.times_used,
                   figures.sql_total(figures.sql_fooling(Example.model_fooled)), func.count(Example.id))
            .outerjoin(Example, (Example.context_id == Context.id) & figures.sql_submitted(Example.status, Example.source))
            .where(Context.id.in_(pool))
            .group_by(Context.id)
        ).all()
        if not stats:
            return []
        keyed = [(figures.mer(fooled, count) or 0.0, used, context_id) for context_id, used, fooled, count in stats]
        best = min((rate, used) for rate, used, _ in keyed)
        return [context_id for rate, used, context_id in keyed if (rate, used) == best]

    def _from_bag(self, session, key, pool: list[uuid.UUID], rng: random.Random) -> uuid.UUID | None:
        """Uniform random without replacement: every context once per pass, in random order."""
        if not pool:
            return None
        available = set(pool)
        bag = [c for c in self._bags.get(key, []) if c in available]
        if not bag:
            bag = list(pool)
            rng.shuffle(bag)
        chosen = bag.pop()
        self._bags[key] = bag
        return chosen

    def starting_label(self, round_id: uuid.UUID, person_id: uuid.UUID, *, previous: str | None = None,
                       after_submit: bool = False, rng: random.Random | None = None) -> str | None:
        """The goal label a new example starts with, under the round's label-start setting.

        A random start picks among the labels this person has written least in this round,
        which balances labels as Dynabench did. After a submit the previous choice is kept
        unless the round says otherwise.
        """
        round_ = self.tasks.round_by_id(round_id)
        settings = self.settings(round_)
        if after_submit and settings.keep_label_after_submit and previous is not None:
            return previous
        if settings.label_start == "blank":
            return None
        if settings.label_start == "fixed":
            return settings.fixed_label
        labels = self.tasks.definition(round_.task_id).labels
        with self.db.read() as session:
            written = dict(session.execute(
                select(Example.true_label, func.count())
                .where(Example.round_id == round_id, Example.author_id == person_id,
                       Example.status != ExampleStatus.DRAFT.value)
                .group_by(Example.true_label)
            ).all())
        fewest = min(written.get(label, 0) for label in labels)
        return (rng or random.Random()).choice([label for label in labels if written.get(label, 0) == fewest])


def parse_settings(data: dict) -> RoundSettings:
    try:
        return RoundSettings.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise DynadeskError(f"Round setting '{'.'.join(map(str, first['loc'])) or 'settings'}': {first['msg']}") from exc
