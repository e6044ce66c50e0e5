"""Screenshots of the review dashboard, taken offscreen from the real application.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_dashboard_screenshots.py

ANLI's round-1 development set (read from ../shared/data) shared among six simulated writers,
and five simulated validators of differing care (tests/simulation.py, seeded). A second desk
holds generated hate-speech examples over three rounds (placeholder texts; the dashboard shows
figures, not texts), to show the hate-type and target-group charts that NLI does not have. A
third desk is on its first day: seven examples written seconds apart.
"""

import tempfile
import time
from datetime import UTC

from screenshot_kit import OUT, ROOT, application, lead_desk, show_window, wait


def wait_for(controller, action) -> None:
    """Run ``action`` and wait until the dashboard shows figures for it."""
    done = []
    controller.updated.connect(lambda: done.append(True))
    action()
    deadline = time.monotonic() + 60
    while not done and time.monotonic() < deadline:
        wait(50)
    wait(300)


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from tests.simulation import import_anli_team, simulate_validators

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        team = import_anli_team(desk, ROOT.parent / "shared" / "data" / "anli" / "ANLI_analysis_r1_dev.csv")
        simulate_validators(desk, team, share=0.8)
        desk.settings.last_task = "nli"
        window = show_window(desk, 1680, 1120)
        view, controller = window.dashboard_view, window.dashboard
        wait_for(controller, lambda: window.tabs.setCurrentWidget(view))
        wait(300)
        window.grab().save(str(OUT / "dashboard.png"))

        # A lead looks into one label and two writers, with the agreement panel in view.
        wait_for(controller, lambda: view.set_filter(label="neutral"))
        model = view.annotator_model
        rows = [i for i in range(model.rowCount()) if model.index(i, 0).data() in ("Amara Okafor", "Emil Sørensen")]
        selection = view.annotator_table.selectionModel()
        for row in rows:
            wait_for(controller, lambda row=row: selection.select(
                view.annotator_model.index(row, 0), selection.SelectionFlag.Select | selection.SelectionFlag.Rows))
        wait_for(controller, lambda: view.breakdown_combo.setCurrentIndex(view.breakdown_combo.findData("label")))
        window.grab().save(str(OUT / "dashboard-filtered.png"))
        window.close()
        desk.close()

    with tempfile.TemporaryDirectory() as scratch:
        desk = lead_desk(scratch)
        simulate_validators(desk, hate_speech_team(desk), share=0.85)
        desk.settings.last_task = "hate_speech"
        window = show_window(desk, 1680, 1120)
        view, controller = window.dashboard_view, window.dashboard
        wait_for(controller, lambda: window.tabs.setCurrentWidget(view))
        wait_for(controller, lambda: view.breakdown_combo.setCurrentIndex(view.breakdown_combo.findData("target_groups")))
        window.grab().save(str(OUT / "dashboard-hate-speech.png"))
        window.close()
        desk.close()

    # Day one: a few examples written seconds apart; the time axes still read as dates and times.
    with tempfile.TemporaryDirectory() as scratch:
        from types import SimpleNamespace

        from tests.simulation import small_team

        desk = lead_desk(scratch)
        people = SimpleNamespace(**{key: desk.people.create(name, "annotator") for key, name in (
            ("author", "Ana Author"), ("val1", "Vic Validator"), ("val2", "Wen Validator"), ("val3", "Xia Validator"))},
            lead=desk.current_person())
        model = desk.models.register("hate model r1", "hf-torch", "ab" * 32, task_id=desk.tasks.task("hate_speech").id)
        small_team(desk, people, model)
        desk.settings.last_task = "hate_speech"
        window = show_window(desk, 1366, 768)
        view, controller = window.dashboard_view, window.dashboard
        wait_for(controller, lambda: window.tabs.setCurrentWidget(view))
        window.grab().save(str(OUT / "dashboard-day-one.png"))
        window.close()
        desk.close()


def hate_speech_team(desk, seed: int = 3):
    """Seven writers over three rounds against ever stronger models; some perturbations."""
    import random
    from datetime import datetime, timedelta

    from sqlalchemy import text

    from app.core.domain import ModelOutput
    from app.core.services.examples import Content
    from tests.simulation import SimulatedTeam

    rng = random.Random(seed)
    definition = desk.tasks.definition_by_code("hate_speech")
    types = next(f for f in definition.metadata if f.name == "hate_type").choices
    groups = next(f for f in definition.metadata if f.name == "target_groups").choices
    writers = {name: (desk.people.create(name, "annotator").id, skill, pace) for name, skill, pace in [
        ("Lena Fischer", 0.55, 140), ("Marco Rossi", 0.45, 90), ("Nadia Karim", 0.62, 200), ("Olu Adeyemi", 0.38, 75),
        ("Pia Nilsson", 0.5, 120), ("Quentin Roy", 0.3, 60), ("Rosa Jiménez", 0.48, 160)]}
    models = [desk.models.register(f"hate model r{r}", "onnx", f"{r:02d}" * 32) for r in (1, 2, 3)]
    now = datetime.now(UTC)
    ids, dates = [], []
    for number in (1, 2, 3):
        desk.tasks.get_or_create_round("hate_speech", number)
        model = models[number - 1]
        for i in range(260):
            name = rng.choice(list(writers))
            author, skill, pace = writers[name]
            label = "hate" if rng.random() < 0.55 else "not hate"
            fooled = rng.random() < skill * (1.15 - 0.25 * number)
            predicted = label if not fooled else ("not hate" if label == "hate" else "hate")
            meta = {"label_explanation": "generated"}
            if label == "hate":
                meta["hate_type"] = rng.choices(types, weights=[5, 4, 2, 1.5, 1])[0]
                meta["target_groups"] = rng.sample(groups, rng.choice((1, 1, 1, 2)))
            parent = ids[-1][0] if ids and ids[-1][1] == author and rng.random() < 0.3 else None
            words = " ".join(rng.choice(("they", "those", "people", "all", "never", "always", "here", "again"))
                             for _ in range(rng.randint(2, 6)))
            example = desk.examples.create(
                author, "hate_speech", Content({"text": f"Generated example {len(ids)}: {words}"}, label, meta=meta),
                [ModelOutput(model.id, model.sha256, predicted, {}, 3.0)], round_number=number,
                perturbation_of=parent, time_spent_ms=int(rng.lognormvariate(0, 0.4) * pace * 1000))
            ids.append((example.id, author))
            when = now - timedelta(days=42) + timedelta(days=14 * (number - 1) + 14 * i / 260, hours=rng.uniform(0, 8))
            dates.append({"id": example.id.hex, "at": when.replace(tzinfo=None).isoformat(sep=" ")})
    with desk.db.write() as session:
        session.execute(text("UPDATE examples SET submitted_at = :at, created_at = :at, updated_at = :at "
                             "WHERE id = :id"), dates)
    return SimulatedTeam("hate_speech", {n: w[0] for n, w in writers.items()}, {}, [i for i, _ in ids])


if __name__ == "__main__":
    main()
