"""pyqtgraph charts for the review dashboard. Views only: data comes in as typed bars and lines
(:mod:`app.views.dashboard`); clicks
go out as typed signals (the key of the bar, line or time range clicked).

Readability choices: MER and vMER get separate charts (the same person's lines would sit on top
of each other in one); legends sit outside the plot area, as a row of coloured names above it;
bars carry their value as text.
"""

from __future__ import annotations

import math
from collections.abc import Sequence, Set
from datetime import datetime, timedelta
from html import escape

import pyqtgraph as pg
from PySide6.QtCore import QPoint, QPointF, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from app.views.dashboard import Bar, Line

pg.setConfigOptions(antialias=True, background="w", foreground="#333")

# Okabe–Ito: distinguishable for the common colour-vision deficiencies.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#999999", "#000000"]
SECOND = "#E69F00"  # the second bar of a pair (vMER next to MER)


def color(index: int) -> QColor:
    return QColor(PALETTE[index % len(PALETTE)])


HOUR, DAY = 3600.0, 86400.0
# Tick steps of a time axis: whole minutes at the finest, so a day-one chart never shows fractions of a second.
TIME_STEPS = (60.0, 300.0, 900.0, 1800.0, HOUR, 2 * HOUR, 3 * HOUR, 6 * HOUR, 12 * HOUR,
              DAY, 2 * DAY, 7 * DAY, 14 * DAY, 28 * DAY, 91 * DAY, 364 * DAY)
COUNT_STEPS = [m * 10.0**e for e in range(16) for m in (1, 2, 5)]
MIN_TIME_SPAN = 50 * 60.0  # a time chart shows at least this much (with padding, about an hour)


def _utc_offset(when: float) -> float:
    return (datetime.fromtimestamp(when).astimezone().utcoffset() or timedelta()).total_seconds()


def time_tick_values(low: float, high: float, most: int, margin: float = 0.0) -> tuple[float, list[float]]:
    """Up to ``most`` ticks between two unix times, on whole local minutes, hours or days, none
    within ``margin`` of either end (where a centred label would be cut off)."""
    span = max(high - low, 1.0)
    offset = _utc_offset(low)  # steps are aligned to local time: 14:00, not 14:00 UTC
    for step in (s for s in TIME_STEPS if span / s <= max(most, 2)):
        first = math.ceil((low + margin + offset) / step) * step - offset
        values = [first + i * step for i in range(int((high - margin - first) // step) + 1)]
        if values:
            return step, values
    return TIME_STEPS[-1], []


def time_tick_labels(values: list[float], step: float) -> list[str]:
    """Local date and time; the date on the first tick and wherever the day changes."""
    labels, last_day = [], None
    for value in values:
        when = datetime.fromtimestamp(value)
        day = f"{when.day} {when:%b}"  # not %-d: Windows' strftime lacks it
        if step >= DAY:
            labels.append(f"{day} {when.year}" if step >= 91 * DAY else day)
        else:
            labels.append(when.strftime("%H:%M") if day == last_day else f"{day} {when:%H:%M}")
        last_day = day
    return labels


def count_tick_values(low: float, high: float, most: int) -> tuple[float, list[float]]:
    """Whole numbers only, at a step of 1, 2 or 5 times a power of ten."""
    span = max(high - low, 1.0)
    step = next(s for s in COUNT_STEPS if span / s <= max(most, 2))
    first = math.ceil(low / step) * step
    return step, [first + i * step for i in range(int((high - first) // step) + 1)]


class TimeAxis(pg.AxisItem):
    """Dates and times in local time; ticks at most every minute."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802 (pyqtgraph's name)
        # a label cut at an end is not drawn, and the first names the day: keep ticks half the widest
        # label from either end, measured in the axis's font (the person chooses its size)
        label = QFontMetrics(self.style.get("tickFont") or self.font()).horizontalAdvance("28 Sep 23:59") + 8
        margin = (maxVal - minVal) * (label / 2) / max(size, 1.0)
        step, values = time_tick_values(minVal, maxVal, max(3, int(size // label)), margin)
        return [(step, values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return time_tick_labels(list(values), spacing)


class CountAxis(pg.AxisItem):
    """Counts: whole-number ticks (unless fixed ticks are set, as for categories or rates)."""

    def tickValues(self, minVal, maxVal, size):  # noqa: N802
        room = 22 if self.orientation in ("left", "right") else 60  # pixels per tick label
        step, values = count_tick_values(minVal, maxVal, int(size // room))
        return [(step, values)]

    def tickStrings(self, values, scale, spacing):  # noqa: N802
        return [f"{round(v):,}" for v in values]


class ChartFrame(QWidget):
    """A title, a legend row (outside the plot) and a pyqtgraph plot."""

    def __init__(self, title: str, *, date_axis: bool = False, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = QLabel(f"<b>{escape(title)}</b>")
        self.title.setWordWrap(True)
        self.legend = QLabel()
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        axes = {"bottom": TimeAxis("bottom") if date_axis else CountAxis("bottom"), "left": CountAxis("left")}
        self.plot = pg.PlotWidget(axisItems=axes)
        self.plot.setMenuEnabled(False)
        self.plot.setMouseEnabled(x=False, y=False)
        self.plot.hideButtons()
        self.plot.showGrid(x=False, y=True, alpha=0.25)
        self.plot.setMinimumHeight(110)
        self.empty = pg.TextItem("", color="#888", anchor=(0.5, 0.5))
        self.plot.addItem(self.empty, ignoreBounds=True)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.legend)
        layout.addWidget(self.plot, 1)

    def set_legend(self, entries: list[tuple[str, QColor]], note: str = "") -> None:
        swatches = "&nbsp;&nbsp; ".join(f"<span style='color:{c.name()}'>&#9632;</span>&nbsp;{escape(name)}"
                                        for name, c in entries)
        self.legend.setText(swatches + (f"&nbsp;&nbsp; <span style='color:#666'>{escape(note)}</span>" if note else ""))
        self.legend.setVisible(bool(entries or note))

    def show_empty(self, message: str) -> None:
        self.empty.setText(message)
        self.empty.setPos(0.5, 0.5)
        self.plot.setXRange(0, 1)
        self.plot.setYRange(0, 1)

    def click_point(self, x: float, y: float) -> QPoint:
        """Where, in the plot widget's viewport, the data point (x, y) is drawn (for tests)."""
        scene = self.plot.getPlotItem().vb.mapViewToScene(QPointF(x, y))
        return self.plot.mapFromScene(scene)


class BarChart(ChartFrame):
    """Bars, or pairs of bars, with category names on the x axis (or, ``horizontal``, down the
    left side, where long names have room); a click emits the bar's key."""

    bar_clicked = Signal(str)

    def __init__(self, title: str, *, rate: bool = False, names: tuple[str, str] | None = None,
                 horizontal: bool = False, parent: QWidget | None = None):
        super().__init__(title, parent=parent)
        self.rate = rate
        self.horizontal = horizontal
        self.names = names  # legend names of a pair of bars
        self.keys: list[str] = []
        self.values: list[tuple[float, float | None]] = []
        self.selected: set[str] = set()
        self._items: list = []
        self.plot.scene().sigMouseClicked.connect(self._clicked)

    def set_bars(self, bars: Sequence[Bar], selected: Set[str] = frozenset()) -> None:
        """A bar (or a pair, where ``second`` is set) per category; selected bars are outlined."""
        for item in self._items:
            self.plot.removeItem(item)
        self._items = []
        self.keys = [b.key for b in bars]
        self.values = [(b.value, b.second) for b in bars]
        self.selected = set(selected)
        if not bars:
            self.set_legend([])
            self.plot.getAxis("bottom").setTicks([[]])
            self.show_empty("No examples match")
            return
        self.empty.setText("")
        if self.horizontal:
            self._horizontal(bars, pens=[pg.mkPen("#222", width=2.5) if b.key in self.selected else pg.mkPen(None)
                                         for b in bars])
            return
        paired = any(b.second is not None for b in bars)
        width = 0.38 if paired else 0.7
        xs = list(range(len(bars)))
        pens = [pg.mkPen("#222", width=2.5) if b.key in self.selected else pg.mkPen(None) for b in bars]

        def shade(base: QColor) -> list[QColor]:  # with a bar chosen, the others fade
            faded = QColor(base)
            faded.setAlpha(90)
            return [base if not self.selected or b.key in self.selected else faded for b in bars]

        first = pg.BarGraphItem(x=[x - (width / 2 if paired else 0) for x in xs], height=[b.value for b in bars],
                                width=width, brushes=shade(color(0)), pens=pens)
        self._add(first)
        if paired:
            second = pg.BarGraphItem(x=[x + width / 2 for x in xs], height=[b.second or 0 for b in bars], width=width,
                                     brushes=shade(QColor(SECOND)), pens=pens)
            self._add(second)
            self.set_legend([(self.names[0], color(0)), (self.names[1], QColor(SECOND))] if self.names else [])
        else:
            self.set_legend([])
        top = max([b.value for b in bars] + [b.second or 0 for b in bars] + [1e-9])
        font = QFont()
        font.setPointSize(8)
        for x, bar in enumerate(bars):
            for offset, value in ((-width / 2 if paired else 0, bar.value), (width / 2, bar.second)):
                if value is None:
                    continue
                label = pg.TextItem(self._format(value), color="#333", anchor=(0.5, 1))
                label.setFont(font)
                label.setPos(x + offset, value)
                self._add(label)
        ticks = [(x, self._short(b.name)) for x, b in enumerate(bars)]
        self.plot.getAxis("bottom").setTicks([ticks])
        self.plot.setXRange(-0.6, len(bars) - 0.4, padding=0)
        self.plot.setYRange(0, (1.0 if self.rate else top) * 1.18, padding=0)
        self.plot.getAxis("left").setTicks([[(v, f"{v:.0%}") for v in (0, 0.25, 0.5, 0.75, 1.0)]] if self.rate else None)

    def _horizontal(self, bars: Sequence[Bar], pens) -> None:
        """First bar on top; value labels at the bars' ends."""
        n = len(bars)
        faded = QColor(color(0))
        faded.setAlpha(90)
        brushes = [color(0) if not self.selected or b.key in self.selected else faded for b in bars]
        self._add(pg.BarGraphItem(x0=0, y=[n - 1 - i for i in range(n)], height=0.7, width=[b.value for b in bars],
                                  brushes=brushes, pens=pens))
        font = QFont()
        font.setPointSize(8)
        for i, bar in enumerate(bars):
            label = pg.TextItem(self._format(bar.value), color="#333", anchor=(0, 0.5))
            label.setFont(font)
            label.setPos(bar.value, n - 1 - i)
            self._add(label)
        self.set_legend([])
        self.plot.getAxis("left").setTicks([[(n - 1 - i, self._short(b.name)) for i, b in enumerate(bars)]])
        self.plot.getAxis("bottom").setTicks(None)
        self.plot.showGrid(x=True, y=False, alpha=0.25)
        top = max([b.value for b in bars] + [1e-9])
        self.plot.setYRange(-0.6, n - 0.4, padding=0)
        self.plot.setXRange(0, top * 1.2, padding=0)

    def _add(self, item) -> None:
        self.plot.addItem(item)
        self._items.append(item)

    def _format(self, value: float) -> str:
        return f"{value:.0%}" if self.rate else f"{value:,.0f}"

    def _short(self, name: str) -> str:
        room = 26 if self.horizontal else 16
        return name if len(name) <= room else name[:room - 1] + "…"

    def bar_center(self, index: int) -> QPoint:
        """Where bar ``index`` is drawn, in viewport coordinates (for tests and keyboard users)."""
        value = self.values[index][0]
        if self.horizontal:
            return self.click_point(value / 2, len(self.values) - 1 - index)
        return self.click_point(index - (0.19 if self.values[index][1] is not None else 0), value / 2)

    def _clicked(self, event) -> None:
        if event.button() != Qt.MouseButton.LeftButton or not self.keys:
            return
        point = self.plot.getPlotItem().vb.mapSceneToView(event.scenePos())
        along, value = (point.y(), point.x()) if self.horizontal else (point.x(), point.y())
        position = round(along)
        index = len(self.keys) - 1 - position if self.horizontal else position
        if 0 <= index < len(self.keys) and abs(along - position) <= 0.45 and value >= 0:
            event.accept()
            self.bar_clicked.emit(self.keys[index])


class LineChart(ChartFrame):
    """Lines over time, one per key, with points; clicking a point emits the line's key and the
    x of the point."""

    point_clicked = Signal(str, float)

    def __init__(self, title: str, *, rate: bool = False, parent: QWidget | None = None):
        super().__init__(title, date_axis=True, parent=parent)
        self.rate = rate
        self.lines: dict[str, tuple[list[float], list[float]]] = {}
        self._items: list = []

    def set_lines(self, xs: Sequence[float], lines: Sequence[Line], *, note: str = "", fill: bool = False) -> None:
        """Shared x values (unix seconds) and a line (y values with NaN gaps) per key."""
        for item in self._items:
            self.plot.removeItem(item)
        self._items = []
        self.lines = {}
        if not xs or not lines:
            self.set_legend([], note)
            self.show_empty("No examples match")
            return
        self.empty.setText("")
        entries = []
        top = 0.0
        for i, line in enumerate(lines):
            key, name, ys = line.key, line.name, line.values
            c = color(i)
            points = [(x, y) for x, y in zip(xs, ys) if not (y is None or math.isnan(y))]
            if not points:
                continue
            px, py = [p[0] for p in points], [p[1] for p in points]
            self.lines[key] = (px, py)
            item = pg.PlotDataItem(px, py, pen=pg.mkPen(c, width=2), symbol="o", symbolSize=6, symbolBrush=c,
                                   symbolPen=pg.mkPen("w"), fillLevel=0 if fill else None,
                                   brush=QColor(c.red(), c.green(), c.blue(), 40) if fill else None)
            item.sigPointsClicked.connect(lambda _item, points, _ev, key=key: self._points(key, points))
            self.plot.addItem(item)
            self._items.append(item)
            entries.append((name, c))
            top = max(top, max(py))
        self.set_legend(entries if len(entries) > 1 or not fill else [], note)
        low, high = min(min(px) for px, _ in self.lines.values()), max(max(px) for px, _ in self.lines.values())
        middle, half = (low + high) / 2, max(high - low, MIN_TIME_SPAN) / 2
        self.plot.setXRange(middle - half, middle + half, padding=0.06)
        self.plot.setYRange(0, 1.05 if self.rate else max(1.0, top * 1.1), padding=0)
        axis = self.plot.getAxis("left")
        axis.setTicks([[(v, f"{v:.0%}") for v in (0, 0.25, 0.5, 0.75, 1.0)]] if self.rate else None)

    def _points(self, key: str, points) -> None:
        if len(points):
            self.point_clicked.emit(key, float(points[0].pos().x()))

    def point_position(self, key: str, index: int) -> QPoint:
        xs, ys = self.lines[key]
        return self.click_point(xs[index], ys[index])
