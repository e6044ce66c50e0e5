"""Screenshots of a new round reaching an open app, taken offscreen from the real window:

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_round_screenshots.py [--refusal]

(--refusal: only the Next round dialog's refusal page and its "Promote anyway…" question.)

A writer fills in an example of round 1; a sync brings round 2 with another target (stored by the
sync's own page writer, then the after-sync signal). Shot at 1366×768: the prediction held while
round 2's target loads, the notice with the offer to move the example, and the example moved.
Two tiny untrained classifiers stand in for the round targets (their predictions mean nothing).
"""

import tempfile
import uuid
from pathlib import Path

from screenshot_kit import OUT, application, lead_desk, show_window, snap, wait, wait_until


def tiny_model(folder: Path, seed: int) -> Path:
    from transformers import BertForSequenceClassification

    from tests.model_fixtures import save_tiny

    folder.mkdir()
    save_tiny(BertForSequenceClassification, folder, seed=seed, num_labels=2,
              id2label={0: "hate", 1: "not hate"}, label2id={"hate": 0, "not hate": 1})
    return folder


def refusal_page() -> None:
    """Round ▸ Next round…, step 3, at 1366×768, on the team run's comparison: one held-out example (too few to
    judge) and the base data's test split worse beyond its interval. The verdict names that split, every split
    is listed; then “Promote anyway…” asking for the reason."""
    from app.views.next_round import comparison_view
    from tests.views.test_next_round_views import team_run_document
    from widgets.next_round_dialog import NextRoundDialog

    dialog = NextRoundDialog()
    dialog.resize(1366, 768)
    dialog.show_comparison(comparison_view(team_run_document(), "/home/lee/.dynadesk/candidates/hate_speech-"
                                                                "20261127-231502/comparison/comparison.html"))
    dialog.set_promote_intro("Promoting closes round 1 of hate_speech and opens round 2 with the candidate as its "
                             "target. The candidate is exported to ONNX and parity-checked like the default model; "
                             "its lineage (parent, manifest, comparison) is recorded.")
    dialog.show()
    snap(dialog, "next-round-2-compare-worse.png")
    dialog.show_step(2)
    snap(dialog, "next-round-3-refused.png")
    dialog.promote_button.click()
    anyway = dialog.promote_anyway
    anyway.reason.setPlainText("Davidson's test split predates the slang this round collects; the team reviewed "
                               "the 18 base-test tweets it now gets wrong.")
    snap(anyway, "next-round-3-promote-anyway.png")
    anyway.reject()
    dialog.close()


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.domain import utcnow
    from app.core.io.records import dump_round
    from app.core.services.target_models import register_model
    from sync.incoming import apply_page
    from sync.transport import SyncReport

    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        desk = lead_desk(scratch / "desk")
        first_model = register_model(desk, tiny_model(scratch / "r1", 1), task_code="hate_speech",
                                     name="hate-r1 (DistilBERT)")
        second_model = register_model(desk, tiny_model(scratch / "r2", 2), task_code="hate_speech",
                                      name="hate-r2 (retrained on round 1)")
        assert desk.rounds.adopt_first_models("hate_speech", [first_model.id])
        window = show_window(desk, 1366, 768)
        ws, view = window.workspace, window.workspace.view
        wait_until(lambda: ws.loaded is not None)
        view.warning.primary.click()
        view.editor.fields["text"].setPlainText("People like them should be kept out of our neighbourhood")
        view.editor.choose_label("hate")
        wait_until(lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        ws.submit()
        wait_until(view.form_shown)
        view.form.set_values({"hate_type": "threat", "target_groups": ["immigrants"],
                              "label_explanation": "Calls for excluding a group."})
        wait(300)

        # What a sync pulls when the lead closed round 1 and opened round 2 on the server.
        first = desk.tasks.round("hate_speech")
        closed = {**dump_round(first, "hate_speech", [first_model.id]), "status": "closed",
                  "closed_at": utcnow().isoformat()}
        opened = {**dump_round(first, "hate_speech", [second_model.id]), "id": str(uuid.uuid4()), "number": 2,
                  "status": "open", "closed_at": None, "opened_at": utcnow().isoformat(),
                  "goal_message": "Fool the model retrained on round 1."}
        apply_page(desk.db, [closed, opened], set(), key="screenshots", cursor=1)
        window.sync.finished.emit(SyncReport(pulled=2))
        wait_until(lambda: ws.pending_round is not None or ws.round.number == 2)
        if ws.pending_round is not None:
            window.grab().save(str(OUT / "round-switch-loading.png"))
        wait_until(lambda: ws.round.number == 2 and ws.loaded is not None)
        snap(window, "round-switch.png", ready=lambda: ws.last_prediction is not None and ws._current_prediction_matches())
        view.move_offer.primary.click()
        snap(window, "round-switch-moved.png", ready=lambda: ws.draft.round_number == 2 and ws.last_prediction is not None
             and ws._current_prediction_matches())
        window.close()
        desk.close()
    print(f"Screenshots written to {OUT}")


if __name__ == "__main__":
    import sys

    if sys.argv[1:] == ["--refusal"]:
        app = application()  # noqa: F841 (must stay alive)
        refusal_page()
        print(f"Screenshots written to {OUT}")
    else:
        main()
        refusal_page()
