"""Dialogs that gather what an import or an export needs. They only collect choices."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from app.views.shell import ExportView, ImportView


def _path_row(line: QLineEdit, browse) -> QWidget:
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(line, 1)
    button = QPushButton("Browse…")
    button.clicked.connect(browse)
    layout.addWidget(button)
    return row


class ImportDialog(QDialog):
    accepted_with = Signal(str, str, object, bool)  # path, format, task code or None, skip bad rows

    def __init__(self, view: ImportView, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Import a data set")
        self.path = QLineEdit(objectName="path", placeholderText="File to import")
        self.format = QComboBox(objectName="format")
        for choice in view.formats:
            self.format.addItem(choice.text, choice.value)
        self.task = QComboBox(objectName="task")
        self.task.addItem("The format's own task", None)
        for choice in view.tasks:
            self.task.addItem(choice.text, choice.value)
        self.skip_bad = QCheckBox("Skip bad rows (otherwise one bad row stops the whole import)", objectName="skip")
        self.problem = QLabel(objectName="problem", styleSheet="color:#b3261e")
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("File", _path_row(self.path, self._browse))
        form.addRow("Format", self.format)
        form.addRow("Into task", self.task)
        form.addRow(self.skip_bad)
        form.addRow(self.problem)
        form.addRow(self.buttons)
        self.resize(640, self.sizeHint().height())

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import", "", "Data sets (*.csv *.jsonl *.json);;All files (*)")
        if path:
            self.path.setText(path)
            if path.endswith((".jsonl", ".json")):
                self.format.setCurrentIndex(max(0, self.format.findData("jsonl")))

    def _accept(self) -> None:
        path = self.path.text().strip()
        if not path:
            self.problem.setText("Choose a file to import.")
            return
        self.accepted_with.emit(path, self.format.currentData(), self.task.currentData(), self.skip_bad.isChecked())
        self.accept()


class ExportDialog(QDialog):
    accepted_with = Signal(str, str, object, bool)  # path, format, task code or None, keep identities

    def __init__(self, view: ExportView, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Export")
        self.path = QLineEdit(objectName="path", placeholderText="File (jsonl, csv) or folder (hf)")
        self.format = QComboBox(objectName="format")
        for text, value in (("Dynadesk JSONL (imports back losslessly)", "jsonl"), ("Flat CSV", "csv"),
                            ("Hugging Face datasets folder", "hf")):
            self.format.addItem(text, value)
        self.task = QComboBox(objectName="task")
        self.task.addItem("All tasks (JSONL only)", None)
        for choice in view.tasks:
            self.task.addItem(choice.text, choice.value)
        if view.current_task:
            self.task.setCurrentIndex(max(0, self.task.findData(view.current_task)))
        self.keep = QCheckBox("Keep real names (only for moving work between your own desks)", objectName="keep")
        self.problem = QLabel(objectName="problem", styleSheet="color:#b3261e")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self._accept)
        buttons.rejected.connect(self.reject)
        form = QFormLayout(self)
        form.addRow("Save to", _path_row(self.path, self._browse))
        form.addRow("Format", self.format)
        form.addRow("Task", self.task)
        form.addRow(self.keep)
        form.addRow(self.problem)
        form.addRow(buttons)
        self.resize(640, self.sizeHint().height())

    def _browse(self) -> None:
        if self.format.currentData() == "hf":
            path = QFileDialog.getExistingDirectory(self, "Export to folder")
        else:
            path, _ = QFileDialog.getSaveFileName(self, "Export to file")
        if path:
            self.path.setText(path)

    def _accept(self) -> None:
        path, format_, task = self.path.text().strip(), self.format.currentData(), self.task.currentData()
        if not path:
            self.problem.setText("Choose where to save the export.")
        elif format_ != "jsonl" and task is None:
            self.problem.setText("CSV and Hugging Face exports hold one task: choose it.")
        else:
            self.accepted_with.emit(path, format_, task, self.keep.isChecked())
            self.accept()
