"""Breaks in the window: records exposure when work ends (a submit, a verdict, a lead's review) on the
database writer's lane, and asks the person's break clock for a prompt at that moment only: a prompt never
appears while someone types. The prompt is a bar above the pages (``widgets.break_prompt``), not a dialog;
snoozing and taking a break are recorded (``app.core.wellbeing``)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtWidgets import QToolBar

from app.core.desk import Desk
from app.core.domain import utcnow
from app.core.wellbeing.breaks import SNOOZE, BreakAction, BreakClock, BreakPrompt
from app.core.wellbeing.exposure import Activity, Span
from app.gui.pages import Menu, MenuAction, Page
from app.gui.worker import SerialWorker
from app.views.breaks import break_prompt_view, break_taken_text
from widgets.break_prompt import BreakPromptBar

if TYPE_CHECKING:
    from app.gui.main_window import MainWindow

NOTE_SHOWN_MS = 8000


class BreakController(QObject):
    prompted = Signal(object)  # the BreakPrompt shown
    answered = Signal(str)  # "taken" or "snoozed", once recorded

    def __init__(self, desk: Desk, db: SerialWorker, bar: BreakPromptBar, show_error,
                 now: Callable[[], datetime] = utcnow, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.bar, self.show_error, self.now = desk, db, bar, show_error, now
        self.clocks: dict[uuid.UUID, BreakClock] = {}
        self.shown: tuple[uuid.UUID, BreakPrompt] | None = None
        self._review_shown: tuple[uuid.UUID, float] | None = None  # the example a lead has open, since when
        # the "see you in N minutes" note goes by itself; the timer dies with the bar
        self._note_timer = QTimer(bar, singleShot=True, interval=NOTE_SHOWN_MS)
        self._note_timer.timeout.connect(lambda: self.shown is None and self.bar.dismiss())
        bar.take_requested.connect(self.take)
        bar.snooze_requested.connect(self.snooze)

    def watch(self, activity: Activity, stored: Signal) -> None:
        """``stored`` carries an example's id once its submit or verdict is in the database."""
        stored.connect(lambda example_id: example_id is not None and self.work_ended(activity, example_id))

    def review_opened(self, detail) -> None:
        self._review_shown = (detail.id, time.monotonic()) if detail is not None else None

    def review_acted(self, _example_id=None) -> None:
        """A lead adjudicated, accepted or returned: the example they had open was read until now."""
        if self._review_shown is None:
            return
        example_id, since = self._review_shown
        self._review_shown = (example_id, time.monotonic())  # counted once
        self.work_ended(Activity.REVIEWING, example_id, int((time.monotonic() - since) * 1000))

    def work_ended(self, activity: Activity, example_id: uuid.UUID, spent_ms: int | None = None) -> None:
        desk, person, now = self.desk, self.desk.current_person_id, self.now()
        profile = desk.settings.wellbeing_for(str(person))
        known = person in self.clocks

        def record() -> tuple[Span | None, BreakClock | None]:
            if spent_ms is None:
                span = desk.exposure.record_stored(person, activity, example_id, ended_at=now)
            else:
                span = desk.exposure.record(person, activity, example_id, spent_ms, ended_at=now)
            # a person's first work in this window: their clock as their recorded day leaves it (this span included)
            return span, None if known else desk.exposure.restore_clock(person, profile, now)

        def recorded(result: tuple[Span | None, BreakClock | None]) -> None:
            span, restored = result
            self.person_changed()
            clock = self.clocks.setdefault(person, restored) if restored is not None else self.clocks.get(person)
            if clock is None:
                return
            clock.profile = desk.settings.wellbeing_for(str(person))  # the Profile may have changed it
            if span is not None and restored is None:
                clock.worked(span.started_at, span.ended_at)
            if person != self.desk.current_person_id:
                return
            prompt = clock.prompt(self.now())  # a submit or a verdict: a pause in the work
            if prompt is not None:
                self.shown = (person, prompt)
                self.bar.show_prompt(break_prompt_view(prompt, int(SNOOZE.total_seconds() // 60)))
                self.prompted.emit(prompt)

        self.db.submit(record, on_done=recorded, on_error=self.show_error)

    def take(self) -> None:
        self._answer(BreakAction.TAKEN)

    def snooze(self) -> None:
        self._answer(BreakAction.SNOOZED)

    def _answer(self, action: BreakAction) -> None:
        if self.shown is None:  # from the menu, with no prompt shown
            window = self.bar.window()
            if hasattr(window, "statusBar"):
                window.statusBar().showMessage("No break is suggested just now.", 4000)
            return
        person, prompt = self.shown
        self.shown = None
        now = self.now()
        clock = self.clocks[person]
        if action is BreakAction.TAKEN:
            clock.take_break(now, prompt.kind)
            self.bar.show_note(break_taken_text(prompt))
            self._note_timer.start()
        else:
            clock.snooze(now)
            self.bar.dismiss()
        exposure = self.desk.exposure
        self.db.submit(lambda: exposure.record_break(person, prompt, action, at=now),
                       on_done=lambda _r: self.answered.emit(action.value), on_error=self.show_error)

    def person_changed(self) -> None:
        """Another profile: a prompt meant for the last one goes (it is asked again at their next pause)."""
        if self.shown is not None and self.shown[0] != self.desk.current_person_id:
            self.clocks[self.shown[0]].dismiss()
            self.shown = None
            self.bar.dismiss()


def break_page(window: MainWindow) -> Page:
    """The break prompt, as a bar under the main toolbar, watching Create, Validate and Review."""
    bar = BreakPromptBar()
    holder = QToolBar("Breaks", objectName="break-toolbar", movable=False, floatable=False)
    shown = holder.addWidget(bar)  # a toolbar shows its widgets through their actions
    holder.toggleViewAction().setVisible(False)
    window.addToolBarBreak(Qt.ToolBarArea.TopToolBarArea)
    window.addToolBar(Qt.ToolBarArea.TopToolBarArea, holder)
    holder.setVisible(False)
    bar.shown_changed.connect(shown.setVisible)
    bar.shown_changed.connect(holder.setVisible)
    controller = BreakController(window.desk, window.db, bar, window.show_error, parent=window)
    controller.watch(Activity.WRITING, window.workspace.example_stored)
    controller.watch(Activity.VALIDATING, window.validate.verdict_stored)
    window.review_page.browser.detail_ready.connect(controller.review_opened)
    window.review_page.verdict_stored.connect(controller.review_acted)
    # the profile changes through dialogs and sync: looked at whenever the person moves between pages
    window.tabs.currentChanged.connect(lambda _index: controller.person_changed())
    # the bar's buttons take no focus (a typist keeps the keyboard); the Profile menu reaches them by keyboard
    actions = (MenuAction(Menu.PROFILE, "Take the suggested break", controller.take, name="break-take",
                          separator_before=True),
               MenuAction(Menu.PROFILE, "Remind me about the break later", controller.snooze, name="break-snooze"))
    return Page(controller, actions=actions)
