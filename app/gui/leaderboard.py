"""The leaderboard panel's controller: reads the board and plans a fill on a reader thread of its own
(reading every round's decided examples takes about a second per 10k: an automatic fill never holds
up the database lane's writes), scores the missing cells as a job of the one inference service (its
own thread, cancellable, with progress), keeps them on the database worker, and shows the board as a
typed view-model. The GUI thread never waits on any of them.

    controller = LeaderboardController(desk, db, inference, panel)
    controller.fill(task_code)                 # missing cells: when the Evaluate tab opens, after a round change
    controller.fill(task_code, refresh=True)   # also stale and failed ones: the Refresh button
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QObject, Signal

from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.core.next_round.leaderboard import (
    LeaderboardError,
    LeaderboardPlan,
    ScoredCell,
    compute_cells,
    plan_leaderboard,
    read_leaderboard,
    store_cells,
)
from app.gui.inference import InferenceFailure, InferenceService, Reply
from app.gui.worker import SerialWorker
from app.views.leaderboard import LeaderboardView, build_leaderboard
from widgets.leaderboard_view import LeaderboardPanel

log = logging.getLogger(__name__)


class LeaderboardController(QObject):
    shown = Signal(object)  # the LeaderboardView now on screen
    filled = Signal(int)  # cells scored by the fill that just ended (0: nothing was missing)

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, panel: LeaderboardPanel):
        super().__init__(panel)
        self.desk, self.db, self.inference, self.panel = desk, db, inference, panel
        # Reading the board reads every round's decided examples (~1 s per 10k): on a reader of its own, so
        # that a fill started by a tab or a round change never holds up the database lane's writes.
        self.reader = SerialWorker("dynadesk-leaderboard", self)
        self.task_code = "hate_speech"
        self.job: Reply | None = None  # the running fill's scoring
        self._pending: tuple[str, bool] | None = None  # a fill asked for while one runs
        self._busy = False
        self._cancel_asked = False
        panel.refresh_requested.connect(lambda: self.fill(self.task_code, refresh=True))
        panel.cancel_requested.connect(self.cancel)

    @property
    def running(self) -> bool:
        """From the reading of the plan to the keeping of the cells."""
        return self._busy

    def fill(self, task_code: str | None = None, *, refresh: bool = False) -> None:
        """Show the task's board and score what is missing (``refresh``: and what is stale or failed)."""
        code = task_code or self.task_code
        if self._busy:  # one fill at a time; the newest request runs next (a refresh asked for stays one)
            waiting = self._pending
            self._pending = (code, refresh or (waiting is not None and waiting[0] == code and waiting[1]))
            if code != self.task_code:
                self.cancel()  # another task is shown now: its board first
            return
        self._busy = True
        self.task_code = code
        self.panel.set_running(True)
        self.panel.set_status("Reading the leaderboard…")
        desk = self.desk
        self.reader.submit(lambda: plan_leaderboard(desk, code, refresh=refresh),
                           on_done=lambda plan: self._planned(code, plan), on_error=self._error)

    def round_changed(self, task_code: str) -> None:
        """A round opened, closed or was promoted: score the new cells in the background."""
        self.fill(task_code)

    def shutdown(self) -> None:
        """The window closes: a running job is cancelled (the inference service stops its own); the reader
        finishes the read it is in."""
        if self.job is not None:
            self.job.cancel()
        self.reader.shutdown(wait=True)

    def cancel(self) -> None:
        if self.job is not None:  # said first: a job not yet started ends within cancel(), saying so
            self.panel.set_status("Cancelling after the current batch; the cells scored so far are kept…")
            self.job.cancel()
        elif self._busy:  # still reading: no job is started
            self._cancel_asked = True
            self.panel.set_status("Cancelling…")

    def _planned(self, code: str, plan: LeaderboardPlan) -> None:
        self._show(plan.board)
        cancelled, self._cancel_asked = self._cancel_asked, False
        if cancelled and plan.work:
            self._finished(0, "Cancelled; nothing was scored. Refresh scores the missing cells.")
            return
        if not plan.work:
            self._finished(0, self._settled_text(plan))
            return
        count = plan.cells_to_score
        models = len(plan.work)
        self.panel.set_status(f"Scoring {count} cell{'s' if count != 1 else ''} ({models} "
                              f"model{'s' if models != 1 else ''}) in the background…")
        partial: list[ScoredCell] = []
        self.job = self.inference.run_job(lambda progress: compute_cells(plan, progress, into=partial),
                                          on_progress=self.panel.set_progress,
                                          on_message=self.panel.set_status, on_done=self._done,
                                          on_failed=self._failed, on_cancelled=lambda: self._cancelled(partial))

    @staticmethod
    def _settled_text(plan: LeaderboardPlan) -> str:
        stale = plan.board.counts().get("stale", 0)
        if stale:
            return f"{stale} cell{'s are' if stale != 1 else ' is'} stale: new decisions changed the split. " \
                   "Press Refresh to score them again."
        return "Up to date."

    def _done(self, scored) -> None:
        self.job = None
        self._keep(list(scored), f"Scored {len(scored)} cell{'s' if len(scored) != 1 else ''}.")

    def _cancelled(self, partial: list[ScoredCell]) -> None:
        self.job = None
        kept = list(partial)  # what the job scored before it stopped
        self._keep(kept, f"Cancelled; {len(kept)} cell{'s' if len(kept) != 1 else ''} scored before it "
                         "are kept. Refresh scores the rest.")

    def _failed(self, failure: InferenceFailure) -> None:
        self.job = None
        self._finished(0, f"The leaderboard could not be scored: {failure.message}", error=True)

    def _keep(self, scored: list[ScoredCell], message: str) -> None:
        desk, code = self.desk, self.task_code

        def shown(board) -> None:
            self._show(board)
            self._finished(len(scored), message)

        def kept(_nothing) -> None:  # written by the database lane; read back by the reader
            self.reader.submit(lambda: read_leaderboard(desk, code), on_done=shown, on_error=self._error)

        self.db.submit(lambda: store_cells(desk, scored), on_done=kept, on_error=self._error)

    def _show(self, board) -> None:
        if board.task_code != self.task_code:
            return
        view = build_leaderboard(board)
        self.panel.show_board(view)
        self.shown.emit(view)

    def _finished(self, scored: int, message: str, *, error: bool = False) -> None:
        self._busy = False
        self.panel.set_running(False)
        self.panel.set_status(message, error=error)
        self.filled.emit(scored)
        pending, self._pending = self._pending, None
        if pending is not None:
            self.fill(pending[0], refresh=pending[1])

    def _error(self, error: BaseException) -> None:
        if isinstance(error, LeaderboardError):  # a task the board does not apply to (extractive QA): a note
            self.panel.show_board(LeaderboardView(self.task_code, (), (), (), "", str(error)))
            self._finished(0, "")
            return
        if isinstance(error, DynadeskError):
            text = str(error)
        else:
            log.error("leaderboard error", exc_info=(type(error), error, error.__traceback__))
            text = f"Unexpected error: {error}. Details are in the log."
        self._finished(0, text, error=True)
