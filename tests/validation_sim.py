"""Real text for the validation and review views: ANLI round-1 dev examples, validated by a
few simulated people whose verdicts partly disagree (seeded, so every run is the same)."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from app.core.domain import Verdict
from app.core.errors import ValidationRuleError
from app.core.io.importers import import_file
from tests.conftest import shared_file

LABELS = ("entailment", "neutral", "contradiction")
REASONS = {
    Verdict.INCORRECT: ["The context never says this; it is neutral at best.",
                        "The hypothesis follows directly from the second sentence.",
                        "The dates in the context contradict the hypothesis."],
    Verdict.FLAGGED: ["The hypothesis copies the context word for word.",
                      "Relies on outside knowledge the context does not give."],
}


@dataclass
class Simulation:
    validators: list = field(default_factory=list)
    lead: object = None
    verdicts: int = 0
    examples: list = field(default_factory=list)  # ids of the examples the validators worked on


def import_anli(desk) -> int:
    """ANLI round-1 dev into the desk's NLI task; returns how many examples were imported."""
    report = import_file(desk, shared_file("anli", "ANLI_analysis_r1_dev.csv"), "anli")
    return report.added.get("examples", 0)


def simulate(desk, *, seed: int = 5, validators: int = 4, examples: int = 60, disagreement: float = 0.3,
             flag_rate: float = 0.08) -> Simulation:
    """The first ``examples`` examples of the NLI queue each get verdicts from a random subset of
    the validators, in random order. With probability ``disagreement`` a verdict is 'incorrect' (with another label), with
    ``flag_rate`` 'flagged'; otherwise 'correct'. Verdicts stop once an example is decided.
    """
    rng = random.Random(seed)
    names = ["Asha Peer", "Bruno Peer", "Chen Peer", "Dara Peer", "Emil Peer", "Fatou Peer"][:validators]
    sim = Simulation(validators=[desk.people.create(name, "annotator") for name in names],
                     lead=desk.people.create("Lena Lead", "lead"))
    pool = [e.id for e in desk.validation.queue(sim.validators[0].id, task_code="nli", limit=examples)]
    sim.examples = pool
    for example_id in pool:
        example = desk.examples.get(example_id)
        order = list(sim.validators)
        rng.shuffle(order)
        for person in order[: rng.randint(1, len(order))]:
            roll = rng.random()
            try:
                if roll < flag_rate:
                    desk.validation.validate(example_id, person.id, Verdict.FLAGGED,
                                             reason=rng.choice(REASONS[Verdict.FLAGGED]))
                elif roll < flag_rate + disagreement:
                    other = rng.choice([label for label in LABELS if label != example.true_label])
                    desk.validation.validate(example_id, person.id, Verdict.INCORRECT, corrected_label=other,
                                             reason=rng.choice(REASONS[Verdict.INCORRECT]))
                else:
                    desk.validation.validate(example_id, person.id, Verdict.CORRECT,
                                             model_note="The model matched words instead of reasoning."
                                             if rng.random() < 0.3 else None)
            except ValidationRuleError:  # decided by the verdicts before this one
                break
            sim.verdicts += 1
    return sim
