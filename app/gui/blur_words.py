"""The lead's blur words for a task, from the Review tab (Blur words… beside Data quality…): read on
the database worker, edited in a small dialog, stored and queued for the team
(``Desk.set_task_settings``); a refusal (not a lead, an entry that cannot be matched) is said in the
tab and nothing is lost."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.core.wellbeing.word_list import bundled_words
from app.views.wellbeing import BlurWordsView, blur_words_message
from widgets.blur_words_dialog import BlurWordsDialog

if TYPE_CHECKING:
    from app.gui.review_page import ReviewController


class BlurWordsEditor:
    def __init__(self, review: ReviewController):
        self.review = review
        self.dialog: BlurWordsDialog | None = None
        review.view.actions_panel.blur_words_requested.connect(self.open)

    def open(self) -> None:
        desk, code = self.review.desk, self.review.task_code
        if code is None:
            return

        def read() -> BlurWordsView:
            return BlurWordsView(desk.tasks.definition_by_code(code).name, len(bundled_words(code)),
                                 desk.tasks.settings(code).blur_words)

        self.review.db.submit(read, on_done=self._show, on_error=self.review.show_error)

    def _show(self, view: BlurWordsView) -> None:
        self.dialog = BlurWordsDialog(view, self.review.view)
        self.dialog.chosen.connect(lambda words: self._store(view.task_name, words))
        self.dialog.open()

    def _store(self, task_name: str, words: list[str]) -> None:
        review = self.review
        desk, code, view = review.desk, review.task_code, review.view
        if code is None:
            return
        review.db.submit(lambda: desk.set_task_settings(desk.current_person_id, code, blur_words=words).settings,
                         on_done=lambda stored: view.show_message(blur_words_message(task_name, stored.blur_words)),
                         on_error=lambda error: review._refused(error, lambda text: view.show_message(text, True)))
