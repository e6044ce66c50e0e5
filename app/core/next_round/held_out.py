"""The held-out split as the comparison, the model leaderboard and the Next round dialog's counts score
it: exactly the round examples that training holds out. One definition, from the same two rules
training uses (``training_data._choose`` for which examples count and with which label,
``splits.held_out_example`` for the side):

- A candidate with a training manifest is scored on the held-out ids its manifest lists, for the rounds
  it was trained on (read, not re-derived: the manifest is what training did), with the manifest's own
  choices (imported data sets named, undecided examples taken or not).
- The adaptive suite's variants are never scored here: they are nobody's writing, and the suite is a split of
  its own (``suite_split``: the variants of held-out seeds only, when a compared model trained on variants).
- Any other model, and rounds the candidate never saw, are scored on every example training would hold
  out: decided examples (their decided label) and every imported data set's examples (their gold
  label), on the held-out side. An imported example on the held-out side is held out of every
  training run, whichever data sets it names, so no desk-trained model ever learned from it.

    held = held_out_sets(desk, "hate_speech", "all", manifest=manifest)
    held.sets[0].cases, held.eligible[1], held.notes
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, cast

from app.core.services.evaluation_data import Case, EvalSet, EvaluationInputError, _origins, _round_case_extra


class _Row(NamedTuple):
    """The columns that decide whether and how an example is scored (``training_data._choose`` reads
    the first ten) and what its case carries."""

    id: uuid.UUID
    status: str
    origin: dict[str, Any] | None
    validation_state: str
    decided_verdict: str | None
    decided_label: str | None
    flag_count: int
    true_label: str | None
    source: str | None
    perturbation_of: uuid.UUID | None
    text: str
    meta: dict[str, Any] | None
    inputs: dict[str, Any] | None
    model_fooled: bool | None


@dataclass
class HeldOut:
    sets: list[EvalSet]  # one per round: "held-out-N"
    eligible: dict[int, int] = field(default_factory=dict)  # round -> examples with a label to score (either side)
    notes: list[str] = field(default_factory=list)


def manifest_held_out(manifest: Mapping[str, Any] | None) -> tuple[set[int], set[str], bool, set[str]]:
    """(rounds trained on, held-out ids, undecided taken, imported data sets named) as a manifest records them."""
    splits = ((manifest or {}).get("data") or {}).get("splits") or {}
    if not manifest or not isinstance(splits.get("held_out"), list):  # no list of what training held out
        return set(), set(), False, set()
    options = manifest.get("options") or {}
    ids = splits["held_out"]
    return ({int(r) for r in manifest.get("rounds") or []}, {str(i) for i in ids},
            bool(options.get("include_undecided")), {str(n) for n in options.get("imported") or []})


def held_out_sets(desk: Any, task_code: str, rounds: Literal["all"] | Sequence[int] = "all", *,
                  manifest: Mapping[str, Any] | None = None) -> HeldOut:
    """Each chosen round's held-out examples as an evaluation set; a case's ``extra`` says whether it is
    validated fooling (``figures.is_validated_fooling``: it fooled the target it was written against,
    and the decision let the author's label stand)."""
    from sqlalchemy import select

    from app.core.next_round.training_data import _choose, _imported_names
    from app.core.services.target_models import model_input
    from app.core.storage.models import Example
    from app.core.tasks.figures import is_validated_fooling
    from app.core.tasks.splits import held_out_example

    definition = desk.tasks.definition_by_code(task_code)
    if definition.is_extractive:
        raise EvaluationInputError(f"{definition.name} is an extractive QA task; evaluation scores classifiers.")
    all_rounds = desk.tasks.rounds(task_code)
    if rounds != "all":
        unknown = sorted(set(rounds) - {r.number for r in all_rounds})
        if unknown:
            have = ", ".join(str(r.number) for r in all_rounds) or "none"
            raise EvaluationInputError(f"{task_code} has no round {', '.join(map(str, unknown))} (it has {have}).")
    wanted = [r for r in all_rounds if rounds == "all" or r.number in set(rounds)]
    trained, recorded, undecided, named = manifest_held_out(manifest)
    labels = set(definition.labels)
    held = HeldOut([])
    found: set[str] = set()
    with desk.db.read() as session:
        for round_ in wanted:
            by_manifest = round_.number in trained
            rows = [_Row(*values) for values in session.execute(
                select(*[getattr(Example, name) for name in _Row._fields]).where(Example.round_id == round_.id)
                .order_by(Example.submitted_at, Example.id))]
            origins = _origins(session, rows)
            cases, eligible, imported = [], 0, 0
            for row in rows:
                label, source = _choose(cast(Example, row), undecided if by_manifest else False,
                                        named if by_manifest else _imported_names(cast(Example, row)))
                if label is None or label not in labels:
                    continue
                eligible += 1
                original = origins.get(row.perturbation_of) if row.perturbation_of else None
                if by_manifest:
                    if str(row.id) not in recorded:
                        continue
                    found.add(str(row.id))
                elif not held_out_example(row.id, row.perturbation_of, row.origin, original):
                    continue
                imported += source == "imported"
                groups = (row.meta or {}).get("target_groups") or []
                item = model_input(definition, row.inputs or {})
                extra: dict[str, Any] = dict(_round_case_extra(row, origins))
                extra["fooled"] = is_validated_fooling(row.model_fooled, row.decided_verdict)
                cases.append(Case(str(row.id), row.text, label, target=groups[0] if len(groups) == 1 else None,
                                  input=list(item) if isinstance(item, tuple) else None, extra=extra))
            ids = {c.id for c in cases}
            pairs = [(c.extra["perturbation_of"], c.id) for c in cases if c.extra.get("perturbation_of") in ids]
            how = "as the candidate's training held them out" if by_manifest else "by the held-out rule"
            held.sets.append(EvalSet(
                f"held-out-{round_.number}", f"Round {round_.number} held-out", "round", cases,
                f"{len(cases)} of {eligible} examples ({len(cases) - imported} decided, {imported} imported), {how}",
                pairs))
            held.eligible[round_.number] = eligible
    gone = recorded - found
    if gone and any(r.number in trained for r in wanted):
        held.notes.append(f"{len(gone)} of the {len(recorded)} examples the candidate's training held out are no "
                          "longer scored here (retracted, flagged or relabelled since); the rest are.")
    return held
