"""Round ▸ Next round…: train a candidate from the rounds, compare it with the current target, promote
it and publish the new round, as three steps of one dialog.

Data arrives as typed view-models (app/views/next_round.py) through ``show_*`` methods; every request
leaves as a signal. The dialog runs nothing itself: the controller (app/gui/next_round.py) does.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QDialog,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QSpinBox,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.views.next_round import (
    FROM_BASE,
    FROM_TARGET,
    NO_BASE_NOTE,
    BaseColumnsView,
    PromotionView,
    StepProgress,
    TrainChoices,
    TrainSetup,
    imported_choice_text,
    variants_choice_text,
)
from widgets.next_round_compare import BANNER, ComparePage
from widgets.promote_anyway_dialog import PromoteAnywayDialog

STEPS = ("Choose and train", "Compare", "Promote and publish")


class _EnterConfirms(QObject):
    """Enter in a path box confirms what was typed there (``then``), and stops: the dialog's default
    button (Train, or a Browse… that had focus) is not pressed by it."""

    def __init__(self, edit: QLineEdit, then) -> None:
        super().__init__(edit)
        self._then = then
        edit.installEventFilter(self)

    def eventFilter(self, watched, event) -> bool:
        if event.type() == QEvent.Type.KeyPress and event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self._then()
            return True
        return False


def _browse_row(edit: QLineEdit, button: QPushButton) -> QWidget:
    button.setAutoDefault(False)  # Enter elsewhere in the dialog never opens a file chooser
    row = QWidget()
    layout = QHBoxLayout(row)
    layout.setContentsMargins(0, 0, 0, 0)
    layout.addWidget(edit, 1)
    layout.addWidget(button)
    return row


class NextRoundDialog(ComparePage, QDialog):
    train_requested = Signal(object)  # TrainChoices
    cancel_requested = Signal()
    columns_requested = Signal(str)  # a base data file was chosen: its columns, please
    report_requested = Signal()
    promote_requested = Signal(bool, bool, str)  # with_current, force, the reason for forcing ("" when not forced)
    publish_requested = Signal()
    propose_requested = Signal()  # a lead who may not promote proposes the candidate to the owner
    back_requested = Signal()  # from the comparison, back to the training choices
    compare_requested = Signal()  # compare the trained candidate again (after a cancelled or failed comparison)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("next-round-dialog")
        self.setWindowTitle("Next round")
        self.resize(1100, 680)  # fits a 1366×768 screen with its title bar and a taskbar
        self.setMinimumSize(860, 560)
        self._running = False
        self._worse = False
        self._refusal: tuple[str, tuple[str, ...]] = ("", ())  # the rule's sentence and every split's line
        self.promote_anyway: PromoteAnywayDialog | None = None
        self._promote_allowed = True
        self._publish_possible = False
        self._compared = False  # a comparison (or its absence, confirmed) is shown: step 3 may follow

        self.steps = QLabel(objectName="steps")
        self.steps.setTextFormat(Qt.TextFormat.RichText)
        self.pages = QStackedWidget(objectName="pages")
        self.pages.addWidget(self._train_page())
        self.pages.addWidget(self._compare_page())
        self.pages.addWidget(self._promote_page())

        self.progress = QProgressBar(objectName="progress")
        self.progress.setRange(0, 1000)
        self.progress.setTextVisible(False)
        self.step_text = QLabel(objectName="step-text")
        self.eta = QLabel(objectName="eta")
        self.eta.setMinimumWidth(150)
        self.eta.setAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        self.cancel_button = QPushButton("Cancel", objectName="cancel")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.message = QLabel(objectName="message", wordWrap=True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.close_button = QPushButton("Close", objectName="close")
        self.close_button.clicked.connect(self.reject)
        running = QWidget(objectName="running")
        row = QHBoxLayout(running)
        row.setContentsMargins(0, 0, 0, 0)
        row.addWidget(self.progress, 2)
        row.addWidget(self.step_text, 3)
        row.addWidget(self.eta)
        row.addWidget(self.cancel_button)
        self.running_row = running

        layout = QVBoxLayout(self)
        layout.addWidget(self.steps)
        layout.addWidget(self.pages, 1)
        layout.addWidget(self.running_row)
        bottom = QHBoxLayout()
        bottom.addWidget(self.message, 1)
        bottom.addWidget(self.close_button, 0, Qt.AlignmentFlag.AlignBottom)
        layout.addLayout(bottom)
        self.set_running(False)
        self.show_step(0)

    # Step 1 -------------------------------------------------------------------------------------
    def _train_page(self) -> QWidget:
        page = QWidget(objectName="train-page")
        self.rounds = QListWidget(objectName="rounds")
        self.rounds.setSelectionMode(QAbstractItemView.SelectionMode.NoSelection)
        self.rounds.setMaximumHeight(84)
        self.include_undecided = QCheckBox("Also take undecided examples, with their author's label (the manifest "
                                           "records it)", objectName="include-undecided")
        # imported data sets (HateCheck cases as a round, ANLI...) come with gold labels, not verdicts: taken on request
        self.include_imported = QCheckBox(objectName="include-imported")
        self.include_imported.setVisible(False)
        # the adaptive suite's validated variants, amplifying what fooled the target (never of held-out seeds)
        self.train_on_variants = QCheckBox(objectName="train-on-variants")
        self._imported_names: tuple[str, ...] = ()
        self._prefilled = ("", "")  # (the pre-filled base file, the note saying where it came from)
        self._pairs = False  # the task reads (context, text) pairs (set by show_setup)
        rounds_box = QGroupBox("Rounds to learn from (decided examples; held-out ones are never trained on)")
        box = QVBoxLayout(rounds_box)
        box.addWidget(self.rounds)
        box.addWidget(self.include_undecided)
        box.addWidget(self.include_imported)
        box.addWidget(self.train_on_variants)

        self.base_path = QLineEdit(objectName="base-path", placeholderText="Labelled CSV file (optional)")
        self.base_path.editingFinished.connect(self._base_path_confirmed)
        _EnterConfirms(self.base_path, self._base_path_confirmed)
        self._base_path_asked: str | None = None  # the path whose columns were asked for last
        browse = QPushButton("Browse…", objectName="browse-base")
        browse.clicked.connect(self._browse_base)
        self.text_column = QComboBox(objectName="text-column", editable=True)
        self.label_column = QComboBox(objectName="label-column", editable=True)
        # a pair task (NLI) reads (context, text): its base data's context column; hidden for single-text tasks
        self.context_column = QComboBox(objectName="context-column", editable=True)
        self.context_label = QLabel("Context column")
        self.text_label = QLabel("Text column")
        self.label_map = QLineEdit(objectName="label-map",
                                   placeholderText="e.g. 0=hate,1=not hate,2=not hate (empty: the file's labels are the task's)")
        self.html_unescape = QCheckBox("Decode HTML entities (&&amp; …)", objectName="html-unescape")
        self.base_note = QLabel(objectName="base-note", wordWrap=True, styleSheet="color:#555")
        columns = QWidget()
        pair = QHBoxLayout(columns)
        pair.setContentsMargins(0, 0, 0, 0)
        pair.addWidget(self.context_label)
        pair.addWidget(self.context_column, 1)
        pair.addWidget(self.text_label)
        pair.addWidget(self.text_column, 1)
        pair.addWidget(QLabel("Label column"))
        pair.addWidget(self.label_column, 1)
        pair.addWidget(self.html_unescape)
        base_box = QGroupBox("Base data (the model's original training data; round examples are weighted against it)")
        form = QFormLayout(base_box)
        form.addRow("File", _browse_row(self.base_path, browse))
        form.addRow("Columns", columns)
        form.addRow("Label map", self.label_map)
        form.addRow(self.base_note)

        self.from_target = QRadioButton("Warm start from the current target", objectName="from-target")
        self.from_base = QRadioButton("Start from the base encoder", objectName="from-base")
        self.start_group = QButtonGroup(self)
        self.start_group.addButton(self.from_target)
        self.start_group.addButton(self.from_base)
        self.weight_auto = QRadioButton("auto", objectName="weight-auto")
        self.weight_auto.setToolTip("Round examples together carry a quarter of the training loss (the measured "
                                    "default; the manifest records it)")
        self.weight_number = QRadioButton("each round example weighs", objectName="weight-number")
        self.weight_group = QButtonGroup(self)
        self.weight_group.addButton(self.weight_auto)
        self.weight_group.addButton(self.weight_number)
        self.weight = QDoubleSpinBox(objectName="weight", minimum=0.01, maximum=10_000, decimals=2, value=1.0)
        self.weight_number.toggled.connect(self.weight.setEnabled)
        self.epochs = QSpinBox(objectName="epochs", minimum=1, maximum=50, value=3)
        self.seed = QSpinBox(objectName="seed", minimum=0, maximum=2**31 - 1, value=13)
        self.seed.setMinimumWidth(self.seed.fontMetrics().horizontalAdvance("2147483647") + 30)
        self.learning_rate = QLineEdit("2e-4", objectName="learning-rate")
        self.learning_rate.setFixedWidth(self.learning_rate.fontMetrics().horizontalAdvance("0.00025") + 16)
        self.encoder = QLineEdit(objectName="encoder", placeholderText="packaged all-MiniLM-L6-v2, or the one "
                                                                      "the target was trained from")
        self.int8_later = QCheckBox("Prepare the int8 form later: promote on the fp32 form at once, and switch to "
                                    "int8 when its search has passed (in the background)", objectName="int8-later")
        self.int8_later.setToolTip("The int8 search takes minutes on two cores (it is most of a training run's "
                                   "time). Later, the round opens on the slower fp32 form first; the status bar "
                                   "says when it switches.")
        self.suite = QLineEdit(objectName="suite", placeholderText="HateCheck-format CSV (optional)")
        suite_browse = QPushButton("Browse…")
        suite_browse.clicked.connect(lambda: self._browse_into(self.suite, "HateCheck-format suite"))
        start = QWidget()
        line = QHBoxLayout(start)
        line.setContentsMargins(0, 0, 0, 0)
        line.addWidget(self.from_target)
        line.addWidget(self.from_base)
        line.addStretch(1)
        weights = QWidget()
        line = QHBoxLayout(weights)
        line.setContentsMargins(0, 0, 0, 0)
        for widget in (self.weight_auto, self.weight_number, self.weight, QLabel("base examples")):
            line.addWidget(widget)
        line.addStretch(1)
        run = QWidget()
        line = QHBoxLayout(run)
        line.setContentsMargins(0, 0, 0, 0)
        for widget in (QLabel("Epochs"), self.epochs, QLabel("  Learning rate"), self.learning_rate, QLabel("  Seed"),
                       self.seed):
            line.addWidget(widget)
        line.addStretch(1)
        training_box = QGroupBox("Training")
        form = QFormLayout(training_box)
        form.addRow("Start", start)
        form.addRow("Round weight", weights)
        form.addRow("Training run", run)
        form.addRow("Encoder folder", self.encoder)
        form.addRow("int8 form", self.int8_later)
        form.addRow("Also compare on", _browse_row(self.suite, suite_browse))
        self.output_note = QLabel(objectName="output-note", wordWrap=True, styleSheet="color:#555")
        self.output_note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)

        self.train_button = QPushButton("Train", objectName="train")
        self.train_button.setDefault(True)
        self.train_button.clicked.connect(self._train)
        buttons = QHBoxLayout()
        buttons.addWidget(self.output_note, 1)
        buttons.addWidget(self.train_button)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(rounds_box)
        layout.addWidget(base_box)
        layout.addWidget(training_box)
        layout.addStretch(1)
        layout.addLayout(buttons)
        self._inputs = [rounds_box, base_box, training_box]
        return page

    def _browse_into(self, edit: QLineEdit, what: str) -> str:
        path, _ = QFileDialog.getOpenFileName(self, what, edit.text(), "CSV files (*.csv);;All files (*)")
        if path:
            edit.setText(path)
        return path

    def _browse_base(self) -> None:
        if self._browse_into(self.base_path, "Base data"):
            self._base_path_confirmed()

    def _base_path_confirmed(self) -> None:
        path = self.base_path.text().strip()
        if path == self._base_path_asked:  # Enter then leaving the box: asked once
            return
        self._base_path_asked = path
        if path:
            self.columns_requested.emit(path)
        else:
            self.set_columns(BaseColumnsView((), "", "", NO_BASE_NOTE))

    def show_setup(self, setup: TrainSetup) -> None:
        self.setWindowTitle(f"Next round · {setup.task_name}")
        self.rounds.clear()
        for row in setup.rounds:
            item = QListWidgetItem(row.text)
            item.setData(Qt.ItemDataRole.UserRole, row.number)
            flags = Qt.ItemFlag.ItemIsUserCheckable | (Qt.ItemFlag.ItemIsEnabled if row.enabled else Qt.ItemFlag.NoItemFlags)
            item.setFlags(flags)
            item.setCheckState(Qt.CheckState.Checked if row.checked else Qt.CheckState.Unchecked)
            self.rounds.addItem(item)
        self.include_undecided.setChecked(setup.include_undecided)
        self._imported_names = tuple(name for name, _ in setup.imported_sets)
        self.include_imported.setText(imported_choice_text(setup.imported_sets) if setup.imported_sets else "")
        self.include_imported.setVisible(bool(setup.imported_sets))
        self.include_imported.setChecked(False)
        self.train_on_variants.setText(variants_choice_text(setup.validated_variants))
        self.train_on_variants.setEnabled(setup.validated_variants > 0)
        self.train_on_variants.setChecked(setup.train_on_variants)
        self.base_path.setText(setup.base_path)
        self._base_path_asked = setup.base_path  # its columns are asked for by the controller
        self._pairs = bool(setup.context_input)
        self.context_label.setText(f"{setup.context_input} column")
        self.text_label.setText(f"{setup.text_input} column")
        for widget in (self.context_label, self.context_column):
            widget.setVisible(self._pairs)
        for combo, value in ((self.text_column, setup.text_column), (self.label_column, setup.label_column),
                             (self.context_column, setup.context_column)):
            combo.clear()
            combo.setEditText(value)
        self.label_map.setText(setup.label_map)
        self.html_unescape.setChecked(setup.html_unescape)
        self.base_note.setText(setup.base_note)
        # once the pre-filled file's columns are read, the note still says where the file came from
        self._prefilled = (setup.base_path, setup.base_note if setup.base_path else "")
        self.from_target.setEnabled(bool(setup.warm_target))
        self.from_target.setText(f"Warm start from the current target ({setup.warm_target})" if setup.warm_target
                                 else "Warm start from the current target (none trained by Dynadesk)")
        (self.from_target if setup.start_from == FROM_TARGET and setup.warm_target else self.from_base).setChecked(True)
        auto = setup.round_weight == "auto"
        (self.weight_auto if auto else self.weight_number).setChecked(True)
        self.weight.setEnabled(not auto)
        if not auto:
            self.weight.setValue(float(setup.round_weight))
        self.suite.setText(setup.suite)
        self.output_note.setText(f"The candidate is written to a new folder under {setup.candidates_folder}")
        self.set_promote_allowed(setup.promote_reason)
        self._publish_possible = setup.publish_possible
        self.publish_reason.setText(setup.publish_reason)

    def set_columns(self, view: BaseColumnsView, problem: str = "") -> None:
        """The chosen base data file's columns: a column already named (pre-filled, or typed) stays where
        the file has it, else the column found by name; none is guessed by position."""
        columns = list(view.columns)
        for combo, found in ((self.text_column, view.text_column), (self.label_column, view.label_column),
                             (self.context_column, view.context_column)):
            typed = combo.currentText()
            combo.clear()
            combo.addItems(columns)
            combo.setEditText(typed if typed in columns or not columns else found)
        path, prefilled = self._prefilled
        same_file = bool(prefilled) and self.base_path.text().strip() == path
        self.base_note.setText(f"{view.note} {prefilled}" if same_file else view.note)
        if problem:
            self.show_message(problem, error=True)

    def choices(self) -> TrainChoices:
        rounds = tuple(self.rounds.item(i).data(Qt.ItemDataRole.UserRole) for i in range(self.rounds.count())
                       if self.rounds.item(i).checkState() == Qt.CheckState.Checked)
        weight = "auto" if self.weight_auto.isChecked() else f"{self.weight.value():g}"
        return TrainChoices(rounds, self.include_undecided.isChecked(), self.base_path.text().strip(),
                            self.text_column.currentText().strip(), self.label_column.currentText().strip(),
                            self.label_map.text().strip(), self.html_unescape.isChecked(),
                            FROM_TARGET if self.from_target.isChecked() else FROM_BASE, weight,
                            self.suite.text().strip(), self.epochs.value(), self.seed.value(), self.encoder.text().strip(),
                            self.learning_rate.text().strip(),
                            self._imported_names if self.include_imported.isChecked() else (),
                            self.context_column.currentText().strip() if self._pairs else "",
                            self.int8_later.isChecked(),
                            self.train_on_variants.isChecked() and self.train_on_variants.isEnabled())

    def _train(self) -> None:
        self.show_message("")
        self._compared = False  # a new candidate: the last comparison is not its
        self.train_requested.emit(self.choices())

    # Step 2 -------------------------------------------------------------------------------------
    def _promote_page(self) -> QWidget:
        page = QWidget(objectName="promote-page")
        self.promote_intro = QLabel(objectName="promote-intro", wordWrap=True)
        self.headline = QLabel(objectName="headline", wordWrap=True)
        self.refusal = QLabel(objectName="refusal", wordWrap=True, styleSheet=BANNER[True])
        self.refusal.setTextFormat(Qt.TextFormat.RichText)
        self.refusal.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.refusal.setMargin(8)
        self.with_current = QCheckBox("Keep the current target in an ensemble with the candidate", objectName="with-current")
        self.promote_button = QPushButton("Promote", objectName="promote")
        self.promote_button.clicked.connect(self._promote)
        self.propose_button = QPushButton("Propose to the owner…", objectName="propose")
        self.propose_button.clicked.connect(self.propose_requested)
        self.propose_button.setVisible(False)  # shown to a lead of a team whose owner decides
        self.promote_reason = QLabel(objectName="promote-reason", wordWrap=True, styleSheet="color:#b3261e")
        self.summary = QLabel(objectName="summary", wordWrap=True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setAlignment(Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignLeft)
        self.publish_button = QPushButton("Publish to the team", objectName="publish")
        self.publish_button.clicked.connect(self.publish_requested)
        self.publish_reason = QLabel(objectName="publish-reason", wordWrap=True, styleSheet="color:#555")
        self.publish_result = QLabel(objectName="publish-result", wordWrap=True)
        back = QPushButton("◀ Back to the comparison", objectName="back-to-compare")
        back.clicked.connect(lambda: self.show_step(1))
        self.back_to_compare = back
        actions = QHBoxLayout()
        actions.addWidget(back)
        actions.addStretch(1)
        actions.addWidget(self.propose_button)
        actions.addWidget(self.promote_button)
        publish = QHBoxLayout()
        publish.addWidget(self.publish_button, 0, Qt.AlignmentFlag.AlignLeft)
        publish.addWidget(self.publish_reason, 1)
        layout = QVBoxLayout(page)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.promote_intro)
        layout.addWidget(self.headline)
        layout.addWidget(self.refusal)
        layout.addWidget(self.with_current)
        layout.addWidget(self.promote_reason)
        layout.addLayout(actions)
        layout.addWidget(self.summary, 1)
        layout.addLayout(publish)
        layout.addWidget(self.publish_result)
        self.publish_button.setVisible(False)
        self.publish_reason.setVisible(False)
        return page

    def set_promote_allowed(self, reason: str) -> None:
        """Promote is disabled, with ``reason`` shown, for someone who may not promote this candidate."""
        self._promote_allowed = not reason
        self.promote_reason.setText(reason)
        self.promote_reason.setVisible(bool(reason))
        self._set_promote_button()

    def set_propose_available(self, available: bool) -> None:
        """"Propose to the owner…", beside a disabled Promote: a lead of a team whose owner decides."""
        self.propose_button.setVisible(available)

    def show_no_comparison(self, message: str) -> None:
        """Nothing to compare on: Promote needs the same explicit confirmation as over a worse comparison."""
        self.compare_again.setVisible(False)
        self._compared = True
        self.to_promote.setEnabled(not self._running)
        self._worse = True
        self.verdict.setText(f"<b>{escape(message)}</b>")
        self.verdict.setStyleSheet(BANNER[True])
        self.table.setRowCount(0)
        self.headline.setText("")
        self.chart.set_groups(())
        self.notes.setVisible(False)
        self.report_link.setText("")
        self.refusal.setText(f"<b>{escape(message)}</b>")
        self.refusal.setVisible(True)
        self._refusal = (message, ())
        self._set_promote_button()
        self.show_step(1)

    def set_promote_intro(self, text: str) -> None:
        self.promote_intro.setText(text)

    def _set_promote_button(self) -> None:
        self.promote_button.setText("Promote anyway…" if self._worse else "Promote")
        self.promote_button.setEnabled(self._promote_allowed and not self._running)

    def _promote(self) -> None:
        if self._worse:  # refused by the promotion rule: the override asks why, with the figures in view
            self.promote_anyway = PromoteAnywayDialog(*self._refusal, parent=self)
            self.promote_anyway.reason_given.connect(
                lambda reason: self._send_promotion(True, reason))
            self.promote_anyway.open()
            return
        self._send_promotion(False, "")

    def _send_promotion(self, force: bool, reason: str) -> None:
        self.show_message("")
        self.promote_requested.emit(self.with_current.isChecked(), force, reason)

    def show_promotion(self, view: PromotionView) -> None:
        lines = "".join(f"<li>{escape(line)}</li>" for line in view.lines)
        lineage = "".join(f"<li>{escape(line)}</li>" for line in view.lineage)
        self.summary.setText(f"<p><b>Round {view.round_number} is open.</b></p><ul>{lines}</ul>"
                             f"<p><b>Lineage</b> (recorded with the model)</p><ul>{lineage}</ul>")
        for widget in (self.promote_intro, self.headline, self.with_current, self.back_to_compare, self.promote_button,
                       self.refusal):
            widget.setVisible(False)
        self.publish_reason.setText(view.publish_hint)
        self.publish_button.setVisible(self._publish_possible)
        self.publish_button.setEnabled(self._publish_possible)
        self.publish_reason.setVisible(not self._publish_possible)
        self.show_step(2)

    def show_publish_result(self, text: str, error: bool = False) -> None:
        self.publish_result.setText(text)
        self.publish_result.setStyleSheet("color:#b3261e" if error else "color:#1b5e20")
        self.publish_button.setEnabled(error)  # a failed publish may be tried again

    # Shared -------------------------------------------------------------------------------------
    def show_step(self, index: int) -> None:
        self.pages.setCurrentIndex(index)
        parts = [f"<b>{i + 1}. {escape(name)}</b>" if i == index else f"<span style='color:#777'>{i + 1}. "
                 f"{escape(name)}</span>" for i, name in enumerate(STEPS)]
        self.steps.setText("&nbsp;&nbsp;›&nbsp;&nbsp;".join(parts))

    def step(self) -> int:
        return self.pages.currentIndex()

    def set_running(self, running: bool, text: str = "") -> None:
        """A step runs (inputs locked, Cancel offered) or nothing runs."""
        self._running = running
        for widget in self._inputs:
            widget.setEnabled(not running)
        self.train_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.to_promote.setEnabled(not running and self._compared)
        self.compare_again.setEnabled(not running)
        self.running_row.setVisible(running)
        if running:
            self.show_progress(StepProgress(None, text, "estimating…"))
        self._set_promote_button()

    def is_running(self) -> bool:
        return self._running

    def show_progress(self, progress: StepProgress) -> None:
        if progress.fraction is None:
            self.progress.setRange(0, 0)
        else:
            self.progress.setRange(0, 1000)
            self.progress.setValue(int(progress.fraction * 1000))
        self.step_text.setText(progress.text)
        self.eta.setText(progress.eta)

    def show_message(self, text: str, error: bool = False) -> None:
        self.message.setText(text)
        self.message.setStyleSheet("color:#b3261e" if error else "color:#1b5e20")

    def reject(self) -> None:
        """Closing while a step runs cancels it first (nothing half-written stays)."""
        if self._running:
            self.cancel_requested.emit()
        super().reject()
