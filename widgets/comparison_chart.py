"""The Next round dialog's chart: accuracy on each round's held-out split, the current target's bar
beside the candidate's, the candidate's with the 95 % interval of the paired difference as whiskers.
A view only: it draws :class:`app.views.next_round.ChartGroup` values (conventions of charts.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtGui import QColor, QFont
from PySide6.QtWidgets import QWidget

from app.views.next_round import ChartGroup
from widgets.charts import SECOND, ChartFrame, color

WIDTH = 0.36  # of each bar; a pair fills most of its slot


class AccuracyComparisonChart(ChartFrame):
    def __init__(self, parent: QWidget | None = None):
        super().__init__("Accuracy on each round's held-out split", parent=parent)
        self.groups: tuple[ChartGroup, ...] = ()
        self._items: list = []
        self.plot.setMinimumHeight(170)

    def set_groups(self, groups: Sequence[ChartGroup], current_name: str = "current target",
                   candidate_name: str = "candidate") -> None:
        for item in self._items:
            self.plot.removeItem(item)
        self._items = []
        self.groups = tuple(groups)
        if not groups:
            self.set_legend([])
            self.plot.getAxis("bottom").setTicks([[]])
            self.show_empty("No held-out examples to compare on")
            return
        self.empty.setText("")
        xs = list(range(len(groups)))
        self._add(pg.BarGraphItem(x=[x - WIDTH / 2 for x in xs], height=[g.current for g in groups], width=WIDTH,
                                  brush=color(0), pen=pg.mkPen(None)))
        self._add(pg.BarGraphItem(x=[x + WIDTH / 2 for x in xs], height=[g.candidate for g in groups], width=WIDTH,
                                  brush=QColor(SECOND), pen=pg.mkPen(None)))
        self._add(pg.ErrorBarItem(  # pyqtgraph computes with these: arrays, not lists
            x=np.array([x + WIDTH / 2 for x in xs]), y=np.array([g.candidate for g in groups]),
            top=np.array([max(min(g.high, 1.0) - g.candidate, 0.0) for g in groups]),  # accuracy stays in [0, 1]
            bottom=np.array([max(g.candidate - max(g.low, 0.0), 0.0) for g in groups]),
            beam=WIDTH * 0.45, pen=pg.mkPen("#222", width=1.5)))
        font = QFont()
        font.setPointSize(8)
        for x, group in enumerate(groups):  # values at the bars' feet, clear of the whiskers
            for offset, value in ((-WIDTH / 2, group.current), (WIDTH / 2, group.candidate)):
                inside = value >= 0.08
                label = pg.TextItem(f"{value:.0%}", color="w" if inside else "#333", anchor=(0.5, 1))
                label.setFont(font)
                label.setPos(x + offset, 0.01 if inside else value + 0.01)
                self._add(label)
        self.set_legend([(current_name, color(0)), (candidate_name, QColor(SECOND))],
                        "whiskers: 95 % interval of the paired difference, drawn on the candidate's bar")
        self.plot.getAxis("bottom").setTicks([[(x, f"{g.name} (n={g.items})") for x, g in enumerate(groups)]])
        self.plot.setXRange(-0.6, len(groups) - 0.4, padding=0)
        self.plot.setYRange(0, 1.12, padding=0)
        self.plot.getAxis("left").setTicks([[(v, f"{v:.0%}") for v in (0, 0.25, 0.5, 0.75, 1.0)]])

    def _add(self, item) -> None:
        self.plot.addItem(item)
        self._items.append(item)
