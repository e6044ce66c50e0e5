"""The Validate tab's controller: serves the person's queue, stores verdicts, reveals outputs.

Every query and write runs on the database worker; the view only gets plain dicts. Skipped
examples are passed over for the rest of the sitting and come round again once nothing else
is left, so the tab never says "nothing to validate" while there is something.
"""

from __future__ import annotations

import time
import uuid

from PySide6.QtCore import QObject, Signal

from app.desk import Desk
from app.errors import DynadeskError
from app.gui.worker import SerialWorker
from app.services.example_view import for_validation
from widgets.validate_view import ValidateView


class ValidateController(QObject):
    verdict_stored = Signal(object)  # the example's id, once its verdict is in the database

    def __init__(self, desk: Desk, db: SerialWorker, view: ValidateView, show_error, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.view, self.show_error = desk, db, view, show_error
        self.task_code: str | None = None
        self.skipped: list[uuid.UUID] = []
        self._person: uuid.UUID | None = None
        self._shown_at = 0.0
        self._generation = 0
        view.form.submitted.connect(self._submit)
        view.form.skipped.connect(self.skip)
        view.next_requested.connect(self.load_next)
        view.reveal_requested.connect(view.reveal)

    def set_task(self, task_code: str | None) -> None:
        if task_code != self.task_code:
            self.task_code = task_code
            self.skipped = []
            self.load_next()

    def refresh(self) -> None:
        """Coming back to the tab: a new profile starts afresh; an example on screen stays."""
        if self.desk.current_person_id != self._person:
            self.skipped = []
            self.load_next()
        elif self.view.example_id is None:
            self.load_next()

    def skip(self) -> None:
        if self.view.example_id is not None:
            self.skipped.append(self.view.example_id)
        self.load_next()

    def load_next(self) -> None:
        if self.task_code is None:
            return
        self._generation += 1
        generation = self._generation
        desk, code, skipped = self.desk, self.task_code, list(self.skipped)
        person = self._person = desk.current_person_id

        def find():
            example = desk.validation.next_for(person, task_code=code, skip=skipped)
            remaining = desk.validation.remaining(person, task_code=code)
            name = desk.people.get(person).display_name
            task = desk.tasks.definition_by_code(code).name
            return (for_validation(desk, example.id) if example else None), remaining, name, task

        def show(result) -> None:
            if generation != self._generation:
                return
            example, remaining, name, task = result
            if example is None:
                self.view.set_status(f"Validating as <b>{name}</b> · {task}")
                self.view.show_empty(f"Nothing left for you to validate in {task}. Examples you wrote, examples "
                                     "you have already validated and examples that are decided are not served.")
                return
            again = " · skipped examples come round again" if example["id"] in skipped else ""
            self.view.set_status(f"Validating as <b>{name}</b> · {task} · <b>{remaining}</b> left for you "
                                 f"(model-fooling first, then the fewest verdicts){again}")
            self.view.show_example(example)
            self._shown_at = time.monotonic()

        self.db.submit(find, on_done=show, on_error=self.show_error)

    def _submit(self, value: dict) -> None:
        example_id = self.view.example_id
        if example_id is None:
            return
        desk, person = self.desk, self.desk.current_person_id
        spent = int((time.monotonic() - self._shown_at) * 1000)

        def store():
            desk.validation.validate(example_id, person, value["verdict"], corrected_label=value["corrected_label"],
                                     reason=value["reason"], model_note=value["model_note"], time_spent_ms=spent)
            return desk.examples.get(example_id).validation_state

        def stored(state: str) -> None:
            if example_id in self.skipped:
                self.skipped.remove(example_id)
            label = value["verdict"] + (f" → {value['corrected_label']}" if value["corrected_label"] else "")
            decided = " The example is now decided." if state == "decided" else ""
            self.view.show_stored(f"✓ Stored your verdict: <b>{label}</b>.{decided}")
            self.verdict_stored.emit(example_id)

        def refused(error: BaseException) -> None:
            if isinstance(error, DynadeskError):
                self.view.form.show_problem(str(error))  # inline, next to what needs fixing
            else:
                self.view.form.setEnabled(True)
                self.show_error(error)

        self.db.submit(store, on_done=stored, on_error=refused)
