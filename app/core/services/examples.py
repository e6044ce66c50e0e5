"""Writing examples: drafts, submission with every target model's output, retraction, flags,
and perturbations linked to their originals."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, selectinload

from app.core.assist.provenance import assistance_record, at_submit, check_assistance, distance_bound, read_assistance
from app.core.assist.types import Assistance
from app.core.domain import ExampleStatus, FooledRule, ModelOutput, RoundStatus, Span, SyncState, utcnow
from app.core.errors import InvalidExample, NotFound
from app.core.limits import record_problems
from app.core.services.tasks import TaskService
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import Context, Example, ExampleFacet, ModelOutputRow, ModelRecord, Person, Round
from app.core.tasks.content import Content, check_content, facet_values, written_text
from app.core.tasks.fooling import is_fooled
from app.core.text import word_edits

# A draft may hold more than a submission allows (the annotator is still cutting it down),
# but not without bound.
DRAFT_MAX_CHARS = 1_000_000

_UNSET: Any = object()


def _stored(assistance: Assistance | None) -> dict[str, Any] | None:
    return None if assistance is None else assistance_record(check_assistance(assistance))


class ExampleService:
    def __init__(self, db: Database, tasks: TaskService):
        self.db = db
        self.tasks = tasks

    def start_draft(
        self,
        author_id: uuid.UUID,
        task_code: str,
        round_number: int | None = None,
        *,
        context_id: uuid.UUID | None = None,
        perturbation_of: uuid.UUID | None = None,
        origin: dict | None = None,
        content: Content | None = None,
        assistance: Assistance | None = None,
    ) -> Example:
        """A new draft. A perturbation starts as a copy of its original's inputs and label.
        ``assistance``: the writing session's arm (and any suggestion applied so far)."""
        task = self.tasks.task(task_code)
        definition = self.tasks.definition(task.id)
        round_ = self.tasks.round(task_code, round_number)
        content = content or Content()
        with self.db.write() as session:
            self._require_person(session, author_id)
            inputs = dict(content.inputs)
            true_label = content.true_label
            answer = content.answer
            chosen_context = context_id
            if perturbation_of is not None:
                parent = self._submitted(session, perturbation_of)
                inputs = inputs or dict(parent.inputs)
                true_label = true_label or parent.true_label
                answer = answer or Span.from_json(parent.answer)
                context_id = context_id or parent.context_id
                origin = origin or {"kind": "perturbation", "of": str(parent.id)}
            if context_id is not None:
                context = session.get(Context, context_id)
                # A chosen context must belong to this round; an original's context may be older.
                if context is None or (chosen_context is not None and context.round_id != round_.id):
                    raise NotFound(f"There is no context with id {context_id} in round {round_.number}.")
                if definition.context_inputs:
                    for spec in definition.context_inputs:
                        inputs.setdefault(spec.name, context.text)
                else:
                    # The prompt condition: the annotator starts from the sentence and edits it.
                    inputs.setdefault(definition.written_inputs[0].name, context.text)
                    origin = origin or {"kind": "prompt", "context_id": str(context.id), "text": context.text}
            draft = Example(
                task_id=task.id,
                round_id=round_.id,
                context_id=context_id,
                author_id=author_id,
                inputs=self._draft_inputs(inputs),
                text=written_text(definition, inputs),
                true_label=true_label,
                answer=answer.to_json() if answer else None,
                meta=dict(content.meta),
                origin=origin or {"kind": "scratch"},
                perturbation_of=perturbation_of,
                assistance=_stored(assistance),
                status=ExampleStatus.DRAFT.value,
                sync_state=SyncState.LOCAL.value,
                fooled_rule=round_.fooled_rule,
            )
            session.add(draft)
            session.flush()
            return draft

    def save_draft(
        self,
        draft_id: uuid.UUID,
        *,
        inputs: dict[str, str] | None = None,
        true_label: str | None = _UNSET,
        answer: Span | None = _UNSET,
        meta: dict[str, Any] | None = None,
        time_spent_ms: int | None = None,
        assistance: Assistance | None = _UNSET,
    ) -> Example:
        """Autosave: store what the editor holds now, exactly as typed, with the assistant's record
        (the suggestion applied, if any, so that its edit distance can be measured at submit)."""
        stored = _stored(assistance) if assistance is not _UNSET else None
        with self.db.write() as session:
            draft = self._draft(session, draft_id)
            if inputs is not None:
                definition = self.tasks.definition(draft.task_id)
                draft.inputs = self._draft_inputs(inputs)
                draft.text = written_text(definition, inputs)
            if true_label is not _UNSET:
                draft.true_label = true_label
            if answer is not _UNSET:
                draft.answer = answer.to_json() if answer else None
            if meta is not None:
                draft.meta = dict(meta)
            if time_spent_ms is not None:
                draft.time_spent_ms = max(0, int(time_spent_ms))
            if assistance is not _UNSET:
                draft.assistance = stored
            return draft

    def drafts(self, author_id: uuid.UUID) -> list[Example]:
        """Unfinished examples of this person, newest first: what to offer back after a crash."""
        with self.db.read() as session:
            return list(
                session.scalars(
                    select(Example)
                    .where(Example.author_id == author_id, Example.status == ExampleStatus.DRAFT.value)
                    .order_by(Example.updated_at.desc())
                )
            )

    def move_draft(self, draft_id: uuid.UUID, round_number: int) -> Example:
        """Move a draft written in a round that has since closed to an open round of its task,
        keeping its text, label and metadata; its context, if any, stays as its provenance."""
        with self.db.write() as session:
            draft = self._draft(session, draft_id)
            round_ = session.scalar(select(Round).where(Round.task_id == draft.task_id, Round.number == round_number))
            if round_ is None or round_.status != RoundStatus.OPEN:
                raise InvalidExample(f"Round {round_number} is not open; a draft can only move to an open round.")
            draft.round_id = round_.id
            draft.fooled_rule = round_.fooled_rule
            return draft

    def give_draft(self, draft_id: uuid.UUID, author_id: uuid.UUID) -> Example:
        """The desk now works as another profile of the same writer (the sync token's holder): the
        draft on screen becomes theirs, so that it is offered to them and, once stored, synced."""
        with self.db.write() as session:
            self._require_person(session, author_id)
            draft = self._draft(session, draft_id)
            draft.author_id = author_id
            return draft

    def discard_draft(self, draft_id: uuid.UUID) -> None:
        with self.db.write() as session:
            session.delete(self._draft(session, draft_id))

    def submit(
        self,
        draft_id: uuid.UUID,
        outputs: Sequence[ModelOutput],
        content: Content | None = None,
        *,
        time_spent_ms: int | None = None,
        assistance: Assistance | None = _UNSET,
    ) -> Example:
        """Turn a draft into a submitted example, with every target model's output.

        ``content`` replaces what the draft holds (the editor's latest state); without it the
        draft's own content is submitted. ``assistance`` likewise replaces the draft's record (None
        clears it); with a suggestion applied, its word edit distance to the submitted text is
        measured here.
        """
        if assistance is not _UNSET and assistance is not None:
            check_assistance(assistance)
        with self.db.write() as session:
            draft = self._draft(session, draft_id)
            if content is None:
                content = Content(dict(draft.inputs), draft.true_label, Span.from_json(draft.answer), dict(draft.meta))
            if time_spent_ms is not None:
                draft.time_spent_ms = max(0, int(time_spent_ms))
            if assistance is not _UNSET:
                draft.assistance = _stored(assistance)
            self._finish(session, draft, content, outputs)
            return draft

    def create(
        self,
        author_id: uuid.UUID,
        task_code: str,
        content: Content,
        outputs: Sequence[ModelOutput] = (),
        *,
        round_number: int | None = None,
        context_id: uuid.UUID | None = None,
        perturbation_of: uuid.UUID | None = None,
        time_spent_ms: int = 0,
        origin: dict | None = None,
        assistance: Assistance | None = None,
    ) -> Example:
        """Create and submit an example in one unit of work (``assistance`` as for :meth:`submit`)."""
        stored = _stored(assistance)
        task = self.tasks.task(task_code)
        round_ = self.tasks.round(task_code, round_number)
        with self.db.write() as session:
            self._require_person(session, author_id)
            example = Example(
                task_id=task.id,
                round_id=round_.id,
                context_id=context_id,
                author_id=author_id,
                perturbation_of=perturbation_of,
                time_spent_ms=max(0, int(time_spent_ms)),
                origin=origin or {"kind": "scratch"},
                assistance=stored,
                status=ExampleStatus.DRAFT.value,
            )
            session.add(example)
            self._finish(session, example, content, outputs)
            return example

    def create_generated(self, author_id: uuid.UUID, task_code: str,
                         items: Sequence[tuple[Content, Sequence[ModelOutput], dict[str, Any]]], *,
                         source: str, round_number: int | None = None) -> list[Example]:
        """Submit examples the desk generated (``items``: content, the target's outputs, origin) in one unit
        of work, under ``source`` (not written: ``tasks.figures.is_written``); metadata the task requires of a
        writer is not required of them. All are stored or none (``InvalidExample`` naming the first refused)."""
        task = self.tasks.task(task_code)
        round_ = self.tasks.round(task_code, round_number)
        out: list[Example] = []
        definition = self.tasks.definition(task.id)
        with self.db.write() as session:
            self._require_person(session, author_id)
            for _, outputs, _ in items:
                if len({o.model_id for o in outputs}) != len(outputs):
                    raise InvalidExample("Each target model may give only one output per example.")
            self._check_models(session, list({o.model_id: o for _, outputs, _ in items for o in outputs}.values()))
            for content, outputs, origin in items:
                example = Example(id=uuid.uuid4(), task_id=task.id, round_id=round_.id, author_id=author_id,
                                  origin=dict(origin), source=source, status=ExampleStatus.DRAFT.value)
                session.add(example)
                self._fill(session, example, content, outputs, require_metadata=False, models_checked=True)
                session.add_all(ExampleFacet.rows_for(example.id, facet_values(definition, example.meta)))
                out.append(example)
            for example in out:
                problems = record_problems("example", example)
                if problems:
                    raise InvalidExample(f"A generated example cannot be sent: {'; '.join(problems)}.")
            outbox.enqueue_all(session, out)  # one unit of work: stored means queued for sync
        return out

    def _finish(self, session: Session, example: Example, content: Content, outputs: Sequence[ModelOutput]) -> None:
        self._fill(session, example, content, outputs)
        session.flush()
        session.execute(delete(ExampleFacet).where(ExampleFacet.example_id == example.id))
        session.add_all(ExampleFacet.rows_for(example.id, facet_values(self.tasks.definition(example.task_id),
                                                                       example.meta)))
        outbox.enqueue(session, example)  # same unit of work: submitted means queued for sync

    def _fill(self, session: Session, example: Example, content: Content, outputs: Sequence[ModelOutput], *,
              require_metadata: bool = True, models_checked: bool = False) -> None:
        """Everything a submission sets on the example (content checked, outputs, "fooled", status)."""
        definition = self.tasks.definition(example.task_id)
        round_ = session.get_one(Round, example.round_id)
        if round_.status != RoundStatus.OPEN:
            raise InvalidExample(f"Round {round_.number} is closed; examples can no longer be submitted to it.")
        checked = check_content(definition, content, require_metadata=require_metadata)
        if example.perturbation_of is not None:
            parent = self._submitted(session, example.perturbation_of)
            ops, distance = word_edits(parent.text, written_text(definition, checked.inputs))
            if distance == 0:
                raise InvalidExample("The perturbation is identical to its original; edit at least one word.")
            example.edit_ops = [op.to_json() for op in ops]
            example.edit_distance = distance
        rule = FooledRule(round_.fooled_rule)
        if not models_checked:
            self._check_models(session, outputs)
        example.inputs = checked.inputs
        example.text = written_text(definition, checked.inputs)
        example.true_label = checked.true_label
        example.answer = checked.answer.to_json() if checked.answer else None
        example.meta = checked.meta
        if example.assistance is not None:
            example.assistance = assistance_record(at_submit(read_assistance(example.assistance) or Assistance(),
                                                             example.text, max_chars=distance_bound(definition)))
        example.fooled_rule = rule.value
        example.model_fooled = is_fooled(definition, outputs, checked.true_label, checked.answer, rule)
        example.outputs = [
            ModelOutputRow(
                model_id=out.model_id,
                position=position,
                model_sha256=out.model_sha256,
                label=out.label,
                probabilities=dict(out.probabilities),
                latency_ms=out.latency_ms,
                answer=out.answer.to_json() if out.answer else None,
                fooled=is_fooled(definition, [out], checked.true_label, checked.answer),
            )
            for position, out in enumerate(outputs)
        ]
        example.status = ExampleStatus.SUBMITTED.value
        example.sync_state = SyncState.PENDING.value
        example.submitted_at = utcnow()

    def retract(self, example_id: uuid.UUID, person_id: uuid.UUID, reason: str | None = None) -> Example:
        return self._author_transition(example_id, person_id, ExampleStatus.RETRACTED, reason,
                                       allowed_from=(ExampleStatus.SUBMITTED, ExampleStatus.FLAGGED))

    def flag(self, example_id: uuid.UUID, person_id: uuid.UUID, reason: str) -> Example:
        if not reason or not reason.strip():
            raise InvalidExample("Say why you flag this example.")
        return self._author_transition(example_id, person_id, ExampleStatus.FLAGGED, reason.strip(),
                                       allowed_from=(ExampleStatus.SUBMITTED,))

    def _author_transition(self, example_id, person_id, status: ExampleStatus, reason, allowed_from) -> Example:
        with self.db.write() as session:
            example = session.get(Example, example_id)
            if example is None:
                raise NotFound(f"There is no example with id {example_id}.")
            if example.author_id != person_id:
                raise InvalidExample(f"Only the author can {'retract' if status == ExampleStatus.RETRACTED else 'flag'} an example.")
            if example.status not in allowed_from:
                raise InvalidExample(f"A {example.status} example cannot be {status.value}.")
            example.status = status.value
            example.status_reason = reason
            example.sync_state = SyncState.PENDING.value
            example.bump()
            outbox.enqueue(session, example)
            return example

    def get(self, example_id: uuid.UUID) -> Example:
        with self.db.read() as session:
            example = session.scalar(
                select(Example)
                .where(Example.id == example_id)
                .options(selectinload(Example.outputs), selectinload(Example.validations))
            )
        if example is None:
            raise NotFound(f"There is no example with id {example_id}.")
        return example

    def perturbations(self, example_id: uuid.UUID) -> list[Example]:
        with self.db.read() as session:
            return list(session.scalars(select(Example).where(Example.perturbation_of == example_id)
                                        .options(selectinload(Example.outputs))))

    @staticmethod
    def _draft_inputs(inputs: dict[str, str]) -> dict[str, str]:
        for name, value in inputs.items():
            if not isinstance(value, str):
                raise InvalidExample(f"Input '{name}' must be text.")
            if len(value) > DRAFT_MAX_CHARS:
                raise InvalidExample(
                    f"Input '{name}' has {len(value):,} characters; a draft holds at most {DRAFT_MAX_CHARS:,}."
                )
        return dict(inputs)

    @staticmethod
    def _draft(session: Session, draft_id: uuid.UUID) -> Example:
        draft = session.get(Example, draft_id)
        if draft is None:
            raise NotFound(f"There is no draft with id {draft_id}.")
        if draft.status != ExampleStatus.DRAFT:
            raise InvalidExample("This example was already submitted; start a new draft.")
        return draft

    @staticmethod
    def _submitted(session: Session, example_id: uuid.UUID) -> Example:
        example = session.get(Example, example_id)
        if example is None:
            raise NotFound(f"There is no example with id {example_id}.")
        if example.status == ExampleStatus.DRAFT:
            raise InvalidExample("Only submitted examples can be perturbed.")
        return example

    @staticmethod
    def _require_person(session: Session, person_id: uuid.UUID) -> None:
        if session.get(Person, person_id) is None:
            raise NotFound(f"There is no profile with id {person_id}.")

    @staticmethod
    def _check_models(session: Session, outputs: Sequence[ModelOutput]) -> None:
        ids = [out.model_id for out in outputs]
        if len(set(ids)) != len(ids):
            raise InvalidExample("Each target model may give only one output per example.")
        known = set(session.scalars(select(ModelRecord.id).where(ModelRecord.id.in_(ids)))) if ids else set()
        missing = [str(i) for i in ids if i not in known]
        if missing:
            raise NotFound(f"Model(s) {', '.join(missing)} are not registered on this desk.")
