"""What a push costs more than a look-up, computed before its write transaction: the edit distance of each
applied suggestion and the judgement of "fooled". The push's writes, and everyone else's, never wait on them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy import select

from app.core.assist.provenance import distance_bound
from app.core.domain import ModelOutput, Span
from app.core.errors import InvalidExample
from app.core.tasks.content import Content, check_content, written_text
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.fooling import output_problem
from app.core.text import word_distance
from sync.protocol import ExampleRecord
from sync.server.db import ServerDatabase
from sync.server.models import Example, ModelRecord, Round, Task
from sync.server.store.judging import Judgement, judge
from sync.server.store.rules import chunks

# Edit distances measured before a push's transaction: (applied suggestion, written text) -> words, None: unknown.
Measured = dict[tuple[str, str], int | None]
# What one push may have measured, in characters of suggestions and texts: an honest push of 500
# assisted tweets holds a tenth of it; a push of 2,000 worst records would otherwise cost minutes.
MEASURED_CHARS_PER_PUSH = 1_000_000
# "Fooled" judged before a push's transaction, per record index: (the round's targets, its rule, the judgement).
Judged = dict[int, tuple[tuple[str, ...], str, Judgement]]


def content_of(definition: TaskDefinition, r: ExampleRecord) -> Content:
    """``r``'s content as the task's rules keep it (``InvalidExample`` when they refuse it)."""
    answer = Span(r.answer.start, r.answer.end, r.answer.text) if r.answer else None
    return check_content(definition, Content(dict(r.inputs), r.true_label, answer, dict(r.meta)),
                         require_metadata=r.source is None)



def measure_assistance(db: ServerDatabase, records: Sequence) -> Measured:
    """The edit distance of every new example's applied suggestion, each within its task's bound
    (``distance_bound``), measured outside any write transaction: the push's writes, and everyone
    else's, never wait on it. Examples the server already has are not measured (their stored
    record stands); a record whose content the task refuses is left to the push to reject."""
    wanted = [r for r in records if r.record == "example" and r.assistance is not None and r.assistance.applied
              and r.assistance.applied_text is not None]
    if not wanted:
        return {}
    with db.read() as session:
        definitions = {code: TaskDefinition.model_validate(definition) for code, definition in session.execute(
            select(Task.code, Task.definition).where(Task.code.in_({r.task for r in wanted})))}
        stored: set[uuid.UUID] = set()
        for chunk in chunks(sorted({r.id for r in wanted})):
            stored.update(session.scalars(select(Example.id).where(Example.id.in_(chunk))))
    measured: Measured = {}
    budget = MEASURED_CHARS_PER_PUSH
    for r in wanted:
        definition = definitions.get(r.task)
        if definition is None or r.id in stored:
            continue
        try:
            text = written_text(definition, content_of(definition, r).inputs)
        except InvalidExample:
            continue
        key = (r.assistance.applied_text, text)
        cost = len(key[0]) + len(key[1])
        if key not in measured and cost <= budget:  # past the request's budget: left unknown
            measured[key] = word_distance(*key, max_chars=distance_bound(definition))
            budget -= cost
    return measured


def judge_ahead(db: ServerDatabase, records: Sequence) -> Judged:
    """"Fooled" for every new example whose task, round and models the server has, judged outside any write
    transaction (the span F1 of an extractive task's answers is the costly part). The push uses a judgement
    only while the round's targets and rule are still the ones it was made against. A record the push will
    refuse or defer is skipped here: the push says why."""
    wanted = [(i, r) for i, r in enumerate(records) if r.record == "example" and r.outputs]
    if not wanted:
        return {}
    with db.read() as session:
        tasks = {t.code: t for t in session.scalars(select(Task).where(Task.code.in_({r.task for _, r in wanted})))}
        rounds = {(rd.task_id, rd.number): rd for rd in session.scalars(
            select(Round).where(Round.task_id.in_([t.id for t in tasks.values()])))}
        shas = sorted({o.model_sha256 for _, r in wanted for o in r.outputs})
        models: dict[str, ModelRecord] = {}
        for chunk in chunks(shas):
            models.update((m.sha256, m) for m in session.scalars(select(ModelRecord).where(ModelRecord.sha256.in_(chunk))))
        by_id = {str(m.id): m.sha256 for m in models.values()}
        missing_targets = {str(t) for rd in rounds.values() for t in rd.target_models} - set(by_id)
        for chunk in chunks(sorted(missing_targets)):
            by_id.update((str(m.id), m.sha256) for m in session.scalars(
                select(ModelRecord).where(ModelRecord.id.in_([uuid.UUID(x) for x in chunk]))))
        stored: set[uuid.UUID] = set()
        for chunk in chunks(sorted({r.id for _, r in wanted})):
            stored.update(session.scalars(select(Example.id).where(Example.id.in_(chunk))))
    definitions: dict[str, TaskDefinition] = {}
    judged: Judged = {}
    for i, r in wanted:
        task = tasks.get(r.task)
        round_ = rounds.get((task.id, r.round_number)) if task is not None else None
        if task is None or round_ is None or r.id in stored or any(o.model_sha256 not in models for o in r.outputs):
            continue
        definition = definitions.setdefault(r.task, TaskDefinition.model_validate(task.definition))
        try:
            checked = content_of(definition, r)
        except InvalidExample:
            continue
        outputs = [{**o.model_dump(mode="json"), "model": str(models[o.model_sha256].id)} for o in r.outputs]
        if any(output_problem(definition, ModelOutput(models[o["model_sha256"]].id, o["model_sha256"], o["label"],
                                                      dict(o.get("probabilities") or {}))) for o in outputs):
            continue
        targets = tuple(by_id[str(t)] for t in round_.target_models if str(t) in by_id)
        judged[i] = (targets, round_.fooled_rule, judge(definition, targets, round_.fooled_rule, checked.true_label,
                                                        checked.answer, outputs))
    return judged
