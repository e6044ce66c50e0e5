"""The metadata an example needs, shown field by field as the task's conditions say.

Fields come as typed view-models (app.views.create.FormFieldView); a field whose ``applies_to``
labels do not include the current label is hidden (hate type and targets only for 'hate').
Values are the example's metadata as stored: {field name: text or list of texts}.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QVBoxLayout,
    QWidget,
)

from app.views.create import FormFieldView, MetadataValues

CHOOSE = "— choose —"


class MetadataForm(QFrame):
    confirmed = Signal(dict)  # the values of the fields that apply
    cancelled = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel("<b>Before it is stored: tell the validators about it</b>", wordWrap=True)
        self.form = QFormLayout()
        self.problem = QLabel(objectName="problem", styleSheet="color:#b3261e", wordWrap=True)
        self.confirm_button = QPushButton("Store example (Ctrl+Enter)", objectName="confirm")
        self.confirm_button.setDefault(True)
        self.confirm_button.clicked.connect(self.confirm)
        cancel = QPushButton("Back to editing (Esc)", objectName="back")
        cancel.clicked.connect(self.cancelled)
        buttons = QHBoxLayout()
        buttons.addWidget(self.problem, 1)
        buttons.addWidget(cancel)
        buttons.addWidget(self.confirm_button)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addLayout(self.form)
        layout.addStretch(1)  # spare height below the fields, not between them
        layout.addLayout(buttons)
        self.fields: tuple[FormFieldView, ...] = ()
        self.editors: dict[str, object] = {}
        self.rows: dict[str, tuple[QLabel, QWidget]] = {}
        self.label: str | None = None

    def configure(self, fields: tuple[FormFieldView, ...]) -> None:
        """Lay out the task's metadata fields (emptied)."""
        while self.form.rowCount():
            self.form.removeRow(0)
        self.fields, self.editors, self.rows = fields, {}, {}
        for field in fields:
            widget, editor = self._editor_for(field)
            caption = QLabel(field.label + (" *" if field.required else ""), wordWrap=True)
            caption.setFixedWidth(240)  # a long question wraps instead of widening the window
            caption.setToolTip(field.help)
            widget.setToolTip(field.help)
            self.form.addRow(caption, widget)
            self.editors[field.name] = editor
            self.rows[field.name] = (caption, widget)
        self.set_label(self.label)

    def _editor_for(self, field: FormFieldView):
        name = field.name
        if field.is_text:
            edit = QPlainTextEdit(objectName=f"meta_{name}")
            edit.setTabChangesFocus(True)
            edit.setMaximumHeight(edit.fontMetrics().height() * 4)
            return edit, edit
        if field.is_choice:
            combo = QComboBox(objectName=f"meta_{name}")
            combo.addItem(CHOOSE, None)
            for choice in field.choices:
                combo.addItem(choice, choice)
            if field.allow_other:
                combo.setEditable(True)
            return combo, combo
        box = QWidget(objectName=f"meta_{name}")
        grid = QGridLayout(box)
        grid.setContentsMargins(0, 0, 0, 0)
        checks = []
        for index, choice in enumerate(field.choices):
            check = QCheckBox(choice, objectName=f"meta_{name}_{index}")
            grid.addWidget(check, index // 3, index % 3)
            checks.append(check)
        other = None
        if field.allow_other:
            other = QLineEdit(objectName=f"meta_{name}_other", placeholderText="Others, separated by commas")
            grid.addWidget(other, (len(checks) + 2) // 3, 0, 1, 3)
        return box, (checks, other)

    def set_label(self, label: str | None) -> None:
        """Show only the fields that apply to ``label``."""
        self.label = label
        for field in self.fields:
            applies = field.applies(label)
            for widget in self.rows[field.name]:
                widget.setVisible(applies)

    def applicable(self) -> list[FormFieldView]:
        return [f for f in self.fields if f.applies(self.label)]

    def values(self) -> MetadataValues:
        values: MetadataValues = {}
        for field in self.applicable():
            editor = self.editors[field.name]
            if field.is_text:
                value = editor.toPlainText().strip()
            elif field.is_choice:
                value = editor.currentText().strip()  # a choice's text is its value; or the typed "other"
                if value == CHOOSE:
                    value = None
            else:
                checks, other = editor
                value = [c.text() for c in checks if c.isChecked()]
                if other is not None:
                    value += [part.strip() for part in other.text().split(",") if part.strip()]
            if value:
                values[field.name] = value
        return values

    def set_values(self, values: MetadataValues) -> None:
        for field in self.fields:
            editor, value = self.editors[field.name], values.get(field.name)
            if field.is_text:
                editor.setPlainText(value or "")
            elif field.is_choice:
                index = editor.findData(value) if value else 0
                if index >= 0:
                    editor.setCurrentIndex(index)
                else:
                    editor.setEditText(value)
            else:
                checks, other = editor
                chosen = set(value or [])
                for check in checks:
                    check.setChecked(check.text() in chosen)
                if other is not None:
                    other.setText(", ".join(v for v in (value or []) if v not in {c.text() for c in checks}))

    def missing(self) -> list[str]:
        values = self.values()
        return [f.label for f in self.applicable() if f.required and f.name not in values]

    def confirm(self) -> None:
        missing = self.missing()
        if missing:
            self.problem.setText("Fill in: " + "; ".join(missing))
            return
        self.problem.clear()
        self.confirmed.emit(self.values())

    def focus_first(self) -> None:
        for field in self.applicable():
            editor = self.editors[field.name]
            (editor[0][0] if isinstance(editor, tuple) else editor).setFocus(Qt.FocusReason.OtherFocusReason)
            return
