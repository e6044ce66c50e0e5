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
from app.services.review import NOT_DRAFT, OBJECTING, ExampleFilter
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
        objected=values.get("objected"),
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
                  ("said incorrect or flagged", sum(v.verdict in OBJECTING for v in example.validations)),
                  ("peer verdicts against the majority", example.disagreement_count), ("flags", example.flag_count),
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
        self.browser.counted.connect(lambda _n: self._select_next_if_wanted())
        # after an action: the rows that followed the acted-on ones, the first still shown is next
        self._next_candidates: list | None = None
        self._acted_row = 0
        view.filters.changed.connect(self._filters_changed)
        view.selection_changed.connect(lambda ids: self.browser.select(ids[0] if ids else None))
        actions = view.actions_panel
        actions.form.submitted.connect(self._adjudicate)
        actions.return_requested.connect(self._return)
        actions.accept_requested.connect(self._accept)
        actions.threshold_requested.connect(self._set_threshold)

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
            threshold = (desk.tasks.agreement_threshold(task.id), definition.agreement_threshold)
            return task.id, annotators, rounds, list(definition.labels), facets, threshold

        def show(result) -> None:
            task_id, annotators, rounds, labels, facets, threshold = result
            self.task_id = task_id
            self.view.filters.set_choices(annotators=annotators, rounds=rounds, labels=labels, facets=facets)
            self.view.actions_panel.set_threshold(*threshold)
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

    def _remember_next(self, acted: list) -> None:
        """Before the table reloads: the rows after the acted-on ones, in the order shown."""
        model = self.view.model
        rows = [r for r in range(model.rowCount()) if model.row_data(r)["id"] in acted]
        last = max(rows, default=self.view.table.currentIndex().row())
        self._acted_row = max(0, min(rows, default=last))
        self._next_candidates = [model.row_data(r)["id"] for r in range(last + 1, model.rowCount())]

    def _select_next_if_wanted(self) -> None:
        """The next example after the one acted on, never back to the top: the first of the rows that
        followed it that the filter still shows; else the row now where it was."""
        candidates, model = self._next_candidates, self.view.model
        if candidates is None or not model.rowCount():
            return
        self._next_candidates = None
        where = {model.row_data(r)["id"]: r for r in range(model.rowCount())}
        row = next((where[i] for i in candidates if i in where), min(self._acted_row, model.rowCount() - 1))
        self.view.table.selectRow(row)
        self.view.table.setFocus()

    def _after_action(self, message: str, example_ids: list) -> None:
        self.view.actions_panel.show_message(message)
        self.view.actions_panel.form.reset()
        self._remember_next(example_ids)
        self.refresh()
        self.verdict_stored.emit(example_ids[0])

    @staticmethod
    def _quoted(text: str, limit: int = 48) -> str:
        flat = " ".join((text or "").split())
        return "“" + (flat if len(flat) <= limit else flat[: limit - 1] + "…") + "”"

    def _set_threshold(self, threshold: int) -> None:
        actions, desk, code = self.view.actions_panel, self.desk, self.task_code
        if code is None:
            return

        def store():
            decided = desk.set_agreement_threshold(desk.current_person_id, code, threshold)
            task_id = desk.tasks.task(code).id
            return decided, desk.tasks.definition(task_id).agreement_threshold

        def done(result) -> None:
            decided, default = result
            actions.set_threshold(threshold, default)
            actions.show_message(f"{threshold} matching verdict{'s' if threshold != 1 else ''} now decide an "
                                 f"example of this task; {decided:,} are decided here, and your team's "
                                 "once you sync.")
            self.refresh()
            self.verdict_stored.emit(None)

        self.db.submit(store, on_done=done,
                       on_error=lambda error: self._refused(error, lambda t: actions.show_message(t, True)))

    # --- the lead's actions -------------------------------------------------------------------------

    def _adjudicate(self, value: dict) -> None:
        form = self.view.actions_panel.form
        if self.detail is None:
            form.show_problem("Select the example to adjudicate.")
            return
        desk, person, example_id = self.desk, self.desk.current_person_id, self.detail["id"]
        which = self._quoted(self._text_of(example_id))

        def store():
            desk.lead.adjudicate(example_id, person, value["verdict"], corrected_label=value["corrected_label"],
                                 reason=value["reason"], model_note=value["model_note"])

        label = value["verdict"] + (f" → {value['corrected_label']}" if value["corrected_label"] else "")
        self.db.submit(store, on_done=lambda _r: self._after_action(f"Decided: {label} (lead verdict) for {which}.",
                                                                    [example_id]),
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

        which = self._quoted(self._text_of(ids[0])) + (f" and {len(ids) - 1} more" if len(ids) > 1 else "")

        def done(count: int) -> None:
            actions.comment.clear()
            self._after_action(f"Returned {which} to the author with your comment.", ids)

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
                                                            f"by {author}.", [example_id]),
                       on_error=lambda error: self._refused(error, lambda t: actions.show_message(t, True)))

    def _text_of(self, example_id) -> str:
        model = self.view.model
        row = next((model.row_data(r) for r in range(model.rowCount()) if model.row_data(r)["id"] == example_id), None)
        return row["text"] if row else ""

    def _refused(self, error: BaseException, inline) -> None:
        if isinstance(error, DynadeskError):
            inline(str(error))
        else:
            form = self.view.actions_panel.form
            form.setEnabled(not form.locked)
            self.show_error(error)
