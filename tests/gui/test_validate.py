"""The Validate tab, driven by keyboard as a validator would: 1/2/3, S, Enter, R."""

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QApplication

from tests.conftest import hate_content, hate_output
from tests.gui.conftest import close_window, open_window
from tests.validation_sim import import_anli, simulate


def _all_validations(desk):
    from sqlalchemy import select

    from app.core.storage.models import Validation

    with desk.db.read() as session:
        return list(session.scalars(select(Validation)))


def open_validate(qtbot, window):
    qtbot.keyClick(window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert window.tabs.currentWidget() is window.validate_view


def wait_for_example(qtbot, view, example_id=None):
    qtbot.waitUntil(lambda: view.example_id is not None and (example_id is None or view.example_id == example_id),
                    timeout=5000)


def test_a_validator_works_through_the_queue_by_keyboard(qtbot, window, people, target_model):
    desk = window.desk
    make = lambda text, model: desk.examples.create(people.author.id, "hate_speech",  # noqa: E731
                                                    hate_content(text, "hate"), [hate_output(target_model, model)])
    held = make("they are all the same, those people", "hate")
    fooled = make("I'd never let one of them near my kids", "not hate")
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view, form = window.validate_view, window.validate_view.form
    wait_for_example(qtbot, view, fooled.id)  # model-fooling first
    assert "2</b> left for you" in view.status.text()
    assert view.warning.isVisible() and "Content warning" in view.warning.text()
    assert "I'd never let one of them near my kids" in view.written.toPlainText()
    assert "because" in view.explanations.text() and "derogation" in view.explanations.text()
    assert not view.output_visible  # hate speech hides the model until the verdict

    # 2 = incorrect: Enter alone is refused inline and stores nothing
    qtbot.keyClick(view, Qt.Key.Key_2)
    assert form.buttons["incorrect"].isChecked() and form.label_choice.isVisible()
    qtbot.keyClick(form.label_choice, Qt.Key.Key_Return)
    qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    assert "corrected label" in form.problem.text()
    assert _all_validations(desk) == []
    form.label_choice.setFocus()
    qtbot.keyClick(form.label_choice, Qt.Key.Key_Down)
    assert form.label_choice.currentData() == "not hate"
    qtbot.keyClick(form.label_choice, Qt.Key.Key_Tab)
    qtbot.keyClicks(form.reason, "A parent's worry, no group is attacked")
    qtbot.keyClicks(form.model_note, "sarcasm")
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(form.model_note, Qt.Key.Key_Return)
    assert {(v.example_id, v.verdict, v.corrected_label, v.reason, v.model_note) for v in _all_validations(desk)} == {
        (fooled.id, "incorrect", "not hate", "A parent's worry, no group is attacked", "sarcasm")}
    assert "Stored your verdict" in view.stored.text() and view.output.reveal_button.isVisible()
    qtbot.keyClick(view, Qt.Key.Key_R)  # reveal what the model said
    assert view.output_visible and "not hate" in view.output.summary.text() and "fooled" in view.output.summary.text()

    qtbot.keyClick(view, Qt.Key.Key_Return)  # next
    wait_for_example(qtbot, view, held.id)
    assert "1</b> left for you" in view.status.text() and not view.output_visible
    qtbot.keyClick(view, Qt.Key.Key_S)  # skip: the only one left comes round again, never "nothing left"
    qtbot.waitUntil(lambda: "come round again" in view.status.text(), timeout=5000)
    assert view.example_id == held.id and view.pages.currentWidget() is not view.empty

    qtbot.keyClick(view, Qt.Key.Key_3)  # flag needs a reason
    qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    assert "reason" in form.problem.text()
    qtbot.keyClicks(form.reason, "Duplicate of another example")
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    qtbot.keyClick(view, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.pages.currentWidget() is view.empty, timeout=5000)
    assert "Nothing left for you to validate" in view.empty.text()

    # one correct verdict by another validator, keys 1 and Enter only
    desk.switch_person(people.val2.id)
    window.tabs.setCurrentWidget(window.data_page)
    open_validate(qtbot, window)
    wait_for_example(qtbot, view, fooled.id)
    qtbot.keyClick(view, Qt.Key.Key_1)
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        qtbot.keyClick(view, Qt.Key.Key_Return)
    assert (fooled.id, "correct", None, None) in {(v.example_id, v.verdict, v.corrected_label, v.reason)
                                                  for v in _all_validations(desk) if v.validator_id == people.val2.id}


def test_model_output_is_shown_at_once_where_the_task_allows_and_pairs_show_both_halves(
        qtbot, window, people, target_model, monkeypatch):
    desk = window.desk
    original = desk.examples.create(people.author.id, "hate_speech", hate_content("women are great", "not hate"),
                                    [hate_output(target_model, "not hate")])
    pair = desk.examples.create(people.author.id, "hate_speech", hate_content("women are vermin", "hate"),
                                [hate_output(target_model, "not hate")], perturbation_of=original.id)
    definition = desk.tasks.definition

    def showing(task_id):  # a task whose setting shows the model's output from the start
        return definition(task_id).model_copy(update={"hide_model_output_until_verdict": False})

    monkeypatch.setattr(desk.tasks, "definition", showing)
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view = window.validate_view
    wait_for_example(qtbot, view, pair.id)
    assert view.pair.isVisible() and not view.written.isVisible()
    assert "women are great" in view.original.toPlainText() and "women are vermin" in view.edited.toPlainText()
    assert "label: not hate" in view.original_title.text() and "label: hate" in view.edited_title.text()
    assert "great" in view.diff.toPlainText() and "vermin" in view.diff.toPlainText()
    assert view.output_visible  # not hidden for this task setting


def test_anli_with_simulated_validators(qtbot, data_dir, modal_log):
    """Real text: ANLI r1 dev, four simulated validators; a fifth person gets the least-validated
    model-fooling example first, with its context and the author's reason."""
    from app.core.desk import Desk

    with Desk(data_dir) as desk:
        import_anli(desk)
        sim = simulate(desk, examples=30)
        newcomer = desk.people.create("Noor New", "annotator")
        expected = desk.validation.next_for(newcomer.id, task_code="nli")
        desk.switch_person(newcomer.id)
    window = open_window(qtbot, data_dir)
    try:
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        open_validate(qtbot, window)
        view = window.validate_view
        wait_for_example(qtbot, view, expected.id)
        assert expected.inputs["context"][:40] in view.context.toPlainText()
        assert expected.inputs["hypothesis"] in view.written.toPlainText()
        assert expected.meta["label_explanation"][:30] in view.explanations.text()
        assert not view.warning.isVisible()  # NLI has no content warning
        assert sim.verdicts > 0
    finally:
        close_window(window)


def test_the_verdict_form_for_extractive_tasks_asks_for_the_corrected_answer(qtbot):
    from app.core.domain import Verdict
    from app.views.example import VerdictChoice
    from widgets.verdict_form import VerdictForm

    form = VerdictForm()
    qtbot.addWidget(form)
    form.show()
    form.set_labels([], "in 1989")  # no label set: the answer is a span of the context
    sent = []
    form.submitted.connect(sent.append)
    qtbot.keyClick(form, Qt.Key.Key_2)
    assert form.answer_edit.isVisible() and not form.label_choice.isVisible()
    qtbot.keyClick(form.answer_edit, Qt.Key.Key_Return)
    assert "corrected answer" in form.problem.text() and sent == []
    qtbot.keyClicks(form.answer_edit, "26 September 1989")
    qtbot.keyClicks(form.reason, "The span misses the day")
    qtbot.keyClick(form.reason, Qt.Key.Key_Return)
    assert sent == [VerdictChoice(Verdict.INCORRECT, corrected_label="26 September 1989",
                                  reason="The span misses the day", model_note=None)]


def _press(qtbot, key):
    """A key as a user presses it: to whatever has the keyboard focus."""
    qtbot.keyClick(QApplication.focusWidget(), key)


def test_after_an_incorrect_or_flagged_verdict_r_reveals_and_enter_moves_on(qtbot, window, people, target_model):
    desk = window.desk
    for text in ("they are all the same, those people", "I'd never let one of them near my kids"):
        desk.examples.create(people.author.id, "hate_speech", hate_content(text, "hate"),
                             [hate_output(target_model, "not hate")])
    desk.switch_person(people.val1.id)
    open_validate(qtbot, window)
    view, form = window.validate_view, window.validate_view.form
    wait_for_example(qtbot, view)
    sent = []
    form.submitted.connect(sent.append)

    _press(qtbot, Qt.Key.Key_2)
    _press(qtbot, Qt.Key.Key_Return)  # no label, no reason: refused inline
    assert "corrected label" in form.problem.text()
    _press(qtbot, Qt.Key.Key_Down)  # the focus is on the label choice: pick one
    assert form.label_choice.currentData() == "not hate"
    assert form.problem.text() == ""  # fixed: the error goes at once
    _press(qtbot, Qt.Key.Key_Tab)
    qtbot.keyClicks(QApplication.focusWidget(), "No group is attacked")
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        _press(qtbot, Qt.Key.Key_Return)
    assert len(sent) == 1  # one Enter, one verdict: a second would be refused and take the focus back
    assert QApplication.focusWidget() is view  # where R and Enter are expected
    _press(qtbot, Qt.Key.Key_R)
    assert view.output_visible and "not hate" in view.output.summary.text()
    first = view.example_id
    _press(qtbot, Qt.Key.Key_Return)
    qtbot.waitUntil(lambda: view.example_id not in (None, first), timeout=5000)

    _press(qtbot, Qt.Key.Key_3)
    _press(qtbot, Qt.Key.Key_Return)
    assert "reason" in form.problem.text()
    qtbot.keyClicks(QApplication.focusWidget(), "Duplicate")
    assert form.problem.text() == ""
    with qtbot.waitSignal(window.validate.verdict_stored, timeout=5000):
        _press(qtbot, Qt.Key.Key_Return)
    assert len(sent) == 2 and QApplication.focusWidget() is view
    _press(qtbot, Qt.Key.Key_R)
    assert view.output_visible
    assert {v.verdict for v in _all_validations(desk)} == {"incorrect", "flagged"}
