"""Choosing who works at this desk, or adding a profile."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPushButton,
    QVBoxLayout,
)

from app.core.domain import Role
from app.views.shell import ProfilesView
from app.views.wellbeing import WellbeingSectionView
from widgets.wellbeing_section import WellbeingSection


class ProfileDialog(QDialog):
    chosen = Signal(str)  # person id
    created = Signal(str, object)  # display name, Role

    def __init__(self, view: ProfilesView, parent=None, wellbeing: WellbeingSectionView | None = None,
                 working: str = ""):
        """``wellbeing``: the working person's choices (``working``: their name), or None without one."""
        super().__init__(parent)
        self.setWindowTitle("Profile")
        self.people = QListWidget()
        self.people.setObjectName("people")
        for person in view.people:
            item = QListWidgetItem(person.text)
            item.setData(Qt.ItemDataRole.UserRole, person.value)
            self.people.addItem(item)
            if person.value == view.current_id:
                self.people.setCurrentItem(item)
        self.people.itemDoubleClicked.connect(lambda *_: self._choose())
        self.name = QLineEdit(placeholderText="Display name")
        self.name.setObjectName("name")
        self.role = QComboBox()
        self.role.setObjectName("role")
        self.role.addItems([role.value for role in view.roles])
        self.problem = QLabel()
        self.problem.setObjectName("problem")
        self.problem.setStyleSheet("color:#b3261e")
        add = QPushButton("Add and switch")
        add.setObjectName("add")
        add.clicked.connect(self._create)
        new_box = QGroupBox("New profile")
        form = QFormLayout(new_box)
        form.addRow("Name", self.name)
        form.addRow("Role", self.role)
        row = QHBoxLayout()
        row.addWidget(self.problem, 1)
        row.addWidget(add)
        form.addRow(row)
        if view.can_switch:
            buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
            buttons.button(QDialogButtonBox.StandardButton.Ok).setText("Switch")
            buttons.accepted.connect(self._choose)
        else:
            buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
            self.people.itemDoubleClicked.disconnect()
        buttons.rejected.connect(self.reject)
        left = QVBoxLayout()
        left.addWidget(QLabel("Who is working at this desk?" if view.can_switch else "Working at this desk"))
        left.addWidget(self.people)
        if view.can_switch:
            left.addWidget(new_box)
        else:
            self.people.setMaximumHeight(self.people.sizeHintForRow(0) * 2 + 8)  # one person: the note has the room
            note = QLabel(view.team_note, wordWrap=True)
            note.setObjectName("team-note")
            note.setMinimumWidth(240)
            note.setTextFormat(Qt.TextFormat.PlainText)
            left.addWidget(note)
            left.addStretch(1)
            new_box.hide()
        columns = QHBoxLayout()
        columns.addLayout(left, 1)
        self.wellbeing = WellbeingSection(wellbeing, working) if wellbeing is not None else None
        if self.wellbeing is not None:
            columns.addWidget(self.wellbeing, 2)
        layout = QVBoxLayout(self)
        layout.addLayout(columns)
        layout.addWidget(buttons)

    def _choose(self) -> None:
        item = self.people.currentItem()
        if item is None:
            self.problem.setText("Choose a profile, or add one.")
            return
        self.chosen.emit(item.data(Qt.ItemDataRole.UserRole))
        self.accept()

    def _create(self) -> None:
        name = " ".join(self.name.text().split())
        if not name:
            self.problem.setText("A profile needs a name.")
            return
        self.created.emit(name, Role(self.role.currentText()))
        self.accept()
