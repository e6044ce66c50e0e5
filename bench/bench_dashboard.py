"""The review dashboard over 100,000 generated examples and about 120,000 verdicts
(DESIGN.md §5: filter, sort and statistics ≤ 100 ms each).

Each timed step is what the dashboard does on the GUI's dashboard worker: bring the snapshot up
to date (``refresh``) and compute every figure for the current filter (``view``: the
per-annotator table, all breakdowns, agreement and every chart series). Sorting is the
per-annotator table's Qt model sorting its rows, as a header click does.
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, timedelta

from sqlalchemy import insert, text

from app.core.desk import Desk
from app.core.domain import ModelOutput
from app.core.services.dashboard import DashboardService
from app.core.services.dashboard_snapshot import DashboardFilter
from app.core.storage.models import Validation
from app.core.tasks.content import Content
from bench.bench_storage import fill
from bench.common import BenchContext, Result, summarise, time_calls

GROUP = "dashboard"
BUDGET_MS = 100


def add_verdicts(desk: Desk, rng: random.Random) -> int:
    """Peer verdicts matching each generated example's summary: decided examples got three
    matching verdicts; examples in progress one or two that may disagree."""
    people = [p.id for p in desk.people.all()]
    rows = []
    with desk.db.read() as session:
        examples = session.execute(text(
            "SELECT id, author_id, validation_count, decided_verdict, true_label, submitted_at FROM examples "
            "WHERE validation_count > 0")).all()
    for example_id, author_id, count, decided, label, submitted in examples:
        author = uuid.UUID(author_id)
        validators = rng.sample([p for p in people if p != author], count)
        submitted = submitted if not isinstance(submitted, str) else None
        for validator in validators:
            verdict = decided or rng.choice(("correct", "correct", "correct", "incorrect", "flagged"))
            rows.append({
                "id": uuid.uuid4(), "example_id": uuid.UUID(example_id), "validator_id": validator, "verdict": verdict,
                "corrected_label": ("not hate" if label == "hate" else "hate") if verdict == "incorrect" else None,
                "reason": "generated" if verdict != "correct" else None, "mode": "peer", "time_spent_ms": 20_000,
                "sync_state": "synced",
            })
    with desk.db.write() as session:
        for start in range(0, len(rows), 20_000):
            session.execute(insert(Validation), rows[start:start + 20_000])
        # Verdicts arrive hours to days after the example.
        session.execute(text("UPDATE validations SET created_at = (SELECT datetime(e.submitted_at, "
                             "'+' || (abs(random()) % 200000) || ' seconds') FROM examples e "
                             "WHERE e.id = validations.example_id)"))
    return len(rows)


def run(ctx: BenchContext) -> list[Result]:
    n = 10_000 if ctx.quick else 100_000
    rng = random.Random(5)
    desk = Desk(ctx.work_dir / "desk")
    fill(desk, n, rng)
    verdicts = add_verdicts(desk, rng)
    task_id = desk.tasks.task("hate_speech").id
    everything = DashboardFilter(task_id=task_id)
    repeats = 10 if ctx.quick else 30
    results: list[Result] = []

    def first_build():
        service = DashboardService(desk.db, desk.tasks)
        service.refresh()
        service.view(everything)

    results.append(summarise(GROUP, f"first build: load snapshot + all figures ({n // 1000}k examples, "
                                    f"{verdicts // 1000}k verdicts)", time_calls(first_build, 3 if ctx.quick else 5, warmup=1),
                             notes="off the GUI thread; once per session"))
    service = desk.dashboard
    service.refresh()
    results.append(summarise(GROUP, "refresh with nothing new + all figures",
                             time_calls(lambda: (service.refresh(), service.view(everything)), repeats),
                             budget_p95_ms=BUDGET_MS))

    # After a verdict: the verdict itself (a write) is not timed, the dashboard's update is.
    undecided = [row[0] for row in desk.db.engine.connect().exec_driver_sql(
        "SELECT id, author_id FROM examples WHERE validation_state != 'decided' AND status = 'submitted' "
        "LIMIT 400").all()]
    validator = desk.people.create("Bench Validator", "annotator").id
    pending = iter(undecided)
    samples = []
    for _ in range(repeats):
        desk.validation.validate(uuid.UUID(next(pending)), validator, "correct")
        started = time.perf_counter()
        assert service.refresh() >= 2
        service.view(everything)
        samples.append((time.perf_counter() - started) * 1000)
    results.append(summarise(GROUP, "refresh after a new verdict + all figures", samples, budget_p95_ms=BUDGET_MS))

    model = desk.models.all()[0]
    author = desk.people.by_name("Annotator 03").id
    samples = []
    for i in range(repeats):
        desk.examples.create(author, "hate_speech", Content({"text": f"bench example {i}"}, "hate", meta={
            "hate_type": "derogation", "target_groups": ["women"], "label_explanation": "bench"}),
            [ModelOutput(model.id, model.sha256, "not hate", {"hate": 0.2, "not hate": 0.8}, 3.0)])
        started = time.perf_counter()
        assert service.refresh() >= 1
        service.view(everything)
        samples.append((time.perf_counter() - started) * 1000)
    results.append(summarise(GROUP, "refresh after a new example + all figures", samples, budget_p95_ms=BUDGET_MS))

    rounds = [r.id for r in desk.tasks.rounds("hate_speech")]
    now = max(t for t in service.examples["submitted_at"])
    from datetime import datetime

    week_end = datetime.fromtimestamp(now, UTC)
    clicks = {
        "filter: click a label bar": DashboardFilter(task_id=task_id, labels=["hate"]),
        "filter: click a target-group bar": DashboardFilter(task_id=task_id, facets={"target_groups": ["refugees"]}),
        "filter: click a round bar + hate type": DashboardFilter(task_id=task_id, round_ids=rounds[1:2],
                                                                 facets={"hate_type": ["derogation"]}),
        "filter: click an annotator's line": DashboardFilter(task_id=task_id, author_ids=[author]),
        "filter: click a backlog point (one week)": DashboardFilter(task_id=task_id, since=week_end - timedelta(days=7),
                                                                    until=week_end),
    }
    for name, flt in clicks.items():
        results.append(summarise(GROUP, f"{name} → all figures", time_calls(lambda flt=flt: service.view(flt), repeats),
                                 budget_p95_ms=BUDGET_MS))

    results.append(_sort(service.view(everything), repeats))
    results += _assistant_split(desk, task_id, repeats)
    desk.close()
    return results


def _assistant_split(desk: Desk, task_id, repeats: int) -> list[Result]:
    """The Dashboard's writing-assistant section over the dashboard's snapshot (what it shows), and
    the same figures from the stored records (the reference form, as the sync server computes them)."""
    from app.core.services.assistant_split import assistant_split

    with desk.db.write() as session:  # an A-B round's records: half the sessions assisted, 60 % applied there
        session.execute(text(
            "UPDATE examples SET assistance = CASE WHEN abs(random()) % 2 = 0 THEN json_object('arm', 'off', "
            "'session', 2, 'applied', json('false')) WHEN abs(random()) % 5 < 3 THEN json_object('arm', 'on', "
            "'session', 1, 'applied', json('true'), 'generator', 'rules', 'edit_type', 'negation', "
            "'applied_text', substr(text, 1, 40), 'edit_distance', 1) ELSE json_object('arm', 'on', 'session', 1, "
            "'applied', json('false')) END"))
    service = DashboardService(desk.db, desk.tasks)  # the records changed behind the snapshot: a new one
    service.refresh()
    everything = DashboardFilter(task_id=task_id)
    results = [summarise(GROUP, f"assistant split {by} (dashboard snapshot)", time_calls(
        lambda by=by: service.assistant_split(everything, by), repeats), budget_p95_ms=BUDGET_MS,
        notes="Dashboard ▸ Writing assistant") for by in ("annotator", "round")]
    results.append(summarise(GROUP, "assistant split annotator (from the stored records)", time_calls(
        lambda: assistant_split(desk.db, "annotator", task_id=task_id), 3, warmup=1),
        notes="reference form; the server's per-team form is the same rule"))
    return results


def _sort(view, repeats: int) -> Result:
    """Sorting the per-annotator table through its Qt model, column by column."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QApplication

    from app.gui.dashboard import figures_view
    from widgets.dashboard_view import FigureTableModel

    _app = QApplication.instance() or QApplication([])
    model = FigureTableModel()
    table = figures_view(view, "round", False).annotators
    columns, rows = table.columns, table.rows
    model.set_table(table)
    cycle = iter(range(10**9))

    def sort():
        column = next(cycle) % len(columns)
        model.sort(column, Qt.SortOrder.DescendingOrder if column % 2 else Qt.SortOrder.AscendingOrder)

    return summarise(GROUP, f"sort the per-annotator table ({len(rows)} rows) by a column",
                     time_calls(sort, repeats * 3), budget_p95_ms=BUDGET_MS)
