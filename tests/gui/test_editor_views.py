"""The example editor and the metadata form, driven by keyboard and mouse."""

from PySide6.QtCore import Qt
from PySide6.QtGui import QTextCursor, QUndoStack

from app.core.tasks.definition import InputKind, MetadataKind
from app.views.create import EditorSpec, FormFieldView, InputFieldView
from widgets.example_editor import ExampleEditor, code_points, utf16
from widgets.metadata_form import MetadataForm

HATE = EditorSpec((InputFieldView("text", "Statement", InputKind.WRITTEN, "Write", 20),),
                  ("hate", "not hate"), extractive=False, prompt_enabled=True)
QA = EditorSpec((InputFieldView("context", "Passage", InputKind.CONTEXT, max_chars=1000),
                 InputFieldView("question", "Question", InputKind.WRITTEN, max_chars=200)),
                (), extractive=True, span_of="context")


def make_editor(qtbot, spec):
    stack = QUndoStack()
    editor = ExampleEditor(stack)
    qtbot.addWidget(editor)
    editor.configure(spec)
    with qtbot.waitActive(editor):  # keyboard shortcuts need an active window
        editor.show()
        editor.activateWindow()
    return editor, stack


def test_offsets_convert_between_qt_and_python():
    text = "😀a👨‍👩‍👧b"
    for index in range(len(text) + 1):
        assert code_points(text, utf16(text, index)) == index


def test_typing_and_labels_share_one_undo_history(qtbot):
    editor, stack = make_editor(qtbot, HATE)
    box = editor.fields["text"]
    changes = []
    editor.content_changed.connect(changes.append)
    qtbot.mouseClick(box.viewport(), Qt.MouseButton.LeftButton)
    qtbot.keyClicks(box, "they are")
    qtbot.keyClick(box, Qt.Key.Key_1, Qt.KeyboardModifier.AltModifier)
    assert editor.content()["label"] == "hate"
    editor.choose_label("not hate")
    stack.undo()
    assert editor.content()["label"] == "hate"
    stack.undo()
    assert editor.content() == {"inputs": {"text": "they are"}, "label": None, "answer": None}
    stack.undo()
    assert editor.content()["inputs"]["text"] == ""  # quick typing undoes as one step
    stack.redo()
    stack.redo()
    assert editor.content() == {"inputs": {"text": "they are"}, "label": "hate", "answer": None}
    assert box.toPlainText() == "they are" and editor.label_group.buttons()[0].isChecked()
    assert changes[-1].label == "hate"


def test_the_counter_warns_past_the_limit_without_cutting_text(qtbot):
    editor, _ = make_editor(qtbot, HATE)
    qtbot.keyClicks(editor.fields["text"], "x" * 25)
    assert editor.content()["inputs"]["text"] == "x" * 25
    assert editor.counters["text"].text() == "25 / 20" and "b3261e" in editor.counters["text"].styleSheet()


def test_an_answer_is_chosen_by_selecting_the_passage(qtbot):
    editor, _ = make_editor(qtbot, QA)
    passage = "Built 😀 in 1889, the tower stands in Paris."
    editor.set_context("context", passage)
    box = editor.fields["context"]
    cursor = QTextCursor(box.document())
    start = passage.index("1889")
    cursor.setPosition(utf16(passage, start) - 1)  # a stray space at the edge is trimmed away
    cursor.setPosition(utf16(passage, start + 4), QTextCursor.MoveMode.KeepAnchor)
    box.setTextCursor(cursor)
    assert editor.content()["answer"] == {"start": start, "end": start + 4, "text": "1889"}
    assert "1889" in editor.answer_label.text()
    assert not editor.prompt_button.isVisibleTo(editor) and editor.next_context_button.isVisibleTo(editor)


FIELDS = (
    FormFieldView("hate_type", "Type of hate", MetadataKind.CHOICE, ("animosity", "derogation"), required=True,
                  applies_to=("hate",)),
    FormFieldView("target_groups", "Target groups", MetadataKind.MULTI_CHOICE, ("women", "Muslims"),
                  allow_other=True, required=True, applies_to=("hate",)),
    FormFieldView("label_explanation", "Why is this label right?", MetadataKind.TEXT, required=True),
)


def test_the_form_shows_only_what_applies_and_asks_for_what_is_required(qtbot):
    form = MetadataForm()
    qtbot.addWidget(form)
    form.configure(FIELDS)
    form.show()
    form.set_label("not hate")
    assert not form.rows["hate_type"][1].isVisible() and form.rows["label_explanation"][1].isVisible()
    form.set_label("hate")
    assert form.rows["hate_type"][1].isVisible() and form.rows["target_groups"][1].isVisible()
    with qtbot.assertNotEmitted(form.confirmed):
        form.confirm()
    assert "Type of hate" in form.problem.text() and "Target groups" in form.problem.text()
    form.editors["hate_type"].setCurrentIndex(2)
    form.editors["target_groups"][0][0].setChecked(True)
    qtbot.keyClicks(form.editors["target_groups"][1], "Sikhs, Roma ")
    qtbot.keyClicks(form.editors["label_explanation"], "It demeans women.")
    with qtbot.waitSignal(form.confirmed) as confirmed:
        form.confirm()
    assert confirmed.args[0] == {"hate_type": "derogation", "target_groups": ["women", "Sikhs", "Roma"],
                                 "label_explanation": "It demeans women."}
    form.set_label("not hate")
    assert form.values() == {"label_explanation": "It demeans women."}  # what no longer applies is left out
    form.set_values({"hate_type": "animosity", "target_groups": ["Muslims", "Jains"]})
    form.set_label("hate")
    assert form.values()["target_groups"] == ["Muslims", "Jains"]
