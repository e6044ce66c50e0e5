"""The Dashboard's writing-assistant section: its controller. The split is computed on the
dashboard's worker (newest request wins) after the dashboard's own figures, whose refresh it
follows, for the same task and the dashboard's round and annotator filters."""

from __future__ import annotations

import uuid
from typing import Callable

from PySide6.QtCore import QObject, Signal

from app.core.services.assistant_split import assistant_split
from app.gui.worker import SerialWorker
from app.views.assistant_split import build_split
from app.views.dashboard import FilterValues
from widgets.assistant_split_view import AssistantSplitPanel

LATEST = "assistant-split"


class AssistantSplitController(QObject):
    updated = Signal()  # the split for the newest request is on screen

    def __init__(self, desk, view: AssistantSplitPanel, worker: SerialWorker, task_code: Callable[[], str | None],
                 values: Callable[[], FilterValues], show_error: Callable[[BaseException], None],
                 parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self.worker, self.show_error = desk, view, worker, show_error
        self._task_code, self._values = task_code, values
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
        desk, task_code, values, by = self.desk, self._task_code(), self._values(), self.by
        if self.view.view is None:
            self.view.show_loading()

        def compute():
            task_id = desk.tasks.task(task_code).id if task_code else None
            split = assistant_split(desk.db, by, task_id=task_id,
                                    round_ids=[uuid.UUID(values.round)] if values.round else (),
                                    author_ids=[uuid.UUID(values.author)] if values.author else ())
            return build_split(split)

        self.worker.submit_latest(LATEST, compute, on_done=self._computed, on_error=self.show_error)

    def _computed(self, view) -> None:
        self.view.show_split(view)
        self.updated.emit()
