"""The Review tab's controller: filters to the lazy browser, figures, and the lead's actions.

A lead's verdict adjudicates (it is final); "accept" takes an annotator's decided work;
"return" sends the selected examples back with a comment the author sees in their history.
Profiles that are not leads can browse, and are told why the actions are off.
"""

from __future__ import annotations

import uuid

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QMessageBox

from app.desk import Desk
from app.errors import DynadeskError
from app.gui.browser import ExampleBrowser
from app.gui.worker import SerialWorker
from app.services.example_view import for_validation
from app.services.review import NOT_DRAFT, ExampleFilter
from app.tasks.definition import MetadataKind
from widgets.review_view import ReviewView


def filter_from(values: dict, task_id: uuid.UUID | None) -> ExampleFilter:
    review = values.get("review_state")
    return ExampleFilter(
        task_id=task_id,
        round_ids=[uuid.UUID(values["round"])] if values.get("round") else (),
        author_ids=[uuid.UUID(values["annotator"])] if values.get("annotator") else (),
        labels=[values["label"]] if values.get("label") else (),
        facets={name: [value] for name, value in (values.get("facets") or {}).items()},
        fooled=values.get("fooled"),
        validation_states=[values["validation_state"]] if values.get("validation_state") else (),
        statuses=NOT_DRAFT,
        text=values.get("text", ""),
        min_disagreements=values.get("min_disagreements"),
        min_flags=values.get("min_flags"),
        review_states=[None] if review == "none" else ([review] if review else ()),
    )


def for_review(desk: Desk, example_id: uuid.UUID) -> dict:
    """The example as ExampleDetail shows it, with every verdict by name and the lead reviews."""
    shown = for_validation(desk, example_id)
    example = desk.examples.get(example_id)
    names = {p.id: p.display_name for p in desk.people.all()}
    verdicts = []
    for v in example.validations:
        who = names.get(v.validator_id, "?") + (" (LEAD, final)" if v.mode == "lead" else "")
        verdicts.append(f"{v.verdict}{' → ' + v.corrected_label if v.corrected_label else ''}"
                        f"{' — ' + v.reason if v.reason else ''}{' · model note: ' + v.model_note if v.model_note else ''}"
                        f" — {who}")
    reviews = [f"{r.action} by {r.lead} {r.at:%Y-%m-%d %H:%M}{': ' + r.comment if r.comment else ''}"
               for r in desk.lead.history(example_id)]
    inputs = shown["context"] + (shown["written"] if shown["pair"] is None else
                                 [("Original", shown["pair"]["original"]["text"]),
                                  ("Perturbation", shown["pair"]["edited"]["text"])])
    decided = example.decided_verdict or "—"
    if example.decided_verdict == "incorrect":
        decided += f" → {example.decided_label}"
    return {
        "id": example.id, "author_id": example.author_id, "author": names.get(example.author_id, "?"),
        "labels": shown["labels"], "review": (example.review_state, example.review_comment),
        "inputs": inputs, "label": shown["label"], "fooled": example.model_fooled, "meta": shown["explanations"],
        "outputs": [{"model": o["model"], "label": o["label"],
                     "probabilities": ", ".join(f"{k} {v:.2f}" for k, v in o["probabilities"].items())}
                    for o in shown["output"]["models"]],
        "validations": verdicts, "verdicts_first": True,
        "facts": [("author", names.get(example.author_id, "?")),
                  ("validation", f"{example.validation_state.replace('_', ' ')} · decided: {decided}"),
                  ("disagreeing verdicts", example.disagreement_count), ("flags", example.flag_count),
                  *[("lead review", text) for text in reviews], ("id", example.id)],
    }


class ReviewController(QObject):
    verdict_stored = Signal(object)  # an example id: adjudicated, accepted or returned

    def __init__(self, desk: Desk, db: SerialWorker, view: ReviewView, show_error, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.view, self.show_error = desk, db, view, show_error
        self.task_code: str | None = None
        self.task_id: uuid.UUID | None = None
        self.detail: dict | None = None
        self.browser = ExampleBrowser(desk, db, view.model, lambda example_id: for_review(desk, example_id),
                                      show_error, self)
        self.browser.detail_ready.connect(self._show_detail)
        self.browser.counted.connect(lambda _n: self._select_first_if_wanted())
        self._select_first = False
        view.filters.changed.connect(self._filters_changed)
        view.selection_changed.connect(lambda ids: self.browser.select(ids[0] if ids else None))
        actions = view.actions_panel
        actions.form.submitted.connect(self._adjudicate)
        actions.return_requested.connect(self._return)
        actions.accept_requested.connect(self._accept)

    # --- filters and figures ------------------------------------------------------------------

    def set_task(self, task_code: str | None) -> None:
        if task_code is None:
            return
        self.task_code = task_code
        desk = self.desk

        def choices():
            definition = desk.tasks.definition_by_code(task_code)
            task = desk.tasks.task(task_code)
            rounds = [(f"Round {r.number} ({r.status})", str(r.id)) for r in desk.tasks.rounds(task_code)]
            annotators = [(p.display_name, str(p.id)) for p in desk.people.all()]
            facets = [(f.name, f.label, f.choices) for f in definition.metadata if f.kind != MetadataKind.TEXT]
            return task.id, annotators, rounds, list(definition.labels), facets

        def show(result) -> None:
            task_id, annotators, rounds, labels, facets = result
            self.task_id = task_id
            self.view.filters.set_choices(annotators=annotators, rounds=rounds, labels=labels, facets=facets)
            self.refresh()

        self.db.submit(choices, on_done=show, on_error=self.show_error)

    def refresh(self) -> None:
        self._update_lead()
        self._filters_changed(self.view.filters.value())

    def _filters_changed(self, values: dict) -> None:
        flt = filter_from(values, self.task_id)
        self.browser.set_filter(flt)
        review, generation = self.desk.review, self.browser.generation

        def show(figures: dict) -> None:
            if generation == self.browser.generation:  # figures of an older filter are dropped
                self.view.set_figures(figures)

        self.db.submit(lambda: review.summary(flt), on_done=show, on_error=self.show_error)

    def _update_lead(self) -> None:
        desk = self.desk
        person = desk.current_person_id

        def who():
            return desk.lead.is_lead(person), desk.people.get(person).display_name

        self.db.submit(who, on_done=lambda r: self.view.actions_panel.set_lead(*r), on_error=self.show_error)

    # --- the selected example -------------------------------------------------------------------

    def _show_detail(self, detail: dict | None) -> None:
        self.detail = detail
        self.view.detail.show_example(detail)
        form = self.view.actions_panel.form
        if detail is None:
            form.set_labels([], None)
            return
        form.set_labels(detail["labels"], detail["label"])
        self.view.actions_panel.accept_button.setText(f"Accept {detail['author']}'s decided work…")

    def _select_first_if_wanted(self) -> None:
        if self._select_first and self.view.model.rowCount():
            self._select_first = False
            self.view.table.selectRow(0)
            self.view.table.setFocus()

    def _after_action(self, message: str, example_id) -> None:
        self.view.actions_panel.show_message(message)
        self.view.actions_panel.form.reset()
        self._select_first = True  # the next one to look at, where the filter still shows it
        self.refresh()
        self.verdict_stored.emit(example_id)

    # --- the lead's actions -------------------------------------------------------------------------

    def _adjudicate(self, value: dict) -> None:
        form = self.view.actions_panel.form
        if self.detail is None:
            form.show_problem("Select the example to adjudicate.")
            return
        desk, person, example_id = self.desk, self.desk.current_person_id, self.detail["id"]

        def store():
            desk.lead.adjudicate(example_id, person, value["verdict"], corrected_label=value["corrected_label"],
                                 reason=value["reason"], model_note=value["model_note"])

        label = value["verdict"] + (f" → {value['corrected_label']}" if value["corrected_label"] else "")
        self.db.submit(store, on_done=lambda _r: self._after_action(f"Decided: {label} (lead verdict).", example_id),
                       on_error=lambda error: self._refused(error, form.show_problem))

    def _return(self, comment: str) -> None:
        ids = self.view.selected_ids()
        actions = self.view.actions_panel
        if not ids:
            actions.show_message("Select the examples to return.", problem=True)
            return
        if not comment:
            actions.show_message("Returning work needs a comment: tell the annotator what to fix.", problem=True)
            actions.comment.setFocus()
            return
        desk, person = self.desk, self.desk.current_person_id

        def done(count: int) -> None:
            actions.comment.clear()
            self._after_action(f"Returned {count} example{'s' if count != 1 else ''} with your comment.", ids[0])

        self.db.submit(lambda: desk.lead.return_examples(person, ids, comment), on_done=done,
                       on_error=lambda error: self._refused(error, lambda t: actions.show_message(t, True)))

    def _accept(self) -> None:
        actions = self.view.actions_panel
        if self.detail is None:
            actions.show_message("Select an example of the annotator whose work you accept.", problem=True)
            return
        author, author_id, task_id = self.detail["author"], self.detail["author_id"], self.task_id
        answer = QMessageBox.question(self.view, "Accept work",
                                      f"Accept every decided example by {author} in this task that is not accepted "
                                      "yet?", QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No)
        if answer != QMessageBox.StandardButton.Yes:
            return
        desk, person, example_id = self.desk, self.desk.current_person_id, self.detail["id"]
        self.db.submit(lambda: desk.lead.accept_work(person, author_id, task_id=task_id),
                       on_done=lambda n: self._after_action(f"Accepted {n} decided example{'s' if n != 1 else ''} "
                                                            f"by {author}.", example_id),
                       on_error=lambda error: self._refused(error, lambda t: actions.show_message(t, True)))

    def _refused(self, error: BaseException, inline) -> None:
        if isinstance(error, DynadeskError):
            inline(str(error))
        else:
            form = self.view.actions_panel.form
            form.setEnabled(not form.locked)
            self.show_error(error)
