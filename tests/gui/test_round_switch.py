"""A new round reaching an open app (issue 15): a sync brings round 2 with another target while a
writer is filling in an example of round 1. The Create tab switches to round 2 once its target
answers, says so, and offers to move the unfinished example, which is predicted again by the new
target and stored in round 2. Nothing is retyped."""

from __future__ import annotations

import json
import uuid

import pytest
from PySide6.QtCore import Qt

from app.desk import Desk
from app.domain import Role, utcnow
from app.io.records import dump_round
from app.services.target_models import register_model
from sync.client import SyncReport
from sync.local import apply_page
from tests.gui.conftest import close_window, open_window
from tests.gui.test_workspace import WAIT, stored_examples, submit, text_box, type_text, wait_for_prediction


@pytest.fixture
def flipped_model_dir(copy_model, hate_trigger_model_dir):
    """The trigger model with its two labels swapped: "banana" now means "not hate"."""
    folder = copy_model(hate_trigger_model_dir, "flipped")
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    id2label = config["id2label"]
    config["id2label"] = {key: id2label[other] for key, other in zip(id2label, reversed(list(id2label)))}
    config["label2id"] = {label: int(key) for key, label in config["id2label"].items()}
    config_path.write_text(json.dumps(config))
    return folder


def pull_round_two(window, flipped_dir) -> str:
    """What a sync pulls when the lead closed round 1 and opened round 2 on the server: the two
    rounds' records (stored by the sync's own page writer) and round 2's target model, already
    downloaded. Then the sync's after-pull signal, as a finished Sync now sends it."""
    desk = window.desk
    model = register_model(desk, flipped_dir, task_code="hate_speech", name="Flipped model")
    first = desk.tasks.round("hate_speech")
    targets = [m.id for m in desk.models.round_models(first.id)]
    closed = {**dump_round(first, "hate_speech", targets), "status": "closed", "closed_at": utcnow().isoformat()}
    opened = {**dump_round(first, "hate_speech", [model.id]), "id": str(uuid.uuid4()), "number": 2, "status": "open",
              "goal_message": "Fool the flipped model", "closed_at": None, "opened_at": utcnow().isoformat()}
    pulled = apply_page(desk.db, [closed, opened], set(), key="test-server", cursor=1)
    assert not pulled.skipped
    window.sync.finished.emit(SyncReport(pulled=2))
    return model.sha256


def test_a_round_opened_by_a_sync_reaches_the_open_app_and_the_form_in_progress_moves_to_it(
        qtbot, data_dir, hate_model, flipped_model_dir):
    window = open_window(qtbot, data_dir)
    ws, view = window.workspace, window.workspace.view
    try:
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        qtbot.mouseClick(view.warning.primary, Qt.MouseButton.LeftButton)
        text = "my neighbour smiled at the doctor today"
        type_text(qtbot, window, text)
        qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)  # hate; the model says not
        assert wait_for_prediction(qtbot, window).label == "not hate"
        assert view.prediction.verdict.text() == "Model fooled"
        submit(qtbot, window)
        qtbot.waitUntil(view.form_shown, timeout=5000)
        form = view.form
        form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("dehumanization"))
        qtbot.mouseClick(form.editors["target_groups"][0][1], Qt.MouseButton.LeftButton)
        qtbot.keyClicks(form.editors["label_explanation"], "It compares a group to vermin")

        new_sha = pull_round_two(window, flipped_model_dir)
        # Until round 2's target answers, nothing is judged by round 1's model.
        held = "Round 2 is open — loading its target…"
        qtbot.waitUntil(lambda: "Round 2" in view.goal.text() or view.prediction.verdict.text() == held, timeout=WAIT)
        if "Round 2" not in view.goal.text():
            assert ws.loaded is None and ws.last_outputs == []
        qtbot.waitUntil(lambda: "Round 2" in view.goal.text() and ws.loaded is not None, timeout=WAIT)
        assert ws.loaded.sha256s == (new_sha,)
        assert view.round_notice.isVisible()
        assert "Round 2 is open" in view.round_notice.text.text() and "Flipped model" in view.round_notice.text.text()
        assert "Round 2" in view.goal.text() and window.round_label.text().startswith("Round 2")
        # The example of round 1 is kept as it was typed, with the offer to move it.
        assert view.editor.content() == {"inputs": {"text": text}, "label": "hate", "answer": None}
        assert view.move_offer.isVisible() and "round 1" in view.move_offer.text.text()
        assert view.move_offer.primary.text() == "Move to round 2"
        drafts = window.desk.examples.drafts(window.desk.current_person_id)
        assert [(d.text, d.round_id) for d in drafts] == [(text, window.desk.tasks.round("hate_speech", 1).id)]
        assert drafts[0].meta["hate_type"] == "dehumanization"
        submit(qtbot, window)  # not into a closed round
        assert not view.form_shown() and "move the example" in view.status.text()

        qtbot.mouseClick(view.move_offer.primary, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not view.move_offer.isVisible() and ws.draft.round_number == 2, timeout=5000)
        assert wait_for_prediction(qtbot, window).label == "hate"  # the flipped model
        assert view.prediction.verdict.text() != "Model fooled"
        submit(qtbot, window)
        qtbot.waitUntil(view.form_shown, timeout=5000)
        assert form.values()["hate_type"] == "dehumanization"  # the filled-in form came along
        assert form.values()["label_explanation"] == "It compares a group to vermin"
        qtbot.keyClicks(form.editors["model_explanation"], "It was not")
        qtbot.keyClick(form.editors["model_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
        qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)

        (example,) = stored_examples(window)
        assert example.text == text and example.true_label == "hate"
        assert example.round_id == window.desk.tasks.round("hate_speech", 2).id
        assert example.model_fooled is False and [o.model_sha256 for o in example.outputs] == [new_sha]
        assert example.outputs[0].label == "hate" and example.meta["hate_type"] == "dehumanization"
        assert window.desk.examples.drafts(window.desk.current_person_id) == []
    finally:
        close_window(window)


def test_a_restored_draft_of_a_closed_round_is_offered_the_move(qtbot, data_dir, hate_model):
    with Desk(data_dir) as desk:
        person = desk.current_person_id
        lead = desk.people.create("Lea Lead", Role.LEAD.value)
        draft = desk.examples.start_draft(person, "hate_speech", 1)
        desk.examples.save_draft(draft.id, inputs={"text": "written before the round closed"}, true_label="hate",
                                 meta={"hate_type": "dehumanization"})
        desk.rounds.open_next("hate_speech", lead.id, [hate_model.id], goal_message="Round two")
    window = open_window(qtbot, data_dir)
    ws, view = window.workspace, window.workspace.view
    try:
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        qtbot.mouseClick(view.warning.primary, Qt.MouseButton.LeftButton)
        assert ws.round.number == 2
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        qtbot.mouseClick(view.draft_offer.primary, Qt.MouseButton.LeftButton)
        assert text_box(window).toPlainText() == "written before the round closed"
        assert view.move_offer.isVisible() and "round 1" in view.move_offer.text.text()

        # Kept as a draft: the editor starts afresh in round 2, and the draft comes back later.
        qtbot.mouseClick(view.move_offer.secondary, Qt.MouseButton.LeftButton)
        assert text_box(window).toPlainText() == "" and not view.move_offer.isVisible()
        assert "Kept as a draft of round 1" in view.message.text.text()
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        qtbot.mouseClick(view.draft_offer.primary, Qt.MouseButton.LeftButton)
        assert text_box(window).toPlainText() == "written before the round closed" and view.move_offer.isVisible()

        qtbot.mouseClick(view.move_offer.primary, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: ws.draft.round_number == 2, timeout=5000)
        wait_for_prediction(qtbot, window)
        (moved,) = window.desk.examples.drafts(window.desk.current_person_id)
        assert moved.id == draft.id and moved.round_id == ws.round.id
        assert moved.text == "written before the round closed" and moved.meta["hate_type"] == "dehumanization"
    finally:
        close_window(window)
