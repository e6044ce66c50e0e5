"""The round dialog: a lead sets up a round (models, goal, contexts); an annotator reads it.

Data arrives as typed view-models (app.views.rounds) through :meth:`RoundDialog.set_rounds` and
:meth:`RoundDialog.show_round`; every change leaves as a signal. The dialog never stores anything itself.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QPlainTextEdit,
    QPushButton,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.core.domain import FooledRule
from app.views.rounds import ASSISTANT_CHOICES, ContextRow, RoundChanges, RoundItem, RoundView

LABEL_STARTS = [("Blank: the annotator chooses", "blank"), ("Fixed label", "fixed"),
                ("Random, balancing labels", "random")]
POLICIES = [("Least used first", "least_used"), ("Uniform random (each once per pass)", "random"),
            ("Least fooled so far", "least_fooled")]
FOOLED_RULES = [("Ensemble mean", FooledRule.MEAN.value), ("Every member fooled", FooledRule.ALL.value),
                ("Any member fooled", FooledRule.ANY.value)]


def _combo(name: str, items) -> QComboBox:
    combo = QComboBox(objectName=name)
    for text, value in items:
        combo.addItem(text, value)
    return combo


class RoundDialog(QDialog):
    round_selected = Signal(object)  # round id
    save_requested = Signal(object, object)  # round id, RoundChanges
    models_requested = Signal(object, list)  # round id, model ids in order
    close_requested = Signal(object)
    open_next_requested = Signal(list, str, str)  # model ids, description, goal message
    import_requested = Signal(object, str, str, str)  # round id, path, column, tag

    def __init__(self, task_name: str, labels: tuple[str, ...], editable: bool, parent=None):
        super().__init__(parent)
        self.setWindowTitle(f"Rounds · {task_name}")
        self.editable = editable
        self._round_id = None
        self._round_open = False

        self.rounds = QListWidget(objectName="rounds")
        self.rounds.currentItemChanged.connect(self._round_clicked)
        self.status = QLabel(objectName="status")
        self.description = QPlainTextEdit(objectName="description")
        self.description.setMaximumHeight(70)
        self.goal = QLineEdit(objectName="goal", placeholderText="What annotators should aim for in this round")
        self.fooled_rule = _combo("fooled_rule", FOOLED_RULES)
        self.label_start = _combo("label_start", LABEL_STARTS)
        self.fixed_label = _combo("fixed_label", [(label, label) for label in labels])
        self.keep_label = QCheckBox("Keep the goal label after a submit", objectName="keep_label")
        self.policy = _combo("policy", POLICIES)
        self.tag = QLineEdit(objectName="tag", placeholderText="all tags")
        self.assistant = _combo("assistant", ASSISTANT_CHOICES)
        self.assistant.setToolTip("Suggested edits, each checked against the target. A-B: a fair comparison of "
                                  "assisted and unassisted sessions (Dashboard).")
        self.label_start.currentIndexChanged.connect(
            lambda: self.fixed_label.setEnabled(self.editable and self.label_start.currentData() == "fixed"))

        self.models = QListWidget(objectName="models")
        self.models.setDragDropMode(QAbstractItemView.DragDropMode.InternalMove)  # order = ensemble order
        self.models.setWordWrap(True)  # long names and the int8 check's line stay readable in the narrow column
        self.contexts = QTableWidget(0, 5, objectName="contexts")
        self.contexts.setHorizontalHeaderLabels(["Context", "Tag", "Served", "Examples", "Fooling rate"])
        header = self.contexts.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.contexts.verticalHeader().setVisible(False)
        self.contexts.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.context_count = QLabel(objectName="context_count")
        self.import_path = QLineEdit(objectName="import_path", placeholderText="Text (one per line), CSV or JSONL file")
        self.import_column = QLineEdit(objectName="import_column", placeholderText="CSV column")
        self.import_tag = QLineEdit(objectName="import_tag", placeholderText="tag")
        self.problem = QLabel(objectName="problem", styleSheet="color:#b3261e", wordWrap=True)

        self.save_button = QPushButton("Save settings", objectName="save")
        self.save_button.clicked.connect(self._save)
        self.models_button = QPushButton("Use checked models", objectName="use_models")
        self.models_button.clicked.connect(self._use_models)
        self.close_button = QPushButton("Close round", objectName="close_round")
        self.close_button.clicked.connect(lambda: self.close_requested.emit(self._round_id))
        self.next_button = QPushButton("Open next round with checked models", objectName="open_next")
        self.next_button.clicked.connect(self._open_next)
        self.import_button = QPushButton("Import contexts", objectName="import")
        self.import_button.clicked.connect(self._import)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)

        settings = QGroupBox("Round")
        form = QFormLayout(settings)
        form.addRow(self.status)
        form.addRow("Description", self.description)
        form.addRow("Goal message", self.goal)
        form.addRow("Goal label starts", self.label_start)
        form.addRow("Fixed label", self.fixed_label)
        form.addRow("", self.keep_label)
        form.addRow("Next context", self.policy)
        form.addRow("Only contexts tagged", self.tag)
        form.addRow("Ensemble fooled when", self.fooled_rule)
        form.addRow("Writing assistant", self.assistant)
        form.addRow(self.save_button)
        models_box = QGroupBox("Target models (check; drag to order the ensemble)")
        models_layout = QVBoxLayout(models_box)
        models_layout.addWidget(self.models)
        models_layout.addWidget(self.models_button)
        contexts_box = QGroupBox("Contexts and prompts")
        contexts_layout = QVBoxLayout(contexts_box)
        contexts_layout.addWidget(self.context_count)
        contexts_layout.addWidget(self.contexts, 1)
        import_row = QHBoxLayout()
        for widget, stretch in ((self.import_path, 3), (browse, 0), (self.import_column, 1), (self.import_tag, 1),
                                (self.import_button, 0)):
            import_row.addWidget(widget, stretch)
        self.import_row = QWidget()
        self.import_row.setLayout(import_row)
        contexts_layout.addWidget(self.import_row)

        right = QWidget()
        right_layout = QVBoxLayout(right)
        top = QHBoxLayout()
        top.addWidget(settings, 3)
        top.addWidget(models_box, 2)
        right_layout.addLayout(top)
        right_layout.addWidget(contexts_box, 1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.problem, 1)
        buttons.addWidget(self.close_button)
        buttons.addWidget(self.next_button)
        right_layout.addLayout(buttons)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(self.rounds)
        splitter.addWidget(right)
        self.rounds.setMaximumWidth(180)
        splitter.setSizes([120, 1000])
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self.resize(1150, 720)
        self._apply_editable()

    def _apply_editable(self) -> None:
        for widget in (self.description, self.goal, self.fooled_rule, self.label_start, self.keep_label,
                       self.policy, self.tag, self.assistant, self.models):
            widget.setEnabled(self.editable)
        self.description.setReadOnly(not self.editable)
        self.fixed_label.setEnabled(self.editable and self.label_start.currentData() == "fixed")
        for widget in (self.save_button, self.models_button, self.close_button, self.next_button, self.import_row):
            widget.setVisible(self.editable)

    def set_rounds(self, rounds: tuple[RoundItem, ...], select_id=None) -> None:
        self.rounds.blockSignals(True)
        self.rounds.clear()
        for round_ in rounds:
            item = QListWidgetItem(round_.text)
            item.setData(Qt.ItemDataRole.UserRole, round_.id)
            self.rounds.addItem(item)
            if round_.id == select_id:
                self.rounds.setCurrentItem(item)
        if self.rounds.currentItem() is None and self.rounds.count():
            self.rounds.setCurrentRow(self.rounds.count() - 1)
        self.rounds.blockSignals(False)
        if self.rounds.currentItem() is not None:
            self.round_selected.emit(self.rounds.currentItem().data(Qt.ItemDataRole.UserRole))

    def show_round(self, view: RoundView) -> None:
        if view.id != self._round_id:
            self.problem.clear()  # a message belongs to the round it was about
        self._round_id = view.id
        self._round_open = view.is_open
        self.status.setText(view.heading)
        self.description.setPlainText(view.description)
        self.goal.setText(view.goal_message)
        for combo, value in ((self.fooled_rule, view.fooled_rule.value), (self.label_start, view.label_start),
                             (self.policy, view.context_policy), (self.fixed_label, view.fixed_label),
                             (self.assistant, view.assistant)):
            index = combo.findData(value)
            if index >= 0:
                combo.setCurrentIndex(index)
        self.keep_label.setChecked(view.keep_label_after_submit)
        self.tag.setText(view.context_tag)
        self.models.clear()
        for model in view.models:
            item = QListWidgetItem(model.text)
            item.setToolTip(model.tooltip)
            item.setData(Qt.ItemDataRole.UserRole, model.id)
            item.setFlags(item.flags() | Qt.ItemFlag.ItemIsUserCheckable)
            item.setCheckState(Qt.CheckState.Checked if model.checked else Qt.CheckState.Unchecked)
            self.models.addItem(item)
        self.show_contexts(view.contexts, view.context_count)
        self.models_button.setEnabled(self._round_open)
        self.close_button.setEnabled(self._round_open)
        self.import_button.setEnabled(True)

    def show_contexts(self, rows: tuple[ContextRow, ...], count: str) -> None:
        self.context_count.setText(count)
        self.contexts.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate((row.text, row.tag, row.served, row.examples, row.fooling_rate)):
                item = QTableWidgetItem(value)
                if c == 0:
                    item.setToolTip(row.tooltip)
                self.contexts.setItem(r, c, item)

    def show_problem(self, text: str) -> None:
        self.problem.setStyleSheet("color:#b3261e")
        self.problem.setText(text)

    def show_note(self, text: str) -> None:
        self.problem.setStyleSheet("color:#1e6b35")
        self.problem.setText(text)

    def checked_models(self) -> list:
        return [self.models.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.models.count())
                if self.models.item(i).checkState() == Qt.CheckState.Checked]

    def _round_clicked(self, current, _previous) -> None:
        if current is not None:
            self.round_selected.emit(current.data(Qt.ItemDataRole.UserRole))

    def _save(self) -> None:
        fixed = self.label_start.currentData() == "fixed"
        self.save_requested.emit(self._round_id, RoundChanges(
            description=self.description.toPlainText(),
            goal_message=self.goal.text(),
            fooled_rule=FooledRule(self.fooled_rule.currentData()),
            label_start=self.label_start.currentData(),
            fixed_label=self.fixed_label.currentData() if fixed else None,
            keep_label_after_submit=self.keep_label.isChecked(),
            context_policy=self.policy.currentData(),
            context_tag=self.tag.text().strip() or None,
            assistant=self.assistant.currentData(),
        ))

    def _use_models(self) -> None:
        if not self.checked_models():
            self.show_problem("Check at least one target model.")
            return
        self.models_requested.emit(self._round_id, self.checked_models())

    def _open_next(self) -> None:
        if not self.checked_models():
            self.show_problem("Check the target model(s) of the next round first.")
            return
        self.open_next_requested.emit(self.checked_models(), "", self.goal.text())

    def _browse(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, "Import contexts", "", "Contexts (*.txt *.csv *.jsonl);;All files (*)")
        if path:
            self.import_path.setText(path)

    def _import(self) -> None:
        path = self.import_path.text().strip()
        if not path:
            self.show_problem("Choose a file of contexts to import.")
            return
        self.import_requested.emit(self._round_id, path, self.import_column.text().strip(), self.import_tag.text().strip())
