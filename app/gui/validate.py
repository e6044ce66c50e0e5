"""The Validate tab's controller: serves the person's queue, stores verdicts, reveals outputs.

Every query and write runs on the database worker; the view gets typed view-models
(``app.views.validate``). Skipped examples are passed over for the rest of the sitting and come
round again once nothing else is left, so the tab never says "nothing to validate" while there is something.
"""

from __future__ import annotations

import time
import uuid

from PySide6.QtCore import QObject, Signal

from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.gui.example_fetch import for_validation
from app.gui.inference import InferenceService
from app.gui.reading_blur import ModelWords
from app.gui.worker import SerialWorker
from app.views.example import VerdictChoice
from app.views.validate import QueueView, queue_view, stored_text
from widgets.validate_view import ValidateView


class ValidateController(QObject):
    verdict_stored = Signal(object)  # the example's id, once its verdict is in the database

    def __init__(self, desk: Desk, db: SerialWorker, view: ValidateView, show_error, parent=None,
                 inference: InferenceService | None = None):
        super().__init__(parent)
        self.desk, self.db, self.view, self.show_error = desk, db, view, show_error
        self.model_words = ModelWords(inference, self)  # the model's words to blur, after the word list's
        self.task_code: str | None = None
        self.skipped: list[uuid.UUID] = []
        self._person: uuid.UUID | None = None
        self._shown_at = 0.0
        view.verdict_submitted.connect(self._submit)
        view.skip_requested.connect(self.skip)
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
        desk, code, skipped = self.desk, self.task_code, list(self.skipped)
        person = self._person = desk.current_person_id

        profile = desk.settings.wellbeing_for(str(person))
        opted = {code: sorted(profile.opted_out(code))}

        def counts(item) -> tuple[int, int]:
            """(left for the person, held back by their opt-outs), each counted once."""
            held = desk.validation.held_back(person, opted, task_code=code) if opted[code] else 0
            return desk.validation.remaining(person, task_code=code) - held if item is not None else 0, held

        def find() -> QueueView:
            example = desk.validation.next_for(person, task_code=code, skip=skipped, opted_out=opted)
            name = desk.people.get(person).display_name
            task = desk.tasks.definition_by_code(code).name
            words = desk.tasks.blur_words(code)
            item = for_validation(desk, example.id, blur_words=words, masked=profile.blur_validating) if example else None
            if item is not None and opted[code]:  # counting past the opt-outs takes longer: it follows
                return queue_view(item, None, name, task, skipped)
            remaining, held = counts(item)
            return queue_view(item, remaining, name, task, skipped, held_back=held, opted_out=opted[code])

        def count_later(item, name: str, task: str) -> None:
            def status() -> str:
                remaining, held = counts(item)
                return queue_view(item, remaining, name, task, skipped, held_back=held, opted_out=opted[code]).status

            def shown(text: str) -> None:
                if self.view.example_id == item.id:  # a count for an example since left is not shown
                    self.view.set_status(text)

            self.db.submit_latest("validate-counts", status, on_done=shown, on_error=self.show_error)

        def show(queue: QueueView) -> None:
            self.view.show_queue(queue)
            if queue.counting is not None:
                count_later(queue.example, *queue.counting)
            self.model_words.cancel()
            example = queue.example
            if example is not None:
                self._shown_at = time.monotonic()
                self.model_words.request(example.id, example.blur, example.labels, self.view.show_model_words)

        # the newest request wins: a queue asked for before a skip or a task switch is not shown
        self.db.submit_latest("validate-next", find, on_done=show, on_error=self.show_error)

    def _submit(self, choice: VerdictChoice) -> None:
        example_id = self.view.example_id
        if example_id is None or choice.verdict is None:
            return
        desk, person = self.desk, self.desk.current_person_id
        spent = int((time.monotonic() - self._shown_at) * 1000)
        verdict = choice.verdict.value

        def store():
            desk.validation.validate(example_id, person, verdict, corrected_label=choice.corrected_label,
                                     reason=choice.reason, model_note=choice.model_note, time_spent_ms=spent)
            return desk.examples.get(example_id).validation_state

        def stored(state: str) -> None:
            if example_id in self.skipped:
                self.skipped.remove(example_id)
            self.view.show_stored(stored_text(choice, state))
            self.verdict_stored.emit(example_id)

        def refused(error: BaseException) -> None:
            if isinstance(error, DynadeskError):
                self.view.show_problem(str(error))  # inline, next to what needs fixing
            else:
                self.view.unlock_form()
                self.show_error(error)

        self.db.submit(store, on_done=stored, on_error=refused)
