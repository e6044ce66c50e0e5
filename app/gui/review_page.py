"""The Review tab's controller: filters to the lazy browser, figures, and the lead's actions.

A lead's verdict adjudicates (it is final); "accept" takes an annotator's decided work;
"return" sends the selected examples back with a comment the author sees in their history.
Profiles that are not leads can browse, and are told why the actions are off.
"""

from __future__ import annotations

import uuid

from PySide6.QtCore import QCoreApplication, QObject, Signal
from PySide6.QtWidgets import QMessageBox

from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.core.services.review import NOT_DRAFT, ExampleFilter
from app.core.wellbeing.blur import blurred
from app.gui.blur_words import BlurWordsEditor
from app.gui.browser import ExampleBrowser
from app.gui.example_fetch import for_review, reading_words
from app.gui.worker import SerialWorker
from app.views.example import VerdictChoice, verdict_text
from app.views.quality import chosen_settings, clusters_view, quality_settings_message, quality_settings_view, snippet
from app.views.review import ReviewChoicesView, ReviewFilterValues, ReviewItemView, review_choices, review_figures
from widgets.review_view import ReviewView


def filter_from(values: ReviewFilterValues, task_id: uuid.UUID | None) -> ExampleFilter:
    return ExampleFilter(
        task_id=task_id,
        round_ids=[values.round] if values.round else (),
        author_ids=[values.annotator] if values.annotator else (),
        labels=[values.label] if values.label else (),
        facets={name: [value] for name, value in values.facets},
        fooled=values.fooled,
        validation_states=[values.validation_state.value] if values.validation_state else (),
        statuses=NOT_DRAFT,
        text=values.text,
        min_disagreements=values.min_disagreements,
        min_flags=values.min_flags,
        review_states=[None if s is None else s.value for s in values.review_states] if values.review_states else (),
        objected=values.objected,
        variants=False,  # Review is what people wrote: the generated variants are vetted in Validate
    )


class ReviewController(QObject):
    verdict_stored = Signal(object)  # an example id: adjudicated, accepted or returned

    def __init__(self, desk: Desk, db: SerialWorker, view: ReviewView, show_error, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.view, self.show_error = desk, db, view, show_error
        self.task_code: str | None = None
        self.task_id: uuid.UUID | None = None
        self.detail: ReviewItemView | None = None
        self.browser = ExampleBrowser(desk, db, view.model, lambda example_id: for_review(desk, example_id),
                                      show_error, self, browsing=False)
        self.browser.detail_ready.connect(self._show_detail)
        self.browser.counted.connect(lambda _n: self._select_next_if_wanted())
        # after an action: the rows that followed the acted-on ones, the first still shown is next
        self._next_candidates: list | None = None
        self._acted_row = 0
        view.filters_changed.connect(self._filters_changed)
        view.selection_changed.connect(lambda ids: self.browser.select(ids[0] if ids else None))
        view.verdict_submitted.connect(self._adjudicate)
        view.return_requested.connect(self._return)
        view.accept_requested.connect(self._accept)
        view.threshold_requested.connect(self._set_threshold)
        view.quality_settings_requested.connect(self._edit_quality_settings)
        self.blur_words = BlurWordsEditor(self)  # the lead's blur words for the task (analyst wellbeing)
        view.quality_settings_chosen.connect(self._set_quality_settings)
        # near-duplicate clusters of a whole task take a second or more at 100,000 examples: not on the writer lane
        self.quality_lane = SerialWorker("dynadesk-review-quality", self)
        app = QCoreApplication.instance()
        if app is not None:
            app.aboutToQuit.connect(lambda: self.quality_lane.shutdown(wait=False))

    def set_task(self, task_code: str | None) -> None:
        if task_code is None:
            return
        self.task_code = task_code
        desk = self.desk

        def choices() -> ReviewChoicesView:
            task = desk.tasks.task(task_code)
            return review_choices(task.id, desk.tasks.definition_by_code(task_code), desk.tasks.rounds(task_code),
                                  desk.people.all(), desk.tasks.agreement_threshold(task.id))

        def show(choices: ReviewChoicesView) -> None:
            self.task_id = choices.task_id
            self.view.show_choices(choices)
            self.refresh()

        self.db.submit(choices, on_done=show, on_error=self.show_error)

    def refresh(self) -> None:
        self._update_lead()
        self._filters_changed(self.view.filter_values())

    def _filters_changed(self, values: ReviewFilterValues) -> None:
        if values.near_duplicates:
            self._show_clusters(values)
            return
        self.view.show_clusters(None)
        flt = filter_from(values, self.task_id)
        self.browser.set_filter(flt)
        review = self.desk.review
        # figures of an older filter are dropped: the newest request wins
        self.db.submit_latest("review-figures", lambda: review_figures(review.summary(flt)),
                              on_done=self.view.set_figures, on_error=self.show_error)

    def _show_clusters(self, values: ReviewFilterValues) -> None:
        task_id, index, desk, code = self.task_id, self.desk.near_duplicates, self.desk, self.task_code
        if task_id is None or code is None:
            return

        def clusters():
            threshold = index.threshold_of(task_id)
            found = index.near_duplicate_clusters(task_id, round_id=values.round, threshold=threshold)
            words = reading_words(desk, browsing=False)(code)  # read as the Review table is
            summaries = {example_id: (blurred(text, words), author) for example_id, (text, author)
                         in index.summaries(m.example_id for c in found for m in c.members).items()}
            return clusters_view(found, summaries, threshold, annotator=values.annotator)

        self.quality_lane.submit_latest("review-clusters", clusters, on_done=self.view.show_clusters,
                                        on_error=self.show_error)

    def _update_lead(self) -> None:
        desk = self.desk
        person = desk.current_person_id

        def who():
            return desk.lead.is_lead(person), desk.people.get(person).display_name

        self.db.submit(who, on_done=lambda r: self.view.set_lead(*r), on_error=self.show_error)

    def _show_detail(self, detail: ReviewItemView | None) -> None:
        self.detail = detail
        self.view.show_item(detail)

    def _remember_next(self, acted: list) -> None:
        """Before the table reloads: the rows after the acted-on ones, in the order shown."""
        ids = [row.id for row in self.view.shown_rows()]
        rows = [r for r, example_id in enumerate(ids) if example_id in acted]
        current = self.view.current_row()
        last = max(rows, default=ids.index(current.id) if current is not None else -1)
        self._acted_row = max(0, min(rows, default=last))
        self._next_candidates = ids[last + 1:]

    def _select_next_if_wanted(self) -> None:
        """The next example after the one acted on, never back to the top: the first of the rows that
        followed it that the filter still shows; else the row now where it was."""
        candidates, shown = self._next_candidates, self.view.shown_rows()
        if candidates is None or not shown:
            return
        self._next_candidates = None
        where = {row.id: r for r, row in enumerate(shown)}
        row = next((where[i] for i in candidates if i in where), min(self._acted_row, len(shown) - 1))
        self.view.select_row(row)

    def _after_action(self, message: str, example_ids: list) -> None:
        """The rows come again through the window's change routing (the store's changes reach it first;
        the new rows arrive after this, and the next example is chosen among them)."""
        self.view.action_done(message)
        if not self.view.clusters_shown():  # the clusters are computed again, not paged
            self._remember_next(example_ids)
        self.verdict_stored.emit(example_ids[0])

    @staticmethod
    def _quoted(text: str, limit: int = 48) -> str:
        return "“" + snippet(text or "", limit) + "”"

    def _set_threshold(self, threshold: int) -> None:
        view, desk, code = self.view, self.desk, self.task_code
        if code is None:
            return

        def store():
            decided = desk.set_task_settings(desk.current_person_id, code, agreement_threshold=threshold).decided
            task_id = desk.tasks.task(code).id
            return decided, desk.tasks.definition(task_id).agreement_threshold

        def done(result) -> None:
            decided, default = result
            view.set_threshold(threshold, default)
            view.show_message(f"{threshold} matching verdict{'s' if threshold != 1 else ''} now decide an "
                              f"example of this task; {decided:,} are decided here, and your team's "
                              "once you sync.")
            self.verdict_stored.emit(None)

        self.db.submit(store, on_done=done,
                       on_error=lambda error: self._refused(error, lambda t: view.show_message(t, True)))

    def _edit_quality_settings(self) -> None:
        desk, code = self.desk, self.task_code
        if code is None:
            return
        self.db.submit(lambda: quality_settings_view(desk.tasks.definition_by_code(code).name,
                                                     desk.tasks.settings(code).quality),
                       on_done=self.view.edit_quality_settings, on_error=self.show_error)

    def _set_quality_settings(self, near_percent: int, token_z: float, rate_percent: int) -> None:
        view, desk, code = self.view, self.desk, self.task_code
        if code is None:
            return
        try:
            settings = chosen_settings(near_percent, token_z, rate_percent)
        except DynadeskError as error:
            view.show_message(str(error), True)
            return

        def done(_) -> None:
            view.show_message(quality_settings_message(settings))

        self.db.submit(lambda: desk.set_task_settings(desk.current_person_id, code, quality=settings), on_done=done,
                       on_error=lambda error: self._refused(error, lambda t: view.show_message(t, True)))

    def _adjudicate(self, choice: VerdictChoice) -> None:
        view = self.view
        if self.detail is None:
            view.show_problem("Select the example to adjudicate.")
            return
        desk, person, example_id = self.desk, self.desk.current_person_id, self.detail.id
        which = self._quoted(self._text_of(example_id))
        verdict = None if choice.verdict is None else choice.verdict.value

        def store():
            desk.lead.adjudicate(example_id, person, verdict, corrected_label=choice.corrected_label,
                                 reason=choice.reason, model_note=choice.model_note)

        label = verdict_text(choice)
        self.db.submit(store, on_done=lambda _r: self._after_action(f"Decided: {label} (lead verdict) for {which}.",
                                                                    [example_id]),
                       on_error=lambda error: self._refused(error, view.show_problem))

    def _return(self, comment: str) -> None:
        view = self.view
        ids = view.selected_ids()
        if not ids:
            view.show_message("Select the examples to return.", problem=True)
            return
        if not comment:
            view.ask_for_comment()
            return
        desk, person = self.desk, self.desk.current_person_id

        which = self._quoted(self._text_of(ids[0])) + (f" and {len(ids) - 1} more" if len(ids) > 1 else "")

        def done(count: int) -> None:
            view.clear_comment()
            self._after_action(f"Returned {which} to the author with your comment.", ids)

        self.db.submit(lambda: desk.lead.return_examples(person, ids, comment), on_done=done,
                       on_error=lambda error: self._refused(error, lambda t: view.show_message(t, True)))

    def _accept(self) -> None:
        view = self.view
        if self.detail is None:
            view.show_message("Select an example of the annotator whose work you accept.", problem=True)
            return
        author, author_id, task_id = self.detail.author, self.detail.author_id, self.task_id
        answer = QMessageBox.question(self.view, "Accept work",
                                      f"Accept every decided example by {author} in this task that is not accepted "
                                      "yet?", QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        if answer != QMessageBox.StandardButton.Yes:
            return
        desk, person, example_id = self.desk, self.desk.current_person_id, self.detail.id
        self.db.submit(lambda: desk.lead.accept_work(person, author_id, task_id=task_id),
                       on_done=lambda n: self._after_action(f"Accepted {n} decided example{'s' if n != 1 else ''} "
                                                            f"by {author}.", [example_id]),
                       on_error=lambda error: self._refused(error, lambda t: view.show_message(t, True)))

    def _text_of(self, example_id) -> str:
        if self.view.clusters_shown():
            return self.view.clusters.text_of(example_id)
        row = next((row for row in self.view.shown_rows() if row.id == example_id), None)
        return row.text if row else ""

    def _refused(self, error: BaseException, inline) -> None:
        if isinstance(error, DynadeskError):
            inline(str(error))
        else:
            self.view.unlock_form()
            self.show_error(error)
