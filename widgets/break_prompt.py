"""The break prompt: a quiet bar, never a dialog. It is shown only after a submit or a verdict (the
controller decides when) and never takes the keyboard focus from where the person is typing."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QVBoxLayout

from app.views.breaks import BreakPromptView

STYLE = ("QFrame#break-prompt { background:#eef6f0; border:1px solid #9cc8a8; border-radius:6px; }"
         "QLabel#break-title { color:#1e4d2b; font-weight:bold; }"
         "QLabel#break-text { color:#24352a; }")


class BreakPromptBar(QFrame):
    take_requested = Signal()
    snooze_requested = Signal()
    shown_changed = Signal(bool)  # the window hides the bar's holder with it

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("break-prompt")
        self.setStyleSheet(STYLE)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.title, self.text = QLabel(), QLabel(wordWrap=True)
        self.take, self.snooze = QPushButton(), QPushButton()
        for widget, name in ((self.title, "break-title"), (self.text, "break-text"), (self.take, "break-take"),
                             (self.snooze, "break-snooze")):
            widget.setObjectName(name)
        for button in (self.take, self.snooze):
            # Clicked with the mouse; a person typing keeps the keyboard (Tab never lands here mid-sentence).
            button.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.take.clicked.connect(self.take_requested)
        self.snooze.clicked.connect(self.snooze_requested)
        words = QVBoxLayout()
        words.setSpacing(2)
        words.addWidget(self.title)
        words.addWidget(self.text)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 10, 6)
        layout.addLayout(words, 1)
        layout.addWidget(self.take)
        layout.addWidget(self.snooze)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Preferred)
        self.setVisible(False)

    def _show(self, shown: bool) -> None:
        self.setVisible(shown)
        self.shown_changed.emit(shown)

    def show_prompt(self, view: BreakPromptView) -> None:
        self.title.setText(view.title)
        self.text.setText(view.text)
        self.take.setText(view.take_label)
        self.snooze.setText(view.snooze_label)
        self.take.setVisible(True)
        self.snooze.setVisible(True)
        self._show(True)

    def show_note(self, text: str) -> None:
        """After an answer: a line of thanks in place of the buttons."""
        self.title.setText("Break")
        self.text.setText(text)
        self.take.setVisible(False)
        self.snooze.setVisible(False)
        self._show(True)

    def dismiss(self) -> None:
        self._show(False)
