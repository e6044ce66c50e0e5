"""The adaptive suite of a task on this desk (``desk.adaptive_suite``): its topics, the variants of each
seed, the validated ones as suite cases, growing it, and its HateCheck-format export.

    suite = desk.adaptive_suite
    suite.topics("hate_speech")          # one Topic per seed (app.core.adaptive_suite.topics)
    suite.cases("hate_speech")           # the validated variants: the suite
    suite.variants_of(seed_id)           # every variant of a seed, with where it stands
    suite.grow("hate_speech", ensemble)  # label-keeping variants of the seeds (growth.py)
    suite.export_csv("hate_speech", path)
"""

from __future__ import annotations

import csv
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import select

from app.core.adaptive_suite.growing import GrowError, GrowReport, grow
from app.core.adaptive_suite.topics import (
    NO_GROUP,
    WRITTEN,
    SuiteCase,
    Topic,
    decided_label,
    edit_type,
    model_label,
    seed_group,
    seed_kind,
)
from app.core.adaptive_suite.variants import VARIANT_SOURCE, not_variant_clause, seed_of, variant_clause
from app.core.domain import Verdict
from app.core.errors import DynadeskError, NotFound
from app.core.services.examples import ExampleService
from app.core.services.lead import LeadReviewService
from app.core.services.tasks import TaskService
from app.core.storage.db import Database
from app.core.storage.models import Example, ModelOutputRow, Person, Round, Validation
from app.core.tasks.figures import COUNTED
from local_models.engine import Ensemble
from local_models.progress import Progress

_CHUNK = 500
# HateCheck's columns, in its order (its files start with an unnamed index column).
HATECHECK_HEADER = ("", "functionality", "case_id", "test_case", "label_gold", "target_ident", "direction",
                    "focus_words", "focus_lemma", "ref_case_id", "ref_templ_id", "templ_id", "case_templ")
HATECHECK_GOLD = {"hate": "hateful", "not hate": "non-hateful"}


@dataclass(frozen=True)
class VariantState:
    """One variant of a seed and where it stands."""

    example_id: uuid.UUID
    seed_id: uuid.UUID
    text: str
    label: str | None  # the label it was generated to keep
    rule: str  # the generator ("rules", "identity_swap", "obfuscation")
    edit_type: str  # its own edit ("group_swap_protected", "leetspeak", ...)
    group: str  # the group it names
    status: str
    validation_state: str
    decided_verdict: str | None
    decided_label: str | None  # validated: the label people decided
    model_fooled: bool | None  # by the target it was checked against
    generated_by: uuid.UUID  # the person who generated it
    validators: tuple[str, ...]  # who gave a verdict on it (display names)

    @property
    def validated(self) -> bool:
        return self.status in COUNTED and self.decided_label is not None

    def provenance(self, seed_label: str = "") -> str:
        """"generated from seed S by rule R, validated by V": never the seed author's writing."""
        seed = seed_label or str(self.seed_id)[:8]
        said = f"generated from seed {seed} by rule {self.rule}:{self.edit_type}"
        return f"{said}, validated by {', '.join(self.validators)}" if self.validators else said


def _chunks(ids: Sequence[Any]) -> Iterable[Sequence[Any]]:
    for start in range(0, len(ids), _CHUNK):
        yield ids[start:start + _CHUNK]


class AdaptiveSuite:
    def __init__(self, db: Database, tasks: TaskService, examples: ExampleService, lead: LeadReviewService,
                 current_person: Callable[[], uuid.UUID] | None = None):
        self.db = db
        self.tasks = tasks
        self.examples = examples
        self.lead = lead
        self._current_person = current_person

    # --- growing --------------------------------------------------------------------------------

    def grow(self, task_code: str, models: Ensemble, *, seeds: Sequence[uuid.UUID] | None = None,
             per_seed: int | None = None, generated_by: uuid.UUID | None = None,
             progress: Progress | None = None) -> GrowReport:
        """Label-keeping variants of the task's seeds (``seeds``: these only), checked against ``models`` (the
        loaded current target), at most ``per_seed`` per seed (the lead's ``variants_per_seed`` by default),
        stored in the open round as ``generated_by``'s (a lead; the desk's profile by default). See growing.py."""
        if generated_by is None:
            if self._current_person is None:
                raise GrowError("Say who generates the variants (a lead).")
            generated_by = self._current_person()
        self.lead.require_lead(generated_by)
        return grow(self, task_code, models, seeds=seeds, per_seed=per_seed, generated_by=generated_by,
                    progress=progress)

    # --- topics ---------------------------------------------------------------------------------

    def topics(self, task_code: str) -> list[Topic]:
        """Every seed of the task as a topic, sorted as the tree is (group, edit type, round, text)."""
        task = self.tasks.task(task_code)
        with self.db.read() as session:
            rounds = dict(session.execute(select(Round.id, Round.number).where(Round.task_id == task.id)).all())
            seeds = self._seed_rows(session, task.id)
            counts = self._variant_counts(session, task.id)
        topics = [Topic(seed_id=row.id, task_code=task_code, round_number=rounds.get(row.round_id, 0), text=row.text,
                        label=label, group=seed_group(row.meta),
                        edit_type=edit_type(row.origin, row.meta, row.assistance, row.perturbation_of,
                                            label_stands=label == row.true_label),
                        seed_kind=seed_kind(row.origin, row.perturbation_of),
                        variants=counts.get(row.id, (0, 0))[0], validated=counts.get(row.id, (0, 0))[1])
                  for row, label in seeds]
        return sorted(topics, key=lambda t: (t.group == NO_GROUP, t.group.casefold(), t.edit_type, t.round_number,
                                             t.text, str(t.seed_id)))

    def topic(self, seed_id: uuid.UUID) -> Topic:
        with self.db.read() as session:
            task_id = session.scalar(select(Example.task_id).where(Example.id == seed_id))
        if task_id is None:
            raise NotFound(f"There is no example with id {seed_id}.")
        for found in self.topics(self.tasks.task_code(task_id)):
            if found.seed_id == seed_id:
                return found
        raise NotFound(f"Example {seed_id} is no seed: it did not fool its round's target as validated, nor flip "
                       "the model as a perturbation.")

    def _seed_rows(self, session: Any, task_id: uuid.UUID) -> list[tuple[Any, str]]:
        columns = (Example.id, Example.round_id, Example.text, Example.true_label, Example.meta, Example.origin,
                   Example.assistance, Example.perturbation_of, Example.model_fooled, Example.validation_state,
                   Example.decided_verdict, Example.decided_label)
        base = (Example.task_id == task_id, Example.status.in_(COUNTED), not_variant_clause())
        decided = session.execute(select(*columns).where(
            *base, Example.decided_verdict.in_((Verdict.CORRECT.value, Verdict.INCORRECT.value)))).all()
        perturbed = session.execute(select(*columns).where(
            *base, Example.perturbation_of.is_not(None),
            Example.decided_verdict.is_(None) | (Example.decided_verdict != Verdict.FLAGGED.value))).all()
        # the outputs that decide a corrected label's seed and a perturbation's flip
        wanted = {r.id for r in decided if r.decided_verdict == Verdict.INCORRECT.value}
        wanted |= {r.id for r in perturbed} | {r.perturbation_of for r in perturbed}
        labels = self._model_labels(session, sorted(wanted, key=str))
        seeds: dict[uuid.UUID, tuple[Any, str]] = {}
        for row in decided:
            label = decided_label(row.validation_state, row.decided_verdict, row.decided_label)
            if label is None:
                continue
            if row.decided_verdict == Verdict.CORRECT.value:
                fooled = row.model_fooled is True
            else:
                predicted = labels.get(row.id)
                fooled = predicted is not None and predicted != label
            if fooled:
                seeds[row.id] = (row, label)
        for row in perturbed:
            mine, theirs = labels.get(row.id), labels.get(row.perturbation_of)
            if row.id not in seeds and mine is not None and theirs is not None and mine != theirs:
                label = decided_label(row.validation_state, row.decided_verdict, row.decided_label) or row.true_label
                if label:
                    seeds[row.id] = (row, label)
        return list(seeds.values())

    @staticmethod
    def _model_labels(session: Any, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, str]:
        outputs: dict[uuid.UUID, list[tuple[str, Any]]] = {}
        for chunk in _chunks(ids):
            rows = session.execute(select(ModelOutputRow.example_id, ModelOutputRow.label, ModelOutputRow.probabilities)
                                   .where(ModelOutputRow.example_id.in_(chunk))
                                   .order_by(ModelOutputRow.example_id, ModelOutputRow.position))
            for example_id, label, probabilities in rows:
                outputs.setdefault(example_id, []).append((label, probabilities))
        return {k: label for k, v in outputs.items() if (label := model_label(v)) is not None}

    def _variant_rows(self, session: Any, task_id: uuid.UUID, *extra: Any) -> list[Any]:
        return list(session.execute(select(
            Example.id, Example.origin, Example.status, Example.validation_state, Example.decided_verdict,
            Example.decided_label, Example.round_id, Example.text, Example.inputs, Example.meta, Example.true_label,
            Example.model_fooled, Example.author_id, Example.created_at)
            .where(Example.task_id == task_id, variant_clause(), Example.status.in_(COUNTED), *extra)
            .order_by(Example.created_at, Example.id)).all())

    def _variant_counts(self, session: Any, task_id: uuid.UUID) -> dict[uuid.UUID, tuple[int, int]]:
        counts: dict[uuid.UUID, list[int]] = {}
        rows = session.execute(select(Example.origin, Example.validation_state, Example.decided_verdict,
                                      Example.decided_label)
                               .where(Example.task_id == task_id, variant_clause(), Example.status.in_(COUNTED)))
        for origin, state, verdict, label in rows:
            seed = seed_of(origin)
            if seed is not None:
                tally = counts.setdefault(seed, [0, 0])
                tally[0] += 1
                tally[1] += decided_label(state, verdict, label) is not None
        return {k: (v[0], v[1]) for k, v in counts.items()}

    # --- variants and the suite -----------------------------------------------------------------

    def cases(self, task_code: str) -> list[SuiteCase]:
        """The task's adaptive suite: every validated variant (its decided label), by seed then age."""
        task = self.tasks.task(task_code)
        with self.db.read() as session:
            rounds = dict(session.execute(select(Round.id, Round.number).where(Round.task_id == task.id)).all())
            rows = self._variant_rows(session, task.id, Example.validation_state == "decided")
        out = []
        for row in rows:
            label = decided_label(row.validation_state, row.decided_verdict, row.decided_label)
            seed = seed_of(row.origin)
            if label is None or seed is None:
                continue
            origin = row.origin or {}
            out.append(SuiteCase(example_id=row.id, seed_id=seed, family=str(origin.get("family") or WRITTEN),
                                 rule=str(origin.get("edit_type") or origin.get("rule") or ""),
                                 group=_variant_group(row.meta, origin), text=row.text,
                                 inputs={k: str(v) for k, v in (row.inputs or {}).items()}, label=label,
                                 round_number=rounds.get(row.round_id, 0)))
        out.sort(key=lambda c: (str(c.seed_id), c.round_number))
        return out

    def variants_of(self, seed_id: uuid.UUID) -> list[VariantState]:
        """Every variant of a seed (retracted ones left out), oldest first."""
        with self.db.read() as session:
            task_id = session.scalar(select(Example.task_id).where(Example.id == seed_id))
            if task_id is None:
                raise NotFound(f"There is no example with id {seed_id}.")
            rows = [r for r in self._variant_rows(session, task_id, Example.origin["seed_id"].as_string() == str(seed_id))
                    if seed_of(r.origin) == seed_id]
            validators: dict[uuid.UUID, list[str]] = {}
            for chunk in _chunks([r.id for r in rows]):
                for example_id, name in session.execute(
                        select(Validation.example_id, Person.display_name).join(Person, Person.id == Validation.validator_id)
                        .where(Validation.example_id.in_(chunk)).order_by(Validation.created_at)):
                    validators.setdefault(example_id, []).append(name)
        return [VariantState(example_id=r.id, seed_id=seed_id, text=r.text, label=r.true_label,
                             rule=str((r.origin or {}).get("rule") or ""), edit_type=str((r.origin or {}).get("edit_type") or ""),
                             group=_variant_group(r.meta, r.origin or {}), status=r.status,
                             validation_state=r.validation_state, decided_verdict=r.decided_verdict,
                             decided_label=decided_label(r.validation_state, r.decided_verdict, r.decided_label),
                             model_fooled=r.model_fooled, generated_by=_person(r.origin, r.author_id),
                             validators=tuple(dict.fromkeys(validators.get(r.id, ()))))
                for r in rows]

    # --- export ---------------------------------------------------------------------------------

    def export_csv(self, task_code: str, path: Path) -> int:
        """The suite as a HateCheck-format CSV (functionality = the topic's edit type, case_id = the variant,
        templ_id = its seed); returns the number of cases written. The file is replaced whole or not at all."""
        cases = self.cases(task_code)
        hate = task_code == "hate_speech"
        path = Path(path)
        partial = path.with_name(path.name + ".partial")
        try:
            with partial.open("w", encoding="utf-8", newline="") as handle:
                writer = csv.writer(handle)
                writer.writerow(HATECHECK_HEADER)
                for index, case in enumerate(cases):
                    gold = HATECHECK_GOLD.get(case.label, case.label) if hate else case.label
                    writer.writerow([index, case.family, str(case.example_id), case.text, gold,
                                     "" if case.group == NO_GROUP else case.group, "", "", "", "", "",
                                     str(case.seed_id), ""])
            partial.replace(path)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise DynadeskError(f"The suite could not be written to {path}: {exc.strerror or exc}.") from exc
        return len(cases)

    # --- storing generated variants -------------------------------------------------------------

    def store_variants(self, task_code: str, generated_by: uuid.UUID,
                       items: Sequence[tuple[Any, Sequence[Any], dict[str, Any]]]) -> list[uuid.UUID]:
        """Submit generated variants (content, the current target's outputs, origin) to the task's open round,
        as ``generated_by``'s, in one unit of work; they enter the Validate queue and the outbox."""
        stored = self.examples.create_generated(generated_by, task_code, items, source=VARIANT_SOURCE)
        return [e.id for e in stored]


def _variant_group(meta: Any, origin: Any) -> str:
    group = seed_group(meta)
    if group != NO_GROUP:
        return group
    topic_group = (origin or {}).get("topic_group")
    return str(topic_group) if isinstance(topic_group, str) and topic_group else NO_GROUP


def _person(origin: Any, fallback: uuid.UUID) -> uuid.UUID:
    try:
        return uuid.UUID(str((origin or {}).get("generated_by")))
    except ValueError:
        return fallback
