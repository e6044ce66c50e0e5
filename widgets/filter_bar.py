"""Search box and filters over examples. Emits the whole filter as a ``DataFilterValues``."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QLineEdit, QWidget

from app.core.domain import ExampleStatus, ValidationState
from app.views.example import DataFilterValues

ANY = None
SEARCH_DEBOUNCE_MS = 250


class FilterBar(QWidget):
    changed = Signal(DataFilterValues)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.search = QLineEdit(placeholderText="Search text (any script, emoji too)…", clearButtonEnabled=True)
        self.search.setObjectName("search")
        self.author = self._combo("author", [("Everyone's", ANY), ("Mine only", "mine"), ("Returned to me", "returned")])
        self.round = self._combo("round", [("All rounds", ANY)])
        self.label = self._combo("label", [("Any label", ANY)])
        self.fooled = self._combo("fooled", [("Fooled or not", ANY), ("Model fooled", True), ("Model not fooled", False)])
        self.validation = self._combo("validation", [("Any validation", ANY), ("Unvalidated", "unvalidated"),
                                                     ("In progress", "in_progress"), ("Decided", "decided")])
        self.status = self._combo("status", [("Any status", ANY), ("Submitted", "submitted"), ("Flagged", "flagged"),
                                             ("Retracted", "retracted")])
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(QLabel("Find:"))
        layout.addWidget(self.search, 3)
        for combo in (self.author, self.round, self.label, self.fooled, self.validation, self.status):
            layout.addWidget(combo, 1)
        self._debounce = QTimer(self, singleShot=True, interval=SEARCH_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._emit)
        self.search.textChanged.connect(self._debounce.start)
        self.search.returnPressed.connect(self._emit)

    def _combo(self, name: str, items: list[tuple[str, object]]) -> QComboBox:
        combo = QComboBox()
        combo.setObjectName(name)
        for text, value in items:
            combo.addItem(text, value)
        combo.currentIndexChanged.connect(self._emit)
        return combo

    def set_choices(self, rounds: Sequence[tuple[str, str]], labels: Sequence[str]) -> None:
        """New task: offer its rounds and labels, and clear what no longer applies."""
        for combo, items in ((self.round, [("All rounds", ANY), *rounds]),
                             (self.label, [("Any label", ANY), *[(label, label) for label in labels]])):
            combo.blockSignals(True)
            combo.clear()
            for text, value in items:
                combo.addItem(text, value)
            combo.blockSignals(False)

    def value(self) -> DataFilterValues:
        round_, state, status = self.round.currentData(), self.validation.currentData(), self.status.currentData()
        return DataFilterValues(
            text=self.search.text().strip(),
            mine=self.author.currentData() == "mine",
            returned=self.author.currentData() == "returned",
            round=uuid.UUID(round_) if round_ else None,
            label=self.label.currentData(),
            fooled=self.fooled.currentData(),
            validation_state=ValidationState(state) if state else None,
            status=ExampleStatus(status) if status else None,
        )

    def focus_search(self) -> None:
        self.search.setFocus()

    def show_returned(self) -> None:
        """Only the working profile's examples that a lead returned."""
        self.author.setCurrentIndex(self.author.findData("returned"))

    def _emit(self) -> None:
        self._debounce.stop()
        self.changed.emit(self.value())
