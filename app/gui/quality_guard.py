"""The Create page's data-quality guard: a novelty indicator while the writer types, and a
near-duplicate warning at submit. Every look-up runs on a lane of its own (the index is built there
when a task opens), never on the GUI thread, and never in the way of a keystroke's prediction,
which goes to the inference service; signatures it computed are stored by the database worker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from PySide6.QtCore import QCoreApplication, QObject, QTimer

from app.core.quality.similarity import normalise
from app.core.tasks.content import written_text
from app.gui.worker import SerialWorker
from app.views.quality import duplicate_warning_view, novelty_view

if TYPE_CHECKING:
    from app.core.quality.near_duplicates import Nearest
    from app.gui.workspace import WorkspaceController

log = logging.getLogger(__name__)
NOVELTY_PAUSE_MS = 300  # the indicator follows a pause in typing, not every keystroke
CHECKING = "Checking for near-duplicates…"


class DuplicateGuard(QObject):
    def __init__(self, controller: WorkspaceController):
        super().__init__(controller)
        self.controller, self.desk, self.view = controller, controller.desk, controller.view
        self.lane = SerialWorker("dynadesk-quality", self)
        self._pause = QTimer(self, singleShot=True, interval=NOVELTY_PAUSE_MS)
        self._pause.timeout.connect(self._ask_novelty)
        self._accepted: str | None = None  # the normalised text the writer chose to submit anyway
        self._pending: tuple[str, Callable[[], None]] | None = None  # the warned text, and what submitting does
        # tasks whose index the lane has built: asking the index would wait on its lock, which a
        # lead's clustering on another lane holds for seconds
        self._built_tasks: set[uuid.UUID] = set()
        self.view.text_edited.connect(self.text_changed)
        self.view.submit_anyway_requested.connect(self.submit_anyway)
        self.view.duplicate_edit_requested.connect(self.go_back)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(self.shutdown)

    def _text(self) -> str | None:
        session = self.controller.session
        if session.definition is None or session.round is None:
            return None
        content = self.view.content()
        if not content.written(session.definition):
            return None
        return written_text(session.definition, dict(content.inputs))

    def _its_own_source(self) -> set[uuid.UUID]:
        """Examples the draft is meant to be near: the original of a perturbation, or the example a
        returned or evaluated text revises (its origin's "of")."""
        draft = self.controller.session.draft
        if draft is None:
            return set()
        sources = {draft.perturbation_of} if draft.perturbation_of else set()
        of = (draft.origin or {}).get("of")
        try:
            sources |= {uuid.UUID(str(of))} if of else set()
        except ValueError:
            pass  # an origin that names no example
        return sources

    def task_opened(self) -> None:
        """Build the task's index on the lane (seconds for 100,000 examples; the first open of an
        older desk computes their signatures), then store new signatures on the database worker."""
        self._pending, self._accepted = None, None
        self.view.show_duplicate_warning(None)
        self.view.show_novelty(None)
        round_ = self.controller.session.round
        if round_ is None:
            return
        index, task_id, db = self.desk.near_duplicates, round_.task_id, self.controller.db

        def built(_) -> None:
            self._built_tasks.add(task_id)
            db.submit(index.save_signatures, on_error=self._failed)

        self.lane.submit(lambda: index.ensure_built(task_id, save=False), on_done=built, on_error=self._failed)

    def text_changed(self) -> None:
        if self._pending is not None:  # the writer went back to the text: the warning has been read
            self._pending = None
            self.view.show_duplicate_warning(None)
        self._pause.start()

    def _ask_novelty(self) -> None:
        text = self._text()
        if text is None:
            self.view.show_novelty(None)
            return
        round_ = self.controller.session.round
        index, task_id, round_id, own = self.desk.near_duplicates, round_.task_id, round_.id, self._its_own_source()
        self.lane.submit_latest("novelty", lambda: index.nearest(task_id, text, round_id=round_id, limit=1,
                                                                 exclude=own),
                                on_done=lambda nearest: self._novelty(text, nearest), on_error=self._failed)

    def _novelty(self, text: str, nearest: Nearest) -> None:
        if self._text() == text:  # else a newer pause asks already
            self.view.show_novelty(novelty_view(nearest, self.controller.assist.session.blur_words))

    def check_then(self, proceed: Callable[[], None]) -> None:
        """At submit: ``proceed`` at once when the text is no near-duplicate of an example of the task
        (or the writer already chose to submit it anyway); else the warning, and proceed on "Submit
        anyway". A text changed while it was checked is not submitted: the writer submits again.
        A perturbation is not warned about its own original (it is meant to be near it). While the
        task's index is still being built (the first open of a large older desk takes tens of
        seconds), submitting goes on unchecked rather than waiting."""
        text = self._text()
        if text is None or normalise(text) == self._accepted:
            proceed()
            return
        task_id, index, own = self.controller.session.round.task_id, self.desk.near_duplicates, self._its_own_source()
        if task_id not in self._built_tasks:  # the first open of a large older desk: the writer does not wait for it
            proceed()
            return
        self.view.set_status(CHECKING)

        def checked(nearest: Nearest) -> None:
            if self._text() != text:
                self.view.set_status("The text changed while it was checked: submit again (Ctrl+Enter).")
                return
            warning = duplicate_warning_view(nearest, self.controller.assist.session.blur_words)
            if warning is None:
                proceed()
                return
            self._pending = (text, proceed)
            self.view.set_status("")
            self.view.show_duplicate_warning(warning)

        def failed(error: BaseException) -> None:  # the guard advises; it never stands in the way
            self._failed(error)
            if self._text() == text:
                proceed()

        self.lane.submit_latest("check", lambda: index.nearest(task_id, text, limit=3, exclude=own), on_done=checked,
                                on_error=failed)

    def warning_shown(self) -> bool:
        return self._pending is not None

    def submit_anyway(self) -> None:
        if self._pending is None:
            return
        text, proceed = self._pending
        self._pending, self._accepted = None, normalise(text)
        self.view.show_duplicate_warning(None)
        proceed()

    def go_back(self) -> None:
        self._pending = None
        self.view.show_duplicate_warning(None)
        self.view.set_status("Change the text, then submit again (Ctrl+Enter).")
        self.view.focus_editor()

    def stored(self) -> None:
        """An example was stored: a new one starts (the indicator follows its first pause)."""
        self._pending, self._accepted = None, None
        self.view.show_duplicate_warning(None)
        self.view.show_novelty(None)

    def _failed(self, error: BaseException) -> None:
        log.warning("data-quality guard: %s", error, exc_info=(type(error), error, error.__traceback__))

    def shutdown(self) -> None:
        self._pause.stop()
        self.lane.shutdown(wait=False)
