"""The Dashboard's data-quality view: alerts, the lead's alert thresholds, the artifact table (click
a term to list its examples) and the diversity figures over rounds. A view only: figures come in
as :class:`app.views.quality.QualityFigures`, what the lead asks for goes out as signals."""

from __future__ import annotations

import math
from collections.abc import Sequence
from html import escape

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QFont
from PySide6.QtWidgets import (
    QAbstractItemView,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from app.views.quality_dashboard import QualityFigures, RoundSeries, TermExamples
from widgets.charts import ChartFrame, color
from widgets.figure_table import FigureTableModel
from widgets.figure_table import figure_table as _table

SHOWN_ALERTS = 2
ALERT_STYLE = "background:#fde8e8; color:#7a1010; padding:4px; border-radius:4px"


class ArtifactModel(FigureTableModel):
    """The figure table, with significant terms in bold."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.significant: set[str] = set()

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.FontRole and index.isValid() and self.rows[index.row()].key in self.significant:
            font = QFont()
            font.setBold(True)
            return font
        return super().data(index, role)


class RoundChart(ChartFrame):
    """Shares (0–1) over rounds: one line per series, a point per round."""

    def __init__(self, title: str, parent: QWidget | None = None):
        super().__init__(title, parent=parent)
        self.plot.setMinimumHeight(100)
        self._items: list = []
        self.series: dict[str, list[tuple[int, float]]] = {}

    def set_series(self, rounds: Sequence[int], series: Sequence[RoundSeries], note: str = "") -> None:
        for item in self._items:
            self.plot.removeItem(item)
        self._items, self.series, entries = [], {}, []
        for i, line in enumerate(series):
            points = [(r, v) for r, v in zip(rounds, line.values) if not math.isnan(v)]
            self.series[line.name] = points
            if not points:
                continue
            c = color(i)
            item = pg.PlotDataItem([p[0] for p in points], [p[1] for p in points], pen=pg.mkPen(c, width=2),
                                   symbol="o", symbolSize=7, symbolBrush=c, symbolPen=pg.mkPen("w"))
            self.plot.addItem(item)
            self._items.append(item)
            entries.append((line.name, c))
        self.set_legend(entries if len(series) > 1 else [], note)
        if not entries:
            self.show_empty(note or "No figures yet")
            return
        self.empty.setText("")
        self.plot.getAxis("bottom").setTicks([[(r, f"R{r}") for r in rounds]])
        self.plot.getAxis("left").setTicks([[(v, f"{v:.0%}") for v in (0, 0.25, 0.5, 0.75, 1.0)]])
        self.plot.setXRange(min(rounds) - 0.5, max(rounds) + 0.5, padding=0)
        self.plot.setYRange(0, 1.05, padding=0)


class QualityView(QWidget):
    term_clicked = Signal(str)
    thresholds_changed = Signal(float, float)  # a term's z-score, a writer's duplicate rate (0–1)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.alerts = QLabel(objectName="quality-alerts", wordWrap=True)
        self.alerts.setStyleSheet(ALERT_STYLE)
        self.alerts.setTextFormat(Qt.TextFormat.RichText)
        self.alerts.hide()
        self.z_threshold = QDoubleSpinBox(objectName="quality-z-threshold", decimals=1, minimum=1, maximum=50,
                                          value=5, singleStep=0.5)
        self.z_threshold.setKeyboardTracking(False)
        self.z_threshold.valueChanged.connect(self._thresholds)
        self.z_threshold.setToolTip("Alert when a term's z-score (its label share against the base rate) reaches this")
        self.duplicate_threshold = self._percent("quality-duplicate-threshold", 30)
        self.duplicate_threshold.setToolTip("Alert when this share of one writer's examples are near-duplicates")
        thresholds = QHBoxLayout()
        thresholds.addWidget(QLabel("<b>Alerts</b> when a term's z reaches"))
        thresholds.addWidget(self.z_threshold)
        thresholds.addWidget(QLabel("or a writer's duplicate rate reaches"))
        thresholds.addWidget(self.duplicate_threshold)
        thresholds.addStretch(1)

        self.duplicates = QLabel(objectName="quality-duplicates", wordWrap=True)
        self.heading = QLabel(objectName="quality-heading")
        self.note = QLabel(objectName="quality-note", wordWrap=True)
        self.note.setStyleSheet("color:#555")
        self.artifact_model = ArtifactModel(self)
        self.artifact_table = _table(self.artifact_model, "quality-artifacts")
        self.artifact_table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.artifact_table.clicked.connect(self._term_clicked)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.heading)
        left_layout.addWidget(self.note)
        left_layout.addWidget(self.artifact_table, 1)

        self.examples_title = QLabel("Click a term to see its examples.", objectName="quality-examples-title",
                                     wordWrap=True)
        self.examples = QTableWidget(0, 3, objectName="quality-examples")
        self.examples.setHorizontalHeaderLabels(["Example", "Label", "Author"])
        self.examples.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.examples.verticalHeader().setVisible(False)
        self.examples.setWordWrap(False)
        header = self.examples.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.ResizeToContents)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.examples_title)
        right_layout.addWidget(self.examples, 1)
        tables = QSplitter(Qt.Orientation.Horizontal, objectName="quality-tables")
        tables.addWidget(left)
        tables.addWidget(right)
        tables.setStretchFactor(0, 3)
        tables.setStretchFactor(1, 2)

        self.distinct_chart = RoundChart("Distinct n-grams (≤ 1,000 examples)")
        self.distinct_chart.setToolTip("Distinct word n-grams ÷ all word n-grams, on a seeded sample of at most "
                                       "1,000 examples per round (the ratio falls with size alone)")
        self.spread_chart = RoundChart("Embedding spread (≤ 300 examples)")
        self.spread_chart.setToolTip("Mean pairwise cosine distance of a seeded sample of at most 300 examples per "
                                     "round, in the target model's sentence-embedding space")
        self.novelty_chart = RoundChart("Novel vs earlier rounds")
        self.novelty_chart.setToolTip("Share of a round's examples with no near-duplicate in an earlier round")
        charts = QHBoxLayout()
        for chart in (self.distinct_chart, self.spread_chart, self.novelty_chart):
            charts.addWidget(chart, 1)
        self.splitter = splitter = QSplitter(Qt.Orientation.Vertical, objectName="quality-splitter")
        splitter.addWidget(tables)
        bottom = QWidget()
        bottom.setLayout(charts)
        charts.setContentsMargins(0, 0, 0, 0)
        splitter.addWidget(bottom)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        self._sorted = False
        self._sized = False
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.alerts)
        layout.addLayout(thresholds)
        layout.addWidget(self.duplicates)
        layout.addWidget(splitter, 1)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if not self._sized:  # the tables get the larger share; the charts read well at 200 pixels
            self._sized = True
            height = max(360, self.splitter.height())
            self.splitter.setSizes([height - 200, 200])

    def _percent(self, name: str, value: int) -> QDoubleSpinBox:
        box = QDoubleSpinBox(objectName=name, suffix=" %", decimals=0, minimum=1, maximum=100, value=value)
        box.setKeyboardTracking(False)  # typed digits count once Enter or focus-out says the number is whole
        box.valueChanged.connect(self._thresholds)
        return box

    def _thresholds(self, *_args) -> None:
        self.thresholds_changed.emit(self.z_threshold.value(), self.duplicate_threshold.value() / 100)

    def set_thresholds(self, z: float, duplicate_rate: float) -> None:
        for box, value in ((self.z_threshold, z), (self.duplicate_threshold, round(duplicate_rate * 100))):
            box.blockSignals(True)
            box.setValue(value)
            box.blockSignals(False)

    def _term_clicked(self, index) -> None:
        term = self.artifact_model.key_at(index.row())
        if term:
            self.term_clicked.emit(term)

    def show_quality(self, figures: QualityFigures) -> None:
        shown = [f"⚠ {escape(message)}" for message in figures.alerts[:SHOWN_ALERTS]]
        if len(figures.alerts) > SHOWN_ALERTS:  # the table needs the room; the rest are a hover away
            shown.append(f"… and {len(figures.alerts) - SHOWN_ALERTS} more (hover to read them)")
        self.alerts.setText("<br>".join(shown))
        self.alerts.setToolTip("\n".join(figures.alerts))
        self.alerts.setVisible(bool(figures.alerts))
        self.duplicates.setText(figures.duplicates)
        self.duplicates.setVisible(bool(figures.duplicates))
        self.heading.setText(f"<b>Artifacts</b> — {escape(figures.heading)}")
        self.note.setText(figures.artifact_note)
        self.artifact_model.significant = set(figures.significant)
        self.artifact_model.set_table(figures.artifacts)
        if not self._sorted:  # strongest first, as the figures come: say so on the z column's header
            self._sorted = True
            z_column = next((i for i, c in enumerate(figures.artifacts.columns) if c.header == "z"), -1)
            self.artifact_table.horizontalHeader().setSortIndicator(z_column, Qt.SortOrder.DescendingOrder)
        self.artifact_table.resizeColumnsToContents()
        self.distinct_chart.set_series(figures.rounds, figures.distinct)
        self.spread_chart.set_series(figures.rounds, figures.spread, figures.spread_note)
        self.novelty_chart.set_series(figures.rounds, figures.novelty)

    def show_term_examples(self, found: TermExamples) -> None:
        self.examples_title.setText(found.title)
        self.examples.setRowCount(len(found.examples))
        for row, example in enumerate(found.examples):
            for column, value in enumerate((example.text, example.label, example.author)):
                item = QTableWidgetItem(value)
                item.setToolTip(value if column == 0 else "")
                self.examples.setItem(row, column, item)

    def show_problem(self, message: str) -> None:
        self.alerts.setText(escape(message))
        self.alerts.show()

    def term_row(self, term: str) -> int:
        """The table row showing ``term`` (for tests and keyboard users); -1 when it is not listed."""
        return next((i for i, row in enumerate(self.artifact_model.rows) if row.key == term), -1)
