"""The lead's data-quality settings of a task: the near-duplicate threshold, and the two lines at
which the dashboard alerts (a token's association with a label, a writer's duplicate rate)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QDoubleSpinBox, QFormLayout, QLabel, QSpinBox, QVBoxLayout

from app.views.quality import QualitySettingsView


class QualitySettingsDialog(QDialog):
    chosen = Signal(int, float, int)  # near-duplicate %, token z-score, duplicate-rate %

    def __init__(self, view: QualitySettingsView, parent=None):
        super().__init__(parent)
        self.setObjectName("quality-settings")
        self.setWindowTitle(f"Data quality · {view.task_name}")
        self.near = QSpinBox(suffix=" %", minimum=view.near_range[0], maximum=view.near_range[1],
                             value=view.near_percent)
        self.near.setObjectName("near-threshold")
        self.near.setToolTip("Two examples are near-duplicates from this similarity of their character 4-grams "
                             "(after folding case, punctuation, spacing, accents, zero-width characters and "
                             "leetspeak). Writers are warned at submit; Review groups them.")
        self.token = QDoubleSpinBox(decimals=1, singleStep=0.5, minimum=view.token_range[0],
                                    maximum=view.token_range[1], value=view.token_z)
        self.token.setObjectName("token-threshold")
        self.token.setToolTip("The dashboard alerts when a word's or bigram's label share stands this many "
                              "standard errors above the label's base rate (the artifact table's z).")
        self.rate = QSpinBox(suffix=" %", minimum=view.rate_range[0], maximum=view.rate_range[1],
                             value=view.duplicate_rate_percent)
        self.rate.setObjectName("duplicate-rate-threshold")
        self.rate.setToolTip("The dashboard alerts when this share of a writer's examples repeat an earlier one.")
        form = QFormLayout()
        form.addRow("Near-duplicates from:", self.near)
        form.addRow("Alert when a token's z-score reaches:", self.token)
        form.addRow("Alert when a writer's duplicate rate reaches:", self.rate)
        note = QLabel("For this task, on this desk and, once you sync, for your team.", wordWrap=True)
        note.setStyleSheet("color:#6b6b6b")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.buttons = buttons
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addWidget(note)
        layout.addWidget(buttons)

    def accept(self) -> None:
        self.chosen.emit(self.near.value(), self.token.value(), self.rate.value())
        super().accept()
