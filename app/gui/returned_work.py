"""Work a lead returned, shown to its author: a notice in Create and a count in the status bar.

The count is of the working profile's examples whose latest review is "returned" and that they
have not retracted (``LeadReviewService.returned_count``); it is asked again whenever the window
refreshes (a stored example, a retraction, a sync, a profile switch).
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel

from app.core.desk import Desk
from app.gui.worker import SerialWorker
from widgets.workspace_view import Banner


def returned_text(count: int) -> str:
    return f"{count} example{'s' if count != 1 else ''} returned to you"


class ReturnedWork(QObject):
    counted = Signal(int)  # how many are shown as waiting for the author

    def __init__(self, desk: Desk, db: SerialWorker, banner: Banner, status_label: QLabel,
                 show_them: Callable[[], None], show_error, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.banner, self.label, self.show_error = desk, db, banner, status_label, show_error
        self.count = 0
        self._hidden_at: int | None = None  # the count when the writer hid the notice
        banner.primary_clicked.connect(show_them)
        banner.secondary_clicked.connect(self._hide)
        status_label.setOpenExternalLinks(False)
        status_label.linkActivated.connect(lambda _link: show_them())
        status_label.setToolTip("Examples a lead sent back with a comment: open them in the Data tab")
        status_label.hide()

    def refresh(self) -> None:
        desk = self.desk
        self.db.submit(lambda: desk.lead.returned_count(desk.current_person_id), on_done=self._show,
                       on_error=self.show_error)

    def _show(self, count: int) -> None:
        self.count = count
        self.label.setVisible(count > 0)
        self.label.setText(f"<a href='returned' style='color:#b3261e'>{returned_text(count)}</a>")
        if count and count != self._hidden_at:
            self.banner.show_message(f"<b>{returned_text(count)}</b> by a lead, with a comment on what to fix.",
                                     "Show them", "Hide")
        elif not count:
            self.banner.hide()
        self.counted.emit(count)

    def _hide(self) -> None:
        self._hidden_at = self.count
        self.banner.hide()
