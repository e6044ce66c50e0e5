"""The model leaderboard in the Evaluate tab, taken offscreen from the real application: shared
HateCheck cases written against each round's target and decided by a lead. Round 1's target is the
real default model; round 2's is a candidate trained on round 1 (train_from_desk) and promoted with
the default model as an ensemble; round 3's was trained on another desk and its files are not here.
After the board fills, one more decision makes round 3's cells stale.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_leaderboard_screenshot.py [PREPARED_MODELS_DIR]

PREPARED_MODELS_DIR (optional) is a data folder's ``models`` folder with the default model
already prepared, to skip the first-use assembly and export.
"""

import csv
import random
import shutil
import sys
import tempfile
from pathlib import Path

from screenshot_kit import OUT, ROOT, application, show_window, wait, wait_until

SUITE = ROOT.parent / "shared" / "data" / "hatecheck" / "test_suite_cases_dev.csv"
GOLD = {"hateful": "hate", "non-hateful": "not hate"}


def cases() -> list[tuple[str, str, str | None]]:
    with open(SUITE, encoding="utf-8", newline="") as handle:
        rows = [(r["test_case"], GOLD[r["label_gold"]], r.get("target_ident") or None) for r in csv.DictReader(handle)]
    random.Random(4).shuffle(rows)
    return rows


def add_round(desk, lead, author, engines, records, rows, *, decide=True) -> list:
    """Examples written against ``engines`` (their outputs stored), decided by the lead as written."""
    from app.core.services.examples import Content
    from app.core.services.target_models import to_model_output

    made = []
    predictions = [engine.predict([text for text, _l, _t in rows]) for engine in engines]
    for i, (text, label, target) in enumerate(rows):
        meta = {"label_explanation": "A HateCheck case, for the screenshot."}
        if label == "hate":
            meta.update(hate_type="derogation", target_groups=[target or "women"])
        outputs = [to_model_output(p[i], record) for p, record in zip(predictions, records)]
        example = desk.examples.create(author.id, "hate_speech", Content({"text": text}, label, meta=meta), outputs)
        if decide:
            desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        made.append(example)
    return made


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core import paths
    from app.core.desk import Desk
    from app.core.next_round.promotion import promote_candidate
    from app.core.next_round.round_training import RoundTrainingOptions, train_from_desk
    from app.core.services.target_models import adopt_default_model, ensure_default_model, load_engine_for
    from app.core.tasks.splits import is_held_out
    from local_models.train import TrainingConfig

    with tempfile.TemporaryDirectory() as scratch:
        if len(sys.argv) > 1:
            shutil.copytree(sys.argv[1], paths.models_cache_dir(Path(scratch)))
        desk = Desk(scratch)
        lead = desk.people.create("Ada Lovelace", "lead")
        author = desk.people.create("Grace Hopper", "annotator")
        desk.switch_person(lead.id)
        onnx = adopt_default_model(desk) or ensure_default_model(desk)
        engines = {onnx.id: load_engine_for(onnx)}
        rows = cases()
        add_round(desk, lead, author, [engines[onnx.id]], [onnx], rows[:500])
        # round 2's target: trained on round 1 from the default model, promoted with it as an ensemble
        candidate_dir = Path(scratch) / "round-2-candidate"
        train_from_desk(desk, RoundTrainingOptions(task="hate_speech", rounds=[1], name="Round 2 candidate",
                                                   config=TrainingConfig(epochs=4, num_threads=2)), candidate_dir)
        promotion = promote_candidate(desk, "hate_speech", candidate_dir, with_current=True, force=True)
        candidate = promotion.candidate
        engines[candidate.id] = load_engine_for(candidate)
        add_round(desk, lead, author, [engines[candidate.id], engines[onnx.id]], [candidate, onnx], rows[500:1000])
        elsewhere = desk.models.register("Round 3 candidate (trained on the lead's desk), ONNX int8", "onnx",
                                         "5e" * 32, path=str(Path(scratch) / "not-synced-yet"),
                                         task_id=desk.tasks.task("hate_speech").id)
        desk.rounds.open_next("hate_speech", lead.id, [elsewhere.id])
        add_round(desk, lead, author, [engines[candidate.id]], [candidate], rows[1000:1400])
        undecided = add_round(desk, lead, author, [engines[candidate.id]], [candidate], rows[1400:1600], decide=False)
        for engine in engines.values():
            engine.close()
        settings = desk.settings
        settings.acknowledged_warnings = [*settings.acknowledged_warnings, "hate_speech"]
        desk.save_settings()

        window = show_window(desk, 1366, 768)
        filled = []  # (Create waits for round 3's target, whose files are not here: the Evaluate tab does not)
        window.leaderboard.filled.connect(filled.append)
        window.tabs.setCurrentWidget(window.evaluation_view)
        wait_until(lambda: bool(filled), 600)
        # one more decision on a held-out example of round 3: its cells are stale until Refresh
        late = next(e for e in undecided if is_held_out(e.id))
        desk.validation.validate(late.id, lead.id, "correct", mode="lead")
        window.tabs.setCurrentWidget(window.workspace_view)
        window.tabs.setCurrentWidget(window.evaluation_view)
        wait_until(lambda: len(filled) >= 2, 120)
        panel = window.evaluation_view.leaderboard
        panel.table.setFocus()
        wait(500)
        window.grab().save(str(OUT / "leaderboard.png"))
        window.close()
        desk.close()
    print(f"Screenshot written to {OUT / 'leaderboard.png'}")


if __name__ == "__main__":
    main()
