"""Round ▸ Next round…, driven as a lead would: on a real desk whose round 1 has the tiny trigger model
as its target and validated examples, choose the rounds and base data, Train (off the GUI thread),
read the comparison, Promote, and see the Create tab follow the new round. Cancel leaves nothing; a
worse candidate is refused until "Promote anyway", which is recorded; an annotator has no entry."""

from __future__ import annotations

import csv
import json
import os
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QAction

from app.core.desk import Desk
from app.core.domain import Role, RoundStatus
from app.core.formatting import MISSING, pct
from app.core.next_round.promotion import promotion_lineage
from app.core.services.target_models import register_model
from app.views.next_round import points
from sync.tokens import TokenStore
from tests.conftest import hate_content, hate_output
from tests.gui.conftest import close_window, open_window
from tests.gui.test_round_switch import team  # noqa: F401 (a loopback team server: owner and annotator)
from tests.model_fixtures import LABELS, trigger_sentences
from widgets.next_round_dialog import NextRoundDialog

TASK = "hate_speech"
WAIT = 60_000
SCREENSHOTS = os.environ.get("DYNADESK_SCREENSHOTS")  # a folder: the three steps are saved there as PNGs


def shot(widget, name: str) -> None:
    if SCREENSHOTS:
        widget.grab().save(str(Path(SCREENSHOTS) / name))


def write_base(path: Path, rows: int, seed: int) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "sentence", "kind"])
        writer.writerows((i, text, label) for i, (text, label) in enumerate(trigger_sentences(rows, seed, LABELS)))
    return path


def set_up(data_dir: Path, model_dir: Path, role: Role = Role.LEAD, examples: int = 150, lesson: bool = True,
           owner=None) -> str:
    """Round 1 open with the trigger model ("banana" means hate) as its target, and ``examples``
    examples, all but the last five decided by a lead: most labelled by the model's own rule, and
    (with ``lesson``) every fourth one a plain sentence with "zebra" labelled hate, which fooled it.
    The working profile has ``role``, or is ``owner``'s on a team server. Returns the target's name."""
    with Desk(data_dir) as desk:
        author = desk.people.create("Ana Author", Role.ANNOTATOR)
        lead = desk.people.create("Lee Lead", Role.LEAD)
        me = lead if role == Role.LEAD else desk.people.create("Otto Other", role)
        if owner is not None:  # the team server's owner (or another member), syncing with it
            me = desk.people.create(owner.name, getattr(owner, "role", Role.OWNER), person_id=owner.id)
            desk.settings.server_url = owner.url
            desk.save_settings()
            TokenStore(desk.root).set(owner.url, owner.token)
        desk.switch_person(me.id)
        target = register_model(desk, model_dir, task_code=TASK, name="Trigger model")
        assert desk.rounds.adopt_first_models(TASK, [target.id])
        for i, (text, label) in enumerate(trigger_sentences(examples, seed=31, labels=LABELS)):
            said = label
            if lesson and i % 4 == 1:  # a plain sentence: the model says "not hate", the author wrote hate
                text, label = f"{text} zebra", "hate"
            example = desk.examples.create(author.id, TASK, hate_content(f"{text} n{i}", label),
                                           [hate_output(target, said)])
            if i < examples - 5:
                desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        return target.name


def open_dialog(qtbot, window) -> NextRoundDialog:
    action = window.findChild(QAction, "next-round")
    assert action.isVisible() and action.isEnabled()
    action.trigger()
    qtbot.waitUntil(lambda: window.findChild(NextRoundDialog) is not None, timeout=10_000)
    dialog = window.findChild(NextRoundDialog)
    qtbot.waitUntil(lambda: dialog.rounds.count() > 0, timeout=10_000)
    return dialog


def choose_base(qtbot, dialog, base: Path) -> None:
    dialog.base_path.setText(str(base))
    dialog.base_path.editingFinished.emit()
    qtbot.waitUntil(lambda: dialog.text_column.count() == 3, timeout=10_000)  # the file's columns to pick from
    dialog.text_column.setCurrentIndex(dialog.text_column.findText("sentence"))
    dialog.label_column.setCurrentIndex(dialog.label_column.findText("kind"))


def cells(dialog) -> list[list[str]]:
    table = dialog.table
    return [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]


def wait_for_comparison(qtbot, dialog) -> None:
    qtbot.waitUntil(lambda: dialog.step() == 1 and not dialog.is_running() and dialog.table.rowCount() > 0,
                    timeout=WAIT)


def test_the_owner_trains_compares_promotes_and_publishes_and_the_create_tab_follows(
        qtbot, data_dir, tmp_path, modal_log, monkeypatch, team, hate_trigger_model_dir, tiny_base_dir):
    owner = SimpleNamespace(name="Olga Owner", id=team.owner.id, url=team.url, token=team.owner.token)
    target_name = set_up(data_dir, hate_trigger_model_dir, owner=owner)
    base = write_base(tmp_path / "base.csv", 200, seed=32)
    window = open_window(qtbot, data_dir)
    try:
        qtbot.waitUntil(lambda: window.workspace.loaded is not None, timeout=WAIT)
        dialog = open_dialog(qtbot, window)
        assert dialog.rounds.item(0).text().startswith("Round 1 (open): 145 decided (")
        assert "5 undecided" in dialog.rounds.item(0).text()
        assert dialog.rounds.item(0).checkState() == Qt.CheckState.Checked
        assert dialog.from_target.isChecked() and target_name in dialog.from_target.text()
        assert dialog.weight_auto.isChecked() and not dialog.running_row.isVisible()
        assert str(window.desk.root / "candidates") in dialog.output_note.text()
        choose_base(qtbot, dialog, base)
        dialog.encoder.setText(str(tiny_base_dir))
        dialog.learning_rate.setText("two")
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        assert not dialog.is_running() and "learning rate 'two'" in dialog.message.text()
        dialog.show_message("")
        dialog.learning_rate.setText("3e-3")  # the tiny model learns the round's lesson quickly
        dialog.epochs.setValue(8)
        dialog.weight_number.setChecked(True)
        dialog.weight.setValue(10)
        shot(dialog, "next-round-1-train.png")

        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        assert dialog.is_running() and dialog.cancel_button.isEnabled() and not dialog.train_button.isEnabled()
        assert dialog.eta.text() == "estimating…"
        wait_for_comparison(qtbot, dialog)

        (folder,) = (window.desk.root / "candidates").iterdir()
        assert folder.name.startswith(f"{TASK}-") and folder.name in dialog.report_link.text()
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["rounds"] == [1] and manifest["parent"]["kind"] == "target"
        assert manifest["options"]["base_data"]["text_column"] == "sentence"
        report = json.loads((folder / "comparison" / "comparison.json").read_text(encoding="utf-8"))
        # every figure in the table is the stored report's
        shown = cells(dialog)
        assert len(shown) == len(report["differences"])
        for row, figure in zip(shown, report["differences"]):
            interval = MISSING if figure["low"] is None else f"[{points(figure['low'])}, {points(figure['high'])}]"
            assert row[2:6] == [pct(figure["current"]), pct(figure["candidate"]), points(figure["difference"]), interval]
            assert row[6] == f"{figure['items']:,}"
        assert shown[0][0] == "All held-out splits" and any(r[0].startswith("base.csv") for r in shown)
        assert [r[1] for r in shown[:3]] == ["accuracy", "macro-F1", "fooling examples now right"]
        groups = dialog.chart.groups
        assert [g.name for g in groups] == ["Round 1", "All held-out"]
        pooled = report["pooled"]
        assert groups[-1].current == pooled["current"] and groups[-1].candidate == pooled["candidate"]
        assert groups[-1].low == pytest.approx(pooled["current"] + pooled["low"])
        # about fifteen held-out examples and a base test split of twenty rows: too few to judge, so refused
        assert report["worse"] and report["verdict"]["refused"] and "no split has enough" in dialog.verdict.text()
        assert dialog.promote_button.text() == "Promote anyway…"
        assert "comparison.html" in dialog.report_link.text()
        shot(dialog, "next-round-2-compare.png")

        qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
        assert dialog.step() == 2 and "round 2" in dialog.promote_intro.text()
        promote_anyway(qtbot, dialog, "a smoke run of the whole flow")
        qtbot.waitUntil(lambda: "Round 2 is open" in dialog.summary.text() or not dialog.is_running(),
                        timeout=3 * WAIT)  # the export's int8 search is long on a busy machine
        qtbot.waitUntil(lambda: "Round 2 is open" in dialog.summary.text() or "fail" in dialog.message.text(),
                        timeout=3 * WAIT)
        assert "Round 2 is open" in dialog.summary.text(), dialog.message.text()
        assert dialog.publish_button.isVisible() and not dialog.publish_reason.isVisible()
        qtbot.mouseClick(dialog.publish_button, Qt.MouseButton.LeftButton)  # the path of `dynadesk sync publish`
        qtbot.waitUntil(lambda: "Published" in dialog.publish_result.text(), timeout=WAIT)
        assert "stored" in dialog.publish_result.text() and not dialog.publish_button.isEnabled()
        shot(dialog, "next-round-3-promote.png")

        desk = window.desk
        rounds = desk.tasks.rounds(TASK)
        assert [(r.number, r.status) for r in rounds] == [(1, RoundStatus.CLOSED), (2, RoundStatus.OPEN)]
        (new_target,) = desk.models.round_models(rounds[1].id)
        lineage = promotion_lineage(new_target)
        assert lineage["round"] == 2 and lineage["forced"] is report["worse"] and lineage["promoted_by"]["name"] == "Olga Owner"
        assert [p["name"] for p in lineage["parent_models"]] == [target_name]
        assert lineage["manifest"]["path"] == str((folder / "manifest.json").resolve())
        assert lineage["comparison"]["pooled"]["current"] == pooled["current"]
        assert new_target.name in dialog.summary.text()
        # the Create tab follows, by the round-switch machinery, once the new target answers
        qtbot.waitUntil(lambda: window.workspace.session.round.number == 2 and window.workspace.loaded is not None,
                        timeout=WAIT)
        assert window.workspace.loaded.sha256s == (new_target.sha256,)
        assert window.round_label.text().startswith("Round 2")
        # the team server has both rounds: round 1 closed, round 2 open with the candidate and its files
        from sqlalchemy import select

        from sync.server import models

        with team.db.read() as session:
            served = {r.number: r for r in session.scalars(select(models.Round))}
            assert served[1].status == "closed" and served[2].status == "open"
            (model,) = [session.get(models.ModelRecord, uuid.UUID(str(i))) for i in served[2].target_models]
            assert model.sha256 == new_target.sha256 and model.files
    finally:
        close_window(window)


def test_cancel_during_training_leaves_no_candidate_and_a_failed_comparison_can_be_repeated(qtbot, data_dir, tmp_path, modal_log,
                                                                               hate_trigger_model_dir, tiny_base_dir,
                                                                               monkeypatch):
    # 80, not 40: examples get random ids and about 10 % are held out, so 35 decided ones had no
    # held-out example in about one run of 40 and the training without base data refused to start
    set_up(data_dir, hate_trigger_model_dir, examples=80)
    base = write_base(tmp_path / "base.csv", 3000, seed=33)
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        choose_base(qtbot, dialog, base)
        dialog.encoder.setText(str(tiny_base_dir))
        reported = []  # what the training job reported, as the dialog shows it
        monkeypatch.setattr(dialog, "show_progress", lambda view, real=dialog.show_progress: (
            reported.append(view), real(view)))
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        # cancelled as soon as the work reports progress (the worker checks between its steps)
        qtbot.waitUntil(lambda: bool(reported), timeout=WAIT)
        assert dialog.running_row.isVisible() and dialog.step_text.text()
        shot(dialog, "next-round-1-training.png")
        qtbot.mouseClick(dialog.cancel_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: not dialog.is_running(), timeout=WAIT)
        assert dialog.step() == 0 and "cancelled; nothing was written" in dialog.message.text()
        candidates = window.desk.root / "candidates"
        assert not candidates.exists() or list(candidates.iterdir()) == []  # no folder, no staging left
        assert dialog.train_button.isEnabled() and dialog.rounds.isEnabled()

        # a comparison that fails (a suite file that is not in HateCheck's format) keeps the candidate to compare again
        suite = tmp_path / "not-a-suite.csv"
        suite.write_text("sentence,kind\nhello,hate\n", encoding="utf-8")
        dialog.base_path.clear()
        dialog.suite.setText(str(suite))
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        try:
            qtbot.waitUntil(lambda: dialog.step() == 1 and not dialog.is_running(), timeout=WAIT)
        except qtbot.TimeoutError:  # seen once in a full run: say where the dialog stood
            raise AssertionError(f"step {dialog.step()}, running {dialog.is_running()}: {dialog.message.text()!r}, "
                                 f"{dialog.step_text.text()!r}") from None
        assert "The comparison failed" in dialog.verdict.text() and dialog.compare_again.isVisible()
        assert not dialog.to_promote.isEnabled() and dialog.table.rowCount() == 0
        (folder,) = candidates.iterdir()
        assert (folder / "manifest.json").is_file()
        qtbot.mouseClick(dialog.compare_again, Qt.MouseButton.LeftButton)
        assert dialog.is_running() and not dialog.compare_again.isEnabled()
        qtbot.waitUntil(lambda: not dialog.is_running(), timeout=WAIT)
        assert "The comparison failed" in dialog.verdict.text() and dialog.compare_again.isVisible()
        assert list(candidates.iterdir()) == [folder]  # compared again, not trained again
    finally:
        close_window(window)


def test_a_worse_candidate_is_refused_until_promote_anyway_which_is_recorded(qtbot, data_dir, modal_log, monkeypatch,
                                                                            hate_trigger_model_dir, tiny_base_dir):
    set_up(data_dir, hate_trigger_model_dir, examples=200, lesson=False)  # the target is right on (nearly) all
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        # from the random tiny encoder, one epoch: far worse than the target on the held-out examples
        dialog.from_base.setChecked(True)
        dialog.epochs.setValue(1)
        dialog.encoder.setText(str(tiny_base_dir))
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        wait_for_comparison(qtbot, dialog)
        assert "Refused" in dialog.verdict.text()
        shot(dialog, "next-round-2-compare-worse.png")
        qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
        assert dialog.refusal.isVisible() and dialog.promote_button.text() == "Promote anyway…"
        shot(dialog, "next-round-3-refused.png")

        qtbot.mouseClick(dialog.promote_button, Qt.MouseButton.LeftButton)  # asked why; cancelled: nothing happens
        qtbot.waitUntil(lambda: dialog.promote_anyway is not None and dialog.promote_anyway.isVisible(), timeout=WAIT)
        dialog.promote_anyway.reject()
        assert not dialog.is_running() and [r.number for r in window.desk.tasks.rounds(TASK)] == [1]
        dialog.with_current.setChecked(True)  # the old target stays on, in an ensemble after the candidate
        promote_anyway(qtbot, dialog, "the old target stays on beside it")
        qtbot.waitUntil(lambda: "Round 2 is open" in dialog.summary.text(), timeout=WAIT)
        assert "forced" in dialog.summary.text(), dialog.message.text()
        desk = window.desk
        new_target, old_target = desk.models.round_models(desk.tasks.round(TASK, 2).id)
        assert old_target.name == "Trigger model" and promotion_lineage(new_target)["with_current"] is True
        lineage = promotion_lineage(new_target)
        assert lineage["forced"] is True and lineage["override"]["refused_because"]
        assert lineage["override"]["reason"] == "the old target stays on beside it"
        assert "Promoted anyway, because: the old target stays on beside it" in dialog.summary.text()
        assert lineage["comparison"]["worse"] is True
    finally:
        close_window(window)


def test_a_lead_whose_owner_decides_proposes_the_candidate_through_the_server(
        qtbot, data_dir, tmp_path, modal_log, team, hate_trigger_model_dir, tiny_base_dir):
    from sync.client import SyncClient
    from sync.proposals import list_proposals
    from tests.sync.helpers import add_account

    with Desk(tmp_path / "owner-desk") as owner:  # the owner has published the task and round 1
        owner.switch_person(owner.people.create("Olga Owner", Role.OWNER, person_id=team.owner.id).id)
        first = register_model(owner, hate_trigger_model_dir, task_code=TASK, name="Trigger model")
        assert owner.rounds.adopt_first_models(TASK, [first.id])
        with SyncClient(owner, team.url, team.owner.token) as client:
            client.publish(TASK)
    account = add_account(team.db, "Lena Lead", "lead", "A")
    lead = SimpleNamespace(name="Lena Lead", id=account.id, url=team.url, token=account.token, role=Role.LEAD)
    set_up(data_dir, hate_trigger_model_dir, owner=lead, examples=60)
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        dialog.encoder.setText(str(tiny_base_dir))
        dialog.epochs.setValue(1)
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        wait_for_comparison(qtbot, dialog)
        qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
        # the task does not let leads promote: Promote is off, with the reason, and Propose is offered
        assert not dialog.promote_button.isEnabled() and "does not let leads promote" in dialog.promote_reason.text()
        assert dialog.propose_button.isVisible()
        qtbot.mouseClick(dialog.propose_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: "Proposed" in dialog.message.text(), timeout=WAIT)
        assert "Round ▸ Proposals…" in dialog.message.text()
        assert [r.number for r in window.desk.tasks.rounds(TASK)] == [1]  # nothing promoted here
        with Desk(tmp_path / "owner-desk") as owner, SyncClient(owner, team.url, team.owner.token) as client:
            (proposal,) = list_proposals(owner, client, TASK).proposals
        assert proposal.proposer == "Lena Lead" and proposal.state == "open" and proposal.worse is not None
        assert proposal.rounds_trained_on == (1,)
    finally:
        close_window(window)


def test_an_annotator_has_no_next_round_entry(qtbot, data_dir, modal_log):
    with Desk(data_dir) as desk:
        desk.switch_person(desk.people.create("Ann Annotator", Role.ANNOTATOR).id)
        lead = desk.people.create("Lee Lead", Role.LEAD)
    window = open_window(qtbot, data_dir)
    try:
        action = window.findChild(QAction, "next-round")
        assert not action.isVisible() and not action.isEnabled()
        action.trigger()  # disabled: nothing happens
        window.next_round.open(TASK, window)  # even when reached some other way, nothing opens for her
        qtbot.waitUntil(lambda: bool(modal_log), timeout=10_000)
        assert "Only leads and owners" in modal_log[-1][2] and window.findChild(NextRoundDialog) is None
        window._profile_chosen(str(lead.id))  # a lead on the same desk gets it
        qtbot.waitUntil(action.isVisible, timeout=10_000)
    finally:
        close_window(window)


def test_promote_is_disabled_with_the_reason_for_someone_who_may_not_promote(qtbot):
    from app.views.next_round import comparison_view
    from tests.views.test_next_round_views import document

    dialog = NextRoundDialog()
    qtbot.addWidget(dialog)
    proposals = []
    dialog.propose_requested.connect(lambda: proposals.append(True))
    dialog.show_comparison(comparison_view(document(0.05), "/c/comparison.html"))
    dialog.set_promote_allowed("Leads of this task propose candidates; the owner promotes them.")
    dialog.show_step(2)
    dialog.show()
    assert not dialog.promote_button.isEnabled() and dialog.promote_reason.isVisible()
    assert dialog.promote_reason.text().startswith("Leads of this task propose")
    assert not dialog.propose_button.isVisible()  # its place is kept for proposals
    dialog.set_propose_available(True)
    qtbot.mouseClick(dialog.propose_button, Qt.MouseButton.LeftButton)
    assert proposals == [True]
    dialog.set_promote_allowed("")
    assert dialog.promote_button.isEnabled() and not dialog.promote_reason.isVisible()
    dialog.show_comparison(comparison_view(document(-0.02)))
    assert dialog.promote_button.text() == "Promote anyway…" and not dialog.refusal.isHidden()  # on step 3


def test_the_base_data_box_enter_columns_by_name_and_its_note(qtbot, data_dir, hate_trigger_model_dir, tmp_path,
                                                              modal_log, monkeypatch):
    """Step 1's base data: pre-filled with the file the target was trained on (still where it was); Enter in
    the file box reads the typed file (no file chooser, no training); the columns are found by name, not
    taken as the file's first two; the note says which file is chosen."""
    from PySide6.QtWidgets import QFileDialog

    browsed = []
    monkeypatch.setattr(QFileDialog, "getOpenFileName", lambda *args, **kwargs: browsed.append(args) or ("", ""))
    set_up(data_dir, hate_trigger_model_dir, examples=12)
    davidson = tmp_path / "labeled_data.csv"  # Davidson et al.'s published column layout
    davidson.write_text(",count,hate_speech,offensive_language,neither,class,tweet\n"
                        "0,3,0,0,3,2,!!! RT @mayasolovely: As a woman you shouldn't complain\n", encoding="utf-8")
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        trained_on = hate_trigger_model_dir.parent.parent / "hate-trigger.csv"
        assert dialog.base_path.text() == str(trained_on)
        # the file's columns are read at once: before and after, the note says where the file came from
        assert "Pre-filled from the current target's training data" in dialog.base_note.text()
        qtbot.waitUntil(lambda: dialog.text_column.count() == 2, timeout=WAIT)  # sentence, kind
        assert (dialog.text_column.currentText(), dialog.label_column.currentText()) == ("sentence", "kind")
        assert dialog.base_note.text().startswith("Base data: hate-trigger.csv (2 columns)")
        assert "Pre-filled from the current target's training data" in dialog.base_note.text()

        dialog.base_path.setFocus()
        dialog.base_path.selectAll()
        qtbot.keyClicks(dialog.base_path, str(davidson))
        qtbot.keyClick(dialog.base_path, Qt.Key.Key_Return)
        qtbot.waitUntil(lambda: dialog.text_column.count() == 6, timeout=WAIT)  # the unnamed index column is not one
        assert browsed == [] and dialog.isVisible() and dialog.pages.currentIndex() == 0
        assert not dialog.cancel_button.isVisible()  # Enter started no training
        assert (dialog.text_column.currentText(), dialog.label_column.currentText()) == ("tweet", "class")
        assert dialog.base_note.text().startswith("Base data: labeled_data.csv (6 columns)")
        assert "No base data chosen yet" not in dialog.base_note.text()
        shot(dialog, "next-round-1-base-data.png")

        dialog.base_path.clear()
        qtbot.keyClick(dialog.base_path, Qt.Key.Key_Return)
        assert dialog.base_note.text().startswith("No base data chosen yet")
    finally:
        close_window(window)


def test_hatecheck_imported_as_round_examples_can_be_taken_from_the_dialog(qtbot, data_dir, tmp_path, modal_log,
                                                                         hate_trigger_model_dir):
    """HateCheck cases imported as round 1 (as the README shows) are listed as imported, not as "left out",
    and a check box takes them: the training options name the data set."""
    from app.core.io.importers import import_file
    from app.core.next_round.training_data import training_set
    from app.views.next_round_session import training_options
    from tests.app.test_stats import csv_slice
    from tests.conftest import shared_file

    set_up(data_dir, hate_trigger_model_dir, examples=12, lesson=False)
    cases = csv_slice(shared_file("hatecheck", "test_suite_cases_dev.csv"), tmp_path / "hatecheck.csv", 9)
    with Desk(data_dir) as desk:
        import_file(desk, cases, "hatecheck", round_number=1, group_column="templ_id")
    window = open_window(qtbot, data_dir)
    try:
        dialog = open_dialog(qtbot, window)
        text = dialog.rounds.item(0).text()
        assert "9 imported (hatecheck; " in text and "left out" not in text, text  # with its held-out cases
        box = dialog.include_imported
        assert box.isVisible() and not box.isChecked() and "hatecheck (9)" in box.text()
        chosen = []
        dialog.train_requested.connect(chosen.append)
        assert dialog.choices().imported == ()
        qtbot.mouseClick(box, Qt.MouseButton.LeftButton)
        assert dialog.choices().imported == ("hatecheck",)
        options = training_options(TASK, dialog.choices())
        assert options.imported == ["hatecheck"]
        data = training_set(window.desk, TASK, [1], imported=options.imported)
        taken = [e for e in [*data.train, *data.held_out] if e.source == "imported"]
        assert len(taken) == 9 and "imported_not_named" not in data.excluded
    finally:
        close_window(window)


def promote_anyway(qtbot, dialog, reason: str) -> None:
    """“Promote anyway…”: the reason dialog opens with the figures; Promote anyway needs a reason."""
    qtbot.mouseClick(dialog.promote_button, Qt.MouseButton.LeftButton)
    anyway = dialog.promote_anyway
    qtbot.waitUntil(lambda: anyway is not None and anyway.isVisible(), timeout=10_000)
    assert not anyway.confirm.isEnabled()  # no reason, no override
    qtbot.keyClicks(anyway.reason, reason)
    assert anyway.confirm.isEnabled()
    qtbot.mouseClick(anyway.confirm, Qt.MouseButton.LeftButton)


def test_the_team_run_case_is_refused_with_every_split_and_promote_anyway_asks_why(qtbot):
    """One held-out example and a base test split measurably worse: the dialog said "do not differ clearly" and
    promoted in one click. Now the refusal names the worse split and lists every split; the override asks why."""
    from app.views.next_round import comparison_view
    from tests.views.test_next_round_views import team_run_document

    dialog = NextRoundDialog()
    qtbot.addWidget(dialog)
    sent = []
    dialog.promote_requested.connect(lambda *args: sent.append(args))
    dialog.show_comparison(comparison_view(team_run_document(), "/c/comparison.html"))
    dialog.show()
    assert "worse than the current target on labeled_data.csv, test split" in dialog.verdict.text()
    assert "do not differ clearly" not in dialog.verdict.text()
    qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
    refusal = dialog.refusal.text()
    assert dialog.refusal.isVisible() and dialog.promote_button.text() == "Promote anyway…"
    assert "Round 1 held-out: too few to judge (n = 1; at least 97)" in refusal
    assert "labeled_data.csv, test split (seed 13): worse — accuracy 92.0% → 91.2%, -0.7 pt [-1.3, -0.1]" in refusal

    qtbot.mouseClick(dialog.promote_button, Qt.MouseButton.LeftButton)  # asked, then cancelled: nothing sent
    qtbot.waitUntil(lambda: dialog.promote_anyway is not None and dialog.promote_anyway.isVisible(), timeout=10_000)
    assert "n = 2,479" in dialog.promote_anyway.findChild(type(dialog.refusal), "refusal-figures").text()
    dialog.promote_anyway.reject()
    assert sent == []
    promote_anyway(qtbot, dialog, "Davidson's test split predates the slang this round collects")
    assert sent == [(False, True, "Davidson's test split predates the slang this round collects")]


def test_a_candidate_better_everywhere_is_promoted_in_one_click(qtbot):
    from app.views.next_round import comparison_view
    from tests.views.test_next_round_views import difference

    document = {"splits": [{"key": "held-out-1", "name": "Round 1 held-out", "kind": "round"},
                           {"key": "base-test", "name": "base.csv, test split (seed 13)", "kind": "dataset"}],
                "differences": [difference(split, metric, 0.80, 0.85, 0.02, 0.08, 400)
                                for split in ("held-out", "held-out-1", "base-test") for metric in ("accuracy", "macro_f1")],
                "current": {"name": "Round 1 target", "round": 1}, "candidate": {"name": "next (candidate)"},
                "evaluation": {"warnings": [], "notes": []}}
    document["pooled"] = document["differences"][0]
    dialog = NextRoundDialog()
    qtbot.addWidget(dialog)
    sent = []
    dialog.promote_requested.connect(lambda *args: sent.append(args))
    dialog.show_comparison(comparison_view(document))
    dialog.show()
    assert "better than the current target on every split" in dialog.verdict.text()
    qtbot.mouseClick(dialog.to_promote, Qt.MouseButton.LeftButton)
    assert dialog.refusal.isHidden() and dialog.promote_button.text() == "Promote"
    qtbot.mouseClick(dialog.promote_button, Qt.MouseButton.LeftButton)
    assert sent == [(False, False, "")] and dialog.promote_anyway is None


def test_the_dialog_trains_an_nli_task_on_pairs_with_its_context_column(qtbot, data_dir, modal_log, tiny_base_dir,
                                                                      nli_base_and_target):
    """NLI reads (premise, hypothesis) pairs: the dialog asks for the base data's context column beside the
    hypothesis column (found by name), trains on pairs, and the comparison scores the base test split as pairs."""
    from tests.model_fixtures import nli_round_one

    base, target_dir = nli_base_and_target
    with Desk(data_dir) as desk:
        author = desk.people.create("Ana Author", Role.ANNOTATOR)
        lead = desk.people.create("Lee Lead", Role.LEAD)
        desk.switch_person(lead.id)
        nli_round_one(desk, target_dir, author, lead)
    window = open_window(qtbot, data_dir)
    try:
        window.next_round.open("nli", window)
        qtbot.waitUntil(lambda: window.findChild(NextRoundDialog) is not None, timeout=WAIT)
        dialog = window.findChild(NextRoundDialog)
        qtbot.waitUntil(lambda: dialog.rounds.count() > 0, timeout=WAIT)
        assert dialog.rounds.item(0).text().startswith("Round 1 (open): 42 decided (")
        assert dialog.context_column.isVisibleTo(dialog) and dialog.context_label.text() == "Context column"
        assert dialog.text_label.text() == "Hypothesis column"
        dialog.base_path.setText(str(base))
        dialog.base_path.editingFinished.emit()
        qtbot.waitUntil(lambda: dialog.context_column.count() == 3, timeout=WAIT)
        assert (dialog.context_column.currentText(), dialog.text_column.currentText(),
                dialog.label_column.currentText()) == ("premise", "hypothesis", "label")
        assert "context “premise”" in dialog.base_note.text()
        shot(dialog, "next-round-1-nli.png")
        dialog.context_column.setEditText("")
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        assert not dialog.is_running() and "name the base data's context column" in dialog.message.text()
        dialog.context_column.setCurrentIndex(dialog.context_column.findText("premise"))
        dialog.encoder.setText(str(tiny_base_dir))
        dialog.epochs.setValue(2)
        dialog.learning_rate.setText("2e-3")
        qtbot.mouseClick(dialog.train_button, Qt.MouseButton.LeftButton)
        assert dialog.is_running()
        wait_for_comparison(qtbot, dialog)

        (folder,) = (window.desk.root / "candidates").iterdir()
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        assert manifest["task"] == "nli" and manifest["parent"]["kind"] == "target"
        assert manifest["options"]["base_data"]["context_column"] == "premise"
        assert manifest["data"]["summary"]["counts"]["base"] == 150
        report = json.loads((folder / "comparison" / "comparison.json").read_text(encoding="utf-8"))
        keys = {s["key"]: len(s["items"]) for s in report["splits"]}
        assert keys["base-test"] == len(manifest["data"]["splits"]["base_test"]) and keys["held-out-1"] > 0
        assert any(r[0].startswith("nli-base.csv") for r in cells(dialog))
    finally:
        close_window(window)
