"""A simulated team for dashboard tests and screenshots: ANLI's real examples shared among several
writers, and validators of differing care who give seeded, partly disagreeing verdicts through
the real ValidationService.

ANLI comes from one crowd pool, so who wrote what, how long it took and when are simulated
here (seeded); the texts, labels and the adversary's predictions are ANLI's own.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

from sqlalchemy import text

from app.core.errors import ValidationRuleError
from app.core.io.importers import import_file
from app.core.services.dashboard_snapshot import DashboardFilter
from tests.conftest import hate_content, hate_output

WRITERS = [  # name, seconds per example (median), share of the examples they wrote
    ("Amara Okafor", 150, 0.26), ("Bruno Teixeira", 95, 0.22), ("Chen Wei", 210, 0.18),
    ("Dana Levi", 120, 0.16), ("Emil Sørensen", 70, 0.10), ("Farah Haddad", 180, 0.08),
]
VALIDATORS = [  # name, how often their verdict is right
    ("Gita Rao", 0.95), ("Hugo Martin", 0.9), ("Ines Duarte", 0.85), ("Jonas Berg", 0.75), ("Kofi Mensah", 0.6),
]


@dataclass
class SimulatedTeam:
    task_code: str
    writers: dict[str, uuid.UUID]
    validators: dict[str, uuid.UUID]
    example_ids: list[uuid.UUID]
    verdicts: int = 0
    truth: dict[uuid.UUID, tuple[str, str | None]] = field(default_factory=dict)  # the simulated right verdict


def import_anli_team(desk, path: str | Path, *, seed: int = 7, days: int = 21, now: datetime | None = None,
                     retract: float = 0.03) -> SimulatedTeam:
    """Import ANLI into the NLI task and share its examples among :data:`WRITERS` over ``days``
    days, with writing times around each writer's pace; a few are retracted."""
    rng = random.Random(seed)
    import_file(desk, path, "anli")
    now = now or datetime.now(UTC)
    writers = {name: desk.people.create(name, "annotator").id for name, _, _ in WRITERS}
    with desk.db.read() as session:
        ids = [uuid.UUID(i) for (i,) in session.execute(text(
            "SELECT id FROM examples WHERE source = 'anli' OR origin LIKE '%\"format\": \"anli\"%' ORDER BY external_id"))]
    start = now - timedelta(days=days)
    updates = []
    for i, example_id in enumerate(ids):
        name, pace, _share = rng.choices(WRITERS, weights=[w[2] for w in WRITERS])[0]
        # Writers improve over time: later examples come a little faster.
        seconds = max(15, int(rng.lognormvariate(0, 0.45) * pace * (1.15 - 0.3 * i / len(ids))))
        when = start + timedelta(seconds=(days * 86400 - 6 * 3600) * i / len(ids) + rng.uniform(0, 3600))
        updates.append({"id": example_id.hex, "author": writers[name].hex, "ms": seconds * 1000,
                        "at": when.replace(tzinfo=None).isoformat(sep=" "),
                        "status": "retracted" if rng.random() < retract else "submitted"})
    with desk.db.write() as session:
        # they stand for examples these writers wrote on their desks (no data set's source): MER counts them
        session.execute(text("UPDATE examples SET author_id = :author, time_spent_ms = :ms, submitted_at = :at, "
                             "created_at = :at, updated_at = :at, status = :status, source = NULL WHERE id = :id"),
                        updates)
    return SimulatedTeam("nli", writers, {}, ids)


def simulate_validators(desk, team: SimulatedTeam, *, seed: int = 11, share: float = 0.8,
                        bad: float = 0.12, delay_hours: float = 30.0) -> SimulatedTeam:
    """Peer validators of differing accuracy validate the oldest ``share`` of the examples until
    each is decided (or runs out of validators); a ``bad`` share of examples really deserve
    'incorrect'. Verdicts are stored through ValidationService and dated hours after the example."""
    rng = random.Random(seed)
    labels = list(desk.tasks.definition_by_code(team.task_code).labels)
    team.validators = {name: desk.people.create(name, "annotator").id for name, _ in VALIDATORS}
    accuracy = {team.validators[name]: p for name, p in VALIDATORS}
    with desk.db.read() as session:
        rows = session.execute(text(
            "SELECT id, true_label, submitted_at FROM examples WHERE status = 'submitted' AND task_id = "
            "(SELECT id FROM tasks WHERE code = :code) ORDER BY submitted_at"), {"code": team.task_code}).all()
    rows = rows[:int(len(rows) * share)]
    dated = []
    for example_id, true_label, submitted_at in rows:
        example_id = uuid.UUID(example_id)
        if rng.random() < bad:
            truth = ("incorrect", rng.choice([label for label in labels if label != true_label]))
        else:
            truth = ("correct", None)
        team.truth[example_id] = truth
        order = list(team.validators.values())
        rng.shuffle(order)
        submitted = datetime.fromisoformat(str(submitted_at))
        when = submitted + timedelta(hours=rng.uniform(1, delay_hours))
        for validator in order:
            if rng.random() < accuracy[validator]:
                verdict, label = truth
            else:
                verdict = rng.choice(["correct", "incorrect", "incorrect", "flagged"])
                label = rng.choice([x for x in labels if x != true_label]) if verdict == "incorrect" else None
                if (verdict, label) == truth:
                    verdict, label = ("incorrect", rng.choice([x for x in labels if x != true_label])) \
                        if verdict == "correct" else ("correct", None)
            try:
                validation = desk.validation.validate(
                    example_id, validator, verdict, corrected_label=label,
                    reason=None if verdict == "correct" else "simulated reason", time_spent_ms=rng.randint(8, 90) * 1000)
            except ValidationRuleError:
                break  # decided: no more peer verdicts
            team.verdicts += 1
            dated.append({"id": validation.id.hex, "at": when.isoformat(sep=" ")})
            when += timedelta(hours=rng.uniform(0.5, delay_hours))
    with desk.db.write() as session:
        session.execute(text("UPDATE validations SET created_at = :at, updated_at = :at WHERE id = :id"), dated)
    return team


def small_team(desk, people, target_model) -> SimpleNamespace:
    """Ana writes six examples in round 1 (one retracted, two perturbations); Vic writes one in round 2.

    | ex | label    | model    | fooled | time | validations                          | decision     |
    |----|----------|----------|--------|------|--------------------------------------|--------------|
    | a1 | hate     | not hate | yes    | 60 s | val1 c, val2 c, val3 i; lead c       | correct      |
    | a2 | hate     | not hate | yes    |120 s | val1, val2, val3: i → not hate       | incorrect    |
    | a3 | not hate | not hate | no     |  0 s | val1 c, val3 flagged                 | —            |
    | a4 | not hate | hate     | yes    | 30 s | (perturbation of a1, 1 word)         | —            |
    | a5 | not hate | not hate | no     | 50 s | (perturbation of a2, 3 words)        | —            |
    | a6 | hate     | not hate | yes    | 90 s | retracted                            |              |
    | v1 | not hate | hate     | yes    | 40 s | lead c (round 2)                     | correct      |
    """
    round2 = desk.tasks.get_or_create_round("hate_speech", 2)

    def submit(author, text, label, predicted, seconds, round_number=1, parent=None, **meta):
        return desk.examples.create(author.id, "hate_speech", hate_content(text, label, **meta),
                                    [hate_output(target_model, predicted)], round_number=round_number,
                                    perturbation_of=parent, time_spent_ms=seconds * 1000)

    ana, vic = people.author, people.val1
    a1 = submit(ana, "they are all vermin", "hate", "not hate", 60, target_groups=["women", "immigrants"])
    a2 = submit(ana, "those people are filth and disease", "hate", "not hate", 120, hate_type="dehumanization")
    a3 = submit(ana, "the weather is lovely today", "not hate", "not hate", 0)
    a4 = submit(ana, "they are all lovely", "not hate", "hate", 30, parent=a1.id)
    a5 = submit(ana, "those people are kind and generous neighbours", "not hate", "not hate", 50, parent=a2.id)
    a6 = submit(ana, "go back where you came from", "hate", "not hate", 90)
    desk.examples.retract(a6.id, ana.id, "duplicate")
    v1 = submit(vic, "I love my neighbours", "not hate", "hate", 40, round_number=2)

    validate = desk.validation.validate
    validate(a1.id, people.val1.id, "correct")
    validate(a1.id, people.val2.id, "correct")
    validate(a1.id, people.val3.id, "incorrect", corrected_label="not hate", reason="not hateful")
    validate(a1.id, people.lead.id, "correct", mode="lead")
    for validator in (people.val1, people.val2, people.val3):
        validate(a2.id, validator.id, "incorrect", corrected_label="not hate", reason="not hateful")
    validate(a3.id, people.val1.id, "correct")
    validate(a3.id, people.val3.id, "flagged", reason="unclear")
    validate(v1.id, people.lead.id, "correct", mode="lead")
    task_id = desk.tasks.task("hate_speech").id
    return SimpleNamespace(a1=a1, a2=a2, a3=a3, a4=a4, a5=a5, a6=a6, v1=v1, round2=round2, task_id=task_id,
                           flt=DashboardFilter(task_id=task_id))
