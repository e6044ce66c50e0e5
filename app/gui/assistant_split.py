"""The Dashboard's writing-assistant section: its controller. The split is computed on the
dashboard's worker (newest request wins) from the dashboard's snapshot, after the dashboard's own
figures, whose refresh it follows, for exactly their filter (task, round, annotator, label, facets,
period)."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from app.core.services.dashboard_snapshot import DashboardFilter
from app.gui.worker import SerialWorker
from app.views.assistant_split import build_split
from widgets.assistant_split_view import AssistantSplitPanel

LATEST = "assistant-split"


class AssistantSplitController(QObject):
    updated = Signal()  # the split for the newest request is on screen

    def __init__(self, desk, view: AssistantSplitPanel, worker: SerialWorker, task_code: Callable[[], str | None],
                 shown_filter: Callable[[], DashboardFilter | None], show_error: Callable[[BaseException], None],
                 parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self.worker, self.show_error = desk, view, worker, show_error
        self._task_code, self._shown_filter = task_code, shown_filter
        self.by = "annotator"
        self._stale = True  # figures owed for when the section is next shown
        view.by_changed.connect(self._by_changed)
        view.shown.connect(self._shown)

    def _shown(self) -> None:
        if self._stale:
            self.refresh()

    def _by_changed(self, by: str) -> None:
        self.by = by
        self.refresh()

    def refresh(self) -> None:
        """New figures for the dashboard's task and filters; only while the section can be seen (a
        query over every example of the task is not run for a hidden tab)."""
        if not self.view.isVisible():
            self._stale = True
            return
        self._stale = False
        flt, by, service = self._shown_filter(), self.by, self.desk.dashboard
        if flt is None:
            return  # the dashboard's figures are not in yet: their update calls again
        if self.view.view is None:
            self.view.show_loading()

        desk = self.desk

        def compute():
            from app.gui.dashboard import own_figures_only

            return build_split(service.assistant_split(flt, by, only_person=own_figures_only(desk)))

        self.worker.submit_latest(LATEST, compute, on_done=self._computed, on_error=self.show_error)

    def _computed(self, view) -> None:
        self.view.show_split(view)
        self.updated.emit()
