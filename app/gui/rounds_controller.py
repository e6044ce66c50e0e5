"""Connects the round dialog to the round service; every call runs on the database worker."""

from __future__ import annotations

import uuid

from PySide6.QtCore import QObject

from app.core.desk import Desk
from app.core.domain import Role
from app.core.errors import DynadeskError
from app.core.services.rounds import parse_settings
from app.gui.worker import SerialWorker
from app.views.rounds import RoundChanges, round_items, round_view
from widgets.round_dialog import RoundDialog

CONTEXT_ROWS = 200  # the most-served contexts shown in the dialog


class RoundsController(QObject):

    def __init__(self, desk: Desk, worker: SerialWorker, show_error, parent=None):
        super().__init__(parent)
        self.desk = desk
        self.worker = worker
        self.show_error = show_error
        self.dialog: RoundDialog | None = None
        self._task_code = ""

    def open_dialog(self, task_code: str, parent) -> None:
        """The round dialog of the task, once its definition and the profile are read (on the worker)."""
        desk = self.desk

        def read():
            return desk.tasks.definition_by_code(task_code), desk.current_person()

        self.worker.submit(read, on_done=lambda found: self._open_dialog(task_code, parent, *found),
                           on_error=self.show_error)

    def _open_dialog(self, task_code: str, parent, definition, person) -> RoundDialog:
        self._task_code = task_code
        lead = person.role in (Role.LEAD, Role.OWNER)
        self.dialog = dialog = RoundDialog(definition.name, tuple(definition.labels), lead, parent)
        dialog.round_selected.connect(self._load_round)
        dialog.save_requested.connect(self._save)
        dialog.models_requested.connect(self._set_models)
        dialog.close_requested.connect(self._close_round)
        dialog.open_next_requested.connect(self._open_next)
        dialog.import_requested.connect(self._import)
        self._load_rounds()
        dialog.open()
        return dialog

    def _load_rounds(self, select_id=None) -> None:
        code = self._task_code
        rounds = self.desk.tasks

        def load():
            return round_items(rounds.rounds(code))

        self.worker.submit(load, on_done=lambda items: self.dialog and self.dialog.set_rounds(items, select_id),
                           on_error=self._failed)

    def _load_round(self, round_id, message: str = "") -> None:
        desk, code = self.desk, self._task_code

        def load():
            rounds = desk.rounds
            return round_view(rounds.summary_by_id(round_id), rounds.context_stats(round_id, limit=CONTEXT_ROWS),
                              rounds.target_candidates(code))

        def show(view) -> None:
            if self.dialog is not None:
                self.dialog.show_round(view)
                if message:
                    self.dialog.show_note(message)

        self.worker.submit(load, on_done=show, on_error=self._failed)

    def _after_change(self, round_id, message: str):
        def done(_result) -> None:
            self._load_rounds(select_id=round_id)  # the window hears the stored change itself (app/gui/changes.py)
            if self.dialog is not None:
                self.dialog.show_note(message)
        return done

    def _person(self) -> uuid.UUID:
        return self.desk.current_person_id

    def _save(self, round_id, changes: RoundChanges) -> None:
        rounds, by = self.desk.rounds, self._person()

        def save():
            return rounds.update(round_id, by, description=changes.description, goal_message=changes.goal_message,
                                 fooled_rule=changes.fooled_rule, settings=parse_settings(changes.settings()))

        self.worker.submit(save, on_done=self._after_change(round_id, "Settings saved."), on_error=self._failed)

    def _set_models(self, round_id, model_ids: list) -> None:
        rounds, by = self.desk.rounds, self._person()
        self.worker.submit(lambda: rounds.set_models(round_id, by, model_ids),
                           on_done=self._after_change(round_id, "Target models saved."), on_error=self._failed)

    def _close_round(self, round_id) -> None:
        rounds, by = self.desk.rounds, self._person()
        self.worker.submit(lambda: rounds.close(round_id, by), on_done=self._after_change(round_id, "Round closed."),
                           on_error=self._failed)

    def _open_next(self, model_ids: list, description: str, goal: str) -> None:
        rounds, by, code = self.desk.rounds, self._person(), self._task_code

        def open_next():
            return rounds.open_next(code, by, model_ids, description=description or None, goal_message=goal)

        self.worker.submit(open_next, on_done=lambda new: self._after_change(new.id, f"Round {new.number} opened.")(new),
                           on_error=self._failed)

    def _import(self, round_id, path: str, column: str, tag: str) -> None:
        rounds, by = self.desk.rounds, self._person()

        def run():
            return rounds.import_contexts(round_id, by, path, column=column or None, tag=tag)

        self.worker.submit(run, on_done=lambda report: self._load_round(round_id, report.summary()),
                           on_error=self._failed)

    def _failed(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError) and self.dialog is not None and self.dialog.isVisible():
            self.dialog.show_problem(str(error))  # the problem is shown where it happened
        else:
            self.show_error(error)
