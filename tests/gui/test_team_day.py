"""A team's day, scripted: a real server on loopback with an owner, a lead and two
annotators, set up in the order docs/sync.md gives. The owner's first sync publishes round 1 (no
hidden step); Ann writes in the app, Bob and the lead work from the command line and their desks;
a verdict and a return travel; the owner opens round 2 while Ann's app is open with a draft in
progress; the draft moves to round 2 and is stored. At the end every record is on the server and
nothing waits on any desk."""

from __future__ import annotations

from click.testing import CliRunner
from PySide6.QtCore import Qt

from app.cli import cli
from app.core.desk import Desk
from app.core.services.target_models import register_model
from sync import local
from tests.conftest import hate_content, hate_output
from tests.gui.conftest import click_shown, close_window, open_window
from tests.gui.test_round_switch import flipped_model_dir  # noqa: F401 (a fixture)
from tests.gui.test_workspace import WAIT, stored_examples, submit, text_box, type_text, wait_for_prediction
from tests.sync.helpers import ThreadServer, add_account, server_database

SYNC_NOW = (Qt.Key.Key_S, Qt.KeyboardModifier.ControlModifier | Qt.KeyboardModifier.ShiftModifier)


def dynadesk(folder, *args, token: str | None = None) -> str:
    """One `dynadesk` command on the desk in ``folder``, as a person types it; its output."""
    result = CliRunner().invoke(cli, ["--data-dir", str(folder), *args], input=f"{token}\n" if token else None)
    assert result.exit_code == 0, result.output
    return result.output


def join(folder, url: str, token: str) -> str:
    dynadesk(folder, "sync", "configure", "--url", url, "--token-stdin", token=token)
    return dynadesk(folder, "sync", "--now")


def server_rows(db, model) -> list:
    from sqlalchemy import select

    with db.read() as session:
        return list(session.scalars(select(model)))


def nothing_waits(folder) -> None:
    with Desk(folder) as desk:
        status = local.local_status(desk.db, desk.current_person_id)
    assert (status.pending, status.deferred, status.rejected, status.conflicts) == (0, 0, 0, 0), status


def store_in_the_app(qtbot, window, label_explanation: str) -> None:
    """Submit, fill in the hate-speech form, and store with Ctrl+Enter."""
    view = window.workspace.view
    submit(qtbot, window)
    qtbot.waitUntil(view.form_shown, timeout=5000)
    form = view.form
    if not form.values().get("hate_type"):
        form.editors["hate_type"].setCurrentIndex(form.editors["hate_type"].findData("dehumanization"))
        qtbot.mouseClick(form.editors["target_groups"][0][1], Qt.MouseButton.LeftButton)
        qtbot.keyClicks(form.editors["label_explanation"], label_explanation)
    qtbot.keyClicks(form.editors["model_explanation"], "It missed the insult")
    qtbot.keyClick(form.editors["model_explanation"], Qt.Key.Key_Return, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: view.message.isVisible() and "Stored" in view.message.text.text(), timeout=10_000)



def owner_publishes_round_one(owner_dir, model_dir, server, owner):
    """The owner's desk gets round 1's target (returned), then configures sync: the first sync publishes round 1."""
    with Desk(owner_dir) as desk:
        first = register_model(desk, model_dir, task_code="hate_speech", name="Trigger model")
        assert desk.rounds.adopt_first_models("hate_speech", [first.id])
    assert "Published 'hate_speech' round 1" in join(owner_dir, server.url, owner.token)
    return first

def test_a_team_day_from_set_up_to_round_two_leaves_nothing_waiting(
        qtbot, tmp_path, data_dir, modal_log, hate_trigger_model_dir, flipped_model_dir):  # noqa: F811
    from sync.server import models as server_models

    # 1. The people on the server (`dynadesk serve add-person`), then the server runs.
    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    server = ThreadServer(db, tmp_path / "server")
    owner, lead = add_account(db, "Olga Owner", "owner"), add_account(db, "Lee Lead", "lead")
    ann, bob = add_account(db, "Ann Annotator", "annotator"), add_account(db, "Bob Annotator", "annotator")
    owner_dir, lead_dir, bob_dir = tmp_path / "owner", tmp_path / "lead", tmp_path / "bob"
    window = None
    try:
        # 2. The owner's desk first: round 1's target, then configure and sync; the first sync publishes.
        first = owner_publishes_round_one(owner_dir, hate_trigger_model_dir, server, owner)

        # 3. Everyone else. Ann works in the app and writes an example that fools round 1's target.
        window = open_window(qtbot, data_dir)
        ws, view = window.workspace, window.workspace.view
        window.sync.configure(server.url, ann.token, 300)
        qtbot.waitUntil(lambda: ws.loaded is not None and ws.loaded.sha256s == (first.sha256,), timeout=WAIT)
        if view.warning.isVisible():
            click_shown(qtbot, view.warning.primary)
        type_text(qtbot, window, "those people are vermin and should leave")
        qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
        assert wait_for_prediction(qtbot, window).label == "not hate"
        store_in_the_app(qtbot, window, "It calls a group vermin")
        (ann_first,) = stored_examples(window)
        assert ann_first.model_fooled is True
        qtbot.keyClick(window, *SYNC_NOW)
        qtbot.waitUntil(lambda: len(server_rows(db, server_models.Example)) == 1, timeout=20_000)

        # Bob writes from his desk; the lead returns his example with a comment.
        join(bob_dir, server.url, bob.token)
        with Desk(bob_dir) as desk:
            target = next(m for m in desk.models.all() if m.sha256 == first.sha256)
            bobs = desk.examples.create(bob.id, "hate_speech", hate_content("they are all the same", "hate"),
                                        [hate_output(target, "not hate")])
        dynadesk(bob_dir, "sync", "--now")
        join(lead_dir, server.url, lead.token)
        with Desk(lead_dir) as desk:
            assert desk.lead.return_examples(lead.id, [bobs.id], "Name the group it targets") == 1
        dynadesk(lead_dir, "sync", "--now")

        # Bob sees the return, and validates Ann's example.
        dynadesk(bob_dir, "sync", "--now")
        with Desk(bob_dir) as desk:
            assert [e.id for e in desk.lead.returned_to(bob.id)] == [bobs.id]
            desk.validation.validate(ann_first.id, bob.id, "correct")
        dynadesk(bob_dir, "sync", "--now")

        # 4. Ann starts another example; meanwhile the owner opens round 2 with another target.
        type_text(qtbot, window, "my neighbour smiled at the doctor today")
        qtbot.keyClick(text_box(window), Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
        wait_for_prediction(qtbot, window)
        with Desk(owner_dir) as desk:
            second = register_model(desk, flipped_model_dir, task_code="hate_speech", name="Flipped model")
            desk.rounds.open_next("hate_speech", owner.id, [second.id])
        dynadesk(owner_dir, "sync", "publish", "hate_speech")

        # 5. Ann's Sync now brings round 2: the app switches once its target answers and offers the move.
        qtbot.keyClick(window, *SYNC_NOW)
        qtbot.waitUntil(lambda: "Round 2" in view.goal.text() and ws.loaded is not None
                        and ws.loaded.sha256s == (second.sha256,), timeout=WAIT)
        assert "Round 2 is open" in view.round_notice.text.text()
        assert view.move_offer.isVisible()
        click_shown(qtbot, view.move_offer.primary)
        qtbot.waitUntil(lambda: ws.draft.round_number == 2, timeout=5000)
        assert wait_for_prediction(qtbot, window).label == "hate"  # judged by round 2's target
        store_in_the_app(qtbot, window, "It is kind")
        qtbot.keyClick(window, *SYNC_NOW)
        qtbot.waitUntil(lambda: len(server_rows(db, server_models.Example)) == 3, timeout=20_000)
        qtbot.waitUntil(lambda: not window.sync.running, timeout=20_000)

        # 6. Everyone syncs once more: every record is on the server, and nothing waits anywhere.
        for folder in (owner_dir, lead_dir, bob_dir):
            dynadesk(folder, "sync", "--now")
        examples = {e.id: e for e in server_rows(db, server_models.Example)}
        rounds = {r.id: r.number for r in server_rows(db, server_models.Round)}
        assert sorted((rounds[e.round_id], e.author_id == ann.id) for e in examples.values()) == [
            (1, False), (1, True), (2, True)]
        assert [(v.example_id, v.validator_id) for v in server_rows(db, server_models.Validation)] == [
            (ann_first.id, bob.id)]
        assert [(r.example_id, r.action) for r in server_rows(db, server_models.ExampleReview)] == [
            (bobs.id, "returned")]
        for folder in (owner_dir, lead_dir, bob_dir):
            nothing_waits(folder)
        status = local.local_status(window.desk.db, window.desk.current_person_id)
        assert (status.pending, status.deferred, status.rejected, status.conflicts) == (0, 0, 0, 0), status
    finally:
        if window is not None:
            close_window(window)
        server.stop()
        db.close()


def test_a_team_from_the_docs_with_imported_anli_and_hatecheck_syncs_and_closes_round_one_on_the_imports(
        qtbot, tmp_path, modal_log, monkeypatch, hate_trigger_model_dir, tiny_base_dir):
    """README and docs/sync.md, in order: the server and its people; the owner's desk with round 1's
    target, an ANLI set and HateCheck cases imported as round 1's examples (`import --format hatecheck
    --round 1 --group-column templ_id`), published and shared; a lead's and an annotator's desks. Every
    desk reaches a synced state with nothing waiting, `stats` counts the imports on each, and the owner
    closes round 1 from Round ▸ Next round…, taking the imported HateCheck cases."""
    import json

    from app.core.domain import RoundStatus
    from sync.server import models as server_models
    from tests.app.test_stats import csv_slice
    from tests.conftest import shared_file
    from tests.gui.test_next_round_dialog import open_dialog, promote_anyway, wait_for_comparison

    db = server_database(f"sqlite:///{tmp_path / 'server' / 'server.sqlite'}")
    server = ThreadServer(db, tmp_path / "server")
    owner, lead = add_account(db, "Olga Owner", "owner"), add_account(db, "Lee Lead", "lead")
    ann = add_account(db, "Ann Annotator", "annotator")
    owner_dir, lead_dir, ann_dir = tmp_path / "owner", tmp_path / "lead", tmp_path / "ann"
    anli = csv_slice(shared_file("anli", "ANLI_analysis_r1_dev.csv"), tmp_path / "anli.csv", 6)
    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp_path / "hatecheck.csv", 12)
    window = None
    try:
        # the owner: round 1's target, the first sync (it publishes round 1), then the imports, as documented
        first = owner_publishes_round_one(owner_dir, hate_trigger_model_dir, server, owner)
        dynadesk(owner_dir, "import", "--format", "anli", str(anli))
        dynadesk(owner_dir, "import", "--format", "hatecheck", "--round", "1", "--group-column", "templ_id",
                 str(cases))
        dynadesk(owner_dir, "sync", "publish", "nli")
        dynadesk(owner_dir, "sync", "publish", "hate_speech")
        assert "18 imported record(s)" in dynadesk(owner_dir, "sync", "share-imported")
        dynadesk(owner_dir, "sync", "--now")

        # the lead and the annotator join; Ann writes two examples, the lead decides them
        join(lead_dir, server.url, lead.token)
        join(ann_dir, server.url, ann.token)
        with Desk(ann_dir) as desk:
            target = next(m for m in desk.models.all() if m.sha256 == first.sha256)
            written = [desk.examples.create(ann.id, "hate_speech", hate_content(text, "hate"),
                                            [hate_output(target, said)])
                       for text, said in (("they are all vermin", "not hate"), ("go back home you lot", "hate"))]
        dynadesk(ann_dir, "sync", "--now")
        dynadesk(lead_dir, "sync", "--now")
        with Desk(lead_dir) as desk:
            for example in written:
                desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        dynadesk(lead_dir, "sync", "--now")

        # a synced state: every desk once more, then nothing waits anywhere and the server has it all
        for folder in (owner_dir, ann_dir, lead_dir, owner_dir):
            dynadesk(folder, "sync", "--now")
        for folder in (owner_dir, lead_dir, ann_dir):
            nothing_waits(folder)
        assert len(server_rows(db, server_models.Example)) == 6 + 12 + 2

        # `stats` on every desk: the imports count apart from MER, Ann's work in it
        for folder in (owner_dir, lead_dir, ann_dir):
            assert "Unexpected error" not in dynadesk(folder, "stats")
            nli = json.loads(dynadesk(folder, "stats", "--task", "nli", "--json"))["task"]
            assert [(r["submitted"], r["imported"], r["mer"]) for r in nli] == [(0, 6, None)]
            hate = json.loads(dynadesk(folder, "stats", "--task", "hate_speech", "--json"))["task"]
            assert [(r["submitted"], r["imported"], r["mer"]) for r in hate] == [(2, 12, 0.5)]

        # the owner closes round 1 from the GUI, on the imported cases
        window = open_window(qtbot, owner_dir)
        qtbot.waitUntil(lambda: window.workspace.loaded is not None, timeout=WAIT)
        dialog = open_dialog(qtbot, window)
        assert "12 imported (hatecheck; 4 held out)" in dialog.rounds.item(0).text(), dialog.rounds.item(0).text()
        qtbot.mouseClick(dialog.include_imported, Qt.MouseButton.LeftButton)
        assert dialog.choices().imported == ("hatecheck",)
        dialog.encoder.setText(str(tiny_base_dir))
        dialog.epochs.setValue(1)
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        wait_for_comparison(qtbot, dialog)
        (folder,) = (window.desk.root / "candidates").iterdir()
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["rounds"] == [1] and manifest["options"]["imported"] == ["hatecheck"]
        qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
        # a dozen cases judge nothing: refused as too few, and the owner promotes anyway with a reason
        assert "too few to judge" in dialog.refusal.text(), dialog.refusal.text()
        promote_anyway(qtbot, dialog, "the first round of a new team: too few cases to judge yet")
        # the int8 export and its parity check run first: on a loaded 2-core machine they take a while
        qtbot.waitUntil(lambda: "Round 2 is open" in dialog.summary.text(), timeout=3 * WAIT)
        qtbot.mouseClick(dialog.publish_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "Published" in dialog.publish_result.text(), timeout=WAIT)
        assert [(r.number, r.status) for r in window.desk.tasks.rounds("hate_speech")] == [
            (1, RoundStatus.CLOSED), (2, RoundStatus.OPEN)]
        dialog.close()
        close_window(window)
        window = None

        # the round's close reaches everyone, and still nothing waits
        for folder in (lead_dir, ann_dir, owner_dir):
            dynadesk(folder, "sync", "--now")
            nothing_waits(folder)
            with Desk(folder) as desk:
                assert [(r.number, r.status) for r in desk.tasks.rounds("hate_speech")] == [
                    (1, RoundStatus.CLOSED), (2, RoundStatus.OPEN)], folder.name
        served = {r.number: r.status for r in server_rows(db, server_models.Round)
                  if r.number in (1, 2) and len(r.target_models) == 1}
        assert served == {1: "closed", 2: "open"}
    finally:
        if window is not None:
            close_window(window)
        server.stop()
        db.close()
