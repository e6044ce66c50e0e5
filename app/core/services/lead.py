"""Lead review: adjudicate, accept an annotator's work, return examples with a comment.

A lead's verdict is final (``ValidationService`` records it in lead mode and ``summarise``
lets it override the peers). Accepting and returning are recorded in ``example_reviews``;
the example keeps the latest review (``review_order``: the server's arrival order) with its
state, comment and time, for fast filters and for the author's own history, where a returned
example shows up marked with the lead's comment.
Reviews go into the sync outbox with the review itself, so they reach the author's desk
(``sync.local`` applies pulled reviews the same way).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select

from app.core.domain import ReviewAction, Role, SyncState, ValidationMode, ValidationState, Verdict, new_id, utcnow
from app.core.errors import NotFound, ValidationRuleError
from app.core.services.validation import VALIDATABLE, ValidationService
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import Example, ExampleReview, Person, Validation

LEAD_ROLES = (Role.LEAD.value, Role.OWNER.value)
REVISION = "revision"  # the origin kind of an example that resubmits a returned one


class NotALead(ValidationRuleError):
    """Lead actions by a profile that is not a lead or owner."""


def review_order(review: ExampleReview) -> tuple:
    """Where a review stands among its example's reviews: when the server received it, never the
    writer's clock alone (a desk's clock may be wrong, or forged), so every desk agrees. One this desk
    has not sent yet comes last (it will arrive last); reviews kept from before arrival times were
    recorded (``received_at`` None) go by ``created_at``. Ties by id."""
    waiting = review.received_at is None and review.sync_state != SyncState.SYNCED.value
    return waiting, review.received_at or review.created_at, review.id


@dataclass(frozen=True)
class ReviewRecord:
    example_id: uuid.UUID
    lead: str
    action: str
    comment: str | None
    at: datetime


class LeadReviewService:
    def __init__(self, db: Database, validation: ValidationService):
        self.db = db
        self.validation = validation

    @staticmethod
    def _lead(session, lead_id: uuid.UUID, action: str = "adjudicate, accept or return work",
              switch: str = "Profile menu") -> Person:
        lead = session.get(Person, lead_id)
        if lead is None:
            raise NotFound(f"There is no profile with id {lead_id}.")
        if lead.role not in LEAD_ROLES:
            raise NotALead(f"{lead.display_name} is an {lead.role}: only team leads and owners can {action}. "
                           f"Switch to a lead profile ({switch}).")
        return lead

    def require_lead(self, person_id: uuid.UUID, *, action: str = "adjudicate, accept or return work",
                     switch: str = "Profile menu") -> None:
        """Raises NotALead, saying what needs a lead (``action``) and where to switch profile, unless the
        profile is a lead or owner."""
        with self.db.read() as session:
            self._lead(session, person_id, action, switch)

    def is_lead(self, person_id: uuid.UUID) -> bool:
        with self.db.read() as session:
            person = session.get(Person, person_id)
            return person is not None and person.role in LEAD_ROLES

    def adjudicate(self, example_id: uuid.UUID, lead_id: uuid.UUID, verdict: Verdict | str, *,
                   corrected_label: str | None = None, reason: str | None = None, model_note: str | None = None,
                   time_spent_ms: int = 0) -> Validation:
        """The lead's final verdict; it decides the example whatever the peers said."""
        with self.db.read() as session:
            self._lead(session, lead_id)
        return self.validation.validate(example_id, lead_id, verdict, corrected_label=corrected_label, reason=reason,
                                        model_note=model_note, mode=ValidationMode.LEAD, time_spent_ms=time_spent_ms)

    def accept_work(self, lead_id: uuid.UUID, author_id: uuid.UUID, *, example_ids: Sequence[uuid.UUID] = (),
                    task_id: uuid.UUID | None = None, round_id: uuid.UUID | None = None,
                    comment: str | None = None) -> int:
        """Accept an annotator's work: the given examples of theirs, or else all their decided
        examples (in the task and round, if given) that are not accepted yet. Returns how many."""
        with self.db.write() as session:
            lead = self._lead(session, lead_id)
            if author_id == lead.id:
                raise ValidationRuleError("Nobody accepts their own work; another lead has to.")
            query = select(Example).where(Example.author_id == author_id, Example.status.in_(VALIDATABLE))
            if example_ids:
                query = query.where(Example.id.in_(list(example_ids)))
            else:
                query = query.where(Example.validation_state == ValidationState.DECIDED.value,
                                    Example.review_state.is_distinct_from(ReviewAction.ACCEPTED.value))
            if task_id is not None:
                query = query.where(Example.task_id == task_id)
            if round_id is not None:
                query = query.where(Example.round_id == round_id)
            examples = list(session.scalars(query))
            self._record(session, examples, lead, ReviewAction.ACCEPTED, (comment or "").strip() or None)
            return len(examples)

    def return_examples(self, lead_id: uuid.UUID, example_ids: Sequence[uuid.UUID], comment: str) -> int:
        """Send examples back to their authors with a comment that they will see in their history."""
        comment = (comment or "").strip()
        if not comment:
            raise ValidationRuleError("Returning work needs a comment: tell the annotator what to fix.")
        if not example_ids:
            raise ValidationRuleError("Select the examples to return.")
        with self.db.write() as session:
            lead = self._lead(session, lead_id)
            examples = list(session.scalars(select(Example).where(Example.id.in_(list(example_ids)))))
            missing = set(example_ids) - {e.id for e in examples}
            if missing:
                raise NotFound(f"{len(missing)} of the selected examples no longer exist.")
            if any(e.author_id == lead.id for e in examples):
                raise ValidationRuleError("Nobody returns their own example; retract it instead.")
            self._record(session, examples, lead, ReviewAction.RETURNED, comment)
            return len(examples)

    @staticmethod
    def _record(session, examples: list[Example], lead: Person, action: ReviewAction, comment: str | None) -> None:
        now = utcnow()
        reviews = []
        for example in examples:
            # A review of an example that never leaves this desk (an imported data set) stays here too.
            local = example.sync_state == SyncState.LOCAL.value
            review = ExampleReview(id=new_id(), example_id=example.id, lead_id=lead.id, action=action.value,
                                   comment=comment, created_at=now, updated_at=now, revision=1,
                                   sync_state=SyncState.LOCAL.value if local else SyncState.PENDING.value)
            session.add(review)
            reviews.append(review)
            example.review_state = action.value
            example.review_comment = comment
            example.reviewed_at = now
        outbox.enqueue_all(session, reviews)  # same unit of work as the reviews

    def history(self, example_id: uuid.UUID) -> list[ReviewRecord]:
        with self.db.read() as session:
            rows = list(session.execute(
                select(ExampleReview, Person.display_name).join(Person, Person.id == ExampleReview.lead_id)
                .where(ExampleReview.example_id == example_id)).all())
            rows.sort(key=lambda row: review_order(row[0]))  # the last is the one the example shows
            return [ReviewRecord(r.example_id, name, r.action, r.comment, r.created_at) for r, name in rows]

    def returned_to(self, author_id: uuid.UUID) -> list[Example]:
        """The author's examples that a lead returned and that still wait for them (newest review first):
        not those the author retracted, nor those they resubmitted as a revision (an example whose
        ``origin`` is ``{"kind": "revision", "of": <the returned example's id>}``)."""
        with self.db.read() as session:
            returned = list(session.scalars(
                select(Example).where(Example.author_id == author_id,
                                      Example.review_state == ReviewAction.RETURNED.value,
                                      Example.status.in_(VALIDATABLE))
                .order_by(Example.reviewed_at.desc())))
            if not returned:
                return []
            revised = {origin.get("of") for origin in session.scalars(
                select(Example.origin).where(Example.author_id == author_id, Example.status.in_(VALIDATABLE),
                                             func.json_extract(Example.origin, "$.kind") == REVISION))}
            return [e for e in returned if str(e.id) not in revised]

    def returned_count(self, author_id: uuid.UUID) -> int:
        return len(self.returned_to(author_id))
