"""The Dashboard's exposure section: reads the figures on the dashboard's worker (never the GUI thread),
saves a lead's limits on the database writer's lane."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from PySide6.QtCore import QObject, Signal

from app.core.desk import Desk
from app.core.domain import Role, utcnow
from app.core.wellbeing.exposure import local_day
from app.gui.worker import SerialWorker
from app.views.exposure import ExposureScreen, exposure_screen
from widgets.exposure_view import ExposureView


class ExposureController(QObject):
    updated = Signal(object)  # the ExposureScreen shown
    limits_saved = Signal()

    def __init__(self, desk: Desk, view: ExposureView, worker: SerialWorker, show_error: Callable[[BaseException], None],
                 parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self.worker, self.show_error = desk, view, worker, show_error
        view.shown.connect(self.refresh)
        view.period_changed.connect(lambda _days: self.refresh())
        view.limits_requested.connect(self.set_limits)

    def refresh(self) -> None:
        if not self.view.isVisible():
            return
        desk, person, days = self.desk, self.desk.current_person_id, self.view.period_days()

        def compute() -> ExposureScreen:
            me = desk.people.get(person)
            lead = me.role in (Role.LEAD.value, Role.OWNER.value)
            today = local_day(utcnow(), desk.exposure.zone)
            rows = desk.exposure.person_days(today - timedelta(days=days - 1), today)
            if not lead:  # anyone else sees their own time only
                rows = [r for r in rows if r.person_id == person]
            return exposure_screen(rows, desk.exposure.limits(), lead=lead, today=today, period_days=days)

        self.worker.submit_latest("exposure", compute, on_done=self._show, on_error=self.show_error)

    def _show(self, screen: ExposureScreen) -> None:
        self.view.show_screen(screen)
        self.updated.emit(screen)

    def set_limits(self, daily_min: int, continuous_min: int) -> None:
        exposure, person = self.desk.exposure, self.desk.current_person_id

        def saved(_limits) -> None:
            self.limits_saved.emit()
            self.refresh()

        self.worker.submit(lambda: exposure.set_limits(person, daily_min, continuous_min), on_done=saved,
                           on_error=self.show_error)
