"""A lead's blur words for a task: the words reading views mask besides the task's bundled list."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QVBoxLayout

from app.views.wellbeing import BlurWordsView


class BlurWordsDialog(QDialog):
    chosen = Signal(list)  # the entries, one a line as typed

    def __init__(self, view: BlurWordsView, parent=None):
        super().__init__(parent)
        self.setObjectName("blur-words")
        self.setWindowTitle(f"Blur words · {view.task_name}")
        intro = QLabel(f"Validate, Review, Data and the failing cases mask the task's {view.bundled} bundled "
                       "words and these, in every disguise the matching sees through (case, accents, "
                       "leetspeak, spaced letters, zero-width characters). One word or phrase a line; an "
                       "ending * covers every word it starts; plurals are matched.", wordWrap=True)
        self.words = QPlainTextEdit()
        self.words.setObjectName("blur-words-text")
        self.words.setPlainText("\n".join(view.added))
        self.words.setPlaceholderText("roaches\nfilthy lot\nsubhum*")
        note = QLabel("For this task, on this desk and, once you sync, for your team.", wordWrap=True)
        note.setStyleSheet("color:#6b6b6b")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(intro)
        layout.addWidget(self.words, 1)
        layout.addWidget(note)
        layout.addWidget(self.buttons)
        self.resize(480, 420)

    def accept(self) -> None:
        self.chosen.emit([line for line in self.words.toPlainText().splitlines() if line.strip()])
        super().accept()
