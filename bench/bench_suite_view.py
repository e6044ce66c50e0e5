"""The Suite tab over 10,000 variants (the issue's budget: it opens in <= 1 s, median).

Data: 500 seeds (validated examples that fooled the round's target, over 8 target groups and 5 hate
types) with 20 variants each, stored as the suite stores generated variants; every other variant is
then decided valid (set in bulk, as bench_review sets its reviews). A run is what a lead waits for:
the tab's controller reads the suite on the database worker (topics and validated cases), builds
the tree's view-model and hands it to the real view (offscreen), until the tree is on screen.
"""

from __future__ import annotations

import random
import statistics
import time

from sqlalchemy import text

from app.core.desk import Desk
from bench.common import BenchContext, Result

BUDGET_MS = 1000
GROUPS = ("women", "Muslims", "refugees", "gay people", "trans people", "black people", "Jewish people",
          "disabled people")
KINDS = ("derogation", "dehumanization", "threatening language", "animosity", "support for hateful entities")
WORDS = "they those people always never should must go leave back home here country city work school".split()


def fill(desk: Desk, seeds: int, per_seed: int, rng: random.Random) -> int:
    """``seeds`` fooling seeds with ``per_seed`` variants each; returns the variants stored."""
    from app.core.domain import ModelOutput
    from app.core.tasks.content import Content

    author = desk.people.create("Ana Author", "annotator")
    validator = desk.people.create("Vic Validator", "annotator")
    lead = desk.people.create("Lee Lead", "lead")
    task = desk.tasks.task("hate_speech")
    model = desk.models.register("bench target", "hf-torch", "cd" * 32, task_id=task.id,
                                 label_map={"0": "not hate", "1": "hate"})
    desk.set_task_settings(lead.id, "hate_speech", agreement_threshold=1)

    def output(label: str) -> ModelOutput:
        p = 0.9 if label == "hate" else 0.1
        return ModelOutput(model.id, model.sha256, label, {"hate": p, "not hate": 1 - p}, 3.0)

    def sentence(group: str) -> str:
        return " ".join([*rng.sample(WORDS, 5), group, *rng.sample(WORDS, 3)])

    stored = 0
    for i in range(seeds):
        group, kind = GROUPS[i % len(GROUPS)], KINDS[i % len(KINDS)]
        seed_text = sentence(group)
        meta = {"hate_type": kind, "target_groups": [group], "label_explanation": "because"}
        seed = desk.examples.create(author.id, "hate_speech", Content({"text": seed_text}, "hate", meta=meta),
                                    [output("not hate")])
        desk.validation.validate(seed.id, validator.id, "correct")
        items = []
        for k in range(per_seed):
            swapped = GROUPS[(i + k + 1) % len(GROUPS)]
            origin = {"kind": "variant", "seed_id": str(seed.id), "rule": "identity_swap",
                      "edit_type": "group_swap_protected", "generated_by": str(lead.id), "seed_text": seed_text}
            content = Content({"text": f"{seed_text} {k} {swapped}"}, "hate", meta={**meta, "target_groups": [swapped]})
            items.append((content, [output("not hate" if k % 3 else "hate")], origin))
        stored += len(desk.adaptive_suite.store_variants("hate_speech", lead.id, items))
    with desk.db.write() as session:  # every other variant decided valid, in bulk
        session.execute(text("UPDATE examples SET validation_state = 'decided', decided_verdict = 'correct', "
                             "decided_label = true_label, validation_count = 1 "
                             "WHERE origin LIKE '%\"variant\"%' AND rowid % 2 = 0"))
    desk.db.refresh_statistics()
    desk.switch_person(lead.id)
    return stored


def time_opens(desk: Desk, runs: int) -> tuple[list[float], list[float], int, int]:
    """Milliseconds from asking for the tab's tree to the tree shown, and to the validated variants read
    after it (what scoring needs: the tree is shown again with them), a fresh tab each run; and the topics
    and variants it showed."""
    from PySide6.QtWidgets import QApplication

    from app.gui.inference import InferenceService
    from app.gui.suite import SuiteController
    from app.gui.worker import SerialWorker
    from widgets.suite_view import SuiteView

    app = QApplication.instance() or QApplication([])
    db = SerialWorker("bench-db")
    inference = InferenceService()
    samples: list[float] = []
    complete: list[float] = []
    shown: list = []
    try:
        for _ in range(runs):
            view = SuiteView()
            view.resize(1366, 700)
            view.show()
            controller = SuiteController(desk, db, inference, view, lambda: "hate_speech")
            controller.tree_shown.connect(shown.append)
            before = len(shown)
            start = time.perf_counter()
            controller.refresh()
            while len(shown) == before:
                app.processEvents()
                time.sleep(0.001)
            app.processEvents()  # the tree paints
            samples.append((time.perf_counter() - start) * 1000)
            while len(shown) < before + 2:  # again, with the validated variants read
                app.processEvents()
                time.sleep(0.001)
            complete.append((time.perf_counter() - start) * 1000)
            view.close()
            view.deleteLater()
            app.processEvents()
    finally:
        inference.shutdown()
        db.shutdown(wait=True)
    tree = shown[-1]
    topics = sum(len(kind.topics) for group in tree.groups for kind in group.children)
    return samples, complete, topics, sum(group.variants for group in tree.groups)


def run(ctx: BenchContext) -> list[Result]:
    seeds, per_seed = (100, 20) if ctx.quick else (500, 20)
    desk = Desk(ctx.work_dir / "desk-suite")
    started = time.perf_counter()
    stored = fill(desk, seeds, per_seed, random.Random(32))
    made = Result("suite", f"store {seeds} seeds and {stored:,} variants", "s",
                  median=time.perf_counter() - started, n=1)
    samples, complete, topics, variants = time_opens(desk, 3 if ctx.quick else 9)
    desk.close()
    median = statistics.median(samples)
    opened = Result("suite", f"Suite view over {variants:,} variants opens", "ms", median=median,
                    p95=max(samples), n=len(samples), budget=f"median <= {BUDGET_MS} ms",
                    within_budget=median <= BUDGET_MS, notes=f"{topics} topics; read + tree + shown (p95: the slowest)")
    ready = Result("suite", f"... and its {variants // 2:,} validated variants read (ready to score)", "ms",
                   median=statistics.median(complete), p95=max(complete), n=len(complete),
                   notes="after the tree is on screen; no budget")
    return [made, opened, ready]
