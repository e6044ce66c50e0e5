"""The Next round dialog with the adaptive suite: "Train on validated variants too" trains the candidate on the
validated variants of training-side seeds (the manifest lists them), and the comparison table shows the suite as a
split and per topic family, scored on held-out seeds' variants since the candidate trained on variants."""

from __future__ import annotations

import json

from PySide6.QtCore import Qt

from app.core.desk import Desk
from app.core.tasks.splits import is_held_out
from tests.gui.conftest import close_window, open_window
from tests.gui.test_next_round_dialog import (
    TASK,
    cells,
    choose_base,
    open_dialog,
    set_up,
    wait_for_comparison,
    write_base,
)
from tests.suite_flow import add_variants, seeds_on_both_sides


def test_the_dialog_trains_on_validated_variants_and_compares_on_the_suite(qtbot, data_dir, tmp_path, modal_log,
                                                                            hate_trigger_model_dir, tiny_base_dir):
    set_up(data_dir, hate_trigger_model_dir, examples=40)
    variants: dict[str, bool] = {}  # variant id -> its seed is held out
    with Desk(data_dir) as desk:
        lead = next(p for p in desk.people.all() if p.display_name == "Lee Lead")
        vetter = desk.people.create("Vera Vetter", "lead")
        (target,) = desk.models.round_models(desk.tasks.round(TASK, 1).id)
        assert len(desk.adaptive_suite.topics(TASK)) == 9  # the lesson: every fourth decided example fooled it
        author = next(p for p in desk.people.all() if p.display_name == "Ana Author")
        seeds_on_both_sides(desk, author, lead, target, training=0, held_out=1, word="zebra")  # one held out, surely
        seeds = desk.adaptive_suite.topics(TASK)
        for n, topic in enumerate(seeds):
            seed = desk.examples.get(topic.seed_id)
            ids = add_variants(desk, lead, vetter, target, seed, [(f"honestly zebra {n} one", "hate"),
                                                                  (f"they say zebra {n} two", "hate")])
            variants.update({str(i): is_held_out(seed.id) for i in ids})
    base = write_base(tmp_path / "base.csv", 60, seed=34)
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        box = dialog.train_on_variants
        assert box.isEnabled() and not box.isChecked() and "20 in the suite" in box.text()
        assert not dialog.choices().variants
        qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
        assert dialog.choices().variants
        choose_base(qtbot, dialog, base)
        dialog.encoder.setText(str(tiny_base_dir))
        dialog.epochs.setValue(2)
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        wait_for_comparison(qtbot, dialog)

        (folder,) = (window.desk.root / "candidates").iterdir()
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        taken = {v["id"] for v in manifest["variants"]["taken"]}
        assert taken == {v for v, held in variants.items() if not held} and manifest["variants"]["weight"] == 1.0
        shown = cells(dialog)
        suite_rows = [r for r in shown if r[0].startswith("Adaptive suite")]
        held_count = sum(variants.values())
        assert suite_rows[0][0] == f"Adaptive suite, held-out seeds ({held_count} variants of {held_count // 2} " \
                                   "seeds)" and suite_rows[0][6] == str(held_count) and suite_rows[0][1] == "accuracy"
        assert [r[1] for r in suite_rows[1:]] == ["accuracy (topic family)"]
        assert suite_rows[1][0] == "Adaptive suite · derogation" and suite_rows[1][6] == str(held_count)
        assert "held-out seeds" in dialog.notes.text() and "trained on validated variants" in dialog.notes.text()
    finally:
        close_window(window)

    # the next time, the dialog starts from the last choice
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        assert dialog.train_on_variants.isChecked()
    finally:
        close_window(window)
