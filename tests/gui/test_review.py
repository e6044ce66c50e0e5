"""The Review tab: a lead filters to disagreements, adjudicates, returns and accepts work."""

import re

from PySide6.QtCore import Qt

from tests.conftest import hate_content, hate_output


def open_review(qtbot, window):
    qtbot.keyClick(window, Qt.Key.Key_4, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.review_view


def shown_ids(view):
    return [view.model.row_data(r).id for r in range(view.model.rowCount())]


def wait_rows(qtbot, view, expected):
    qtbot.waitUntil(lambda: sorted(shown_ids(view)) == sorted(expected), timeout=5000)


def make_examples(desk, people, target_model):
    make = lambda text, author=people.author: desk.examples.create(  # noqa: E731
        author.id, "hate_speech", hate_content(text, "hate"), [hate_output(target_model, "not hate")])
    split = make("those people ruin every neighbourhood")
    agreed = make("send them all back")
    flagged = make("my neighbour is from there", author=people.val3)
    desk.validation.validate(split.id, people.val1.id, "correct")
    desk.validation.validate(split.id, people.val2.id, "incorrect", corrected_label="not hate", reason="no group")
    desk.validation.validate(agreed.id, people.val1.id, "correct")
    desk.validation.validate(agreed.id, people.val2.id, "correct")
    desk.validation.validate(flagged.id, people.val1.id, "flagged", reason="personal information")
    desk.validation.validate(flagged.id, people.val2.id, "flagged", reason="unclear")
    return split, agreed, flagged


def lead_reviews_three(qtbot, window, people, target_model):
    """The three examples of ``make_examples``, listed in Review for the lead: (view, split, agreed, flagged)."""
    split, agreed, flagged = make_examples(window.desk, people, target_model)
    window.desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    wait_rows(qtbot, view, [split.id, agreed.id, flagged.id])
    return view, split, agreed, flagged


def test_a_lead_filters_to_disagreements_and_adjudicates(qtbot, window, people, target_model):
    desk = window.desk
    view, split, agreed, flagged = lead_reviews_three(qtbot, window, people, target_model)
    qtbot.waitUntil(lambda: "<b>3</b> examples" in view.figures.text(), timeout=5000)
    assert not view.actions_panel.not_lead.isVisible()

    view.filters.min_disagreements.setFocus()
    qtbot.keyClick(view.filters.min_disagreements, Qt.Key.Key_Up)  # disagreeing verdicts ≥ 1
    wait_rows(qtbot, view, [split.id])
    qtbot.waitUntil(lambda: "<b>1</b> examples" in view.figures.text(), timeout=5000)
    view.filters.min_disagreements.setValue(0)
    qtbot.keyClick(view.filters.min_flags, Qt.Key.Key_Up)
    qtbot.keyClick(view.filters.min_flags, Qt.Key.Key_Up)  # flags ≥ 2
    wait_rows(qtbot, view, [flagged.id])
    view.filters.min_flags.setValue(0)
    view.filters.annotator.setCurrentIndex(view.filters.annotator.findData(str(people.val3.id)))
    wait_rows(qtbot, view, [flagged.id])
    view.filters.annotator.setCurrentIndex(0)
    view.filters.search.setText("neighbourhood")
    wait_rows(qtbot, view, [split.id])
    view.filters.search.clear()
    hate_type = view.filters.facets["hate_type"]
    hate_type.setCurrentIndex(hate_type.findData("animosity"))
    wait_rows(qtbot, view, [])  # every example here is derogation
    hate_type.setCurrentIndex(hate_type.findData("derogation"))
    wait_rows(qtbot, view, [split.id, agreed.id, flagged.id])
    hate_type.setCurrentIndex(0)
    view.filters.min_disagreements.setValue(1)
    wait_rows(qtbot, view, [split.id])

    # adjudicate by keyboard: select, 2, choose the label, explain, Enter
    view.table.setFocus()
    view.table.selectRow(0)
    qtbot.waitUntil(lambda: "no group" in view.detail.toPlainText(), timeout=5000)
    assert "Vic Validator" in view.detail.toPlainText() and "Wen Validator" in view.detail.toPlainText()
    qtbot.keyClick(view.table, Qt.Key.Key_2)
    form = view.actions_panel.form
    assert form.buttons["incorrect"].isChecked()
    form.label_choice.setCurrentIndex(form.label_choice.findData("not hate"))
    qtbot.keyClicks(form.reason, "Complaint about a place, not a protected group")
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    state = desk.examples.get(split.id)
    assert (state.validation_state, state.decided_verdict, state.decided_label) == ("decided", "incorrect", "not hate")
    lead_verdicts = [v for v in desk.validation.validations_of(split.id) if v.mode == "lead"]
    assert [(v.validator_id, v.reason) for v in lead_verdicts] == [
        (people.lead.id, "Complaint about a place, not a protected group")]
    assert "Decided: incorrect → not hate" in view.actions_panel.message.text()
    # still shown (the filter is on disagreements, which stay) and now decided
    view.filters.validation.setCurrentIndex(view.filters.validation.findData("in_progress"))
    wait_rows(qtbot, view, [])


def test_a_lead_returns_an_example_and_the_author_sees_it_marked(qtbot, window, people, target_model):
    desk = window.desk
    split, agreed, flagged = make_examples(desk, people, target_model)
    desk.validation.validate(agreed.id, people.val3.id, "correct")  # decided by three peers
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    wait_rows(qtbot, view, [split.id, agreed.id, flagged.id])
    row = shown_ids(view).index(split.id)
    view.table.selectRow(row)
    qtbot.waitUntil(lambda: view.actions_panel.accept_button.text().startswith("Accept Ana Author"), timeout=5000)
    view.actions_panel.return_button.click()
    assert "needs a comment" in view.actions_panel.message.text()
    assert desk.examples.get(split.id).review_state is None
    qtbot.keyClicks(view.actions_panel.comment, "Say which group is attacked")
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        qtbot.keyClick(view.actions_panel.comment, Qt.Key.Key_Return)
    assert (desk.examples.get(split.id).review_state, desk.examples.get(split.id).review_comment) == (
        "returned", "Say which group is attacked")

    qtbot.waitUntil(lambda: any(view.model.row_data(r).review_state == "returned"
                                for r in range(view.model.rowCount())), timeout=5000)  # the table refreshed
    qtbot.waitUntil(lambda: window.review_page.detail is not None, timeout=5000)  # and selected its first row
    # accept the author's decided work (the question is answered Yes by the test's dialog stub)
    view.table.selectRow(shown_ids(view).index(agreed.id))
    qtbot.waitUntil(lambda: view.actions_panel.accept_button.text().startswith("Accept Ana Author"), timeout=5000)
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == agreed.id,
                    timeout=5000)
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        view.actions_panel.accept_button.click()
    assert desk.examples.get(agreed.id).review_state == "accepted"
    assert "Accepted 1 decided example by Ana Author" in view.actions_panel.message.text()
    view.filters.review.setCurrentIndex(view.filters.review.findData("returned"))
    wait_rows(qtbot, view, [split.id])

    # the author's history (Data tab, "Returned to me") shows it marked, with the comment
    desk.switch_person(people.author.id)
    window.tabs.setCurrentWidget(window.data_page)
    author = window.filter_bar.author
    author.setCurrentIndex(author.findData("returned"))
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=5000)
    assert window.table_model.row_data(0).id == split.id
    column = [key for key, _ in window.table_model.columns].index("review_state")
    assert window.table_model.data(window.table_model.index(0, column)) == "⟲ returned"
    window.table.selectRow(0)
    qtbot.waitUntil(lambda: "Returned by a lead: Say which group is attacked" in window.detail.toPlainText(),
                    timeout=5000)


def test_annotators_get_a_clear_message_instead_of_lead_actions(qtbot, window, people, target_model):
    make_examples(window.desk, people, target_model)
    window.desk.switch_person(people.val1.id)
    open_review(qtbot, window)
    panel = window.review_view.actions_panel
    qtbot.waitUntil(lambda: panel.not_lead.isVisible(), timeout=5000)
    assert "Vic Validator is not a team lead" in panel.not_lead.text()
    assert not panel.return_button.isEnabled() and not panel.form.isEnabled()
    view = window.review_view
    qtbot.waitUntil(lambda: view.model.rowCount() == 3, timeout=5000)
    view.table.selectRow(0)  # loading an example into the form must not unlock it
    qtbot.waitUntil(lambda: window.review_page.detail is not None, timeout=5000)
    assert not panel.form.isEnabled() and not panel.accept_button.isEnabled()


def test_the_review_table_loads_pages_as_it_scrolls(qtbot, window, people):
    from tests.validation_sim import import_anli

    import_anli(window.desk)
    window.desk.switch_person(people.lead.id)
    window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
    open_review(qtbot, window)
    view = window.review_view
    qtbot.waitUntil(lambda: "<b>1,000</b> examples" in view.figures.text(), timeout=5000)
    qtbot.waitUntil(lambda: view.model.total == 1000, timeout=5000)
    assert view.model.rowCount() == 200  # the first page only
    view.table.scrollToBottom()
    qtbot.waitUntil(lambda: view.model.rowCount() == 400, timeout=5000)
    assert len(set(shown_ids(view))) == 400


def test_a_validator_saying_incorrect_disagrees_with_the_author_even_when_validators_agree(
        qtbot, window, people, target_model):
    desk = window.desk
    split, agreed, flagged = make_examples(desk, people, target_model)
    both_wrong = desk.examples.create(people.author.id, "hate_speech", hate_content("they are all the same", "hate"),
                                      [hate_output(target_model, "not hate")])
    for validator in (people.val1, people.val2):  # the validators agree with each other, not with the author
        desk.validation.validate(both_wrong.id, validator.id, "incorrect", corrected_label="not hate", reason="no")
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    wait_rows(qtbot, view, [split.id, agreed.id, flagged.id, both_wrong.id])
    plain = lambda: re.sub("<[^>]+>", "", view.figures.text())  # noqa: E731
    qtbot.waitUntil(lambda: "3 a validator said incorrect or flagged" in plain(), timeout=5000)
    assert "1 where validators split" in plain()
    column = [key for key, _ in view.model.columns].index("objections")
    assert view.model.headerData(column, Qt.Orientation.Horizontal) == "Objected"
    assert "disagree with the author" in view.model.headerData(column, Qt.Orientation.Horizontal,
                                                                Qt.ItemDataRole.ToolTipRole)
    shown = {view.model.row_data(r).id: view.model.data(view.model.index(r, column))
             for r in range(view.model.rowCount())}
    assert shown == {split.id: "1", agreed.id: "", flagged.id: "2", both_wrong.id: "2"}

    objected = view.filters.objected
    objected.setCurrentIndex(objected.findData(True))
    wait_rows(qtbot, view, [split.id, flagged.id, both_wrong.id])
    objected.setCurrentIndex(objected.findData(False))
    wait_rows(qtbot, view, [agreed.id])
    objected.setCurrentIndex(0)
    view.filters.min_disagreements.setValue(1)  # the validators' own split does not show it
    wait_rows(qtbot, view, [split.id])
    assert "against majority" in view.filters.min_disagreements.prefix()


def test_a_lead_sets_the_agreement_threshold_for_a_small_team(qtbot, window, people, target_model):
    desk = window.desk
    split, agreed, flagged = make_examples(desk, people, target_model)
    assert desk.examples.get(agreed.id).validation_state == "in_progress"  # two of three matching verdicts
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    panel = window.review_view.actions_panel
    qtbot.waitUntil(lambda: panel.threshold.value() == 3 and panel.threshold.isEnabled(), timeout=5000)
    panel.threshold.setValue(2)
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        panel.threshold_button.click()
    assert "2 matching verdicts now decide" in panel.message.text()
    assert "the task says 3" in panel.threshold_note.text()
    assert (desk.examples.get(agreed.id).validation_state, desk.examples.get(agreed.id).decided_verdict) == (
        "decided", "correct")
    assert desk.examples.get(flagged.id).decided_verdict == "flagged"
    assert desk.examples.get(split.id).validation_state == "in_progress"
    assert desk.tasks.settings("hate_speech").agreement_threshold == 2
    # the validation service goes by it: a second matching verdict decides at once
    fresh = desk.examples.create(people.author.id, "hate_speech", hate_content("new one", "hate"),
                                 [hate_output(target_model, "not hate")])
    desk.validation.validate(fresh.id, people.val1.id, "correct")
    desk.validation.validate(fresh.id, people.val2.id, "correct")
    assert desk.examples.get(fresh.id).validation_state == "decided"


def test_the_selection_moves_to_the_next_example_after_a_lead_verdict_and_a_return(
        qtbot, window, people, target_model):
    desk = window.desk
    make_examples(desk, people, target_model)
    more = [desk.examples.create(people.author.id, "hate_speech", hate_content(f"example number {i}", "hate"),
                                 [hate_output(target_model, "not hate")]) for i in range(3)]
    desk.switch_person(people.lead.id)
    open_review(qtbot, window)
    view = window.review_view
    qtbot.waitUntil(lambda: view.model.rowCount() == 6, timeout=5000)
    view.filters.validation.setCurrentIndex(view.filters.validation.findData("unvalidated"))
    wait_rows(qtbot, view, [e.id for e in more])
    order = shown_ids(view)
    view.table.selectRow(1)
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == order[1],
                    timeout=5000)
    acted_text = view.model.row_data(1).text
    form = view.actions_panel.form
    view.table.setFocus()
    qtbot.keyClick(view.table, Qt.Key.Key_1)
    assert form.buttons["correct"].isChecked()
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        form.confirm.click()
    # decided, so it left the "unvalidated" list; the one after it is selected and shown
    qtbot.waitUntil(lambda: shown_ids(view) == [order[0], order[2]], timeout=5000)
    qtbot.waitUntil(lambda: view.current_row() is not None and view.current_row().id == order[2], timeout=5000)
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == order[2],
                    timeout=5000)
    assert acted_text in view.actions_panel.message.text()  # the message names the example it is about
    assert view.model.row_data(view.table.currentIndex().row()).text in view.detail.toPlainText()

    # a return keeps the example in the list: the selection moves on to the row below it
    view.filters.validation.setCurrentIndex(0)
    qtbot.waitUntil(lambda: view.model.rowCount() == 6, timeout=5000)
    order = shown_ids(view)
    view.table.selectRow(2)
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == order[2],
                    timeout=5000)
    qtbot.keyClicks(view.actions_panel.comment, "Name the group")
    with qtbot.waitSignal(window.review_page.verdict_stored, timeout=5000):
        view.actions_panel.return_button.click()
    qtbot.waitUntil(lambda: window.review_page.detail is not None and window.review_page.detail.id == order[3],
                    timeout=5000)
    assert view.current_row().id == order[3]
    assert desk.examples.get(order[2]).review_state == "returned"


def test_returned_work_is_counted_for_its_author_until_retracted(qtbot, window, people, target_model, monkeypatch):
    from PySide6.QtWidgets import QInputDialog

    desk = window.desk
    split, agreed, flagged = make_examples(desk, people, target_model)
    desk.lead.return_examples(people.lead.id, [split.id, agreed.id], "Say which group is attacked")
    desk.lead.return_examples(people.lead.id, [flagged.id], "Not yours to worry about")  # Xia's, not Ana's
    window._profile_chosen(str(people.author.id))  # what the Profile dialog does
    status = window.findChild(type(window.count_label), "returned-count")
    banner = window.workspace_view.returned
    qtbot.waitUntil(lambda: status.isVisible() and "2 examples returned to you" in status.text(), timeout=5000)
    assert window.tabs.currentWidget() is window.workspace_view and banner.isVisible()
    assert "2 examples returned to you" in banner.text.text()

    banner.primary.click()  # "Show them": the Data tab, filtered to them
    assert window.tabs.currentWidget() is window.data_page
    qtbot.waitUntil(lambda: window.count_label.text() == "2 examples", timeout=5000)
    window.table.selectRow([window.table_model.row_data(r).id for r in range(2)].index(split.id))
    monkeypatch.setattr(QInputDialog, "getText", lambda *a, **k: ("rewriting it", True))
    window.retract_action.trigger()  # the author takes it back: it no longer waits for them
    qtbot.waitUntil(lambda: "1 example returned to you" in status.text(), timeout=5000)
    qtbot.waitUntil(lambda: window.count_label.text() == "1 example", timeout=5000)
    assert window.table_model.row_data(0).id == agreed.id
    assert [e.id for e in desk.lead.returned_to(people.author.id)] == [agreed.id]
    # the other one is revised: Create starts from its text, and the draft names what it revises
    window.table.selectRow(0)
    window.revise_action.trigger()
    assert window.tabs.currentWidget() is window.workspace_view
    assert window.workspace.draft.origin == {"kind": "revision", "of": str(agreed.id)}
    assert window.workspace_view.editor.content()["inputs"]["text"] == "send them all back"
    assert "Say which group is attacked" in window.workspace_view.message.text.text()


def test_new_rows_keep_the_example_the_lead_reads_where_it_is_still_listed(qtbot, window, people, target_model):
    """A change routed from elsewhere (a sync, the lead's own blur words) replaces the rows while the lead reads:
    the example they read stays selected and shown."""
    view, _split, agreed, _flagged = lead_reviews_three(qtbot, window, people, target_model)
    view.select_row(shown_ids(view).index(agreed.id))
    qtbot.waitUntil(lambda: view.current_row().text in view.detail.toPlainText(), timeout=5000)

    with qtbot.waitSignal(view.model.modelReset, timeout=5000):
        window.review_page.refresh()
    assert view.current_row().id == agreed.id and view.selected_ids() == [agreed.id]
    qtbot.waitUntil(lambda: view.current_row().text in view.detail.toPlainText(), timeout=5000)
