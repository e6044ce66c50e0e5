"""The profile dialog's Wellbeing section: what the working person reads masked, which target
groups they are not served when validating (per task), and the lengths of their breaks."""

from __future__ import annotations

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from app.views.wellbeing import GroupChoice, WellbeingChoice, WellbeingSectionView


def _minutes(low: int, high: int, value: int, name: str) -> QSpinBox:
    box = QSpinBox(objectName=name, minimum=low, maximum=high, value=value, suffix=" min")
    box.setAccelerated(True)
    return box


class WellbeingSection(QGroupBox):
    chosen = Signal(WellbeingChoice)

    def __init__(self, view: WellbeingSectionView, person: str, parent=None):
        super().__init__(f"Wellbeing · {person}", parent)
        self.setObjectName("wellbeing")
        self.blur_validating = QCheckBox("Blur slurs and hateful words when validating and reviewing, "
                                         "and in the assistant's suggestions",
                                         objectName="blur-validating", checked=view.blur_validating)
        self.blur_browsing = QCheckBox("Blur them when browsing too (Data, the evaluation's failing cases)",
                                       objectName="blur-browsing", checked=view.blur_browsing)
        hint = QLabel("Masked words show while you point at them; V shows those of the example on screen. "
                      "Your own editor is never blurred.", wordWrap=True, styleSheet="color:#6b6b6b")

        # opt-outs: per task, the target groups this person is not served in the validation queue
        self._groups: dict[str, dict[str, bool]] = {code: {g.group: g.opted_out for g in groups}
                                                    for code, _name, groups in view.tasks}
        self.task = QComboBox(objectName="opt-out-task")
        for code, name, _groups in view.tasks:
            self.task.addItem(name, code)
        self.groups = QListWidget(objectName="opt-out-groups")
        self.groups.setMinimumHeight(self.groups.fontMetrics().lineSpacing() * 10)  # a task's groups, unscrolled
        self.groups.itemChanged.connect(self._group_changed)
        self.other = QLineEdit(objectName="opt-out-other", placeholderText="Another group…")
        add = QPushButton("Add", objectName="opt-out-add", autoDefault=False)
        add.clicked.connect(self._add_other)
        # Enter adds the group; it must not reach the dialog, whose default button switches profiles
        self.other.installEventFilter(self)
        self.task.currentIndexChanged.connect(self._show_groups)

        self.break_after = _minutes(5, 480, view.break_after_min, "break-after")
        self.daily_after = _minutes(10, 1440, view.daily_break_after_min, "daily-break-after")
        self.short_break = _minutes(1, 60, view.short_break_min, "short-break")
        self.long_break = _minutes(1, 120, view.long_break_min, "long-break")
        self.saved = QLabel(objectName="wellbeing-saved", styleSheet="color:#1e6b35")
        save = QPushButton("Save my wellbeing choices", objectName="wellbeing-save", autoDefault=False)
        save.clicked.connect(self._save)

        layout = QVBoxLayout(self)
        layout.addWidget(self.blur_validating)
        layout.addWidget(self.blur_browsing)
        layout.addWidget(hint)
        layout.addWidget(QLabel("<b>Not served to me when validating</b> (examples targeting these groups)"))
        if view.tasks:
            layout.addWidget(self.task)
            layout.addWidget(self.groups)
            other = QHBoxLayout()
            other.addWidget(self.other, 1)
            other.addWidget(add)
            layout.addLayout(other)
        else:
            layout.addWidget(QLabel("No task on this desk names target groups.", styleSheet="color:#6b6b6b"))
        breaks = QFormLayout()
        breaks.addRow("A short break after continuous work of", self.break_after)
        breaks.addRow("A longer break after a day's total of", self.daily_after)
        breaks.addRow("Short break", self.short_break)
        breaks.addRow("Longer break", self.long_break)
        layout.addWidget(QLabel("<b>Breaks</b> (when reading or writing hateful content)"))
        layout.addLayout(breaks)
        row = QHBoxLayout()
        row.addWidget(self.saved, 1)
        row.addWidget(save)
        layout.addLayout(row)
        self._show_groups()

    def eventFilter(self, watched, event) -> bool:
        if (watched is self.other and event.type() == QEvent.Type.KeyPress
                and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter)):
            self._add_other()
            return True
        return super().eventFilter(watched, event)

    def _show_groups(self) -> None:
        code = self.task.currentData()
        self.groups.blockSignals(True)
        self.groups.clear()
        for group, opted in (self._groups.get(code) or {}).items():
            item = QListWidgetItem(group)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if opted else Qt.CheckState.Unchecked)
            self.groups.addItem(item)
        self.groups.blockSignals(False)

    def _group_changed(self, item: QListWidgetItem) -> None:
        code = self.task.currentData()
        self._groups[code][item.text()] = item.checkState() == Qt.CheckState.Checked

    def _add_other(self) -> None:
        group = " ".join(self.other.text().split())
        code = self.task.currentData()
        if not group or code is None:
            return
        self._groups[code][group] = True
        self.other.clear()
        self._show_groups()

    def choice(self) -> WellbeingChoice:
        return WellbeingChoice(
            self.blur_validating.isChecked(), self.blur_browsing.isChecked(),
            tuple((code, tuple(g for g, opted in groups.items() if opted)) for code, groups in self._groups.items()),
            self.break_after.value(), self.daily_after.value(), self.short_break.value(), self.long_break.value())

    def opted_out(self, code: str) -> list[GroupChoice]:
        return [GroupChoice(g, opted) for g, opted in self._groups.get(code, {}).items()]

    def _save(self) -> None:
        self.chosen.emit(self.choice())

    def show_saved(self, text: str) -> None:
        self.saved.setText(text)
