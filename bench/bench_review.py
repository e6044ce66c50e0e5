"""The Review tab over 100,000 generated examples (DESIGN.md §5: filter, sort, statistics
≤ 100 ms each), the validation queue, and a scroll test of the lazy table model.

Data: bench_storage's generator (Zipf text, 50 annotators, 4 rounds, facets, verdict
summaries), plus lead reviews on a few percent of the examples.
"""

from __future__ import annotations

import random
import time

from sqlalchemy import text

from app.core.desk import Desk
from app.core.services.review import ExampleFilter
from bench.bench_storage import fill
from bench.common import BenchContext, Result, summarise, time_calls

BUDGET_MS = 100
SCROLL_STEPS = 50


def add_reviews(desk: Desk) -> None:
    """Leads accepted 5% and returned 1% of the examples (every 20th and every 100th, offset)."""
    with desk.db.write() as session:
        session.execute(text("UPDATE examples SET review_state = CASE WHEN rowid % 20 = 0 THEN 'accepted' "
                             "WHEN rowid % 100 = 7 THEN 'returned' END, reviewed_at = submitted_at"))
    desk.db.refresh_statistics()


def review_filters(desk: Desk) -> dict[str, ExampleFilter]:
    task_id = desk.tasks.task("hate_speech").id
    rounds = [r.id for r in desk.tasks.rounds("hate_speech")]
    annotator = desk.people.by_name("Annotator 07").id
    return {
        "no filter": ExampleFilter(task_id=task_id),
        "disagreements >= 1": ExampleFilter(task_id=task_id, min_disagreements=1),
        "flags >= 1": ExampleFilter(task_id=task_id, min_flags=1),
        "annotator + round": ExampleFilter(task_id=task_id, author_ids=[annotator], round_ids=rounds[1:2]),
        "label + hate type + target group": ExampleFilter(task_id=task_id, labels=["hate"],
                                                          facets={"hate_type": ["derogation"],
                                                                  "target_groups": ["refugees"]}),
        "fooled + in progress": ExampleFilter(task_id=task_id, fooled=True, validation_states=["in_progress"]),
        "returned by a lead": ExampleFilter(task_id=task_id, review_states=["returned"]),
        "full text 'refugees'": ExampleFilter(task_id=task_id, text="refugees"),
    }


def scroll_test(desk: Desk, flt: ExampleFilter, steps: int) -> tuple[int, int, list[float]]:
    """The real table model and view, offscreen; pages come synchronously from the query layer.
    Returns rows loaded after ``steps`` page-down scrolls, the total, and ms per step."""
    from PySide6.QtWidgets import QApplication

    from app.views.example import row_view
    from widgets.example_table import PAGE_SIZE, ExampleTableModel, ExampleTableView

    app = QApplication.instance() or QApplication([])
    model = ExampleTableModel()
    model.page_wanted.connect(lambda offset, limit: model.add_page(
        offset, [row_view(r) for r in desk.review.rows(flt, offset=offset, limit=limit)]))
    view = ExampleTableView(model)
    view.resize(1200, 700)
    view.show()
    total = desk.review.count(flt)
    model.reset(total, [row_view(r) for r in desk.review.rows(flt, limit=PAGE_SIZE)])
    app.processEvents()
    bar = view.verticalScrollBar()
    samples = []
    for _ in range(steps):
        start = time.perf_counter()
        bar.setValue(bar.value() + bar.pageStep())
        app.processEvents()
        samples.append((time.perf_counter() - start) * 1000)
    loaded = model.rowCount()
    view.close()
    return loaded, total, samples


def run(ctx: BenchContext) -> list[Result]:
    n = 10_000 if ctx.quick else 100_000
    rng = random.Random(11)
    desk = Desk(ctx.work_dir / "desk-review")
    started = time.perf_counter()
    fill(desk, n, rng)
    add_reviews(desk)
    results = [Result("review", f"generate {n:,} examples", "s", median=time.perf_counter() - started, n=1)]
    review, repeats, k = desk.review, (10 if ctx.quick else 30), f"{n // 1000}k"
    filters = review_filters(desk)
    for name, flt in filters.items():
        hits = review.count(flt)
        results.append(summarise("review", f"filter {name}: first page ({k})",
                                 time_calls(lambda flt=flt: review.rows(flt), repeats, warmup=2),
                                 budget_p95_ms=BUDGET_MS, notes=f"{hits:,} match"))
        results.append(summarise("review", f"filter {name}: count ({k})",
                                 time_calls(lambda flt=flt: review.count(flt), repeats, warmup=2),
                                 budget_p95_ms=BUDGET_MS))
        results.append(summarise("review", f"statistics refresh, {name} ({k})",
                                 time_calls(lambda flt=flt: review.summary(flt), repeats, warmup=2),
                                 budget_p95_ms=BUDGET_MS))
    broad = filters["no filter"]
    for key in ("disagreements", "flags", "validations", "review_state", "author", "round", "text"):
        for descending in (True, False):
            results.append(summarise(
                "review", f"sort by {key} {'desc' if descending else 'asc'}, first page ({k})",
                time_calls(lambda key=key, d=descending: review.rows(broad, sort=key, descending=d), repeats, warmup=2),
                budget_p95_ms=BUDGET_MS))
    split = filters["disagreements >= 1"]
    results.append(summarise("review", f"sort disagreements>=1 by flags, first page ({k})",
                             time_calls(lambda: review.rows(split, sort="flags"), repeats, warmup=2),
                             budget_p95_ms=BUDGET_MS))
    validator = desk.people.by_name("Annotator 03").id
    results.append(summarise("review", f"validation queue: next example + remaining count ({k})",
                             time_calls(lambda: (desk.validation.next_for(validator, task_code="hate_speech"),
                                                 desk.validation.remaining(validator, task_code="hate_speech")),
                                        repeats, warmup=2), budget_p95_ms=BUDGET_MS))
    opted = {"hate_speech": ["women", "refugees"]}  # opt-outs by target group: what the tab runs
    # the tab shows the next example at once and counts what is left (past the opt-outs) after it
    results.append(summarise("review", f"validation queue with opt-outs: next example ({k})",
                             time_calls(lambda: desk.validation.next_for(validator, task_code="hate_speech",
                                                                         opted_out=opted),
                                        repeats, warmup=2), budget_p95_ms=BUDGET_MS))
    results.append(summarise("review", f"validation queue with opt-outs: remaining + held back, after ({k})",
                             time_calls(lambda: (desk.validation.remaining(validator, task_code="hate_speech"),
                                                 desk.validation.held_back(validator, opted, task_code="hate_speech")),
                                        repeats, warmup=2),
                             notes="off the example's path: the status line's count follows the example"))
    loaded, total, samples = scroll_test(desk, broad, SCROLL_STEPS)
    scroll = summarise("review", f"scroll the table {SCROLL_STEPS} pages down ({k}): ms per step", samples,
                       notes=f"rows loaded after {SCROLL_STEPS} steps: {loaded:,} of {total:,}")
    scroll.extra = {"rows_loaded": loaded, "total": total}
    results.append(scroll)
    desk.close()
    return results
