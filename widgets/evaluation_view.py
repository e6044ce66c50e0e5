"""The Evaluate tab: pick models and data, run, and read the results (a view only).

Data comes in as typed view-models (app/views/evaluation.py) from the controller
(app/gui/evaluation.py), text already formatted; the view asks for work through signals carrying
typed values. Charts are pyqtgraph bar charts.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QProgressBar,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QTreeWidget,
    QTreeWidgetItem,
    QTreeWidgetItemIterator,
    QVBoxLayout,
    QWidget,
)

from app.views.evaluation import (
    AccuracyBar,
    DetailsView,
    EvaluationSettings,
    FailingCase,
    Grid,
    ModelChoice,
    OverviewView,
    Weight,
)
from widgets.leaderboard_view import LeaderboardPanel
from widgets.page_tabs import ColumnScroll


def shade(value) -> QColor:
    """Red (0) through yellow to green (1), light enough for black text."""
    if value is None:
        return QColor("#eeeeee")
    v = max(0.0, min(1.0, float(value)))
    if v < 0.5:
        return QColor(240, int(140 + v * 180), 160)
    return QColor(int(240 - (v - 0.5) * 220), 230, 160)


class BarChart(pg.PlotWidget):
    """Horizontal bars of accuracies (0..100 %), one row per named item, worst at the top."""

    def __init__(self, title: str, parent=None):
        super().__init__(parent, background="w")
        self.setObjectName(title.lower().replace(" ", "-"))
        self.setMenuEnabled(False)
        self.setMouseEnabled(x=False, y=False)
        self.hideButtons()
        self.plotItem.setTitle(title, color="#222", size="10pt")
        self.plotItem.showGrid(x=True, y=False, alpha=0.3)
        self.plotItem.getAxis("bottom").setLabel("accuracy (%)")
        for axis in ("left", "bottom"):
            self.plotItem.getAxis(axis).setTextPen("#222")
            self.plotItem.getAxis(axis).setPen("#888")
        self.items: list[tuple[str, float]] = []

    def show_bars(self, bars: Sequence[AccuracyBar]) -> None:
        """A row per bar, in the order given (top first)."""
        self.plotItem.clear()
        self.items = [(bar.name, bar.accuracy) for bar in bars]
        n = len(bars)
        if not n:
            return
        ys = [n - 1 - i for i in range(n)]
        values = [100 * (bar.accuracy or 0.0) for bar in bars]
        brushes = [QBrush(shade(bar.accuracy)) for bar in bars]
        self.plotItem.addItem(pg.BarGraphItem(x0=[0] * n, y=ys, height=0.72, width=values, brushes=brushes,
                                              pen=pg.mkPen("#777", width=0.5)))
        for y, bar in zip(ys, bars):
            label = pg.TextItem(bar.label, color="#222", anchor=(0, 0.5))
            label.setPos(100 * (bar.accuracy or 0.0) + 1, y)  # right of the bar; the axis leaves room up to 125
            self.plotItem.addItem(label)
        self.plotItem.getAxis("left").setTicks([[(y, bar.name) for y, bar in zip(ys, bars)]])
        self.plotItem.getAxis("bottom").setTicks([[(x, str(x)) for x in range(0, 101, 20)]])
        self.plotItem.setXRange(0, 125, padding=0)
        self.plotItem.setYRange(-0.6, n - 0.4, padding=0)
        self.setMinimumHeight(70 + 20 * n)


class EvaluationView(QWidget):
    run_requested = Signal(EvaluationSettings)
    cancel_requested = Signal()
    model_changed = Signal(str)  # the model whose details to show
    set_changed = Signal(str)  # the evaluation set whose details to show
    case_opened = Signal(FailingCase)  # to open in the workspace
    report_requested = Signal()

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("evaluation")
        self.models = QTreeWidget(objectName="models")  # a model held in several formats lists them under it
        self.models.setHeaderHidden(True)
        self.models.setIndentation(16)
        self.models.setMinimumHeight(120)
        self.models.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # "Hate speech R1 (Mini…, ONNX fp32"
        self.models.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.rounds = QCheckBox("Every round's validated examples", objectName="rounds", checked=True)
        self.suite = QLineEdit(objectName="suite", placeholderText="HateCheck-format CSV (optional)")
        self.data = QLineEdit(objectName="data", placeholderText="Labelled CSV or JSONL (optional)")
        self.training = QLineEdit(objectName="training-data",
                                  placeholderText="Training data, for the overlap check (optional)")
        self.training.setToolTip("The models' training file (CSV or JSONL), when their records do not say "
                                 "where it is. Test cases found in it are reported in red.")
        self.identity_swap = QCheckBox("Identity swap (fairness)", objectName="identity-swap", checked=True)
        self.robustness = QCheckBox("Spelling perturbations (robustness)", objectName="robustness", checked=True)
        self.weights: dict[str, QDoubleSpinBox] = {}  # per dimension of the score (show_weights)
        self._weights_form = weights_form = QFormLayout()
        self.run_button = QPushButton("&Evaluate", objectName="run")
        self.run_button.setDefault(True)
        self.cancel_button = QPushButton("Cancel", objectName="cancel", enabled=False)
        self.progress = QProgressBar(objectName="progress", minimum=0, maximum=100, value=0, textVisible=True)
        self.status = QLabel(objectName="status", wordWrap=True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)

        setup = QWidget(objectName="evaluation-setup")
        form = QVBoxLayout(setup)
        intro = QLabel("<b>Models</b> (tick one or more; a round's targets answer as an ensemble)", wordWrap=True)
        form.addWidget(intro)
        form.addWidget(self.models, 1)
        form.addWidget(QLabel("<b>Data</b>"))
        form.addWidget(self.rounds)
        form.addLayout(self._file_row(self.suite, "Suite…", "Choose a HateCheck-format suite", "CSV files (*.csv)"))
        form.addLayout(self._file_row(self.data, "Data…", "Choose a labelled data set",
                                      "Data (*.csv *.jsonl *.ndjson)"))
        form.addLayout(self._file_row(self.training, "Training…", "Choose the models' training data",
                                      "Data (*.csv *.jsonl *.ndjson)"))
        form.addWidget(self.identity_swap)
        form.addWidget(self.robustness)
        weights = QGroupBox("Score weights", objectName="weights")
        weights.setLayout(weights_form)
        form.addWidget(weights)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        form.addLayout(buttons)
        form.addWidget(self.progress)
        form.addWidget(self.status)
        setup.setMinimumWidth(300)
        setup.setMaximumWidth(420)

        self.warnings = QLabel(objectName="warnings", wordWrap=True)
        self.warnings.setTextFormat(Qt.TextFormat.PlainText)
        self.warnings.setStyleSheet("background:#fde2e1;border:2px solid #c62828;color:#7f1010;"
                                    "font-weight:bold;padding:6px;")
        self.warnings.hide()
        self.model_choice = QComboBox(objectName="result-model")
        self.model_choice.currentIndexChanged.connect(lambda _: self.model_changed.emit(self.model_choice.currentData() or ""))
        self.set_choice = QComboBox(objectName="result-set")
        self.set_choice.currentIndexChanged.connect(lambda _: self.set_changed.emit(self.set_choice.currentData() or ""))
        self.report_button = QPushButton("Open HTML report", objectName="open-report", enabled=False)
        self.report_button.clicked.connect(self.report_requested)
        choosers = QHBoxLayout()
        choosers.addWidget(QLabel("Model:"))
        choosers.addWidget(self.model_choice, 2)
        choosers.addWidget(QLabel("Set:"))
        choosers.addWidget(self.set_choice, 2)
        choosers.addWidget(self.report_button)

        self.summary = self._table("summary")
        self.dimensions = QLabel(objectName="dimensions", wordWrap=True)
        self.dimensions.setTextFormat(Qt.TextFormat.RichText)
        summary_page = QWidget()
        summary_layout = QVBoxLayout(summary_page)
        summary_layout.addWidget(self.summary, 1)
        summary_layout.addWidget(self.dimensions)
        self.matrix = self._table("matrix")
        self.functionality_chart = BarChart("Accuracy per functionality")
        self.target_chart = BarChart("Accuracy per target group")
        self.set_figures = QLabel(objectName="set-figures", wordWrap=True)
        self.set_figures.setTextFormat(Qt.TextFormat.RichText)
        charts = QWidget()
        charts_layout = QVBoxLayout(charts)
        charts_layout.addWidget(self.set_figures)
        charts_layout.addWidget(self.functionality_chart)
        charts_layout.addWidget(self.target_chart)
        charts_scroll = QScrollArea(objectName="charts", widgetResizable=True)
        charts_scroll.setWidget(charts)
        self.failing = self._table("failing")
        self.failing.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.failing.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.failing.itemActivated.connect(self._open_case)  # double-click or Enter
        failing_page = QWidget()
        failing_layout = QVBoxLayout(failing_page)
        failing_layout.addWidget(QLabel("Double-click a case (or press Enter) to open it in Create with its "
                                        "attributions, as the start of a new example.", wordWrap=True))
        failing_layout.addWidget(self.failing, 1)
        self.leaderboard = LeaderboardPanel()  # every model the task has had on every round: no run needed
        self._summary_page, self._failing_page = summary_page, failing_page
        self.result_tabs = QTabWidget(objectName="result-tabs")
        self.result_tabs.addTab(self.leaderboard, "Leaderboard")
        self.result_tabs.addTab(summary_page, "Summary")
        self.result_tabs.addTab(self.matrix, "Rounds × models")
        self.result_tabs.addTab(charts_scroll, "Per functionality")
        self.result_tabs.addTab(failing_page, "Failing cases")
        results = QWidget(objectName="evaluation-results")
        results_layout = QVBoxLayout(results)
        results_layout.addWidget(self.warnings)
        results_layout.addLayout(choosers)
        results_layout.addWidget(self.result_tabs, 1)

        splitter = QSplitter(Qt.Orientation.Horizontal, objectName="evaluation-splitter")
        # the long set-up column scrolls on a laptop screen; the results keep their place
        splitter.addWidget(ColumnScroll(setup, "evaluation-setup-scroll"))
        splitter.addWidget(results)
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self.run_button.clicked.connect(self._run_clicked)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.failing_rows: tuple[FailingCase, ...] = ()
        self.set_running(False)

    def _file_row(self, edit: QLineEdit, text: str, title: str, filters: str) -> QHBoxLayout:
        row = QHBoxLayout()
        row.addWidget(edit, 1)
        button = QPushButton(text, objectName=f"browse-{edit.objectName()}")

        def browse() -> None:
            path, _ = QFileDialog.getOpenFileName(self, title, edit.text(), filters)
            if path:
                edit.setText(path)

        button.clicked.connect(browse)
        row.addWidget(button)
        return row

    @staticmethod
    def _table(name: str) -> QTableWidget:
        table = QTableWidget(objectName=name)
        table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        table.verticalHeader().hide()
        table.setWordWrap(False)
        table.setAlternatingRowColors(True)
        table.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        return table

    @staticmethod
    def _fill(table: QTableWidget, grid: Grid, stretch: int | None = None, max_width: int = 320) -> None:
        headers, rows = list(grid.headers), grid.rows
        table.clear()
        table.setColumnCount(len(headers))
        table.setRowCount(len(rows))
        table.setHorizontalHeaderLabels(headers)
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                item = QTableWidgetItem(value.text)
                if value.right:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if value.shade is not None:
                    item.setBackground(QBrush(shade(value.shade)))
                    item.setForeground(QBrush(QColor("#111")))
                table.setItem(r, c, item)
        table.resizeColumnsToContents()
        header = table.horizontalHeader()
        for column in range(len(headers)):  # long model names are elided in the middle, whole in the tooltip
            if table.columnWidth(column) > max_width:
                table.setColumnWidth(column, max_width)
            table.horizontalHeaderItem(column).setToolTip(headers[column])
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                if len(value.text) > 40:
                    table.item(r, c).setToolTip(value.text)
        if stretch is not None and headers:
            header.setSectionResizeMode(stretch, QHeaderView.ResizeMode.Stretch)

    def show_weights(self, weights: Sequence[Weight]) -> None:
        """A box per dimension of the score, at its default weight."""
        for weight in weights:
            if weight.dimension in self.weights:
                continue
            box = QDoubleSpinBox(objectName=f"weight-{weight.dimension}", minimum=0.0, maximum=100.0,
                                 singleStep=0.5, value=weight.default, decimals=1)
            self.weights[weight.dimension] = box
            self._weights_form.addRow(weight.title, box)

    def show_models(self, models: Sequence[ModelChoice]) -> None:
        """The model choices; a choice with formats (one per format of one model) lists them under
        its name. What the user ticked stays ticked."""
        checked = set(self.checked_models())
        self.models.clear()

        def add(parent, model: ModelChoice) -> QTreeWidgetItem:
            item = QTreeWidgetItem(parent, [model.name])
            item.setToolTip(0, model.detail)
            item.setData(0, Qt.ItemDataRole.UserRole, model.key)
            flags = item.flags() | Qt.ItemFlag.ItemIsUserCheckable
            item.setFlags(flags | Qt.ItemFlag.ItemIsAutoTristate if model.formats else flags)
            if not model.formats:
                on = model.key in checked if checked else model.checked
                item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)
            else:
                item.setCheckState(0, Qt.CheckState.Unchecked)
            for child in model.formats:
                add(item, child)
            return item

        for model in models:
            add(self.models, model)
        self.models.expandAll()

    def _leaves(self) -> list[QTreeWidgetItem]:
        """The choices that name something to evaluate (a model's formats, not the model above them)."""
        leaves, it = [], QTreeWidgetItemIterator(self.models)
        while it.value():
            if it.value().childCount() == 0:
                leaves.append(it.value())
            it += 1
        return leaves

    def model_entries(self) -> list[tuple[str, list[str]]]:
        """(name, the names of its formats) per entry of the model list, as shown."""
        top = [self.models.topLevelItem(i) for i in range(self.models.topLevelItemCount())]
        return [(t.text(0), [t.child(j).text(0) for j in range(t.childCount())]) for t in top]

    def model_keys(self) -> list[str]:
        return [item.data(0, Qt.ItemDataRole.UserRole) for item in self._leaves()]

    def checked_models(self) -> list[str]:
        return [item.data(0, Qt.ItemDataRole.UserRole) for item in self._leaves()
                if item.checkState(0) == Qt.CheckState.Checked]

    def check_model(self, key: str, on: bool = True) -> None:
        for item in self._leaves():
            if item.data(0, Qt.ItemDataRole.UserRole) == key:
                item.setCheckState(0, Qt.CheckState.Checked if on else Qt.CheckState.Unchecked)

    def settings(self) -> EvaluationSettings:
        return EvaluationSettings(
            models=tuple(self.checked_models()), rounds=self.rounds.isChecked(), suite=self.suite.text().strip(),
            data=self.data.text().strip(), training_data=self.training.text().strip(),
            identity_swap=self.identity_swap.isChecked(), robustness=self.robustness.isChecked(),
            weights=tuple((name, box.value()) for name, box in self.weights.items()))

    def _run_clicked(self) -> None:
        settings = self.settings()
        if not settings.models:
            self.set_status("Tick at least one model to evaluate.", error=True)
            return
        if not (settings.rounds or settings.suite or settings.data):
            self.set_status("Choose what to evaluate on: the rounds, a suite or a data file.", error=True)
            return
        self.run_requested.emit(settings)

    def set_running(self, running: bool) -> None:
        self.run_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        if running:
            self.progress.setValue(0)

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setMaximum(max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))

    def set_status(self, text: str, *, error: bool = False) -> None:
        self.status.setStyleSheet("color:#b3261e;" if error else "")
        self.status.setText(text)

    def set_report_ready(self, ready: bool) -> None:
        self.report_button.setEnabled(ready)

    def current_set(self) -> str:
        """The key of the evaluation set whose details are shown ("" before any result)."""
        return self.set_choice.currentData() or ""

    def show_overview(self, overview: OverviewView) -> None:
        """Warnings, the summary table, the round matrix and the model and set choices."""
        self.warnings.setText("\n".join(overview.warnings))
        self.warnings.setVisible(bool(overview.warnings))
        self._fill(self.summary, overview.summary)
        self.dimensions.setText(overview.explanation)
        self._fill(self.matrix, overview.matrix)
        self.report_button.setEnabled(overview.report)
        for combo, choices in ((self.model_choice, overview.models), (self.set_choice, overview.sets)):
            combo.blockSignals(True)
            combo.clear()
            for choice in choices:
                combo.addItem(choice.name, choice.key)
            combo.blockSignals(False)
        self.set_choice.setCurrentIndex(overview.preferred_set)
        if self.result_tabs.currentWidget() is self.leaderboard:  # a run just ended: its results first
            self.result_tabs.setCurrentWidget(self._summary_page)

    def show_details(self, details: DetailsView) -> None:
        """One model on one set: figures, charts and failing cases."""
        self.set_figures.setText(details.figures)
        self.functionality_chart.setVisible(bool(details.functionalities))
        self.functionality_chart.show_bars(details.functionalities)
        self.target_chart.setVisible(bool(details.targets))
        self.target_chart.show_bars(details.targets)
        self.failing_rows = details.failing
        self._fill(self.failing, details.failing_table, stretch=3, max_width=2000)
        self.result_tabs.setTabText(self.result_tabs.indexOf(self._failing_page), f"Failing cases ({len(details.failing)})")

    def _open_case(self, item: QTableWidgetItem) -> None:
        row = item.row()
        if 0 <= row < len(self.failing_rows):
            self.case_opened.emit(self.failing_rows[row])
