"""The next-round flow on real text, shared by the end-to-end test, `make bench`'s rounds group and the
evidence scripts (bench/evidence_rounds.py; bench/evidence_rounds_nli.py takes its timing and reporting helpers).

Round 1 is simulated from HateCheck: its cases are imported as hate-speech round-1 examples written against
the desk's default model (its answers recorded, so "fooled" means what it means on the desk), grouped by
template (``templ_id``) for the held-out split, and decided by seeded simulated validators: each verdict
follows the gold label except with a small seeded error rate, and a lead settles what the peers do not agree
on. Round 2's candidate is trained from those examples plus Davidson et al. (2017), compared, promoted and
published. HateCheck is a test suite: a model trained here is for this flow only and is never shipped.

Nothing here is tuned on the held-out templates: every option is the desk's default.
"""

from __future__ import annotations

import csv
import json
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.core.domain import Verdict
from app.core.errors import ValidationRuleError

TASK = "hate_speech"
HATECHECK = ("hatecheck", "test_suite_cases_dev.csv")
DAVIDSON = ("davidson2017", "labeled_data.csv")
DAVIDSON_LABELS = {"0": "hate", "1": "not hate", "2": "not hate"}
LABELS = ("hate", "not hate")


@dataclass
class Timings:
    seconds: dict[str, float] = field(default_factory=dict)

    def timed(self, name: str, work: Callable[[], Any]) -> Any:
        started = time.perf_counter()
        try:
            return work()
        finally:
            self.seconds[name] = time.perf_counter() - started


def davidson_sample(source: Path, out: Path, rows: int | None, seed: int = 7) -> Path:
    """Davidson's file, or a seeded, class-stratified sample of ``rows`` of its rows written to ``out`` (a
    scratch file outside the project) for runs that must be short."""
    if rows is None:
        return source
    with open(source, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, table = reader.fieldnames, list(reader)
    rng = random.Random(seed)
    by_class: dict[str, list[dict]] = {}
    for row in table:
        by_class.setdefault(DAVIDSON_LABELS.get(row["class"], row["class"]), []).append(row)
    chosen = []
    for _label, members in sorted(by_class.items()):
        chosen += rng.sample(members, max(1, round(rows * len(members) / len(table))))
    rng.shuffle(chosen)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        writer.writerows(chosen)
    return out


def base_options(path: Path):
    from app.core.next_round.round_training import BaseDataOptions

    return BaseDataOptions(str(Path(path).resolve()), "tweet", "class", dict(DAVIDSON_LABELS), True)


def base_test_options():
    from app.core.next_round.comparison import BaseTestOptions

    return BaseTestOptions("tweet", "class", dict(DAVIDSON_LABELS), True)


def import_round_one(desk: Any, hatecheck: Path) -> Any:
    """HateCheck's cases as round-1 examples against the round's target, one split group per template."""
    from app.core.io.importers import import_file

    return import_file(desk, hatecheck, "hatecheck", task_code=TASK, round_number=1, group_column="templ_id")


def simulate_validators(desk: Any, *, seed: int = 11, error_rate: float = 0.05, peers: int = 3,
                        lead: Any = None, task: str = TASK, labels: tuple[str, ...] = LABELS, only: Any = None,
                        names: str = "Simulated validator") -> dict[str, int]:
    """Seeded peers give verdicts on every submitted round-1 example of ``task`` until it is decided: 'correct' (the
    author's label is the gold one), except with ``error_rate`` an 'incorrect' with the first other of ``labels``.
    What the peers leave undecided, the lead settles with the gold label. Returns counts of what happened.
    ``only``: a condition on ``Example`` that narrows the examples (e.g. the variants grown since); ``names``:
    the peers' name (numbered)."""
    from sqlalchemy import select

    from app.core.storage.models import Example

    rng = random.Random(seed)
    people = [desk.people.create(f"{names} {i + 1}", "annotator") for i in range(peers)]
    lead = lead or desk.people.create("Simulated lead", "lead")
    round_id = desk.tasks.round(task, 1).id
    query = select(Example.id, Example.true_label).where(Example.round_id == round_id)
    with desk.db.read() as session:
        examples = list(session.execute((query if only is None else query.where(only))
                                        .order_by(Example.external_id, Example.id)))
    counts = {"examples": len(examples), "verdicts": 0, "wrong_verdicts": 0, "settled_by_lead": 0}
    for example_id, gold in examples:
        order = people[:]
        rng.shuffle(order)
        decided = False
        for person in order:
            wrong = rng.random() < error_rate
            try:
                if wrong:
                    desk.validation.validate(example_id, person.id, Verdict.INCORRECT,
                                             corrected_label=next(lb for lb in labels if lb != gold),
                                             reason="Simulated validator: the other label (a seeded error).")
                else:
                    desk.validation.validate(example_id, person.id, Verdict.CORRECT)
            except ValidationRuleError:
                decided = True
                break
            counts["verdicts"] += 1
            counts["wrong_verdicts"] += wrong
        if not decided and desk.examples.get(example_id).validation_state != "decided":
            desk.validation.validate(example_id, lead.id, Verdict.CORRECT, mode="lead")
            counts["settled_by_lead"] += 1
    return counts


def train_round_two(desk: Any, base_csv: Path, out: Path, *, progress: Any = None, round_weight: str = "auto",
                    int8: str = "now", variants: float | None = None, **config: Any) -> dict[str, Any]:
    """`dynadesk train --task hate_speech --rounds 1 --imported hatecheck --base DAVIDSON ...` with the desk's
    defaults (warm start from the round's target; ``config`` overrides training options, e.g. for a short run;
    ``int8="later"`` leaves the int8 search for after promotion; ``variants``: `--variants WEIGHT`, the validated
    variants too)."""
    from app.core.next_round.round_training import RoundTrainingOptions, train_from_desk
    from local_models.train import TrainingConfig

    options = RoundTrainingOptions(task=TASK, rounds=[1], base_data=base_options(base_csv), imported=["hatecheck"],
                                   round_weight=round_weight, config=TrainingConfig(**config), int8=int8,
                                   variants=variants)
    return train_from_desk(desk, options, out, progress=progress)


def compare(desk: Any, candidate: Path, base_csv: Path, *, resamples: int = 2000, seed: int = 0,
            num_threads: int | None = None) -> Any:
    from app.core.next_round.comparison import compare_candidate

    return compare_candidate(desk, TASK, candidate, base_test=base_csv, base_options=base_test_options(),
                             resamples=resamples, seed=seed, num_threads=num_threads)


def promote(desk: Any, candidate: Path, report: Any, actor_id: uuid.UUID | None = None, *,
            anyway: str | None = None) -> Any:
    """Promote as the dialog does; ``anyway``: the reason to promote over a refusal (a bench timing the whole
    flow whatever the verdict says); without it a refused candidate raises ``PromotionRefused``."""
    from app.core.next_round.promotion import promote_candidate

    forced = anyway is not None and report is not None and report.verdict.refused
    return promote_candidate(desk, TASK, candidate, comparison=report, actor_id=actor_id, force=forced,
                             reason=anyway if forced else None)


def figures(report: Any) -> list[dict[str, Any]]:
    """The comparison's figures, one row per split and measure: current target, candidate, the difference and its
    95 % paired-bootstrap interval."""
    rows = []
    for d in report.differences:
        rows.append({"split": d.split, "metric": d.metric, "items": d.items, "current": d.current,
                     "candidate": d.candidate, "difference": d.difference, "low": d.low, "high": d.high})
    return rows


def format_figures(rows: list[dict[str, Any]]) -> str:
    def number(value: Any) -> str:
        return "-" if value is None else f"{value:.3f}"

    header = ["split", "measure", "n", "round-1 target", "round-2 candidate", "difference", "95 % interval"]
    table = [[r["split"], r["metric"], str(r["items"]), number(r["current"]), number(r["candidate"]),
              ("-" if r["difference"] is None else f"{r['difference']:+.3f}"),
              "-" if r["low"] is None else f"[{r['low']:+.3f}, {r['high']:+.3f}]"] for r in rows]
    widths = [max(len(x) for x in col) for col in zip(header, *table)]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip()
                     for row in [header, ["-" * w for w in widths], *table])


def run_conditions(threads: int) -> str:
    """How an evidence run ran: threads, cores and the load it shared the machine with."""
    return (f"cold frozen-layer cache; {threads} thread(s); machine: {os.cpu_count()} cores, load average at the end "
            f"{os.getloadavg()[0]:.1f}")


def printed_progress() -> Any:
    """A long evidence run's progress on stderr: the stage in words, counts at most every 30 s."""
    import sys
    import time

    from local_models.progress import Progress

    last = [0.0]

    def report(done: int, total: int) -> None:
        if time.perf_counter() - last[0] > 30 or done == total:
            last[0] = time.perf_counter()
            print(f"    {done:,}/{total:,}", file=sys.stderr, flush=True)

    return Progress(report, lambda text: print(f"  {text}", file=sys.stderr, flush=True))


def write_evidence(work: Path, figures: list[dict[str, Any]], manifest: dict[str, Any], timings: Timings,
                   **extra: Any) -> Path:
    """<work>/evidence.json: the comparison's figures, what else the run found, its stage times, and the
    candidate's own metrics and frozen-cache use."""
    path = work / "evidence.json"
    path.write_text(json.dumps({"figures": figures, **extra, "times_s": timings.seconds,
                                "manifest_metrics": manifest["metrics"], "frozen_cache": manifest["frozen_cache"]},
                               indent=2))
    print(f"Wrote {path} and {work / 'comparison'}")
    return path
