"""Evidence that a pair task closes its round from the desk: ANLI round 1 (the shared sample) as round 1's data on
top of a small NLI base, trained, compared and promoted as `dynadesk train --task nli` and the Next round dialog do.

    python -m bench.evidence_rounds_nli [--work DIR] [--base-share 0.5] [--resamples 2000] [--threads 2]

No NLI model ships, and the only NLI data here is ANLI's 1,000 round-1 development examples. So the sample is split
by context (a context and every hypothesis written on it fall on one side; seeded): one part is the small NLI base
(premise, hypothesis, label), on which the round-1 target is trained: the packaged all-MiniLM-L6-v2 encoder with a
fresh classification head, top layer and pooler trained, every option at its default. The other part is imported
as round 1 (`import --format anli --group-column context`), so round 1's held-out split holds whole contexts, and
decided by seeded simulated validators as bench.evidence_rounds decides HateCheck's cases (the comparison scores
decided held-out examples), and taken as the imported data set it is (`--imported anli`). Then: train the next target from the desk (warm start from round 1's
target, base data as pairs), compare it with round 1's target on the held-out split and the base data's test split
(paired bootstrap, 95 % intervals), and promote it under the desk's promotion rule, reporting its verdict. ANLI was
written to fool strong models, so both models stay near chance (a third); the run shows that the pipeline takes
pairs end to end and what its figures are, not a good NLI model. Reads /work/shared/data (../shared/data from the
project root); writes only under --work (the split files too: nothing of the data set is kept elsewhere).
"""

from __future__ import annotations

import argparse
import csv
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from tests import round_flow as flow  # noqa: E402
from tests.conftest import SHARED_DATA  # noqa: E402

TASK = "nli"
ANLI = ("anli", "ANLI_analysis_r1_dev.csv")
LABELS = {"e": "entailment", "n": "neutral", "c": "contradiction"}


def split_by_context(source: Path, work: Path, base_share: float, seed: int = 7) -> tuple[Path, Path, dict]:
    """(base data CSV with premise/hypothesis/label, ANLI-format CSV of round 1, counts), split by context."""
    with open(source, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = list(reader.fieldnames or []), list(reader)
    contexts = sorted({r["context"] for r in rows})
    random.Random(seed).shuffle(contexts)
    base_contexts = set(contexts[:round(len(contexts) * base_share)])
    base, round_one = work / "nli-base.csv", work / "anli-round-1.csv"
    with open(base, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "label"])
        writer.writerows((r["context"], r["statement"], LABELS[r["gold_label"]]) for r in rows
                         if r["context"] in base_contexts)
    with open(round_one, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(r for r in rows if r["context"] not in base_contexts)
    in_base = sum(r["context"] in base_contexts for r in rows)
    return base, round_one, {"rows": len(rows), "contexts": len(contexts), "base_rows": in_base,
                             "base_contexts": len(base_contexts), "round_rows": len(rows) - in_base}


def train_target(desk, base: Path, work: Path, encoder: Path | None, threads: int, progress) -> object:
    """Round 1's target: the encoder with a fresh head trained on the base data's pairs (the task's label order),
    on this desk as `dynadesk train` would (its frozen-layer cache keeps the base pairs' states)."""
    from app.core import paths
    from app.core.io.training import read_labelled_csv
    from app.core.services.target_models import register_model
    from local_models.frozen_cache import FrozenCache
    from local_models.train import TrainingConfig, assemble, train_classifier

    labels = desk.tasks.definition_by_code(TASK).labels
    data = read_labelled_csv(base, "hypothesis", "label", context_column="premise",
                             label_map={label: label for label in labels})
    part = work / "round-1-target"
    train_classifier(data, part, base_dir=encoder, config=TrainingConfig(num_threads=threads), progress=progress,
                     name="NLI round 1 (all-MiniLM-L6-v2, fresh head, small ANLI base)",
                     frozen_cache=FrozenCache(paths.frozen_states_cache_dir(desk.root)))
    model = assemble(part, work / "round-1-target-model", base_dir=encoder)
    return register_model(desk, model, task_code=TASK, name="NLI round-1 target")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evidence_rounds_nli")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--base-share", type=float, default=0.5, help="share of ANLI's contexts taken as base data")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--encoder", type=Path, help="base encoder folder (default: the packaged all-MiniLM-L6-v2)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for training and comparing")
    parser.add_argument("--error-rate", type=float, default=0.05, help="simulated validators' error rate")
    args = parser.parse_args(argv)

    from app.core.desk import Desk
    from app.core.io.importers import import_file
    from app.core.next_round.comparison import BaseTestOptions, compare_candidate
    from app.core.next_round.comparison_report import write_report
    from app.core.next_round.promotion import PromotionRefused, promote_candidate
    from app.core.next_round.round_training import BaseDataOptions, RoundTrainingOptions, train_from_desk
    from local_models.train import TrainingConfig

    work = args.work or Path(tempfile.mkdtemp(prefix="dynadesk-evidence-nli-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    base, round_csv, split = split_by_context(SHARED_DATA.joinpath(*ANLI), work, args.base_share)
    say = flow.printed_progress()
    timings = flow.Timings()
    encoder = args.encoder.resolve() if args.encoder else None
    with Desk(work / "desk") as desk:
        owner = desk.people.create("Evidence Owner", "owner")
        desk.switch_person(owner.id)
        target = timings.timed("train round-1 target", lambda: train_target(desk, base, work, encoder, args.threads,
                                                                              say))
        desk.rounds.set_models(desk.tasks.round(TASK, 1).id, owner.id, [target.id])
        imported = timings.timed("import", lambda: import_file(desk, round_csv, "anli", round_number=1,
                                                               group_column="context"))
        print(imported.summary(), file=sys.stderr)
        validation = timings.timed("validation", lambda: flow.simulate_validators(
            desk, task=TASK, labels=tuple(LABELS.values()), error_rate=args.error_rate))
        print(f"Validation: {validation}", file=sys.stderr, flush=True)

        started = time.perf_counter()
        options = RoundTrainingOptions(
            task=TASK, rounds=[1], imported=["anli"], encoder=str(encoder) if encoder else None,
            base_data=BaseDataOptions(str(base), "hypothesis", "label", context_column="premise"),
            config=TrainingConfig(num_threads=args.threads))
        manifest = timings.timed("train", lambda: train_from_desk(desk, options, work / "candidate", progress=say))
        report = timings.timed("compare", lambda: compare_candidate(
            desk, TASK, work / "candidate", base_test=base, resamples=args.resamples, num_threads=args.threads,
            base_options=BaseTestOptions("hypothesis", "label", context_column="premise")))
        write_report(report, work / "comparison")
        try:
            promotion = timings.timed("promote", lambda: promote_candidate(desk, TASK, work / "candidate",
                                                                             comparison=report))
            verdict = (f"promoted to round {promotion.round_number}: {promotion.candidate.name} "
                       f"({'ONNX' if promotion.onnx else 'PyTorch'}; {promotion.parity_note})")
        except PromotionRefused as refused:
            verdict = "refused by the promotion rule: " + " | ".join(refused.lines)
        total = time.perf_counter() - started

    rows = flow.figures(report)
    counts = manifest["data"]["summary"]["counts"]
    print(f"\nNLI: round-1 target (all-MiniLM-L6-v2 with a fresh head, trained on {split['base_rows']} ANLI pairs of "
          f"{split['base_contexts']} contexts) vs the desk-trained candidate; ANLI r1 dev's other {split['round_rows']} "
          f"pairs imported as round 1 (held out by context); paired bootstrap, {args.resamples} resamples, 95 % "
          "intervals.")
    print(f"Candidate: {counts['train']} round pairs trained on, {counts['held_out']} held out, {counts['base']} base "
          f"pairs; started from the {manifest['parent']['kind']}; round weight {manifest['weighting']['value']:g}; "
          f"frozen cache: {manifest['frozen_cache']['computed']} computed, {manifest['frozen_cache']['from_cache']} "
          "from cache.")
    print(flow.format_figures(rows))
    print("\n(held-out-1: round 1's held-out ANLI pairs; held-out: every round's held-out split together (here the "
          "same); fooling_right: the share of the split's model-fooling pairs the model gets right; base-test: the "
          "base data's seeded test split, never trained on by either model.)")
    print(f"Validation (seeded simulated peers, error rate {args.error_rate}): {validation}")
    print(f"\nVerdict: {verdict}")
    print("Times: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.seconds.items()))
    print(f"Train -> compared -> promotion verdict: {total:.0f} s; {flow.run_conditions(args.threads)} (the base "
          "pairs' frozen states were kept by the round-1 target's training on this desk)")
    flow.write_evidence(work, rows, manifest, timings, split=split, validation=validation, verdict=verdict,
                        train_to_verdict_s=total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
