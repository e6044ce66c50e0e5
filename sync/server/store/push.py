"""A desk's push: examples, validations, lead reviews, task settings and imported authors, with their rules."""

from __future__ import annotations

import uuid
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime
from typing import cast

from sqlalchemy import insert, select

from app.core.assist.arms import round_key
from app.core.assist.provenance import distance_bound, received_assistance
from app.core.assist.types import AssistantMode
from app.core.domain import ModelOutput, ReviewAction, Role, ValidationMode, utcnow
from app.core.errors import InvalidExample
from app.core.task_settings import TaskSettings
from app.core.tasks.content import Content, written_text
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.fooling import output_problem
from app.core.tasks.verdicts import summarise
from sync.protocol import (
    ExampleRecord,
    ExampleReviewRecord,
    PersonRecord,
    RecordError,
    RecordResult,
    TaskSettingRecord,
    ValidationRecord,
    text_sha256,
)
from sync.server.db import ServerDatabase
from sync.server.models import (
    Context,
    Example,
    ExampleReview,
    Person,
    Round,
    Task,
    TaskSetting,
    Validation,
)
from sync.server.store.ahead import Judged, Measured, content_of, judge_ahead, measure_assistance
from sync.server.store.batch import Batch, PendingRow
from sync.server.store.changelog import take_numbers, write_changes
from sync.server.store.judging import judge, judgement_note, verdict_problem
from sync.server.store.people import name_problem
from sync.server.store.rules import LEADS, TRANSITIONS, Forbidden, chunks, fetch
from sync.server.store.settings import team_settings
from sync.server.store.wire import (
    example_review_wire,
    example_wire,
    hide_foreign,
    other_teams,
    task_setting_wire,
    validation_wire,
)


def _assistant_mode(round_: Round) -> AssistantMode:
    """The round's assistant setting (publish checked it; anything else counts as off)."""
    try:
        return AssistantMode((round_.settings or {}).get("assistant") or AssistantMode.OFF)
    except ValueError:
        return AssistantMode.OFF


class _Push(Batch):
    """One push. New examples, validations and reviews are inserted (as plain rows, in bulk) only after
    the change counter is taken, which also gives them their arrival order for duplicates."""

    def run(self, records: Sequence, measured: Measured, judged: Judged) -> list[RecordResult]:
        session = self.session
        self.measured = measured
        self.judged = judged
        timely = self.in_time(records)
        people = [(i, r) for i, r in timely if r.record == "person"]
        examples = [(i, r) for i, r in timely if r.record == "example"]
        validations = [(i, r) for i, r in timely if r.record == "validation"]
        reviews = [(i, r) for i, r in timely if r.record == "example_review"]
        settings = [(i, r) for i, r in timely if r.record == "task_setting"]
        # Lock, in one sorted pass, every stored example this request may change, before the
        # counter: concurrent pushes touching the same examples queue instead of deadlocking.
        # FOR NO KEY UPDATE leaves other writers' foreign-key checks on these rows unblocked.
        wanted = sorted({r.id for _, r in examples} | {r.example for _, r in validations}
                        | {r.example for _, r in reviews})
        self.examples: dict[uuid.UUID, Example | PendingRow] = {}
        for chunk in chunks(wanted):
            self.examples.update((e.id, e) for e in session.scalars(
                select(Example).where(Example.id.in_(chunk)).order_by(Example.id).with_for_update(key_share=True)))
        self.existing_validations = {v.id: v for v in fetch(session, Validation, [r.id for _, r in validations]).values()}
        self.validations_of: dict[uuid.UUID, list] = defaultdict(list)
        for chunk in chunks(wanted):
            for v in session.scalars(select(Validation).where(Validation.example_id.in_(chunk))):
                self.validations_of[v.example_id].append(v)
        self.authors: dict[uuid.UUID, Person] = {self.me.id: self.me}
        self.new_examples: list[PendingRow] = []
        self.new_validations: list[PendingRow] = []
        self.existing_reviews = fetch(session, ExampleReview, [r.id for _, r in reviews])
        self.new_reviews: dict[uuid.UUID, PendingRow] = {}
        self.thresholds: dict[tuple[str, uuid.UUID], int] = {}

        for i, r in settings:
            self._task_setting(i, r)
        for i, r in people:
            self._person(i, r)
        for i, r in examples:
            self._example(i, r)
        touched: dict[uuid.UUID, Example | PendingRow] = {}
        for i, r in validations:
            example = self._validation(i, r)
            if example is not None:
                touched[example.id] = example
        for example in touched.values():
            summarise(example, self.validations_of[example.id], self._threshold(example.team, example.task_id))
        for i, r in reviews:
            self._review(i, r)
        self.finish()
        return cast("list[RecordResult]", self.results)  # every record has its result by now

    def finish(self) -> list[int]:
        if self.forbidden:
            raise Forbidden(f"{len(self.forbidden)} record(s) in this request are not yours to write; "
                            "nothing was stored.", self.forbidden)
        if not self.changes:
            return []
        self.session.flush()  # people and status changes; their rows are locked already
        seqs = take_numbers(self.session, len(self.changes))
        seq_of = {rid: seq for (rid, *_), seq in zip(self.changes, seqs)}
        if self.new_examples:
            for row in self.new_examples:
                row.stored_seq = seq_of[row.id]
            self._mark_duplicates()
            self.session.execute(insert(Example), [row.values for row in self.new_examples])
        if self.new_validations:
            self.session.execute(insert(Validation), [row.values for row in self.new_validations])
        if self.new_reviews:
            self.session.execute(insert(ExampleReview), [row.values for row in self.new_reviews.values()])
        write_changes(self.session, self.changes, seqs, self.updated)
        return seqs

    def _definition_of(self, task_id: uuid.UUID) -> TaskDefinition:
        task = self.session.get_one(Task, task_id)
        return self.definition(task)

    def _threshold(self, team: str, task_id: uuid.UUID) -> int:
        """Matching peer verdicts that decide a team's example: its lead's setting, else the task definition's."""
        key = (team, task_id)
        if key not in self.thresholds:
            settings = team_settings(self.session, team, task_id)
            self.thresholds[key] = settings.threshold_for(self._definition_of(task_id))
        return self.thresholds[key]

    def _task_setting(self, i: int, r: TaskSettingRecord) -> None:
        lead = self._lead(i, r, "set the team's settings of a task")
        if lead is None:
            return
        existing = self.session.get(TaskSetting, r.id)
        if existing is not None:
            code = self.session.get_one(Task, existing.task_id).code
            server = task_setting_wire(existing, code).model_dump(mode="json", exclude={"received_at"})
            if server == r.model_dump(mode="json", exclude={"received_at"}):
                return self.result(i, r, "already_stored", revision=existing.revision,
                                   server={"received_at": existing.received_at.isoformat()})
            return self.result(i, r, "conflict", revision=existing.revision, server=server,
                               reason="task settings cannot be changed once stored; send a new one")
        task = self.task(r.task)
        if task is None:
            return self.result(i, r, "deferred", reason=f"task '{r.task}' is not published on this server yet")
        before = self._threshold(self.me.team, task.id)
        setting = TaskSetting(id=r.id, task_id=task.id, team=self.me.team, lead_id=lead.id, settings=r.settings,
                              created_at=r.created_at, updated_at=r.updated_at, revision=r.revision,
                              received_at=self.now)
        self.session.add(setting)
        threshold = TaskSettings.from_json(r.settings).threshold_for(self._definition_of(task.id))
        self.thresholds[(self.me.team, task.id)] = threshold
        self.changed(setting, "task_setting", self.me.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)
        if threshold != before:
            self._decide_again(task.id, threshold)

    def _decide_again(self, task_id: uuid.UUID, threshold: int) -> None:
        """Decide the team's validated examples of the task again under a new threshold; those whose
        decision changes go out on the change feed again."""
        session, team = self.session, self.me.team
        examples = list(session.scalars(select(Example).where(Example.team == team, Example.task_id == task_id,
                                                               Example.validation_count > 0)
                                        .order_by(Example.id).with_for_update(key_share=True)))
        verdicts: dict[uuid.UUID, list] = defaultdict(list)
        for chunk in chunks([e.id for e in examples]):
            for v in session.scalars(select(Validation).where(Validation.example_id.in_(chunk))):
                verdicts[v.example_id].append(v)
        for example in examples:
            before = (example.validation_state, example.decided_verdict, example.decided_label)
            summarise(example, verdicts[example.id], threshold)
            if (example.validation_state, example.decided_verdict, example.decided_label) != before:
                self.examples.setdefault(example.id, example)
                self.changed(example, "example", example.team, example.author_id, is_new=False)

    def _person(self, i: int, r: PersonRecord) -> None:
        if self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="only owners send person records "
                                                                               "(the authors of an imported data set)"))
            return
        existing = self.session.get(Person, r.id)
        if existing is not None:
            if existing.token_hash is not None and existing.id != self.me.id:
                self.forbidden.append(RecordError(index=i, id=str(r.id),
                                                  reason=f"{existing.display_name} has an account; only they write as themselves"))
                return
            self.authors[existing.id] = existing
            self.result(i, r, "already_stored", revision=existing.revision)
            return
        problem = name_problem(r.display_name)
        if problem:
            return self.result(i, r, "rejected", reason=f"its display_name {problem}")
        person = Person(id=r.id, display_name=r.display_name, role=Role.ANNOTATOR.value, team=self.me.team,
                        token_hash=None, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision)
        self.session.add(person)
        self.authors[person.id] = person
        self.changed(person, "person", person.team, None, is_new=True)
        self.result(i, r, "stored", revision=person.revision)

    def _author(self, i: int, r, person_id: uuid.UUID, what: str, imported: bool) -> Person | None:
        """The person a record is written as, if this token may write as them."""
        if person_id == self.me.id:
            return self.me
        person = self.authors.get(person_id) or self.session.get(Person, person_id)
        if imported and self.me.role == Role.OWNER.value and person is not None and person.token_hash is None:
            self.authors[person_id] = person
            return person
        if imported and self.me.role == Role.OWNER.value and person is None:
            self.result(i, r, "rejected", reason=f"its {what} {person_id} is not on the server; send their person "
                                                 "record in the same request")
            return None
        self.forbidden.append(RecordError(index=i, id=str(r.id), reason=f"its {what} is {person_id}, not you; "
                                                                          "nobody can write as someone else"))
        return None

    def _lead(self, i: int, r: TaskSettingRecord | ExampleReviewRecord, may: str) -> Person | None:
        """The lead a setting or review is written as, if this token may write as them and they lead."""
        lead = self._author(i, r, r.lead, "lead", imported=False)
        if lead is not None and lead.role not in LEADS:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason=(
                f"{lead.display_name} is an {lead.role} on this server: only team leads and owners {may}")))
            return None
        return lead

    def _example(self, i: int, r: ExampleRecord) -> None:
        author = self._author(i, r, r.author, "author", imported=r.source is not None)
        if author is None:
            return
        existing = self.examples.get(r.id)
        if isinstance(existing, PendingRow):  # the same record twice in one request
            return self.result(i, r, "already_stored", revision=existing.revision)
        if existing is not None:
            self._update_example(i, r, existing, author)
        else:
            self._insert_example(i, r, author)

    def _resolve(self, i: int, r: ExampleRecord, *, judge: bool) -> dict | None:
        """What the server stores for ``r``: its rows' ids, and the content as the task's rules
        keep it; with ``judge``, "fooled" as the server judges it (``_judge``). None when the
        record is deferred or rejected (its result is set)."""
        task = self.task(r.task)
        if task is None:
            return self.result(i, r, "deferred", reason=f"task '{r.task}' is not published on this server yet")
        definition = self.definition(task)
        round_ = self.round(task, r.round_number)
        if round_ is None:
            return self.result(i, r, "deferred", reason=f"round {r.round_number} of '{r.task}' is not published yet")
        try:
            checked = content_of(definition, r)
        except InvalidExample as exc:
            return self.result(i, r, "rejected", reason=str(exc))
        context_id = None
        if r.context is not None or r.context_hash is not None:
            context = self._context(round_, r.context, r.context_hash)
            if context is None:
                return self.result(i, r, "deferred", reason=f"its context is not published in round {round_.number} yet")
            context_id = context.id
        outputs = []
        for output in r.outputs:
            model = self.model(output.model_sha256)
            if model is None:
                return self.result(i, r, "deferred", reason=f"model {output.model_sha256[:12]}… is not published yet")
            problem = output_problem(definition, ModelOutput(model.id, output.model_sha256, output.label,
                                                             dict(output.probabilities)))
            if problem:  # no model gives it: judged neither fooled nor not, and not stored as evidence
                return self.result(i, r, "rejected", reason=f"its output of model {output.model_sha256[:12]}… "
                                                            f"cannot be judged: {problem}")
            outputs.append({**output.model_dump(mode="json"), "model": str(model.id)})
        model_fooled, fooled_rule, note = r.model_fooled, r.fooled_rule.value, None
        if judge:
            judged = self._judge(i, r, definition, round_, checked, outputs)
            if judged is None:
                return None
            model_fooled, note = judged
            fooled_rule = round_.fooled_rule
        text = written_text(definition, checked.inputs)
        try:  # the desk's figures are not taken: the distance was measured before this transaction, the arm is checked
            received = received_assistance(
                r.assistance.model_dump() if r.assistance else None, text, max_chars=distance_bound(definition),
                writer_id=r.author, round_key=round_key(r.task, round_.number), mode=_assistant_mode(round_),
                measure=lambda applied, written: self.measured.get((applied, written)))
        except InvalidExample as exc:
            return self.result(i, r, "rejected", reason=str(exc))
        assistance = received.record
        note = "; ".join(n for n in (note, received.note) if n) or None
        return dict(
            task_id=task.id, round_id=round_.id, context_id=context_id, inputs=checked.inputs, text=text,
            true_label=checked.true_label, answer=checked.answer.to_json() if checked.answer else None,
            model_fooled=model_fooled, fooled_rule=fooled_rule, meta=checked.meta, origin=r.origin,
            perturbation_of=r.perturbation_of, edit_ops=r.edit_ops, edit_distance=r.edit_distance,
            assistance=assistance, time_spent_ms=r.time_spent_ms, submitted_at=r.submitted_at, source=r.source, external_id=r.external_id,
            outputs=outputs, created_at=r.created_at, _round=round_, _note=note)

    def _judge(self, i: int, r: ExampleRecord, definition: TaskDefinition, round_: Round, checked: Content,
               outputs: list[dict]) -> tuple[bool | None, str | None] | None:
        """Whether the round's target models were fooled, judged here from the outputs, the true label
        (or answer) and the round's rule, with the desk's one definition (``is_fooled``); the client's
        ``model_fooled`` and per-output ``fooled`` are replaced. Returns (fooled, a note for the author
        when that is not what their desk said), or None when the record is refused (result set).

        Outputs of any model but the round's targets (by sha256) are refused: an honest desk sends
        only its round's targets, and the server stores no output it does not judge by. An example
        without an output of every target is stored, but not as fooling: nothing here can judge it."""
        targets = self.target_shas(round_)
        ahead = self.judged.get(i)
        if ahead is not None and ahead[:2] == (tuple(targets), round_.fooled_rule):
            verdict = ahead[2]  # judged before the transaction, against the targets and rule still in force
        else:  # the round changed in between (rare): judged here, within the same bound
            verdict = judge(definition, targets, round_.fooled_rule, checked.true_label, checked.answer, outputs)
        if verdict.foreign:
            named = ", ".join(f"{sha[:12]}…" for sha in verdict.targets) or "none"
            return self.result(i, r, "rejected", reason=(
                f"its output of model {verdict.foreign[0][:12]}… is not from a target model of round {round_.number} "
                f"(its targets: {named}); examples are judged against the round's target models only"))
        if verdict.repeated:
            return self.result(i, r, "rejected", reason="it has more than one output of the same target model")
        outputs[:] = verdict.outputs
        if verdict.fooled is None:
            lacks = (f"round {round_.number} has no target model" if not verdict.targets
                     else f"it carries no output of round {round_.number}'s target model(s)" if not outputs
                     else f"it lacks the output of target model(s) {', '.join(s[:12] + '…' for s in verdict.missing)} "
                          f"of round {round_.number}")
            return None, f"stored, but not counted as fooling the model: {lacks}"
        if verdict.fooled is r.model_fooled:
            return verdict.fooled, None
        return verdict.fooled, (f"the server judges it {'fooled' if verdict.fooled else 'not fooled'} by round "
                                f"{round_.number}'s target model(s) ({round_.fooled_rule} rule), and counts it so")

    def _insert_example(self, i: int, r: ExampleRecord, author: Person) -> None:
        # Imported data sets' own (token-less) authors are rated by nobody: their flag is labelled data.
        values = self._resolve(i, r, judge=author.token_hash is not None)
        if values is None:
            return
        round_, note = values.pop("_round"), values.pop("_note")
        problem = self._perturbation_problem(r, author)
        if problem:
            return self.result(i, r, "rejected", reason=problem)
        if round_.status == "closed" and round_.closed_at is not None and (
                r.submitted_at is None or r.submitted_at > round_.closed_at):
            return self.result(i, r, "rejected", reason=f"round {round_.number} of '{r.task}' closed at "
                                                        f"{round_.closed_at:%Y-%m-%d %H:%M} UTC, before this was submitted")
        row = PendingRow(dict(
            id=r.id, author_id=author.id, team=author.team, text_hash=text_sha256(values["text"]),
            status=r.status, status_reason=r.status_reason, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now, stored_seq=0, duplicate_of=None, validation_state="unvalidated",
            validation_count=0, flag_count=0, disagreement_count=0, decided_verdict=None, decided_label=None,
            **values))
        self.examples[r.id] = row
        self.new_examples.append(row)
        self.changed(row, "example", author.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision, reason=note, server=judgement_note(row, r))

    def _perturbation_problem(self, r: ExampleRecord, author: Person) -> str | None:
        """A perturbation stays in its original's team (an original the server lacks is not checked:
        it may stay on its desk)."""
        if r.perturbation_of is None:
            return None
        original = self.examples.get(r.perturbation_of) or self.session.get(Example, r.perturbation_of)
        if original is not None and original.team != author.team:
            return (f"it is a perturbation of example {r.perturbation_of}, which belongs to another team; "
                    "perturb examples of your own team")
        return None

    def _context(self, round_: Round, context_id: uuid.UUID | None, digest: str | None) -> Context | None:
        if context_id is not None:
            context = self.session.get(Context, context_id)
            if context is not None and context.round_id == round_.id:
                return context
        if digest is not None:
            return self.session.scalar(select(Context).where(Context.round_id == round_.id,
                                                             Context.content_hash == digest))
        return None

    def _server_form(self, e: Example) -> dict:
        task = self.session.get_one(Task, e.task_id)
        round_ = self.session.get_one(Round, e.round_id)
        context = self.session.get(Context, e.context_id) if e.context_id else None
        record = example_wire(e, task.code, round_.number, context.content_hash if context else None)
        return hide_foreign(record, other_teams(self.session, self.me, [e.duplicate_of])).model_dump(mode="json")

    def _update_example(self, i: int, r: ExampleRecord, e: Example, author: Person) -> None:
        if e.author_id != r.author:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="this example belongs to someone else"))
            return
        values = self._resolve(i, r, judge=False)
        if values is None:
            return  # deferred or rejected: its content no longer fits what the server has
        # the assistance record as the server took it when stored stands (as its "fooled" does):
        # the round's setting may have changed since, and nothing is measured again here
        for key in ("_round", "_note", "text", "assistance"):
            values.pop(key)
        stored = {k: getattr(e, k) for k in values}
        if author.token_hash is not None:  # the server's judgement, made once when stored, is not the client's
            for side in (values, stored):
                side.pop("model_fooled"), side.pop("fooled_rule")
                side["outputs"] = [{k: v for k, v in o.items() if k != "fooled"} for o in side["outputs"]]
        different = sorted(k for k, v in values.items() if stored[k] != v)
        if different:
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"a submitted example cannot be edited (differs in {', '.join(different)}); "
                                      f"the server keeps revision {e.revision}")
        if r.revision == e.revision:
            if (r.status, r.status_reason) == (e.status, e.status_reason):
                return self.result(i, r, "already_stored", revision=e.revision,
                                   server=judgement_note(e, r) if author.token_hash is not None else None)
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"revision {e.revision} on the server is {e.status}, here it is {r.status}")
        if r.revision < e.revision:
            return self.result(i, r, "conflict", revision=e.revision, server=self._server_form(e),
                               reason=f"the server has a newer revision ({e.revision}, {e.status})")
        if r.status != e.status and (e.status, r.status) not in TRANSITIONS:
            return self.result(i, r, "rejected", revision=e.revision,
                               reason=f"a {e.status} example cannot become {r.status}")
        e.status, e.status_reason, e.updated_at, e.revision = r.status, r.status_reason, r.updated_at, r.revision
        self.changed(e, "example", e.team, self.me.id, is_new=False)
        self.result(i, r, "stored", revision=e.revision)

    def _validation(self, i: int, r: ValidationRecord):
        example = self.examples.get(r.example)
        imported = example is not None and example.source is not None
        validator = self._author(i, r, r.validator, "validator", imported=imported)
        if validator is None:
            return None
        if r.mode == ValidationMode.LEAD and validator.role not in LEADS and validator.token_hash is not None:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="only leads and owners adjudicate"))
            return None
        existing = self.existing_validations.get(r.id)
        if existing is not None:
            server = validation_wire(existing).model_dump(mode="json")
            if server == r.model_dump(mode="json"):
                self.result(i, r, "already_stored", revision=existing.revision)
            else:
                self.result(i, r, "conflict", revision=existing.revision, server=server,
                            reason="validations cannot be changed once stored")
            return None
        if example is None:
            self.result(i, r, "deferred", reason=f"example {r.example} is not on the server yet")
            return None
        if example.team != self.me.team and self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="the example belongs to another team"))
            return None
        if example.author_id == r.validator:
            self.result(i, r, "rejected", reason="Nobody validates their own example.")
            return None
        for other in self.validations_of[example.id]:
            if other.validator_id == r.validator and other.mode == r.mode.value:
                if other.id == r.id:  # the same validation twice in one request
                    self.result(i, r, "already_stored", revision=other.revision)
                else:
                    self.result(i, r, "conflict", revision=other.revision,
                                server=validation_wire(other).model_dump(mode="json") if isinstance(other, Validation)
                                else None,
                                reason=f"this person already validated this example (validation {other.id})")
                return None
        problem = verdict_problem(self._definition_of(example.task_id), example, r)
        if problem:
            self.result(i, r, "rejected", reason=problem)
            return None
        row = PendingRow(dict(
            id=r.id, example_id=example.id, validator_id=r.validator, team=example.team, verdict=r.verdict.value,
            corrected_label=r.corrected_label, reason=r.reason, model_note=r.model_note, mode=r.mode.value,
            time_spent_ms=r.time_spent_ms, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now))
        self.new_validations.append(row)
        self.validations_of[example.id].append(row)
        self.changed(row, "validation", example.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)
        return example

    def _review(self, i: int, r: ExampleReviewRecord) -> None:
        lead = self._lead(i, r, "accept or return work")
        if lead is None:
            return
        existing = self.existing_reviews.get(r.id)
        if existing is not None:
            server = example_review_wire(existing).model_dump(mode="json", exclude={"received_at"})
            if server == r.model_dump(mode="json", exclude={"received_at"}):  # a resend: when it first came
                return self.result(i, r, "already_stored", revision=existing.revision,
                                   server={"received_at": existing.received_at.isoformat()})
            return self.result(i, r, "conflict", revision=existing.revision, server=server,
                               reason="reviews cannot be changed once stored")
        if r.id in self.new_reviews:  # the same review twice in one request
            return self.result(i, r, "already_stored", revision=self.new_reviews[r.id].revision)
        example = self.examples.get(r.example)
        if example is None:
            return self.result(i, r, "deferred", reason=f"example {r.example} is not on the server yet")
        if example.team != self.me.team and self.me.role != Role.OWNER.value:
            self.forbidden.append(RecordError(index=i, id=str(r.id), reason="the example belongs to another team"))
            return
        if example.author_id == r.lead:
            return self.result(i, r, "rejected", reason="Nobody accepts or returns their own example.")
        if r.action == ReviewAction.RETURNED and not (r.comment or "").strip():
            return self.result(i, r, "rejected", reason="Returning work needs a comment for the annotator.")
        row = PendingRow(dict(
            id=r.id, example_id=example.id, lead_id=r.lead, team=example.team, action=r.action.value,
            comment=r.comment, created_at=r.created_at, updated_at=r.updated_at, revision=r.revision,
            received_at=self.now))
        self.new_reviews[r.id] = row
        self.changed(row, "example_review", example.team, self.me.id, is_new=True)
        self.result(i, r, "stored", revision=r.revision)

    def _mark_duplicates(self) -> None:
        """Each new example whose text an earlier example of its round already has points at the
        earliest. Runs while the counter is taken, so every earlier example is visible."""
        rounds = sorted({row.round_id for row in self.new_examples})
        hashes = sorted({row.text_hash for row in self.new_examples})
        first: dict[tuple[uuid.UUID, str], tuple[int, uuid.UUID]] = {}
        for chunk in chunks(hashes):
            rows = self.session.execute(
                select(Example.id, Example.round_id, Example.text_hash, Example.stored_seq)
                .where(Example.round_id.in_(rounds), Example.text_hash.in_(chunk)))
            for example_id, round_id, digest, seq in rows:
                key = (round_id, digest)
                if key not in first or seq < first[key][0]:
                    first[key] = (seq, example_id)
        for row in self.new_examples:  # in arrival order
            key = (row.round_id, row.text_hash)
            if key in first:
                row.duplicate_of = first[key][1]
            else:
                first[key] = (row.stored_seq, row.id)


def push(db: ServerDatabase, me: Person, records: Sequence, now: datetime | None = None) -> list[RecordResult]:
    """``now``: the request's arrival time, stored as each new record's ``received_at``. What costs
    more than a look-up (the assistance's edit distances, the judgement of "fooled") is computed first,
    outside the transaction."""
    now = now or utcnow()
    measured = measure_assistance(db, records)
    judged = judge_ahead(db, records)
    return db.write_retrying(
        lambda session: _Push(session, me, [None] * len(records), now=now).run(records, measured, judged))
