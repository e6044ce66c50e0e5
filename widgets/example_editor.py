"""The example editor: inputs laid out from the task definition, the goal label, and for
extractive tasks the answer chosen by selecting text in the passage.

Text and label edits go on one undo stack given by the window, so Ctrl+Z walks back through
both in the order they happened. Offsets leave as Python (code point) offsets.
"""

from __future__ import annotations

import time

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import (
    QColor,
    QFont,
    QFontMetrics,
    QKeyEvent,
    QKeySequence,
    QShortcut,
    QTextCharFormat,
    QTextCursor,
    QUndoCommand,
    QUndoStack,
)
from PySide6.QtWidgets import (
    QButtonGroup,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTextEdit,
    QVBoxLayout,
    QWidget,
)

from app.core.domain import Span
from app.views.create import EditorContent, EditorSpec

# the chosen label in the colour the prediction bars use for "your label"
CHOSEN_LABEL_PADDING = 10  # pixels each side
CHOSEN_LABEL_STYLE = ("QPushButton:checked { background:#c77c02; color:white; font-weight:bold; border-radius:3px; "
                      f"padding:3px {CHOSEN_LABEL_PADDING}px }}")
MERGE_WINDOW_S = 1.0  # keystrokes closer together than this undo as one step


def code_points(text: str, utf16_position: int) -> int:
    """Python's index for a Qt (UTF-16) position in ``text``."""
    units = 0
    for index, ch in enumerate(text):
        if units >= utf16_position:
            return index
        units += 2 if ord(ch) > 0xFFFF else 1
    return len(text)


def utf16(text: str, index: int) -> int:
    return index + sum(1 for ch in text[:index] if ord(ch) > 0xFFFF)


class _TextEdit(QUndoCommand):
    def __init__(self, editor: ExampleEditor, field: str, before: str, after: str, cursor: int):
        super().__init__(f"typing in {field}")
        self.editor, self.field, self.before, self.after, self.cursor = editor, field, before, after, cursor
        self.stamp = time.monotonic()
        self.first = True

    def id(self) -> int:
        return 1

    def mergeWith(self, other: QUndoCommand) -> bool:
        if not isinstance(other, _TextEdit) or other.field != self.field or other.stamp - self.stamp > MERGE_WINDOW_S:
            return False
        self.after, self.cursor, self.stamp = other.after, other.cursor, other.stamp
        return True

    def redo(self) -> None:
        if self.first:  # the text is already on screen
            self.first = False
            return
        self.editor._apply_text(self.field, self.after, self.cursor)

    def undo(self) -> None:
        self.editor._apply_text(self.field, self.before, None)


class _Replacement(QUndoCommand):
    """A written input replaced as one undo step (a suggestion applied); undo and redo are
    reported with the caller's ``token``, so that what the example records follows them."""

    def __init__(self, editor: ExampleEditor, field: str, before: str, after: str, token: int, title: str):
        super().__init__(title)
        self.editor, self.field, self.before, self.after, self.token = editor, field, before, after, token

    def redo(self) -> None:
        self.editor._replace_text(self.field, self.after)
        self.editor.replacement_toggled.emit(self.token, True)

    def undo(self) -> None:
        self.editor._replace_text(self.field, self.before)
        self.editor.replacement_toggled.emit(self.token, False)


class _LabelChange(QUndoCommand):
    def __init__(self, editor: ExampleEditor, before: str | None, after: str | None):
        super().__init__("label")
        self.editor, self.before, self.after = editor, before, after

    def redo(self) -> None:
        self.editor._apply_label(self.after)

    def undo(self) -> None:
        self.editor._apply_label(self.before)


class ExampleEditor(QWidget):
    content_changed = Signal(object)  # the EditorContent after every change
    text_edited = Signal()  # a keystroke in a written input (the live-prediction trigger)
    next_context_requested = Signal()
    prompt_requested = Signal()
    replacement_toggled = Signal(int, bool)  # a replace_text step's token, and whether it is now applied

    def __init__(self, undo_stack: QUndoStack, parent=None):
        super().__init__(parent)
        self.undo_stack = undo_stack
        self.spec = EditorSpec()
        self.fields: dict[str, QPlainTextEdit] = {}
        self.counters: dict[str, QLabel] = {}
        self._texts: dict[str, str] = {}
        self._label: str | None = None
        self._answer: Span | None = None
        self._applying = False
        self.form = QFormLayout()
        self.label_group = QButtonGroup(self)
        self.label_group.setExclusive(False)  # so that "no label yet" is possible
        self.label_shortcuts: list[QShortcut] = []
        self.label_row = QHBoxLayout()
        self.answer_label = QLabel(objectName="answer", wordWrap=True)
        self.next_context_button = QPushButton("Next context", objectName="next_context")
        self.next_context_button.clicked.connect(self.next_context_requested)
        self.prompt_button = QPushButton("Start from a prompt", objectName="prompt")
        self.prompt_button.clicked.connect(self.prompt_requested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.next_context_button)
        buttons.addWidget(self.prompt_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(self.form, 1)
        layout.addWidget(self.answer_label)
        layout.addLayout(self.label_row)
        layout.addLayout(buttons)

    def configure(self, spec: EditorSpec) -> None:
        """Lay out the task's inputs and labels."""
        self.spec = spec
        while self.form.rowCount():
            self.form.removeRow(0)
        self.fields, self.counters, self._texts = {}, {}, {}
        for field in spec.inputs:
            edit = QPlainTextEdit(objectName=f"input_{field.name}")
            edit.setPlaceholderText(field.placeholder)
            edit.setUndoRedoEnabled(False)  # the window's undo stack covers text and label alike
            edit.installEventFilter(self)
            edit.setTabChangesFocus(True)
            if field.is_context:
                edit.setReadOnly(True)
                edit.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse
                                             | Qt.TextInteractionFlag.TextSelectableByKeyboard)
                if spec.extractive and field.name == spec.span_of:
                    edit.selectionChanged.connect(lambda name=field.name: self._selection_changed(name))
            else:
                edit.textChanged.connect(lambda name=field.name: self._text_changed(name))
                font = edit.font()
                font.setPointSizeF(font.pointSizeF() * 1.25)
                edit.setFont(font)
            counter = QLabel(objectName=f"count_{field.name}")
            column = QVBoxLayout()
            column.addWidget(edit)
            column.addWidget(counter, 0, Qt.AlignmentFlag.AlignRight)
            self.form.addRow(field.label, column)
            self.fields[field.name] = edit
            self.counters[field.name] = counter
            self._texts[field.name] = ""
            self._update_counter(field.name)
        for button in self.label_group.buttons():
            self.label_group.removeButton(button)
            button.deleteLater()
        while self.label_row.count():
            item = self.label_row.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        if spec.labels:
            self.label_row.addWidget(QLabel("Your label:"))
            for index, label in enumerate(spec.labels):
                button = QPushButton(label, objectName=f"label_{index}")
                button.setCheckable(True)
                button.setStyleSheet(CHOSEN_LABEL_STYLE)
                # chosen, the label is bold and padded: its size hint is the plain one, so say how wide
                bold = QFont(button.font())
                bold.setBold(True)
                button.setMinimumWidth(QFontMetrics(bold).horizontalAdvance(label) + 2 * CHOSEN_LABEL_PADDING + 8)
                button.setToolTip(f"Alt+{index + 1}")
                button.clicked.connect(lambda _checked, value=label: self.choose_label(value))
                self.label_group.addButton(button)
                self.label_row.addWidget(button)
            self.label_row.addStretch(1)
        for shortcut in self.label_shortcuts:
            shortcut.setEnabled(False)
            shortcut.deleteLater()
        self.label_shortcuts = []
        for index, label in enumerate(spec.labels):
            shortcut = QShortcut(QKeySequence(f"Alt+{index + 1}"), self)
            shortcut.setContext(Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(lambda value=label: self.choose_label(value))
            self.label_shortcuts.append(shortcut)
        self.next_context_button.setVisible(spec.has_context)
        self.prompt_button.setVisible(spec.prompt_enabled and not spec.has_context)
        self.answer_label.setVisible(spec.extractive)
        self._label, self._answer = None, None
        self._show_answer()

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        """A text box claims Ctrl+Z and Ctrl+Shift+Z for its own (disabled) undo; they go to the
        window's stack instead, so one key walks back through text and label edits alike."""
        if event.type() in (QEvent.Type.ShortcutOverride, QEvent.Type.KeyPress) and isinstance(event, QKeyEvent):
            for key, step in ((QKeySequence.StandardKey.Undo, self.undo_stack.undo),
                              (QKeySequence.StandardKey.Redo, self.undo_stack.redo)):
                if event.matches(key):
                    event.accept()
                    if event.type() == QEvent.Type.KeyPress:
                        step()
                    return True
        return super().eventFilter(watched, event)

    def current(self) -> EditorContent:
        return EditorContent(dict(self._texts), self._label, self._answer)

    def content(self) -> dict:
        """The content as plain JSON-like data: {"inputs", "label", "answer"} (what tests compare)."""
        return {"inputs": dict(self._texts), "label": self._label,
                "answer": self._answer.to_json() if self._answer else None}

    def set_content(self, content: EditorContent, *, record_undo: bool = False) -> None:
        """Show ``content`` (a restored draft, a perturbation's start, a prompt); inputs it does not
        name keep their text, the label and answer are replaced."""
        before = dict(self._texts)
        self._applying = True
        try:
            for name, text in content.inputs.items():
                if name in self.fields:
                    self.fields[name].setPlainText(text)
                    self._texts[name] = text
                    self._update_counter(name)
            self._apply_label(content.label, emit=False)
            self._answer = content.answer
            self._show_answer()
        finally:
            self._applying = False
        if record_undo:
            for name in self.fields:
                if before.get(name, "") != self._texts[name]:
                    command = _TextEdit(self, name, before.get(name, ""), self._texts[name], len(self._texts[name]))
                    command.stamp = -1e9  # never merges with typing
                    self.undo_stack.push(command)
        self.content_changed.emit(self.current())

    def replace_text(self, name: str, text: str, token: int, title: str = "apply a suggestion") -> None:
        """Replace what is written in ``name`` by ``text`` as one undo step (Ctrl+Z brings the
        writer's text back); ``replacement_toggled(token, …)`` follows every do and undo."""
        before = self._texts[name]
        if before != text:
            self.undo_stack.push(_Replacement(self, name, before, text, token, title))

    def set_context(self, name: str, text: str) -> None:
        self._applying = True
        try:
            self.fields[name].setPlainText(text)
            self._texts[name] = text
            self._answer = None
            self._show_answer()
        finally:
            self._applying = False
        self.content_changed.emit(self.current())

    def choose_label(self, label: str | None) -> None:
        if label == self._label:
            self._sync_buttons()
            return
        self.undo_stack.push(_LabelChange(self, self._label, label))

    def focus_first_written(self) -> None:
        for field in self.spec.inputs:
            if not field.is_context:
                self.fields[field.name].setFocus()
                return

    def _text_changed(self, name: str) -> None:
        if self._applying:
            return
        edit = self.fields[name]
        before, after = self._texts[name], edit.toPlainText()
        if before == after:
            return
        self._texts[name] = after
        self._update_counter(name)
        self.undo_stack.push(_TextEdit(self, name, before, after, edit.textCursor().position()))
        self.text_edited.emit()
        self.content_changed.emit(self.current())

    def _apply_text(self, name: str, text: str, cursor: int | None) -> None:
        self._applying = True
        try:
            edit = self.fields[name]
            edit.setPlainText(text)
            moved = edit.textCursor()
            moved.setPosition(min(cursor if cursor is not None else len(text), len(edit.toPlainText())))
            edit.setTextCursor(moved)
            self._texts[name] = text
            self._update_counter(name)
        finally:
            self._applying = False
        self.text_edited.emit()
        self.content_changed.emit(self.current())

    def _replace_text(self, name: str, text: str) -> None:
        """Replace only the part that differs, in one edit, leaving the cursor after it (the
        writer sees where the change is, and the view does not jump)."""
        edit, before = self.fields[name], self._texts[name]
        prefix = 0
        while prefix < min(len(before), len(text)) and before[prefix] == text[prefix]:
            prefix += 1
        suffix = 0
        while (suffix < min(len(before), len(text)) - prefix
               and before[len(before) - 1 - suffix] == text[len(text) - 1 - suffix]):
            suffix += 1
        self._applying = True
        try:
            cursor = QTextCursor(edit.document())
            cursor.beginEditBlock()
            cursor.setPosition(utf16(before, prefix))
            cursor.setPosition(utf16(before, len(before) - suffix), QTextCursor.MoveMode.KeepAnchor)
            cursor.insertText(text[prefix:len(text) - suffix])
            cursor.endEditBlock()
            edit.setTextCursor(cursor)
            self._texts[name] = edit.toPlainText()
            self._update_counter(name)
        finally:
            self._applying = False
        self.text_edited.emit()
        self.content_changed.emit(self.current())

    def _apply_label(self, label: str | None, emit: bool = True) -> None:
        self._label = label
        self._sync_buttons()
        if emit:
            self.content_changed.emit(self.current())

    def _sync_buttons(self) -> None:
        for button in self.label_group.buttons():
            button.setChecked(button.text() == self._label)

    def _update_counter(self, name: str) -> None:
        limit = self.spec.limit(name)
        count = len(self._texts.get(name, ""))
        counter = self.counters[name]
        counter.setText(f"{count:,} / {limit:,}" if limit else f"{count:,}")
        counter.setStyleSheet("color:#b3261e; font-weight:bold" if limit and count > limit else "color:#6b6b6b")

    def _selection_changed(self, name: str) -> None:
        cursor = self.fields[name].textCursor()
        if not cursor.hasSelection():
            return
        text = self._texts[name]
        start = code_points(text, cursor.selectionStart())
        end = code_points(text, cursor.selectionEnd())
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if start == end:
            return
        self._answer = Span(start, end, text[start:end])
        self._show_answer()
        self.content_changed.emit(self.current())

    def _show_answer(self) -> None:
        if not self.spec.extractive:
            return
        name = self.spec.span_of
        edit = self.fields.get(name)
        if edit is None:
            return
        selections = []
        if self._answer:
            self.answer_label.setText(f"Your answer: “{self._answer.text}”")
            text = self._texts.get(name, "")
            selections.append(_highlight(edit, utf16(text, self._answer.start), utf16(text, self._answer.end)))
        else:
            self.answer_label.setText("Select the answer in the passage.")
        edit.setExtraSelections(selections)


def _highlight(edit: QPlainTextEdit, start: int, end: int) -> QTextEdit.ExtraSelection:
    selection = QTextEdit.ExtraSelection()
    cursor = QTextCursor(edit.document())
    cursor.setPosition(start)
    cursor.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
    selection.cursor = cursor
    fmt = QTextCharFormat()
    fmt.setBackground(QColor("#ffe08a"))
    selection.format = fmt
    return selection
