"""The review dashboard: filters, the per-annotator table, a breakdown, agreement among
validators and charts. A view only: figures come in through :meth:`DashboardView.show_figures`
as a typed, formatted :class:`app.views.dashboard.FiguresView`; what the user asks for goes out as
signals (the filter as :class:`app.views.dashboard.FilterValues`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFileDialog,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QMenu,
    QPushButton,
    QSplitter,
    QTabWidget,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.views.dashboard import (
    AgreementView,
    FiguresView,
    FilterChoices,
    FilterValues,
    Line,
    facet_values,
)
from widgets.assistant_split_view import AssistantSplitPanel
from widgets.charts import BarChart, ChartFrame, LineChart
from widgets.elided_label import ElidedLabel
from widgets.exposure_view import ExposureView
from widgets.figure_table import FigureTableModel
from widgets.figure_table import figure_table as _table
from widgets.flow_layout import FlowLayout
from widgets.page_tabs import PageScroll
from widgets.quality_view import QualityView

PERIODS = [("All time", None), ("Last 7 days", 7), ("Last 30 days", 30), ("Last 90 days", 90)]


def _heading(text: str) -> QLabel:
    label = QLabel(f"<b>{escape(text)}</b>")
    return label


class DashboardView(QWidget):
    filters_changed = Signal(FilterValues)
    breakdown_changed = Signal(str)
    chart_people_changed = Signal(tuple)  # person keys whose MER lines to draw; empty: the most productive
    export_requested = Signal(str, str)  # what, path
    shown = Signal()

    CHARTS = {
        "mer_over_time": "MER over time", "vmer_over_time": "vMER over time", "fooling_by_round": "Fooling rate by round",
        "backlog": "Validation backlog", "labels": "Labels",
    }

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._values = FilterValues()
        self._facet_titles: dict[str, str] = {}
        self._bin_seconds = 86400.0
        self._building = False
        self._sized = False

        self.round_combo = QComboBox(objectName="dashboard-round")
        self.author_combo = QComboBox(objectName="dashboard-author")
        self.label_combo = QComboBox(objectName="dashboard-label")
        self.period_combo = QComboBox(objectName="dashboard-period")
        for combo in (self.round_combo, self.author_combo, self.label_combo, self.period_combo):
            combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        for combo in (self.round_combo, self.author_combo, self.label_combo):
            combo.addItem("All", None)
            combo.currentIndexChanged.connect(self._combo_changed)
        # long names and metadata values must not widen the filter row past a laptop screen
        self.author_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.author_combo.setMinimumContentsLength(10)
        for text, days in PERIODS:
            self.period_combo.addItem(text, days)
        self.period_combo.currentIndexChanged.connect(self._combo_changed)
        self.facet_combos: dict[str, QComboBox] = {}
        self.clear_button = QPushButton("Clear filters", objectName="dashboard-clear")
        self.clear_button.clicked.connect(self.clear_filters)
        # "12,345 of 99,999 examples" must not push the row past a laptop screen: it gives way first,
        # from its end, so that the count stays readable
        self.summary = ElidedLabel(objectName="dashboard-summary", elide=Qt.TextElideMode.ElideRight)
        self.summary.setMinimumWidth(60)
        self.export_button = QToolButton(objectName="dashboard-export", text="Export")
        self.export_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.export_menu = QMenu(self.export_button)
        self.export_button.setMenu(self.export_menu)
        self.filter_row = FlowLayout()  # wraps, on a laptop with a large font, instead of widening the page
        self._holders: dict[QComboBox, QWidget] = {}  # each filter with its caption, kept on one line
        self._filter_widgets = [("Round", self.round_combo), ("Annotator", self.author_combo),
                                ("Label", self.label_combo)]
        self._lay_out_filters()

        self.annotator_model = FigureTableModel(self)
        self.annotator_table = _table(self.annotator_model, "dashboard-annotators")
        self.annotator_table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.annotator_table.selectionModel().selectionChanged.connect(self._people_selected)
        self.annotator_table.setToolTip("Select people to draw their MER and vMER over time")
        self.breakdown_combo = QComboBox(objectName="dashboard-breakdown")
        self.breakdown_combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
        self.breakdown_combo.currentIndexChanged.connect(self._breakdown_chosen)
        self.breakdown_model = FigureTableModel(self)
        self.breakdown_table = _table(self.breakdown_model, "dashboard-breakdown-table")
        self.agreement_label = QLabel(objectName="dashboard-agreement")
        self.agreement_label.setWordWrap(True)
        self.agreement_label.setTextFormat(Qt.TextFormat.RichText)
        self.pair_model = FigureTableModel(self)
        self.pair_table = _table(self.pair_model, "dashboard-pairs")

        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(_heading("Per annotator"))
        left_layout.addWidget(self.annotator_table, 6)
        breakdown_row = QHBoxLayout()
        breakdown_row.addWidget(_heading("Breakdown"))
        breakdown_row.addWidget(self.breakdown_combo)
        breakdown_row.addStretch(1)
        left_layout.addLayout(breakdown_row)
        left_layout.addWidget(self.breakdown_table, 2)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(_heading("Agreement among validators"))
        right_layout.addWidget(self.agreement_label)
        right_layout.addWidget(self.pair_table, 1)
        right.setMinimumWidth(470)
        tables = QSplitter(Qt.Orientation.Horizontal, objectName="dashboard-tables")
        tables.addWidget(left)
        tables.addWidget(right)
        tables.setStretchFactor(0, 5)
        tables.setStretchFactor(1, 2)

        # MER and vMER side by side under one legend: in one plot the same person's two lines overlap.
        self.mer_chart = LineChart("MER (model-fooling ÷ submitted)", rate=True)
        self.vmer_chart = LineChart("vMER (validated fooling ÷ submitted)", rate=True)
        self.people_legend = QLabel(objectName="dashboard-people-legend")
        self.people_legend.setWordWrap(True)
        self.people_legend.setTextFormat(Qt.TextFormat.RichText)
        over_time = QWidget(objectName="dashboard-over-time")
        over_time_layout = QGridLayout(over_time)
        over_time_layout.setContentsMargins(4, 4, 0, 0)
        over_time_layout.setSpacing(0)
        over_time_layout.addWidget(QLabel("<b>MER and vMER over time</b> (cumulative, per annotator)"), 0, 0, 1, 2)
        over_time_layout.addWidget(self.people_legend, 1, 0, 1, 2)
        over_time_layout.addWidget(self.mer_chart, 2, 0)
        over_time_layout.addWidget(self.vmer_chart, 2, 1)
        over_time_layout.setRowStretch(2, 1)
        self.over_time = over_time
        self.round_chart = BarChart("Fooling rate by round", rate=True, names=("MER", "vMER"))
        self.backlog_chart = LineChart("Validation backlog")
        self.backlog_chart.setToolTip("Submitted examples not yet decided. Click a point: the examples submitted "
                                      "in that period.")
        self.label_chart = BarChart("Labels (submitted examples)")
        self.facet_charts: dict[str, BarChart] = {}
        self.mer_chart.point_clicked.connect(lambda key, _x: self._toggle("author", key))
        self.vmer_chart.point_clicked.connect(lambda key, _x: self._toggle("author", key))
        self.round_chart.bar_clicked.connect(lambda key: self._toggle("round", key))
        self.label_chart.bar_clicked.connect(lambda key: self._toggle("label", key))
        self.backlog_chart.point_clicked.connect(self._backlog_clicked)
        self.chart_grid = QGridLayout()
        self.chart_grid.setSpacing(6)
        self.chart_grid.addWidget(over_time, 0, 0, 1, 2)
        for column, chart in enumerate((self.round_chart, self.backlog_chart), start=2):
            self.chart_grid.addWidget(chart, 0, column)
        for column in range(4):
            self.chart_grid.setColumnStretch(column, 1)
        self.chart_grid.addWidget(self.label_chart, 1, 0)
        self.chart_grid.setRowStretch(0, 1)
        self.chart_grid.setRowStretch(1, 1)
        charts = QWidget(objectName="dashboard-charts")
        charts.setLayout(self.chart_grid)

        self.splitter = QSplitter(Qt.Orientation.Vertical, objectName="dashboard-splitter")
        self.splitter.addWidget(tables)
        self.splitter.addWidget(PageScroll(charts))  # on a laptop screen the charts scroll, the window stays
        self.splitter.setStretchFactor(0, 4)
        self.splitter.setStretchFactor(1, 5)
        # a task whose agreement threshold the team is too small to reach
        self.threshold_warning = QLabel(objectName="dashboard-threshold-warning", wordWrap=True)
        self.threshold_warning.setStyleSheet("background:#fff4e5; color:#6b3d00; padding:4px; border-radius:4px")
        self.threshold_warning.hide()
        layout = QVBoxLayout(self)
        layout.addLayout(self.filter_row)
        layout.addWidget(self.threshold_warning)
        # the figures, and the data-quality guard's view of the same filter (controlled by app.gui.quality)
        self.quality = QualityView()
        self.quality.setObjectName("dashboard-quality")
        self.sections = QTabWidget(objectName="dashboard-sections")
        self.sections.addTab(self.splitter, "Figures")
        self.sections.addTab(self.quality, "Data quality")
        # the writing assistant's A-B split (controlled by app.gui.assistant_split)
        self.assistant = AssistantSplitPanel()
        self.assistant.setObjectName("dashboard-assistant")
        self.sections.addTab(self.assistant, "Writing assistant")
        self.exposure = ExposureView()  # care figures, apart from the per-annotator table
        self.sections.addTab(self.exposure, "Exposure (care)")
        self.sections.currentChanged.connect(self._section_changed)
        layout.addWidget(self.sections, 1)
        self._build_export_menu()

    def _lay_out_filters(self) -> None:
        while self.filter_row.count():
            self.filter_row.takeAt(0)  # the widgets stay; they are laid out anew below
        for text, combo in self._filter_widgets + [(self._facet_titles.get(n, n), c) for n, c in self.facet_combos.items()]:
            self.filter_row.addWidget(self._captioned(text, combo))
        self.filter_row.addWidget(self._captioned("Period", self.period_combo))
        self.filter_row.addWidget(self.clear_button)
        self.filter_row.addWidget(self.summary)
        self.filter_row.addWidget(self.export_button)
        self.filter_row.invalidate()
        self._section_changed()

    def _captioned(self, caption: str, combo: QComboBox) -> QWidget:
        holder = self._holders.get(combo)
        if holder is None:
            holder = QWidget(self, objectName=f"{combo.objectName()}-filter")
            row = QHBoxLayout(holder)
            row.setContentsMargins(0, 0, 0, 0)
            row.addWidget(QLabel(caption, objectName="caption"))
            row.addWidget(combo)
            self._holders[combo] = holder
        else:
            holder.findChild(QLabel, "caption").setText(caption)
        return holder

    def _section_changed(self, *_args) -> None:
        """The filters shape the figures and the data-quality view, not exposure (it has its own period)."""
        filtered = getattr(self, "sections", None) is None or self.sections.currentWidget() is not self.exposure
        for index in range(self.filter_row.count()):
            widget = self.filter_row.itemAt(index).widget()
            if widget is not None:
                widget.setVisible(filtered)

    def show_choices(self, choices: FilterChoices) -> None:
        """Filter choices: rounds, people, labels, and per choice metadata field its title and
        values. Current choices stay when still offered."""
        self._building = True
        try:
            for combo, items in ((self.round_combo, [(c.key, c.name) for c in choices.rounds]),
                                 (self.author_combo, [(c.key, c.name) for c in choices.people]),
                                 (self.label_combo, [(label, label) for label in choices.labels])):
                current = combo.currentData()
                combo.clear()
                combo.addItem("All", None)
                for key, name in items:
                    combo.addItem(name, key)
                combo.setCurrentIndex(max(0, combo.findData(current)))
            names = [f.name for f in choices.facets]
            if set(names) != set(self.facet_combos):
                for combo in self.facet_combos.values():
                    (self._holders.pop(combo, None) or combo).deleteLater()
                self.facet_combos = {}
                for name in names:
                    combo = QComboBox(objectName=f"dashboard-facet-{name}")
                    combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
                    combo.setMinimumContentsLength(8)
                    combo.currentIndexChanged.connect(self._combo_changed)
                    self.facet_combos[name] = combo
            self._facet_titles = {f.name: f.title for f in choices.facets}
            for facet in choices.facets:
                combo = self.facet_combos[facet.name]
                current = combo.currentData()
                combo.clear()
                combo.addItem("All", None)
                for value in facet.values:
                    combo.addItem(value, value)
                combo.setCurrentIndex(max(0, combo.findData(current)))
            self._lay_out_filters()
            self._sync_facet_charts(names)
        finally:
            self._building = False

    def _sync_facet_charts(self, names: list[str]) -> None:
        if names == list(self.facet_charts):
            return
        for chart in self.facet_charts.values():
            self.chart_grid.removeWidget(chart)
            chart.deleteLater()
        self.facet_charts = {}
        for column, name in enumerate(names, start=1):
            chart = BarChart(f"{self._facet_titles[name]} (submitted examples)", horizontal=True)
            chart.bar_clicked.connect(lambda key, name=name: self._toggle_facet(name, key))
            self.facet_charts[name] = chart
            self.chart_grid.addWidget(chart, 1, column)
        self._build_export_menu()

    def _combo_changed(self, *_args) -> None:
        if self._building:
            return
        self._values = replace(
            self._values, round=self.round_combo.currentData(), author=self.author_combo.currentData(),
            label=self.label_combo.currentData(),
            facets=facet_values((name, c.currentData()) for name, c in self.facet_combos.items()))
        if self.period_combo.currentIndex() < len(PERIODS):  # beyond them: a range picked on the backlog chart
            days = self.period_combo.currentData()
            since = (datetime.now(UTC).timestamp() - days * 86400) if days else None
            self._values = replace(self._values, since=since, until=None, period=None)
            while self.period_combo.count() > len(PERIODS):
                self.period_combo.removeItem(len(PERIODS))
        self._emit()

    def _emit(self) -> None:
        self.filters_changed.emit(self.values())

    def values(self) -> FilterValues:
        return self._values

    def _select(self, combo: QComboBox, key) -> None:
        combo.setCurrentIndex(max(0, combo.findData(key)))

    def set_filter(self, **changes) -> None:
        """Change filters as chart clicks do (round, author, label, facets, since/until) and emit once."""
        if "facets" in changes:
            changes["facets"] = facet_values(changes["facets"])
        self._building = True
        try:
            self._values = replace(self._values, **changes)
            self._select(self.round_combo, self._values.round)
            self._select(self.author_combo, self._values.author)
            self._select(self.label_combo, self._values.label)
            for name, combo in self.facet_combos.items():
                self._select(combo, self._values.facet(name))
            if "since" in changes or "until" in changes:
                self._show_period()
        finally:
            self._building = False
        self._emit()

    def _show_period(self) -> None:
        while self.period_combo.count() > len(PERIODS):
            self.period_combo.removeItem(len(PERIODS))
        since, until = self._values.since, self._values.until
        if since is None and until is None:
            self.period_combo.setCurrentIndex(0)
            return
        fmt = "%d %b %Y %H:%M" if self._bin_seconds < 86400 else "%d %b %Y"
        start = datetime.fromtimestamp(since, UTC).strftime(fmt) if since else "…"
        end = datetime.fromtimestamp(until, UTC).strftime(fmt) if until else "now"
        self._values = replace(self._values, period=f"{start} – {end}")
        self.period_combo.addItem(f"Submitted {start} – {end}", "range")
        self.period_combo.setCurrentIndex(len(PERIODS))

    def _toggle(self, what: str, key: str) -> None:
        self.set_filter(**{what: None if getattr(self._values, what) == key else key})

    def _toggle_facet(self, name: str, key: str) -> None:
        facets = dict(self._values.facets)
        if facets.get(name) == key:
            facets.pop(name)
        else:
            facets[name] = key
        self.set_filter(facets=facets)

    def _backlog_clicked(self, _key: str, x: float) -> None:
        """A backlog point stands for the examples submitted in its time bin (which ends at x)."""
        since = x - self._bin_seconds
        if self._values.since == since and self._values.until == x:
            self.set_filter(since=None, until=None)
        else:
            self.set_filter(since=since, until=x)

    def reset_filters(self) -> None:
        """Back to no filters without asking for figures (another task's choices are coming)."""
        self._building = True
        try:
            self._values = FilterValues()
            for combo in (self.round_combo, self.author_combo, self.label_combo, self.period_combo,
                          *self.facet_combos.values()):
                combo.setCurrentIndex(0)
            while self.period_combo.count() > len(PERIODS):
                self.period_combo.removeItem(len(PERIODS))
        finally:
            self._building = False

    def clear_filters(self) -> None:
        self.set_filter(round=None, author=None, label=None, facets=(), since=None, until=None)

    def _breakdown_chosen(self, *_args) -> None:
        if not self._building and self.breakdown_combo.currentData():
            self.breakdown_changed.emit(self.breakdown_combo.currentData())

    def _people_selected(self, *_args) -> None:
        rows = sorted({index.row() for index in self.annotator_table.selectionModel().selectedRows()})
        self.chart_people_changed.emit(tuple(k for k in (self.annotator_model.key_at(r) for r in rows) if k))

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._sized:  # tables above, charts below: charts get the larger share
            self._sized = True
            height = max(600, self.splitter.height())
            self.splitter.setSizes([int(height * 0.42), int(height * 0.58)])
        self.shown.emit()

    def show_loading(self) -> None:
        """The first build reads every example: say so until the figures come."""
        self.summary.setText("Loading the figures…")

    def show_figures(self, figures: FiguresView) -> None:
        """Show everything computed for the current filter."""
        self._bin_seconds = figures.bin_seconds
        self.summary.setText(figures.summary)
        self.threshold_warning.setText(figures.threshold_warning)
        self.threshold_warning.setVisible(bool(figures.threshold_warning))
        selected = [self.annotator_model.key_at(i.row()) for i in self.annotator_table.selectionModel().selectedRows()]
        self.annotator_model.set_table(figures.annotators)
        self.annotator_table.resizeColumnsToContents()
        self._reselect(selected)
        self._building = True
        try:
            self.breakdown_combo.clear()
            for choice in figures.breakdowns:
                self.breakdown_combo.addItem(choice.name, choice.key)
            self.breakdown_combo.setCurrentIndex(max(0, self.breakdown_combo.findData(figures.breakdown)))
        finally:
            self._building = False
        self.breakdown_model.set_table(figures.breakdown_table)
        self.breakdown_table.resizeColumnsToContents()
        self._show_agreement(figures.agreement)
        note = figures.people_note
        self.mer_chart.set_lines(figures.time_edges, figures.mer_lines, note=note)
        self.vmer_chart.set_lines(figures.time_edges, figures.vmer_lines, note=note)
        self.people_legend.setText(self.mer_chart.legend.text())
        self.mer_chart.legend.hide()
        self.vmer_chart.legend.hide()
        self.round_chart.set_bars(figures.rounds, {self._values.round} - {None})
        self.backlog_chart.set_lines(figures.backlog_times, [Line("backlog", "Backlog", figures.backlog)], fill=True,
                                     note="submitted, not yet decided")
        self.label_chart.set_bars(figures.labels, {self._values.label} - {None})
        for name, chart in self.facet_charts.items():
            chart.set_bars(figures.facet(name), {self._values.facet(name)} - {None})

    def _reselect(self, keys: list) -> None:
        if not keys:
            return
        selection = self.annotator_table.selectionModel()
        selection.blockSignals(True)
        for row, data in enumerate(self.annotator_model.rows):
            if data.key in keys:
                selection.select(self.annotator_model.index(row, 0),
                                 selection.SelectionFlag.Select | selection.SelectionFlag.Rows)
        selection.blockSignals(False)

    def _show_agreement(self, agreement: AgreementView) -> None:
        parts = [
            f"Fleiss' κ <b>{agreement.fleiss}</b> over {agreement.fleiss_items:,} examples with two or "
            f"more verdicts",
            f"Krippendorff's α <b>{agreement.alpha}</b> (nominal; {agreement.ratings:,} peer verdicts)",
        ]
        if agreement.interpretation:
            parts.append(f"<span style='color:#555'>{escape(agreement.interpretation)}</span>")
        parts.append(f"<span style='color:#555'>Cohen's κ for each pair sharing at least "
                     f"{agreement.min_overlap} examples ({len(agreement.pairs.rows)} pairs), lowest first:</span>")
        self.agreement_label.setText("<br>".join(parts))
        self.pair_model.set_table(agreement.pairs)
        self.pair_table.resizeColumnsToContents()

    def chart_names(self) -> tuple[str, ...]:
        return tuple(self.charts())

    def charts(self) -> dict[str, ChartFrame]:
        charts = {"mer_over_time": self.mer_chart, "vmer_over_time": self.vmer_chart,
                  "fooling_by_round": self.round_chart, "backlog": self.backlog_chart, "labels": self.label_chart}
        charts.update({name: chart for name, chart in self.facet_charts.items()})
        return charts

    def save_chart(self, name: str, path: str) -> bool:
        return self.charts()[name].grab().save(path, "PNG")

    def _build_export_menu(self) -> None:
        self.export_menu.clear()
        entries = [("annotators", "Per-annotator table (CSV)…", "csv"), ("breakdown", "Breakdown table (CSV)…", "csv")]
        titles = dict(self.CHARTS)
        titles.update({name: self._facet_titles.get(name, name) for name in self.facet_charts})
        entries += [(name, f"Chart: {titles.get(name, name)} (PNG)…", "png") for name in self.charts()]
        for what, text, suffix in entries:
            action = QAction(text, self.export_menu)
            action.setObjectName(f"export-{what}")
            action.triggered.connect(lambda _=False, what=what, suffix=suffix: self._ask_path(what, suffix))
            self.export_menu.addAction(action)
        self.export_menu.addSeparator()
        everything = QAction("Everything to a folder (CSV and PNG)…", self.export_menu)
        everything.setObjectName("export-all")
        everything.triggered.connect(self._ask_folder)
        self.export_menu.addAction(everything)

    def _ask_path(self, what: str, suffix: str) -> None:
        kind = "CSV files (*.csv)" if suffix == "csv" else "PNG images (*.png)"
        path, _ = QFileDialog.getSaveFileName(self, "Export", f"dynadesk-{what}.{suffix}", kind)
        if path:
            self.export_requested.emit(what, path)

    def _ask_folder(self) -> None:
        path = QFileDialog.getExistingDirectory(self, "Export the dashboard to a folder")
        if path:
            self.export_requested.emit("all", path)
