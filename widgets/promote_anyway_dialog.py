"""“Promote anyway…”: the promotion rule refused the candidate; this asks for the reason to override it,
with every split's figures in view. The reason is recorded with those figures in the model's lineage.
Used by the Next round dialog and the Proposals dialog; it runs nothing itself (``reason_given``)."""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QPlainTextEdit, QPushButton, QVBoxLayout

MAX_REASON_CHARS = 500  # what the lineage and a proposal's decision carry (promotion_rule.MAX_REASON_CHARS)


class PromoteAnywayDialog(QDialog):
    reason_given = Signal(str)  # the override was confirmed with this reason

    def __init__(self, sentence: str, splits: tuple[str, ...], parent=None):
        super().__init__(parent)
        self.setObjectName("promote-anyway")
        self.setWindowTitle("Promote anyway?")
        self.setWindowModality(Qt.WindowModality.WindowModal)
        self.resize(720, 420)
        figures = QLabel(objectName="refusal-figures", wordWrap=True)
        figures.setTextFormat(Qt.TextFormat.RichText)
        figures.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        figures.setText(f"<b>{escape(sentence)}</b>" + ("<ul>" + "".join(f"<li>{escape(s)}</li>" for s in splits)
                                                        + "</ul>" if splits else ""))
        ask = QLabel("Say why it should become the target all the same. The reason is recorded with these figures "
                     "in the model's lineage, for the team to read.", wordWrap=True)
        self.reason = QPlainTextEdit(objectName="reason")
        self.reason.setPlaceholderText("e.g. the base test split is older slang than what the team collects now")
        self.reason.textChanged.connect(self._changed)
        self.count = QLabel(objectName="reason-count", styleSheet="color:#555")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.confirm = QPushButton("Promote anyway", objectName="confirm-promote-anyway")
        buttons.addButton(self.confirm, QDialogButtonBox.ButtonRole.AcceptRole)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(figures)
        layout.addWidget(ask)
        layout.addWidget(self.reason, 1)
        layout.addWidget(self.count)
        layout.addWidget(buttons)
        self._changed()

    def _text(self) -> str:
        return self.reason.toPlainText().strip()

    def _changed(self) -> None:
        text = self._text()
        self.confirm.setEnabled(0 < len(text) <= MAX_REASON_CHARS)
        self.count.setText(f"{len(text)} of at most {MAX_REASON_CHARS} characters" + (
            "" if text else " — a reason is needed"))

    def _accept(self) -> None:
        if not self.confirm.isEnabled():
            return
        self.reason_given.emit(self._text())
        self.accept()
