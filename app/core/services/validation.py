"""Validation: verdicts under the task's rules, decisions, and the queue of examples to validate."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Mapping, Sequence

from sqlalchemy import exists, func, or_, select, text
from sqlalchemy.orm import Session, selectinload

from app.core.domain import ExampleStatus, Role, SyncState, ValidationMode, ValidationState, Verdict
from app.core.errors import NotFound, ValidationRuleError
from app.core.services.review import ROWID
from app.core.services.tasks import TaskService
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import QUEUE_CONDITION, Example, Person, Validation
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.verdicts import summarise_on_desk
from app.core.wellbeing.opt_outs import targets_opted_out

# Examples in these states can be validated; drafts and retracted examples cannot.
VALIDATABLE = (ExampleStatus.SUBMITTED.value, ExampleStatus.FLAGGED.value)

# A validator's opt-outs: task code -> target groups they are not served (``WellbeingProfile.opted_out_groups``).
OptOuts = Mapping[str, Collection[str]]


class ValidationService:
    def __init__(self, db: Database, tasks: TaskService):
        self.db = db
        self.tasks = tasks

    def validate(
        self,
        example_id: uuid.UUID,
        validator_id: uuid.UUID,
        verdict: Verdict | str,
        *,
        corrected_label: str | None = None,
        reason: str | None = None,
        model_note: str | None = None,
        mode: ValidationMode | str = ValidationMode.PEER,
        time_spent_ms: int = 0,
    ) -> Validation:
        verdict, mode = Verdict(verdict), ValidationMode(mode)
        reason = (reason or "").strip() or None
        corrected_label = (corrected_label or "").strip() or None
        with self.db.write() as session:
            example = session.get(Example, example_id)
            if example is None:
                raise NotFound(f"There is no example with id {example_id}.")
            validator = session.get(Person, validator_id)
            if validator is None:
                raise NotFound(f"There is no profile with id {validator_id}.")
            definition = self.tasks.definition(example.task_id)
            self._check(session, definition, example, validator, verdict, corrected_label, reason, mode)
            validation = Validation(
                example_id=example.id,
                validator_id=validator.id,
                verdict=verdict.value,
                corrected_label=corrected_label if verdict == Verdict.INCORRECT else None,
                reason=reason,
                model_note=(model_note or "").strip() or None,
                mode=mode.value,
                time_spent_ms=max(0, int(time_spent_ms)),
                sync_state=SyncState.PENDING.value,
            )
            session.add(validation)
            session.flush()
            summarise_on_desk(example, example.validations, self.tasks.agreement_threshold(example.task_id))
            outbox.enqueue(session, validation)  # same unit of work as the verdict
            return validation

    @staticmethod
    def _check(session, definition: TaskDefinition, example, validator, verdict, corrected_label, reason, mode) -> None:
        if example.status not in VALIDATABLE:
            raise ValidationRuleError(f"A {example.status} example cannot be validated.")
        if example.author_id == validator.id:
            raise ValidationRuleError("Nobody validates their own example.")
        if mode == ValidationMode.LEAD and validator.role not in (Role.LEAD, Role.OWNER):
            raise ValidationRuleError("Only team leads and owners can adjudicate.")
        already = session.scalar(
            select(Validation.id).where(
                Validation.example_id == example.id, Validation.validator_id == validator.id, Validation.mode == mode.value
            )
        )
        if already:
            raise ValidationRuleError("You have already validated this example.")
        if mode == ValidationMode.PEER and example.validation_state == ValidationState.DECIDED:
            raise ValidationRuleError("This example is already decided; it needs no more validations.")
        if verdict == Verdict.INCORRECT:
            if not corrected_label:
                raise ValidationRuleError("An 'incorrect' verdict needs the corrected label.")
            if definition.labels and corrected_label not in definition.labels:
                raise ValidationRuleError(f"The corrected label must be one of: {', '.join(definition.labels)}.")
            if corrected_label == (example.true_label if definition.labels else (example.answer or {}).get("text")):
                raise ValidationRuleError("The corrected label is the same as the author's; choose 'correct' instead.")
            if not reason:
                raise ValidationRuleError("An 'incorrect' verdict needs an explanation.")
        if verdict == Verdict.FLAGGED and not reason:
            raise ValidationRuleError("A flag needs a reason.")

    def queue_query(self, validator_id: uuid.UUID, *, task_id: uuid.UUID | None = None, round_id: uuid.UUID | None = None,
                    opted_out: OptOuts | None = None, only_opted_out: bool = False):
        """Examples this person may validate: model-fooling first, then the least validated,
        then the oldest. Runs off the partial index ``ix_examples_queue``. ``opted_out``: the
        target groups the person is not served, per task code; ``only_opted_out``: the examples
        those opt-outs hold back instead."""
        mine = exists().where(
            Validation.example_id == Example.id,
            Validation.validator_id == validator_id,
            Validation.mode == ValidationMode.PEER.value,
        )
        held_back = targets_opted_out(self._opt_out_ids(opted_out))
        query = select(Example).where(text(QUEUE_CONDITION), Example.author_id != validator_id, ~mine,
                                      *self._rule_conditions(task_id, round_id),
                                      held_back if only_opted_out else ~held_back)
        return query.order_by(Example.model_fooled.desc(), Example.validation_count, Example.submitted_at, ROWID)

    def _opt_out_ids(self, opted_out: OptOuts | None) -> dict[uuid.UUID, Collection[str]]:
        """Opt-outs by task id; a task this desk does not hold has nothing to hold back."""
        known = {task.code: task.id for task in self.tasks.tasks()} if opted_out else {}
        return {known[code]: groups for code, groups in (opted_out or {}).items() if code in known and groups}

    def queue(self, validator_id: uuid.UUID, *, task_code: str | None = None, round_id: uuid.UUID | None = None,
              limit: int = 20, opted_out: OptOuts | None = None) -> list[Example]:
        task_id = self.tasks.task(task_code).id if task_code else None
        with self.db.read() as session:
            return list(session.scalars(self.queue_query(validator_id, task_id=task_id, round_id=round_id,
                                                         opted_out=opted_out).limit(limit)))

    def next_for(self, validator_id: uuid.UUID, *, task_code: str | None = None, round_id: uuid.UUID | None = None,
                 skip: Sequence[uuid.UUID] = (), opted_out: OptOuts | None = None) -> Example | None:
        """The next example to validate, passing over those skipped in this sitting and those
        targeting a group the person opted out of. Once only skipped examples are left, they come
        round again: skipping never empties the queue."""
        task_id = self.tasks.task(task_code).id if task_code else None
        with self.db.read() as session:
            query = self.queue_query(validator_id, task_id=task_id, round_id=round_id, opted_out=opted_out)
            if skip:
                fresh = session.scalars(query.where(Example.id.not_in(list(skip))).limit(1)).first()
                if fresh is not None:
                    return fresh
            return session.scalars(query.limit(1)).first()

    def held_back(self, validator_id: uuid.UUID, opted_out: OptOuts | None, *, task_code: str | None = None,
                  round_id: uuid.UUID | None = None) -> int:
        """How many examples the person could validate but is not served, for their opt-outs."""
        if not self._opt_out_ids(opted_out):
            return 0
        task_id = self.tasks.task(task_code).id if task_code else None
        query = self.queue_query(validator_id, task_id=task_id, round_id=round_id, opted_out=opted_out,
                                 only_opted_out=True).order_by(None)
        with self.db.read() as session:
            return session.scalar(select(func.count()).select_from(query.with_only_columns(Example.id).subquery())) or 0

    def remaining(self, validator_id: uuid.UUID, *, task_code: str | None = None,
                  round_id: uuid.UUID | None = None, opted_out: OptOuts | None = None) -> int:
        """How many examples this person may still validate (served to them: less those their
        opt-outs hold back)."""
        if opted_out and self._opt_out_ids(opted_out):
            return (self.remaining(validator_id, task_code=task_code, round_id=round_id)
                    - self.held_back(validator_id, opted_out, task_code=task_code, round_id=round_id))
        # Counted as (undecided) − (mine to write) − (already validated by me): each part runs off an
        # index, where counting the queue itself tests "not validated by me" row by row (~300 ms at 100k).
        task_id = self.tasks.task(task_code).id if task_code else None
        conditions = [text(QUEUE_CONDITION), *self._rule_conditions(task_id, round_id)]
        with self.db.read() as session:
            undecided = session.scalar(select(func.count()).select_from(Example).where(*conditions))
            own = session.scalar(select(func.count()).select_from(Example)
                                 .where(*conditions, Example.author_id == validator_id))
            done = session.scalar(
                select(func.count()).select_from(Validation).join(Example, Example.id == Validation.example_id)
                .where(Validation.validator_id == validator_id, Validation.mode == ValidationMode.PEER.value,
                       Example.author_id != validator_id, *conditions))
            return (undecided or 0) - (own or 0) - (done or 0)  # counts: never None

    def _rule_conditions(self, task_id: uuid.UUID | None, round_id: uuid.UUID | None) -> list:
        """The task rules and choices that narrow the queue (besides person and decision)."""
        conditions = []
        fooling_only = [task.id for task in self.tasks.tasks()
                        if not self.tasks.definition(task.id).validate_non_fooling]
        if fooling_only:
            conditions.append(or_(Example.task_id.not_in(fooling_only), Example.model_fooled.is_not(False)))
        if task_id is not None:
            conditions.append(Example.task_id == task_id)
        if round_id is not None:
            conditions.append(Example.round_id == round_id)
        return conditions

    def validations_of(self, example_id: uuid.UUID) -> list[Validation]:
        with self.db.read() as session:
            return list(session.scalars(select(Validation).where(Validation.example_id == example_id)
                                        .order_by(Validation.created_at)))

    def resummarise(self, session: Session, example: Example) -> None:
        """Recompute the summary after verdicts arrived from elsewhere (imports, sync)."""
        summarise_on_desk(example, list(example.validations), self.tasks.agreement_threshold(example.task_id))

    def resummarise_task(self, task_id: uuid.UUID) -> int:
        """Recompute every validated example of a task (its threshold changed); returns how many
        are decided now."""
        threshold = self.tasks.agreement_threshold(task_id)
        with self.db.write() as session:
            examples = session.scalars(select(Example).where(Example.task_id == task_id,
                                                             Example.validation_count > 0)
                                       .options(selectinload(Example.validations)))
            decided = 0
            for example in examples:
                summarise_on_desk(example, list(example.validations), threshold)
                decided += example.validation_state == ValidationState.DECIDED.value
            return decided


def threshold_warning(threshold: int, team_size: int) -> str | None:
    """Why no example can be decided by its validators, or None: nobody validates their own example,
    so at most ``team_size - 1`` peer verdicts can match."""
    others = max(0, team_size - 1)
    if others >= threshold:
        return None
    return (f"A decision needs {threshold} matching verdicts, but with {team_size} "
            f"{'person' if team_size == 1 else 'people'} on this desk's team at most {others} can validate an "
            f"example (nobody validates their own): only a lead's verdict decides. A lead can lower the number "
            f"in the Review tab (Matching verdicts to decide).")
