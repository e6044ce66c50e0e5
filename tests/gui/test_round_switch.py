"""A new round reaching an open app: the owner publishes round 2 with another target on a
real loopback server while Ann is filling in an example of round 1, and Ann presses Sync now.
The Create tab switches to round 2 once its target answers, says so, and offers to move the unfinished example, which is predicted again by the new
target and stored in round 2. Nothing is retyped."""

from __future__ import annotations

import json

import pytest
from PySide6.QtCore import Qt

from app.core.desk import Desk
from app.core.domain import Role
from app.core.services.target_models import register_model
from tests.gui.conftest import click_shown, close_window, open_window
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


@pytest.fixture
def team(tmp_path):
    from tests.sync.helpers import ThreadServer, add_account, server_database

    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    running = ThreadServer(db, tmp_path / "server")
    running.owner = add_account(db, "Olga Owner", "owner", "A")
    running.ann = add_account(db, "Ann Annotator", "annotator", "A")
    yield running
    running.stop()
    db.close()


def server_example(team, example_id):
    from sync.server import models

    with team.db.read() as session:
        return session.get(models.Example, example_id)


def team_round(team, number: int):
    from sqlalchemy import select

    from sync.server import models

    with team.db.read() as session:
        return session.scalar(select(models.Round.id).where(models.Round.number == number))


def test_round_two_published_by_the_owner_reaches_the_open_app_and_the_form_in_progress_moves_to_it(
        qtbot, tmp_path, data_dir, team, hate_trigger_model_dir, flipped_model_dir):
    from sync.client import SyncClient

    owner = Desk(tmp_path / "owner-desk")
    owner.people.create("Olga Owner", "owner", person_id=team.owner.id)
    owner.switch_person(team.owner.id)
    first_model = register_model(owner, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
    assert owner.rounds.adopt_first_models("hate_speech", [first_model.id])
    with SyncClient(owner, team.url, team.owner.token) as client:
        client.publish("hate_speech")

    window = open_window(qtbot, data_dir)
    ws, view = window.workspace, window.workspace.view
    try:
        # Ann's first sync brings round 1's target: the open app takes it, and says so.
        window.sync.configure(team.url, team.ann.token, 300)
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        assert ws.loaded.sha256s == (first_model.sha256,)
        assert window.desk.current_person_id == ws.draft.author_id == team.ann.id  # her work syncs as hers
        assert "Round 1's target changed" in view.round_notice.text.text()
        click_shown(qtbot, view.warning.primary)
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

        # The owner closes round 1 and opens round 2 with another target; Ann presses Sync now.
        second_model = register_model(owner, flipped_model_dir, task_code="hate_speech", name="Flipped model")
        owner.rounds.open_next("hate_speech", team.owner.id, [second_model.id])
        with SyncClient(owner, team.url, team.owner.token) as client:
            client.publish("hate_speech")
        owner.close()
        qtbot.keyClick(window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        # Until round 2's target answers, nothing is judged by round 1's model.
        held = "Round 2 is open — loading its target…"
        qtbot.waitUntil(lambda: "Round 2" in view.goal.text() or view.prediction.verdict.text() == held, timeout=WAIT)
        if "Round 2" not in view.goal.text():
            assert ws.loaded is None and ws.last_outputs == []
        qtbot.waitUntil(lambda: "Round 2" in view.goal.text() and ws.loaded is not None, timeout=WAIT)
        assert ws.loaded.sha256s == (second_model.sha256,)
        assert view.round_notice.isVisible()
        assert "Round 2 is open" in view.round_notice.text.text() and "Flipped model" in view.round_notice.text.text()
        assert window.round_label.text().startswith("Round 2")
        # The example of round 1 is kept as it was typed, with the offer to move it.
        assert view.editor.content() == {"inputs": {"text": text}, "label": "hate", "answer": None}
        assert view.move_offer.isVisible() and "round 1" in view.move_offer.text.text()
        assert view.move_offer.primary.text() == "Move to round 2"
        desk = window.desk
        drafts = desk.examples.drafts(desk.current_person_id)
        assert [(d.text, d.round_id) for d in drafts] == [(text, desk.tasks.round("hate_speech", 1).id)]
        assert drafts[0].meta["hate_type"] == "dehumanization"
        submit(qtbot, window)  # not into a closed round
        assert not view.form_shown() and "move the example" in view.status.text()

        click_shown(qtbot, view.move_offer.primary)
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
        assert example.round_id == desk.tasks.round("hate_speech", 2).id
        assert example.model_fooled is False and [o.model_sha256 for o in example.outputs] == [second_model.sha256]
        assert example.outputs[0].label == "hate" and example.meta["hate_type"] == "dehumanization"
        assert desk.examples.drafts(desk.current_person_id) == []
        # Nothing waits: Sync now sends it to round 2 on the server.
        qtbot.keyClick(window, Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)
        qtbot.waitUntil(lambda: server_example(team, example.id) is not None, timeout=20_000)
        stored = server_example(team, example.id)
        assert stored.round_id == team_round(team, 2) and stored.author_id == team.ann.id
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
        lead_id = lead.id
    window = open_window(qtbot, data_dir)
    ws, view = window.workspace, window.workspace.view
    try:
        qtbot.waitUntil(lambda: ws.loaded is not None, timeout=WAIT)
        click_shown(qtbot, view.warning.primary)
        assert ws.round.number == 2
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        click_shown(qtbot, view.draft_offer.primary)
        assert text_box(window).toPlainText() == "written before the round closed"
        assert view.move_offer.isVisible() and "round 1" in view.move_offer.text.text()

        # Kept as a draft: the editor starts afresh in round 2, and the draft comes back later.
        click_shown(qtbot, view.move_offer.secondary)
        assert text_box(window).toPlainText() == "" and not view.move_offer.isVisible()
        assert "Kept as a draft of round 1" in view.message.text.text()
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        qtbot.waitUntil(view.draft_offer.isVisible, timeout=10_000)
        click_shown(qtbot, view.draft_offer.primary)
        assert text_box(window).toPlainText() == "written before the round closed" and view.move_offer.isVisible()

        click_shown(qtbot, view.move_offer.primary)
        qtbot.waitUntil(lambda: ws.draft.round_number == 2, timeout=5000)
        wait_for_prediction(qtbot, window)
        (moved,) = window.desk.examples.drafts(window.desk.current_person_id)
        assert moved.id == draft.id and moved.round_id == ws.round.id
        assert moved.text == "written before the round closed" and moved.meta["hate_type"] == "dehumanization"

        # A lead closes round 2 on this desk, and no round is open: the text stays, as a draft.
        window.desk.rounds.close(ws.round.id, lead_id)  # the window hears the change: no signal needed
        qtbot.waitUntil(lambda: not view.editing.isEnabled(), timeout=5000)
        assert "Round 2 has closed; your text is kept as a draft" in view.status.text()
        assert window.round_label.text() == "No open round" and ws.loaded is None
        assert text_box(window).toPlainText() == "written before the round closed"
    finally:
        close_window(window)
