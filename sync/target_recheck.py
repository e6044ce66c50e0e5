"""Examples written against this desk's own form of a model that the team's round targets in another form,
re-checked against the team's form. Qt-free; runs in the sync job, off the GUI thread.

A model's forms (its PyTorch weights and each ONNX export of them: fp32, int8 by one recipe or another) answer
almost alike under different checksums, and a team has one target per round, named by checksum. A desk that
wrote before its first sync brought the team's target wrote against its own form (this release builds the
default model's int8 form from the fused graph, 0.1 and 0.2 desks from the plain one): the server judges only
the round's target's outputs and would put those examples off for ever. Here each such example gets the
team's target's output in place of the one its writer saw, which ``origin["rechecked"]`` keeps with the
judgement the desk showed then (it travels with the example: every desk shows it), and the server judges it
with its one definition of "fooled" (it takes no output of a model that is not the round's target). When
the target cannot run here (its files are not on this desk, or they are damaged) nothing changes: the
examples stay in the outbox, and why is noted.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.core.domain import FooledRule, Span, utcnow
from app.core.errors import DynadeskError
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import Example, ModelOutputRow, ModelRecord, OutboxEntry, RoundModel
from local_models.errors import ModelError
from sync import local
from sync.protocol import form_parents

log = logging.getLogger(__name__)

RECHECKED = "rechecked"  # the key in an example's origin
PROBLEM = "sync.recheck_problem"  # meta: why the last re-check could not run (empty: it ran, or none was needed)
# The server's refusal of an output of a known model that is not the round's target (sync/server/store/push.py)
NOT_A_TARGET = "is not from a target model of round"


@dataclass
class Recheck:
    rechecked: int = 0  # examples that now carry the team's target's output
    no_longer_fooling: int = 0  # of those, examples the writer's form said fooled and the target's does not
    problems: list[str] = field(default_factory=list)  # why some could not be re-checked (they stay in the outbox)
    refused_before: list[uuid.UUID] = field(default_factory=list)  # re-checked ones the server had refused


def model_origins(record: ModelRecord) -> set[str]:
    """The trained model a record is a form of: the checksum(s) its export names as parent, or its own."""
    return form_parents(record.provenance or {}) or {record.sha256}


def same_model(a: ModelRecord, b: ModelRecord) -> bool:
    """Two forms of one trained model under different checksums (its PyTorch form and an export, two exports)."""
    return a.sha256 != b.sha256 and bool(model_origins(a) & model_origins(b))


@dataclass
class _Candidate:
    example_id: uuid.UUID
    seq: int
    written: list[ModelRecord]  # the models whose outputs the writer saw
    refused: bool  # the server refused it (an output of a model it knows that is not the round's target)
    targets: list[ModelRecord]  # the round's targets, in order


def recheck_against_targets(desk: Any, person_id: uuid.UUID, check: Callable[[], None] = lambda: None) -> Recheck:
    """Re-check this person's waiting examples written only against other forms of their round's targets.
    ``check`` raises to stop (a cancelled sync) between groups of examples; what was re-checked stays."""
    from app.core.services.target_models import TargetModelError, load_engine_for, model_input, to_model_output

    candidates = _candidates(desk.db, person_id)
    out = Recheck()
    by_targets: dict[tuple[uuid.UUID, ...], list[_Candidate]] = {}
    for candidate in candidates:
        by_targets.setdefault(tuple(t.id for t in candidate.targets), []).append(candidate)
    for group in by_targets.values():
        check()
        targets = group[0].targets
        missing = [t for t in targets if not t.path or not Path(t.path).exists()]
        if missing:
            out.problems.append(_problem(group, missing[0], "its files are not on this desk yet (the next sync "
                                                            "fetches them; if it says nothing was downloaded, an "
                                                            "owner must publish the round again)"))
            continue
        engines = []
        try:
            try:
                engines = [load_engine_for(t, num_threads=1) for t in targets]
                inputs = _inputs(desk, [c.example_id for c in group], model_input)
                answers = [[to_model_output(p, t) for p in engine.predict_batched([inputs[c.example_id] for c in group])]
                           for engine, t in zip(engines, targets)]
            finally:
                for engine in engines:
                    engine.close()
        except (TargetModelError, ModelError, DynadeskError) as exc:
            log.warning("re-checking %d example(s) against %s failed: %s", len(group), targets[0].name, exc)
            out.problems.append(_problem(group, targets[0], f"it could not run here: {exc}"))
            continue
        refused = []
        for i, candidate in enumerate(group):
            try:
                done = _add_outputs(desk, candidate, [answer[i] for answer in answers])
            except DynadeskError as exc:  # an answer the task cannot judge: this example stays as it was
                refused.append(str(exc))
                continue
            if done is not None:
                out.rechecked += 1
                out.no_longer_fooling += done
                if candidate.refused:
                    out.refused_before.append(candidate.example_id)
        if refused:
            out.problems.append(_problem(group, targets[0], f"its answers to {len(refused)} of them cannot be judged "
                                                            f"({refused[0]})"))
    problem = " ".join(out.problems)
    if problem != (desk.db.get_meta(PROBLEM) or ""):
        with desk.db.write() as session:
            local.set_meta(session, PROBLEM, problem)
    return out


def _problem(group: Sequence[_Candidate], target: ModelRecord, why: str) -> str:
    written = group[0].written[0]
    return (f"{len(group)} example(s) written against {written.name} ({written.sha256[:12]}…) wait: they are "
            f"re-checked against the team's target {target.name} ({target.sha256[:12]}…) of their round, but {why}; "
            "they stay in the outbox.")


def _candidates(db: Database, person_id: uuid.UUID) -> list[_Candidate]:
    """This person's examples in the outbox whose outputs are all from other forms of their round's targets
    (none from a target): put off by the server ("model … is not published yet"), refused for an output of a
    model that is not the round's target, or not sent yet."""
    judged_by_target = (select(ModelOutputRow.id).join(RoundModel, RoundModel.model_id == ModelOutputRow.model_id)
                        .where(ModelOutputRow.example_id == Example.id, RoundModel.round_id == Example.round_id).exists())
    with db.read() as session:
        entries = list(session.execute(  # the few without a target's output: most carry one
            select(OutboxEntry.record_id, OutboxEntry.seq, OutboxEntry.state, OutboxEntry.last_error,
                   OutboxEntry.revision)
            .join(Example, Example.id == OutboxEntry.record_id)
            .where(OutboxEntry.kind == "example", OutboxEntry.person_id == person_id,
                   OutboxEntry.state.in_([outbox.PENDING, outbox.REJECTED]), ~judged_by_target,
                   select(ModelOutputRow.id).where(ModelOutputRow.example_id == Example.id).exists())))
        entries = [e for e in entries if _not_on_server(e.state, e.last_error, e.revision)]
        if not entries:
            return []
        seqs = {e.record_id: e.seq for e in entries}
        refused = {e.record_id for e in entries if e.state == outbox.REJECTED}
        examples = list(session.scalars(select(Example).where(Example.id.in_(list(seqs)))
                                        .options(selectinload(Example.outputs))))
        round_targets: dict[uuid.UUID, list[uuid.UUID]] = {}
        for round_id, model_id in session.execute(select(RoundModel.round_id, RoundModel.model_id)
                                                  .where(RoundModel.round_id.in_({x.round_id for x in examples}))
                                                  .order_by(RoundModel.position)):
            round_targets.setdefault(round_id, []).append(model_id)
        model_ids = {o.model_id for x in examples for o in x.outputs} | {m for ms in round_targets.values() for m in ms}
        models = {m.id: m for m in session.scalars(select(ModelRecord).where(ModelRecord.id.in_(model_ids)))}
        out = []
        for example in examples:
            targets = [models[m] for m in round_targets.get(example.round_id, [])]
            written = [models[o.model_id] for o in sorted(example.outputs, key=lambda o: o.position)]
            if not targets or not written or RECHECKED in (example.origin or {}):
                continue
            if {w.id for w in written} & {t.id for t in targets}:
                continue  # judged by the team's target already
            if all(any(same_model(w, t) for t in targets) for w in written) and \
                    all(any(same_model(w, t) for w in written) for t in targets):
                out.append(_Candidate(example.id, seqs[example.id], written, example.id in refused, targets))
        return sorted(out, key=lambda c: c.seq)


def _not_on_server(state: str, last_error: str | None, revision: int) -> bool:
    """Whether the server surely lacks the example (an example it holds cannot be edited there): it put it
    off or refused it for an output of a model that is not the round's target, or it was never sent or changed."""
    if state == outbox.REJECTED:
        return NOT_A_TARGET in (last_error or "")
    return (last_error or "").startswith("deferred:") or (last_error is None and revision == 1)


def _inputs(desk: Any, example_ids: Iterable[uuid.UUID], model_input) -> dict[uuid.UUID, Any]:
    with desk.db.read() as session:
        examples = list(session.scalars(select(Example).where(Example.id.in_(list(example_ids)))))
        return {x.id: model_input(desk.tasks.definition(x.task_id), x.inputs) for x in examples}


def _add_outputs(desk: Any, candidate: _Candidate, answers: Sequence[Any]) -> bool | None:
    """The targets' outputs become the example's (what the team judges, on every desk alike); the writer's go
    to ``origin["rechecked"]`` with the judgement the desk showed. Returns whether the writer's form said
    fooled and the targets do not (None when the example changed meanwhile and was left as it is)."""
    from app.core.tasks.fooling import is_fooled

    with desk.db.write() as session:
        example = session.get(Example, candidate.example_id)
        entry = session.scalar(select(OutboxEntry).where(OutboxEntry.record_id == candidate.example_id))
        if example is None or entry is None or RECHECKED in (example.origin or {}) or \
                {o.model_id for o in example.outputs} != {w.id for w in candidate.written}:
            return None
        definition = desk.tasks.definition(example.task_id)
        answer = Span.from_json(example.answer)
        before = example.model_fooled
        names = {w.id: w.name for w in candidate.written}
        seen = sorted(example.outputs, key=lambda o: o.position)
        after = is_fooled(definition, answers, example.true_label, answer, FooledRule(example.fooled_rule))
        example.origin = {**(example.origin or {}), RECHECKED: {
            "against": [t.sha256 for t in candidate.targets], "at": utcnow().isoformat(),
            "model_fooled_before": before,
            "written_against": [{"model_sha256": o.model_sha256, "name": names.get(o.model_id, ""),
                                 "label": o.label, "probabilities": dict(o.probabilities),
                                 "latency_ms": o.latency_ms, "answer": o.answer, "fooled": o.fooled} for o in seen]}}
        example.outputs = [
            ModelOutputRow(model_id=out.model_id, position=position, model_sha256=out.model_sha256, label=out.label,
                           probabilities=dict(out.probabilities), latency_ms=out.latency_ms,
                           answer=out.answer.to_json() if out.answer else None,
                           fooled=is_fooled(definition, [out], example.true_label, answer))
            for position, out in enumerate(answers)]
        example.model_fooled = after  # as the server will judge it; its answer to the push stands
        entry.state, entry.last_error = outbox.PENDING, None
        return bool(before) and after is False
