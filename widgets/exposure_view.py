"""The Dashboard's exposure section: a care note, the team's alert lines (a lead sets them),
and minutes per person per day with hateful content. Shows typed view-models; emits what the user asks."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QPushButton,
    QSpinBox,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.exposure import CARE_NOTE, COLUMNS, PERIODS, ExposureScreen

ALERT_BACKGROUND = QColor("#fdecea")


class ExposureView(QWidget):
    limits_requested = Signal(int, int)  # daily minutes, continuous minutes
    period_changed = Signal(int)  # days
    shown = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent, objectName="exposure-view")
        self.care = QLabel(CARE_NOTE, objectName="exposure-care", wordWrap=True)
        self.care.setStyleSheet("background:#eef3fb; color:#1f3552; padding:6px; border-radius:4px")
        self.headline = QLabel(objectName="exposure-headline", wordWrap=True)
        self.period = QComboBox(objectName="exposure-period")
        for days, text in PERIODS:
            self.period.addItem(text, days)
        self.period.setCurrentIndex(1)
        self.period.currentIndexChanged.connect(lambda _i: self.period_changed.emit(self.period.currentData()))
        self.daily = QSpinBox(objectName="exposure-daily", minimum=10, maximum=1440, singleStep=15, suffix=" min a day")
        self.continuous = QSpinBox(objectName="exposure-continuous", minimum=5, maximum=480, singleStep=5,
                                   suffix=" min without a break")
        self.save = QPushButton("Save limits", objectName="exposure-save")
        self.save.clicked.connect(lambda: self.limits_requested.emit(self.daily.value(), self.continuous.value()))
        self.limits_note = QLabel(objectName="exposure-limits-note", wordWrap=True)
        self.limits_note.setStyleSheet("color:#555")
        limits = QHBoxLayout()
        limits.addWidget(QLabel("Alert above"))
        limits.addWidget(self.daily)
        limits.addWidget(QLabel("or"))
        limits.addWidget(self.continuous)
        limits.addWidget(self.save)
        limits.addWidget(self.limits_note, 1)
        top = QHBoxLayout()
        top.addWidget(self.headline, 1)
        top.addWidget(QLabel("Period:"))
        top.addWidget(self.period)
        self.table = QTableWidget(0, len(COLUMNS), objectName="exposure-table")
        self.table.setHorizontalHeaderLabels(list(COLUMNS))
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.verticalHeader().setVisible(False)
        self.table.horizontalHeader().setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.empty = QLabel(objectName="exposure-empty", alignment=Qt.AlignmentFlag.AlignCenter)
        self.empty.hide()
        layout = QVBoxLayout(self)
        layout.addWidget(self.care)
        layout.addLayout(top)
        layout.addLayout(limits)
        layout.addWidget(self.table, 1)
        layout.addWidget(self.empty)

    def period_days(self) -> int:
        return int(self.period.currentData())

    def show_screen(self, screen: ExposureScreen) -> None:
        self.headline.setText(screen.headline)
        self.daily.setValue(screen.daily_min)
        self.continuous.setValue(screen.continuous_min)
        for widget in (self.daily, self.continuous, self.save):
            widget.setEnabled(screen.can_set_limits)
        self.limits_note.setText(screen.limits_note)
        self.table.setRowCount(len(screen.rows))
        for r, row in enumerate(screen.rows):
            for c, text in enumerate(row.cells):
                item = QTableWidgetItem(text)
                if c >= 2 and c < len(COLUMNS) - 1:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row.alerting:
                    item.setBackground(QBrush(ALERT_BACKGROUND))
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.table.horizontalHeader().setSectionResizeMode(len(COLUMNS) - 1, QHeaderView.ResizeMode.Stretch)
        self.table.setVisible(bool(screen.rows))
        self.empty.setText(screen.empty_text)
        self.empty.setVisible(not screen.rows)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        self.shown.emit()
