"""The adaptive suite: growing 50 variants of one seed on the default model's int8 form (budget: median <= 2 s).

What is timed is ``desk.adaptive_suite.grow`` for one seed, as `dynadesk suite grow --seed ID --per-seed 50` runs it
after the model is loaded: the drafts (identity swaps across the group list, the assistant's label-keeping rules,
respellings aimed by one ablation pass of the target, and their compositions), the check of every draft against
the target in pools (three times the room left, one batch over the seeds, until the seed is full), the fold and
the storing of the 50 kept as examples (one unit of work, with their outbox entries). Each repeat grows a fresh seed: a HateCheck hateful case that names a group, stored as a validated
example that fooled the target (its label is the one the target does not give), so every repeat does the same
work a lead's first growth of a seed does. The target is the desk's record of the prepared default model (its
ONNX form: int8 when it passes parity), loaded as the CLI loads a round's target.
"""

from __future__ import annotations

import csv
import statistics
import time
from pathlib import Path

from bench.common import BenchContext, Result, percentile

GROUP = "suite"
BUDGET_MS = 2000.0
VARIANTS = 50
HATE = "hate_speech"
_DATA = [Path(__file__).resolve().parents[2] / "shared" / "data", Path("/work/shared/data")]
_FALLBACK = ["I hate women.", "Muslims are disgusting.", "Immigrants are a plague on society.",
             "Gay people should all be locked up.", "Black people are worthless."]


def seed_texts(n: int) -> list[str]:
    """Hateful HateCheck cases that name a group of the assistant's list (its identity swaps work on them)."""
    from app.core.adaptive_suite.growth import identity_swaps
    from app.core.assist.lexicon import shipped_lexicon

    lexicon = shipped_lexicon(HATE)
    path = next((root / "hatecheck" / "test_suite_cases_dev.csv" for root in _DATA
                 if (root / "hatecheck" / "test_suite_cases_dev.csv").is_file()), None)
    rows = _FALLBACK
    if path is not None:
        with open(path, newline="", encoding="utf-8") as handle:
            rows = [r["test_case"].strip() for r in csv.DictReader(handle)
                    if r["label_gold"] == "hateful" and r["functionality"].startswith("derog")]
    named = [t for t in dict.fromkeys(rows) if identity_swaps(t, lexicon)]
    step = max(1, len(named) // n)
    return named[::step][:n]


def run(ctx: BenchContext) -> list[Result]:
    import resources
    from app.core.desk import Desk
    from app.core.services.target_models import load_ensemble, register_model, to_model_output
    from app.core.tasks.content import Content
    from local_models.backends.hf_torch import quiet_transformers
    from local_models.default_model import prepare_default_model

    quiet_transformers()
    prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", ctx.work_dir / "cache")
    assert prepared.onnx_dir is not None
    form = "ONNX int8" if prepared.onnx_int8 else "ONNX fp32 (int8 did not pass parity here)"
    repeats = 3 if ctx.quick else 9
    with Desk(ctx.work_dir / "desk") as desk:
        lead = desk.people.create("Bench Lead", "lead")
        vetter = desk.people.create("Bench Vetter", "lead")
        writer = desk.people.create("Bench Writer", "annotator")
        record = register_model(desk, prepared.onnx_dir, name="default (bench)", task_code=HATE)
        desk.rounds.set_models(desk.tasks.round(HATE, 1).id, lead.id, [record.id])
        models = load_ensemble([record])
        try:
            seeds = []
            for text in seed_texts(repeats + 1):
                prediction = models.predict([text])[0]
                label = "not hate" if prediction.label == "hate" else "hate"
                meta = {"hate_type": "derogation", "target_groups": ["women"]} if label == "hate" else {}
                example = desk.examples.create(writer.id, HATE, Content({"text": text}, label, meta={
                    **meta, "label_explanation": "bench"}), [to_model_output(m, record) for m in prediction.members])
                desk.validation.validate(example.id, vetter.id, "correct", mode="lead")
                seeds.append(example.id)
            desk.adaptive_suite.grow(HATE, models, seeds=seeds[:1], per_seed=VARIANTS, generated_by=lead.id)  # warm
            wall, added, drafted, parts = [], [], [], {"draft": [], "check": [], "fold": [], "store": []}
            for seed in seeds[1:]:
                began = time.perf_counter()
                report = desk.adaptive_suite.grow(HATE, models, seeds=[seed], per_seed=VARIANTS, generated_by=lead.id)
                wall.append((time.perf_counter() - began) * 1000)
                added.append(report.added)
                drafted.append(report.seeds[0].checked)
                for name in parts:
                    parts[name].append(report.timings_ms.get(name, 0.0))
        finally:
            models.close()
    median = statistics.median(wall)
    notes = (f"{form}; added per seed {min(added)}-{max(added)} of {VARIANTS}; drafts checked per seed "
             f"{min(drafted)}-{max(drafted)}")
    results = [Result(GROUP, f"grow {VARIANTS} variants for one seed (default model, {form.split(' (')[0]})", "ms",
                      median, percentile(wall, 0.95), len(wall), f"median <= {BUDGET_MS:g} ms", median <= BUDGET_MS,
                      notes, {"added": added, "drafted": drafted, "wall_ms": wall})]
    for name, samples in parts.items():
        results.append(Result(GROUP, f"  {name.replace('_', ' ')}", "ms", statistics.median(samples),
                              percentile(samples, 0.95), len(samples)))
    return results
