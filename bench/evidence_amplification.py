"""Does amplification pay off? The round-2 candidate trained WITH validated variants of round 1's fooling examples
against the one trained WITHOUT them, everything else the same, with paired-bootstrap 95 % intervals.

    python -m bench.evidence_amplification [--work DIR] [--resamples 2000] [--error-rate 0.1] [--seed 11]
                                           [--davidson-rows N] [--max-seeds N] [--per-seed N] [--variant-weight W]
                                           [--frozen-cache DIR] [--models-cache DIR] [--threads 2] [--quick]

The round is bench.evidence_rounds' (tests/round_flow.py): the shipped default model (its int8 ONNX form, as the
desk adopts it) is round 1's target; HateCheck's 2,297 dev cases are round 1, written against it (its answers
recorded), split by template (a template falls whole on one side), and decided by seeded simulated validators;
all of Davidson et al. (2017) is the base data. Then:

1. Seeds: the round-1 examples that fooled the target and were validated (the adaptive suite's topics), on both
   sides of the split. The desk grows label-keeping variants of each (``desk.adaptive_suite.grow``: the writing
   assistant's generators, checked against the round-1 target, near-duplicates folded), at most ``--per-seed``
   per seed (default: the task's ``variants_per_seed`` setting). ``--max-seeds N`` grows a seeded sample of N
   seeds instead, drawn on both sides of the split in proportion: growing checks every seed's drafts (about a
   hundred) against the target, some 2 s a seed on a busy 2-core machine, so all ~830 seeds take ~30 min there.
2. Seeded simulated validators decide every variant through the desk's validation service: each peer's verdict
   keeps the variant's claimed label except with probability ``--error-rate``, when it says 'incorrect' with the
   other label; peers give verdicts until the desk's rule decides, and what they leave undecided the lead
   settles with the claimed label. The simulation takes the generators' claimed labels as the truth: it
   measures what validator noise does, not what a generator's wrong claim would (a real validator would catch
   some of those). Only validated variants count (the suite and ``--variants`` training read the decisions).
3. Two round-2 candidates, trained alike (every option the desk's default, warm start from round 1's target,
   the same seed; the int8 search deferred: it does not change the weights scored here): WITHOUT, and WITH the
   validated variants (``variants`` training option, ``--variant-weight``). A seed's variants fall on its side
   of the held-out split, so variants of held-out seeds are never trained on.
4. Both (and round 1's target, for context) scored on (a) the held-out HateCheck templates (HateCheck's gold
   labels; templates drawn whole), also only their validated fooling cases (the held-out seeds); (b) Davidson's
   seeded test split (the one training held out); (c) each HateCheck functionality of the held-out templates;
   (d) the adaptive suite's held-out topics (validated variants of held-out seeds, their decided labels; topics
   drawn whole), overall, per topic family and per variant edit. with - without, paired bootstrap, 95 %; help or
   hurt only where the interval excludes 0 and was drawn from at least five units (templates, topics).

Reads /work/shared/data (../shared/data from the project root); writes only under --work (evidence.json there).
``--quick``: a smoke-test size (40 templates, 300 Davidson rows, 3 variants per seed, one epoch); its figures mean
nothing, and it still takes minutes (13 on a busy 2-core machine), so no test runs it.
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
import uuid
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from bench import amplification_figures as af  # noqa: E402
from tests import round_flow as flow  # noqa: E402
from tests.conftest import SHARED_DATA  # noqa: E402


@dataclass(frozen=True)
class Size:
    """How big a run is: the full experiment, or the smoke test's few minutes."""

    davidson_rows: int | None
    hatecheck_templates: tuple[int, int] | None  # (held-out, training) templates sampled; None: all of them
    per_seed: int | None  # None: the task's variants_per_seed setting
    epochs: int | None  # None: the desk's default


FULL = Size(None, None, None, None)
MIN_EDIT_ITEMS = 10  # per variant edit type, a row only with this many held-out variants
QUICK = Size(300, (10, 30), 3, 1)


def hatecheck_sample(source: Path, out: Path, templates: tuple[int, int] | None, seed: int) -> Path:
    """HateCheck's dev cases, or those of a seeded sample of templates (``templates``: how many of the held-out
    side and of the training side, by the desk's own split rule) written to ``out`` for a short run."""
    if templates is None:
        return source
    from app.core.tasks.splits import is_held_out

    with open(source, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        header, rows = list(reader.fieldnames or []), list(reader)
    names = sorted({r["templ_id"] for r in rows}, key=int)
    held = [t for t in names if is_held_out(uuid.UUID(int=0), None, group=f"templ_id={t}")]  # the import's group
    trained = [t for t in names if t not in set(held)]
    rng = random.Random(seed)
    cases = {t: sum(r["templ_id"] == t for r in rows) for t in names}

    def fullest(side: list[str], count: int) -> set[str]:  # templates with most cases first, ties seeded
        return set(sorted(side, key=lambda t: (-cases[t], rng.random()))[:count])

    chosen = fullest(held, templates[0]) | fullest(trained, templates[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(r for r in rows if r["templ_id"] in chosen)
    return out


def use_frozen_cache(desk: Any, shared: Path | None) -> None:
    """Keep the frozen layers' outputs in ``shared`` (kept across runs) instead of the new desk's own cache."""
    if shared is None:
        return
    from app.core import paths

    folder = paths.frozen_states_cache_dir(desk.root)
    shared.mkdir(parents=True, exist_ok=True)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if folder.exists() and not folder.is_symlink():
        shutil.rmtree(folder)
    if not folder.exists():
        folder.symlink_to(shared.resolve(), target_is_directory=True)


def chosen_seeds(topics: list[Any], held_ids: set[str], limit: int | None, seed: int) -> list[Any]:
    """Every topic, or a seeded sample of ``limit`` of them drawn on each side of the held-out split in
    proportion (so the held-out topics stay a tenth or so)."""
    if limit is None or limit >= len(topics):
        return topics
    held = [t for t in topics if str(t.seed_id) in held_ids]
    trained = [t for t in topics if str(t.seed_id) not in held_ids]
    rng = random.Random(seed)
    take_held = min(len(held), round(limit * len(held) / len(topics)))
    return rng.sample(held, take_held) + rng.sample(trained, min(len(trained), limit - take_held))


def grow_variants(desk: Any, owner: Any, *, per_seed: int | None, threads: int, say: Any, held_ids: set[str],
                  max_seeds: int | None, seed: int) -> dict[str, Any]:
    """The topics (validated fooling examples of round 1; all, or a seeded sample) grow variants against the
    round-1 target, as the lead's "Generate variants" does."""
    from app.core.services.target_models import load_ensemble

    round_one = desk.tasks.round(flow.TASK, 1)
    every = desk.adaptive_suite.topics(flow.TASK)
    topics = chosen_seeds(every, held_ids, max_seeds, seed)
    models = load_ensemble(desk.models.round_models(round_one.id), num_threads=threads)
    started = time.perf_counter()
    try:
        report = desk.adaptive_suite.grow(flow.TASK, models, seeds=[t.seed_id for t in topics], per_seed=per_seed,
                                          generated_by=owner.id, progress=say)
    finally:
        models.close()
    seconds = time.perf_counter() - started
    limit = per_seed if per_seed is not None else desk.tasks.settings(flow.TASK).variants_per_seed
    grown = report.seeds
    return {"seeds": len(topics), "topics": len(every), "held_out_seeds": sum(str(t.seed_id) in held_ids for t in topics),
            "per_seed_limit": limit, "seconds": round(seconds, 1),
            "seconds_per_seed": round(seconds / max(1, len(topics)), 3), "added": report.added,
            "fooling_round_one": report.fooling, "folded_near_duplicates": report.folded,
            "drafted": sum(g.drafted for g in grown), "over_limit": sum(g.over_limit for g in grown),
            "refused_by_content_rules": sum(g.refused for g in grown), "seeds_with_none": len(report.skipped),
            "summary": report.summary()}


def validate_variants(desk: Any, *, seed: int, error_rate: float) -> dict[str, int]:
    """Seeded simulated validators decide every variant (``round_flow.simulate_validators`` over variants only)."""
    from app.core.adaptive_suite.variants import variant_clause

    return flow.simulate_validators(desk, seed=seed, error_rate=error_rate, only=variant_clause(),
                                    names="Simulated variant validator")


def train(desk: Any, base_csv: Path, out: Path, *, variants: str | None, threads: int, epochs: int | None,
          say: Any) -> dict[str, Any]:
    """The round-2 candidate as `dynadesk train --task hate_speech --rounds 1 --imported hatecheck --base ...
    [--variants W] --int8 later` trains it; nothing else differs between the two."""
    from app.core.next_round.variant_training import parse_variant_weight

    config: dict[str, Any] = {"num_threads": threads}
    if epochs is not None:
        config["epochs"] = epochs
    return flow.train_round_two(desk, base_csv, out, progress=say, int8="later",
                                variants=parse_variant_weight(variants), **config)


def held_out_hatecheck(desk: Any) -> tuple[af.Split, af.Split, set[str]]:
    """(a) the round-1 HateCheck cases of the held-out templates, with HateCheck's gold labels, one group per
    template; their validated fooling cases (the held-out seeds); and the ids of the held-out cases."""
    from sqlalchemy import select

    from app.core.storage.models import Example
    from app.core.tasks.figures import is_validated_fooling
    from app.core.tasks.splits import held_out_example

    round_id = desk.tasks.round(flow.TASK, 1).id
    items = []
    with desk.db.read() as session:
        for example in session.scalars(select(Example).where(Example.round_id == round_id)
                                       .order_by(Example.external_id, Example.id)):
            origin = example.origin or {}
            if origin.get("kind") != "import" or not held_out_example(example.id, example.perturbation_of, origin):
                continue
            items.append(af.Item(str(example.id), example.text, example.true_label, f"templ:{origin['templ_id']}",
                                 origin.get("functionality"),
                                 bool(is_validated_fooling(example.model_fooled, example.decided_verdict))))
    held = af.Split("hatecheck-held-out", "HateCheck held-out templates", items, part="(a)", units="templates")
    fooling = af.Split("hatecheck-held-out-fooling", "HateCheck held-out templates, validated fooling cases only",
                       [i for i in items if i.fooled], part="(a)", units="templates")
    return held, fooling, {i.id for i in items}


def davidson_test(base_csv: Path, seed: int) -> af.Split:
    """(b) Davidson's seeded test split: the rows both candidates' training held out (the manifests' seed)."""
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, stratified_split

    data = read_labelled_csv(base_csv, "tweet", "class", label_map=dict(flow.DAVIDSON_LABELS), unescape_html=True)
    rows = stratified_split(data.labels, TrainingConfig(seed=seed))[2]
    items = [af.Item(f"base:{i}", str(data.texts[i]), data.label_names[data.labels[i]], f"row:{i}") for i in rows]
    return af.Split("davidson-test", f"Davidson test split (seed {seed})", items, part="(b)", units="rows")


def suite_held_out(desk: Any, held_ids: set[str]) -> tuple[af.Split, list[af.Split], dict[str, int]]:
    """(d) the adaptive suite's held-out topics: validated variants whose seed is a held-out case, with their
    decided labels, one group per topic; per topic family (the seed's HateCheck functionality) and per variant
    edit type (the generator's edit, with enough items)."""
    cases = desk.adaptive_suite.cases(flow.TASK)
    items = [af.Item(str(c.example_id), c.text, c.label, f"topic:{c.seed_id}", c.family, edit=c.rule)
             for c in cases if str(c.seed_id) in held_ids]
    split = af.Split("suite-held-out", "Adaptive suite, held-out topics", items, ("accuracy", "macro_f1"), "(d)",
                     "topics")
    families = [af.Split(s.key, s.name, s.items, ("accuracy",), "(d)", "topics")
                for s in af.per_functionality(split, "(d)", "Adaptive suite held-out, family")]
    by_edit = af.Split("suite-held-out-edit", "", [replace(i, functionality=i.edit) for i in items],
                       ("accuracy",), "(d)", "topics")
    families += af.per_functionality(by_edit, "(d)", "Adaptive suite held-out, variant edit", minimum=MIN_EDIT_ITEMS)
    counts = {"validated_variants": len(cases), "held_out_variants": len(items),
              "held_out_topics": split.groups, "topics": len({c.seed_id for c in cases})}
    return split, families, counts


def predict_all(desk: Any, splits: list[af.Split], candidates: dict[str, Path], threads: int,
                say: Any) -> dict[str, dict[str, str]]:
    """Every model's label for every item (each distinct text read once per model)."""
    from app.core.services.target_models import assemble_trained_part, load_ensemble
    from local_models.engine import Ensemble, load_engine

    labels = list(desk.tasks.definition_by_code(flow.TASK).labels)
    texts = list(dict.fromkeys(i.text for s in splits for i in s.items))
    round_one = desk.tasks.round(flow.TASK, 1)
    out: dict[str, dict[str, str]] = {}
    for name in af.MODELS:
        say.say(f"scoring {name} on {len(texts):,} texts")
        if name == af.ROUND_ONE:
            model = load_ensemble(desk.models.round_models(round_one.id), num_threads=threads)
        else:
            folder = assemble_trained_part(desk, candidates[name])
            model = Ensemble([load_engine(folder, task_labels=labels, num_threads=threads, name=name)])
        try:
            answers = model.predict_batched(texts)
        finally:
            model.close()
        by_text = {t: str(p.label) for t, p in zip(texts, answers)}
        out[name] = {i.id: by_text[i.text] for s in splits for i in s.items}
    return out


def split_checks(desk: Any, manifests: dict[str, dict[str, Any]], held_ids: set[str]) -> dict[str, Any]:
    """What keeps the comparison fair, counted: both candidates hold out the same HateCheck cases, the one
    WITHOUT trains on no variant, and no variant of a held-out seed is trained on."""
    from sqlalchemy import select

    from app.core.adaptive_suite.variants import variant_clause
    from app.core.storage.models import Example

    with desk.db.read() as session:
        variant_ids = {str(i) for i in session.scalars(select(Example.id).where(variant_clause()))}

    def trained(name: str) -> list[str]:
        splits = manifests[name]["data"]["splits"]
        return [i for part in ("train", "variants") for i in splits.get(part, [])]

    held = {k: {i for i in m["data"]["splits"]["held_out"] if i in held_ids} for k, m in manifests.items()}
    taken = (manifests[af.WITH].get("variants") or {}).get("taken") or []
    return {"held_out_hatecheck_same": held[af.WITH] == held[af.WITHOUT] and bool(held[af.WITH]),
            "held_out_hatecheck_cases": len(held[af.WITHOUT]),
            "variants_trained_without": sum(i in variant_ids for i in trained(af.WITHOUT)),
            "variants_trained_with": sum(i in variant_ids for i in trained(af.WITH)),
            "held_out_seed_variants_trained": sum(str(v.get("seed_id")) in held_ids for v in taken)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.evidence_amplification")
    parser.add_argument("--work", type=Path, help="scratch folder, emptied first (default: a new temporary one); "
                        "evidence.json is written there")
    parser.add_argument("--resamples", type=int, default=2000)
    parser.add_argument("--error-rate", type=float, default=0.1, help="the variants' simulated validators' error rate")
    parser.add_argument("--round-error-rate", type=float, default=0.05,
                        help="round 1's simulated validators' error rate (bench.evidence_rounds' default)")
    parser.add_argument("--seed", type=int, default=11, help="seeds the simulated validators and the bootstrap")
    parser.add_argument("--davidson-rows", type=int, help="a seeded sample of Davidson instead of all of it")
    parser.add_argument("--per-seed", type=int, help="variants per seed at most (default: the task's setting)")
    parser.add_argument("--max-seeds", type=int, help="grow a seeded sample of this many seeds, drawn on both sides "
                        "of the held-out split in proportion (default: every seed)")
    parser.add_argument("--variant-weight", default="1", help="the variants' loss weight, relative to a written "
                        "round example (--variants W; the desk's default is 1)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads for growing, training and scoring")
    parser.add_argument("--frozen-cache", type=Path, help="a folder that keeps the frozen layers' outputs across "
                        "runs (default: the new desk's own cache, filled by the first candidate's training)")
    parser.add_argument("--models-cache", type=Path, help="a desk's prepared models folder to start from (the "
                        "default model's ONNX forms), instead of preparing them again")
    parser.add_argument("--quick", action="store_true", help="smoke-test size; its figures mean nothing")
    args = parser.parse_args(argv)
    if not 0 <= args.error_rate < 0.5 or not 0 <= args.round_error_rate < 0.5:
        parser.error("error rates lie in [0, 0.5)")
    size = QUICK if args.quick else FULL
    return run(args, size)


def run(args: argparse.Namespace, size: Size) -> int:
    from app.core.desk import Desk
    from app.core.services.target_models import adopt_default_model

    work = args.work or Path(tempfile.mkdtemp(prefix="dynadesk-amplification-"))
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    rows = args.davidson_rows if args.davidson_rows is not None else size.davidson_rows
    per_seed = args.per_seed if args.per_seed is not None else size.per_seed
    hatecheck = hatecheck_sample(SHARED_DATA.joinpath(*flow.HATECHECK), work / "hatecheck-sample.csv",
                                 size.hatecheck_templates, args.seed)
    base_csv = flow.davidson_sample(SHARED_DATA.joinpath(*flow.DAVIDSON), work / "davidson-sample.csv", rows)
    say = flow.printed_progress()
    timings = flow.Timings()
    started = time.perf_counter()
    with Desk(work / "desk") as desk:
        use_frozen_cache(desk, args.frozen_cache)
        if args.models_cache is not None:
            from app.core import paths

            shutil.copytree(args.models_cache, paths.models_cache_dir(desk.root), dirs_exist_ok=True)
        owner = desk.people.create("Evidence Owner", "owner")
        desk.switch_person(owner.id)
        target = timings.timed("prepare default model", lambda: adopt_default_model(desk, progress=say))
        print(f"Round 1 target: {target.name} ({target.format}, {target.sha256[:12]})", file=sys.stderr)
        imported = timings.timed("import round 1", lambda: flow.import_round_one(desk, hatecheck))
        print(imported.summary(), file=sys.stderr)
        round_validation = timings.timed("validate round 1", lambda: flow.simulate_validators(
            desk, seed=args.seed, error_rate=args.round_error_rate))
        print(f"Round 1 validation: {round_validation}", file=sys.stderr, flush=True)
        _, _, held_ids = held_out_hatecheck(desk)
        grown = timings.timed("grow variants", lambda: grow_variants(
            desk, owner, per_seed=per_seed, threads=args.threads, say=say, held_ids=held_ids,
            max_seeds=args.max_seeds, seed=args.seed))
        print(f"Grown: {grown}", file=sys.stderr, flush=True)
        variant_validation = timings.timed("validate variants", lambda: validate_variants(
            desk, seed=args.seed + 1, error_rate=args.error_rate))
        print(f"Variant validation: {variant_validation}", file=sys.stderr, flush=True)
        candidates = {af.WITHOUT: work / "candidate-without", af.WITH: work / "candidate-with"}
        manifests = {}
        for name, variants in ((af.WITHOUT, None), (af.WITH, args.variant_weight)):
            say.say(f"training the candidate {name.upper()} variants")
            since = time.perf_counter()
            manifests[name] = train(desk, base_csv, candidates[name], variants=variants, threads=args.threads,
                                    epochs=size.epochs, say=say)
            timings.seconds[f"train {name}"] = time.perf_counter() - since
        if manifests[af.WITH]["seed"] != manifests[af.WITHOUT]["seed"]:
            raise SystemExit("The two candidates were trained with different seeds; their base test splits differ.")
        held, fooling, held_ids = held_out_hatecheck(desk)
        davidson = davidson_test(base_csv, manifests[af.WITHOUT]["seed"])
        suite, families, suite_counts = suite_held_out(desk, held_ids)
        functionality = af.per_functionality(held, "(c)", "HateCheck held-out, functionality")
        splits = [held, fooling, davidson, *functionality, suite, *families]
        predictions = timings.timed("score", lambda: predict_all(desk, splits, candidates, args.threads, say))
        checks = split_checks(desk, manifests, held_ids)
    figures = af.compare_all(splits, predictions, resamples=args.resamples, seed=args.seed)
    total = time.perf_counter() - started
    report(args, size, figures, grown, round_validation, variant_validation, manifests, checks, suite_counts,
           timings, total, work, rows)
    return 0


def weighting(manifest: dict[str, Any]) -> str:
    said = f"round weight {manifest['weighting']['value']:g}"
    variants = manifest.get("variants")
    if variants:
        said += (f", {variants['count']} validated variants of {variants['seeds']} seeds at {variants['weight']:g} x "
                 f"a round example (sample weight {variants['sample_weight']:g})")
    return said


def report(args: argparse.Namespace, size: Size, figures: af.Figures, grown: dict[str, Any],
           round_validation: dict[str, int], variant_validation: dict[str, int], manifests: dict[str, Any],
           checks: dict[str, Any], suite_counts: dict[str, int], timings: Any, total: float, work: Path,
           davidson_rows: int | None) -> None:
    what = "QUICK smoke-test size (figures mean nothing)" if size is QUICK else "full size"
    print(f"\n## Amplification evidence ({what})\n")
    print(f"Round 1: HateCheck dev{' (a sample of templates)' if size.hatecheck_templates else ''} written against "
          f"the default model (int8 ONNX), grouped by templ_id, decided by seeded simulated validators (error rate "
          f"{args.round_error_rate:g}); base data: {'all of' if davidson_rows is None else f'{davidson_rows} rows of'}"
          f" Davidson et al. (2017).")
    sampled = "" if grown["seeds"] == grown["topics"] else f" (a seeded sample of the {grown['topics']} topics)"
    print(f"Seeds: {grown['seeds']}{sampled} validated round-1 examples that fooled the round-1 target, "
          f"{grown['held_out_seeds']} of them held out; variants grown on the "
          f"round-1 target, at most {grown['per_seed_limit']} per seed ({grown['seconds']:.0f} s, "
          f"{grown['seconds_per_seed']:.2f} s per seed): {grown['summary']} ({grown['drafted']} drafts checked, "
          f"{grown['over_limit']} over the limit).")
    print(f"Variant validation: seeded simulated validators, error rate {args.error_rate:g} per verdict, the desk's "
          f"rule decides, the lead settles the rest with the claimed label: {variant_validation}.")
    print(f"Validated variants: {suite_counts['validated_variants']} of {suite_counts['topics']} topics; held out "
          f"(seed on the held-out side): {suite_counts['held_out_variants']} of {suite_counts['held_out_topics']} "
          f"topics.")
    print(f"Candidates: WITHOUT ({weighting(manifests[af.WITHOUT])}) and WITH ({weighting(manifests[af.WITH])}, "
          f"--variants {args.variant_weight}); checks: {checks}.")
    print(f"Paired bootstrap, {args.resamples} resamples, 95 % intervals, seed {args.seed}; difference = with - "
          "without; n (units): items (groups drawn whole: templates, rows, topics).\n")
    print(af.markdown_table(figures))
    print()
    for line in af.plain_words(figures):
        print(line)
    steps = ", ".join(f"{k} {v:.0f} s" for k, v in timings.seconds.items())
    cache = "; ".join(f"{k}: {m['frozen_cache'].get('computed', 0)} computed, {m['frozen_cache'].get('from_cache', 0)} "
                      "from cache" for k, m in manifests.items())
    print(f"\nTimes: {steps}; total {total:.0f} s; frozen-layer cache ({cache}); {args.threads} thread(s); machine: "
          f"{os.cpu_count()} cores, load average at the end {os.getloadavg()[0]:.1f}")
    path = af.write_json(work / "evidence.json", figures, size=what, command=sys.argv, grown=grown,
                         round_validation=round_validation, variant_validation=variant_validation,
                         suite=suite_counts, checks=checks, times_s=timings.seconds, total_s=total,
                         error_rate=args.error_rate, round_error_rate=args.round_error_rate,
                         variant_weight=args.variant_weight,
                         manifests={k: {"weighting": m["weighting"], "metrics": m["metrics"],
                                        "frozen_cache": m["frozen_cache"], "summary": m["data"]["summary"],
                                        **({"variants": m["variants"]} if "variants" in m else {})}
                                    for k, m in manifests.items()})
    print(f"Wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
