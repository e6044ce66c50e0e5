"""The desk's changes, brought to the GUI thread and routed: the one place the main window learns what a
store changed, and sends it to the parts of the window whose data it touched.

Writes commit on worker threads (the database worker, sync, a promotion); the desk's change log tells
each commit's :class:`app.core.changes.Changes` on the thread that committed. The relay gathers them
and hands them to the GUI thread as one ``changed`` per turn of the event loop, so a burst of commits
(an import, a pull of many pages) makes the views look again once, not once a commit. The main
window's ``_route`` (:class:`ChangeRoutes`) gives them to each mounted page that ``watches`` the data
they touch; no store refreshes the window itself.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Qt, Signal

from app.core.changes import NO_CHANGES, Changes, Data
from app.core.storage.change_log import ChangeLog

if TYPE_CHECKING:
    from app.gui.browser import ExampleBrowser
    from app.gui.pages import Page
    from app.gui.review_page import ReviewController
    from app.gui.validate import ValidateController
    from app.views.example import DataFilterValues
    from widgets.filter_bar import FilterBar
    from widgets.page_tabs import PageTabs
    from widgets.review_view import ReviewView
    from widgets.validate_view import ValidateView

log = logging.getLogger(__name__)
# What each part of the window shows, so that a store re-reads only the parts it touched.
DATA_TABLE = (Data.EXAMPLES | Data.VALIDATIONS | Data.REVIEWS | Data.ROUNDS | Data.TASKS | Data.PEOPLE | Data.PROFILE
              | Data.TASK_SETTINGS | Data.PREFERENCES)  # the rows, their states and authors, read through the blur
RETURNED_WORK = Data.EXAMPLES | Data.REVIEWS | Data.PROFILE
VALIDATE_QUEUE = Data.EXAMPLES | Data.VALIDATIONS | Data.PROFILE | Data.PREFERENCES
CREATE = Data.PREFERENCES  # the writing assistant's rows, masked as the writer chose
REVIEW_TABLE = DATA_TABLE
SYNC_STATE = Data.SYNC | Data.PROFILE  # what waits to be sent, and for whom


class ChangeRelay(QObject):
    changed = Signal(object)  # Changes: what the writes since the last one changed (on the GUI thread)
    _arrived = Signal()  # from any thread: changes wait to be handed over

    def __init__(self, change_log: ChangeLog, parent: QObject | None = None):
        super().__init__(parent)
        self._log = change_log
        self._lock = threading.Lock()
        self._pending = NO_CHANGES
        self._arrived.connect(self._hand_over, Qt.ConnectionType.QueuedConnection)
        change_log.subscribe(self._record)
        # a relay destroyed without close() (a window never closed) no longer hears the log
        self.destroyed.connect(lambda *_: change_log.unsubscribe(self._record))

    def _record(self, changes: Changes) -> None:
        """On the committing thread."""
        with self._lock:
            first = not self._pending
            self._pending = self._pending | changes
        if first:
            self._arrived.emit()

    def _hand_over(self) -> None:
        with self._lock:
            changes, self._pending = self._pending, NO_CHANGES
        if changes:
            self.changed.emit(changes)

    def close(self) -> None:
        self._log.unsubscribe(self._record)


class ChangeRoutes:
    """Mixed into the main window, which makes these attributes and mounts the pages."""

    pages: list[Page]
    tabs: PageTabs
    browser: ExampleBrowser
    filter_bar: FilterBar
    validate: ValidateController
    validate_view: ValidateView
    review_page: ReviewController
    review_view: ReviewView
    _filters_changed: Callable[[DataFilterValues], None]

    def _route(self, changes: Changes) -> None:
        """The one place a store's changes reach the views: each page whose data they touch looks again."""
        log.debug("changed: %s", changes)
        for page in self.pages:
            if page.changed is not None and changes.touches(page.watches):
                page.changed(changes)

    def _data_changed(self, changes: Changes) -> None:
        if changes.touches(Data.ROUNDS | Data.TASKS):
            return  # the rounds' page reads the task again, and filters the table anew
        if changes.touches(Data.PROFILE):
            self._filters_changed(self.filter_bar.value())  # "mine" and "returned to me" are someone else's now
        else:
            self._reload_data()

    def _reload_data(self) -> None:
        """Re-run the query (answers to older queries are dropped when they arrive); the selected
        example stays selected (ExampleTableView keeps it across the reset), so a sync in the background
        does not take it from under the user."""
        self.browser.refresh()

    def _validate_changed(self, changes: Changes) -> None:
        """New work to validate, or another profile: looked at in view (an example on screen stays);
        out of view, when the tab is shown. The person's blur and opt-outs: at once."""
        if self.validate.task_code is None:
            return
        if changes.touches(Data.PREFERENCES):
            self.validate.load_next()  # the example again, masked as now chosen, with the opt-outs
        elif self.tabs.currentWidget() is self.validate_view:
            self.validate.refresh()

    def _review_changed(self, changes: Changes) -> None:
        if self.tabs.currentWidget() is not self.review_view:
            return  # read again when the tab is shown
        if changes.touches(Data.ROUNDS | Data.PEOPLE | Data.TASK_SETTINGS):
            self.review_page.set_task(self.review_page.task_code)  # its filter choices, threshold, and the rows
        else:
            self.review_page.refresh()
