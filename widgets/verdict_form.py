"""The verdict form: correct (1), incorrect (2), flagged (3), skip (S), Enter to confirm.

'Incorrect' asks for the corrected label (or answer) and an explanation, 'flagged' for a
reason; the form says so inline before anything is sent. It emits a ``VerdictChoice`` and decides
nothing else: the controller stores it and reports problems back with :meth:`show_problem`.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QButtonGroup,
    QComboBox,
    QFormLayout,
    QFrame,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

from app.core.domain import Verdict
from app.views.example import VerdictChoice, verdict_problem

VERDICTS = [(Verdict.CORRECT, "1", "Correct"), (Verdict.INCORRECT, "2", "Incorrect"), (Verdict.FLAGGED, "3", "Flag")]
KEYS = {Qt.Key.Key_1: Verdict.CORRECT, Qt.Key.Key_2: Verdict.INCORRECT, Qt.Key.Key_3: Verdict.FLAGGED}
_COLOURS = {Verdict.CORRECT: "#1e6b35", Verdict.INCORRECT: "#b3261e", Verdict.FLAGGED: "#8a5a00"}


def tint(widget, background: str, foreground: str | None = None):
    """Colour a widget through its palette: a style sheet would drop the font it inherits
    (the user's text size) back to the application default."""
    from PySide6.QtGui import QColor, QPalette

    palette = widget.palette()
    palette.setColor(QPalette.ColorRole.Window, QColor(background))
    if foreground:
        palette.setColor(QPalette.ColorRole.WindowText, QColor(foreground))
    widget.setPalette(palette)
    widget.setAutoFillBackground(True)
    return widget


class VerdictForm(QFrame):
    submitted = Signal(VerdictChoice)
    skipped = Signal()

    def __init__(self, parent=None, *, allow_skip: bool = True, title: str = "Your verdict"):
        super().__init__(parent)
        self.setObjectName("verdict-form")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.title = QLabel(f"<b>{title}</b>", objectName="verdict-title")
        self.group = QButtonGroup(self)
        self.group.setExclusive(True)
        self.buttons: dict[Verdict, QPushButton] = {}
        row = QHBoxLayout()
        for verdict, key, text in VERDICTS:
            button = QPushButton(f"{key}  {text}", objectName=f"verdict-{verdict.value}", checkable=True)
            button.setToolTip(f"Key {key}")
            button.setStyleSheet(f"QPushButton:checked {{ background:{_COLOURS[verdict]}; color:white; "
                                 "font-weight:bold; }")
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
            self.group.addButton(button)
            button.clicked.connect(lambda _=False, v=verdict: self.choose(verdict=v))
            self.buttons[verdict] = button
            row.addWidget(button)
        self.skip_button = QPushButton("S  Skip", objectName="verdict-skip", toolTip="Key S: later, not now")
        self.skip_button.setFocusPolicy(Qt.FocusPolicy.TabFocus)
        self.skip_button.clicked.connect(self.skipped)
        self.skip_button.setVisible(allow_skip)
        row.addWidget(self.skip_button)

        self.label_choice = QComboBox(objectName="corrected-label")
        self.answer_edit = QLineEdit(objectName="corrected-answer", placeholderText="The right answer span…")
        self.reason = QLineEdit(objectName="reason")
        self.model_note = QLineEdit(objectName="model-note",
                                    placeholderText="Optional: why was the model fooled?")
        self.fields = QFormLayout()
        self.fields.setFieldGrowthPolicy(QFormLayout.FieldGrowthPolicy.AllNonFixedFieldsGrow)
        self.fields.addRow("Corrected label:", self.label_choice)
        self.fields.addRow("Corrected answer:", self.answer_edit)
        self.fields.addRow("Why?", self.reason)
        self.fields.addRow("Model note:", self.model_note)
        self.problem = QLabel(objectName="verdict-problem", wordWrap=True)
        tint(self.problem, "#00000000", "#b3261e").setAutoFillBackground(False)
        self.confirm = QPushButton("Confirm  (Enter)", objectName="verdict-confirm", default=True)
        self.confirm.clicked.connect(self.submit)
        for edit in (self.answer_edit, self.reason, self.model_note):
            edit.returnPressed.connect(self.submit)
            edit.textChanged.connect(self._recheck_problem)
        self.label_choice.currentIndexChanged.connect(self._recheck_problem)
        layout = QVBoxLayout(self)
        layout.addWidget(self.title)
        layout.addLayout(row)
        layout.addLayout(self.fields)
        layout.addWidget(self.problem)
        layout.addWidget(self.confirm)
        self._labels: list[str] = []
        self._author_label: str | None = None
        self.verdict: Verdict | None = None
        self.locked = False  # e.g. lead actions for a profile that is not a lead
        self.set_labels([], None)

    def set_labels(self, labels: Sequence[str], author_label: str | None) -> None:
        """The task's labels (empty for extractive QA: a corrected answer is typed instead)."""
        self._labels, self._author_label = list(labels), author_label
        self.label_choice.clear()
        self.label_choice.addItem("choose the right label…", None)
        for label in labels:
            if label != author_label:
                self.label_choice.addItem(label, label)
        self.reset()

    def reset(self) -> None:
        self.group.setExclusive(False)
        for button in self.buttons.values():
            button.setChecked(False)
        self.group.setExclusive(True)
        self.verdict = None
        self.label_choice.setCurrentIndex(0)
        for edit in (self.answer_edit, self.reason, self.model_note):
            edit.clear()
        self.problem.clear()
        self._show_fields()
        self.setEnabled(not self.locked)

    def set_locked(self, locked: bool) -> None:
        """Locked forms stay disabled whatever is loaded into them."""
        self.locked = locked
        self.setEnabled(not locked)

    def choose(self, *, verdict: Verdict | str) -> None:
        verdict = self.verdict = Verdict(verdict)
        self.buttons[verdict].setChecked(True)
        self.problem.clear()
        self._show_fields()
        if verdict == Verdict.INCORRECT:
            (self.label_choice if self._labels else self.answer_edit).setFocus()
        elif verdict == Verdict.FLAGGED:
            self.reason.setFocus()
        else:
            self.confirm.setFocus()

    def _show_fields(self) -> None:
        incorrect, flagged = self.verdict == Verdict.INCORRECT, self.verdict == Verdict.FLAGGED
        self.fields.setRowVisible(self.label_choice, incorrect and bool(self._labels))
        self.fields.setRowVisible(self.answer_edit, incorrect and not self._labels)
        self.fields.setRowVisible(self.reason, incorrect or flagged)
        self.fields.setRowVisible(self.model_note, self.verdict is not None)
        self.reason.setPlaceholderText("Why is the author's label wrong? (required)" if incorrect
                                       else "What is wrong with this example? (required)")
        self.confirm.setEnabled(self.verdict is not None)

    def handle_key(self, key: int) -> bool:
        """The form's keys, for a parent that receives them while no text field has focus."""
        if key in KEYS:
            self.choose(verdict=KEYS[key])
            return True
        if key == Qt.Key.Key_S and self.skip_button.isVisible():
            self.skipped.emit()
            return True
        if key in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and self.verdict is not None:
            self.submit()
            return True
        return False

    def keyPressEvent(self, event) -> None:
        if not self.handle_key(event.key()):
            super().keyPressEvent(event)

    def value(self) -> VerdictChoice:
        corrected = None
        if self.verdict == Verdict.INCORRECT:
            corrected = self.label_choice.currentData() if self._labels else self.answer_edit.text().strip() or None
        return VerdictChoice(self.verdict, corrected, self.reason.text().strip() or None,
                             self.model_note.text().strip() or None)

    def problem_with(self, value: VerdictChoice) -> str | None:
        return verdict_problem(value, bool(self._labels))

    def submit(self) -> None:
        # Enter in a text field reaches the form twice (returnPressed, then the key the field
        # passes on): a second verdict would be refused and pull the focus back into the hidden form.
        # Disabled means sent (or locked): nothing to send.
        if not self.isEnabled():
            return
        value = self.value()
        problem = self.problem_with(value)
        if problem:
            self.show_problem(problem)
            return
        self.problem.clear()
        self.setEnabled(False)  # until the controller says it is stored (or not)
        self.submitted.emit(value)

    def _recheck_problem(self) -> None:
        """The problem on show goes as soon as it is fixed; what else is missing is said at the next Enter."""
        if self.problem.text() and self.problem_with(self.value()) != self.problem.text():
            self.problem.clear()

    def show_problem(self, text: str) -> None:
        self.setEnabled(not self.locked)
        self.problem.setText(text)
        if self.verdict == Verdict.INCORRECT and "label" in text.lower() and self._labels:
            self.label_choice.setFocus()
        elif self.verdict in (Verdict.INCORRECT, Verdict.FLAGGED):
            self.reason.setFocus()
