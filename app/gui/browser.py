"""A lazy example browser: filter → paged table → detail, with all queries on the database worker.

The first page is fetched before the count, so the table fills at once even where counting
a large filter takes longer; later pages arrive as the view scrolls (canFetchMore/fetchMore).
Answers to an older filter are dropped when they arrive.
"""

from __future__ import annotations

import uuid
from typing import Callable

from PySide6.QtCore import QObject, Signal

from app.desk import Desk
from app.gui.worker import SerialWorker
from app.services.review import ExampleFilter, ExampleRow
from widgets.example_table import PAGE_SIZE, ExampleTableModel


def row_dict(row: ExampleRow) -> dict:
    return {
        "id": row.id, "submitted_at": row.submitted_at.strftime("%Y-%m-%d %H:%M") if row.submitted_at else "",
        "round": row.round_number, "author": row.author, "text": row.text, "label": row.true_label,
        "fooled": row.model_fooled, "status": row.status, "validation_state": row.validation_state.replace("_", " "),
        "validations": row.validation_count, "disagreements": row.disagreement_count, "flags": row.flag_count,
        "decided": row.decided_verdict, "decided_label": row.decided_label, "perturbation_of": row.perturbation_of,
        "review_state": row.review_state,
        "review_comment": row.review_comment, "objections": row.objections,
    }


class ExampleBrowser(QObject):
    counted = Signal(int)  # how many match the current filter
    detail_ready = Signal(object)  # the detail dict of the selected example, or None

    def __init__(self, desk: Desk, db: SerialWorker, model: ExampleTableModel,
                 detail_loader: Callable[[uuid.UUID], dict], show_error, parent=None):
        super().__init__(parent)
        self.desk, self.db, self.model = desk, db, model
        self.detail_loader, self.show_error = detail_loader, show_error
        self.filter = ExampleFilter()
        self.generation = 0
        model.page_wanted.connect(self._fetch_page)
        model.sort_requested.connect(lambda *_: self.refresh())

    def set_filter(self, flt: ExampleFilter) -> None:
        self.filter = flt
        self.refresh()

    def refresh(self) -> None:
        self.generation += 1
        generation = self.generation
        flt, sort, descending, review = self.filter, self.model.sort_key, self.model.descending, self.desk.review

        def first_page():
            return [row_dict(r) for r in review.rows(flt, sort=sort, descending=descending, limit=PAGE_SIZE)]

        def show(rows) -> None:
            if generation == self.generation:
                # until the count arrives: exact if the page is short, otherwise "at least one more page"
                self.model.reset(len(rows) + (PAGE_SIZE if len(rows) == PAGE_SIZE else 0), rows)
                self.detail_ready.emit(None)

        def show_count(total: int) -> None:
            if generation == self.generation:
                self.model.set_total(total)
                self.counted.emit(total)

        self.db.submit(first_page, on_done=show, on_error=self.show_error)
        self.db.submit(lambda: review.count(flt), on_done=show_count, on_error=self.show_error)

    def _fetch_page(self, offset: int, limit: int) -> None:
        generation = self.generation
        flt, sort, descending, review = self.filter, self.model.sort_key, self.model.descending, self.desk.review

        def page():
            return [row_dict(r) for r in review.rows(flt, sort=sort, descending=descending, offset=offset, limit=limit)]

        def show(rows) -> None:
            if generation == self.generation:
                self.model.add_page(offset, rows)

        self.db.submit(page, on_done=show, on_error=self.show_error)

    def select(self, example_id: uuid.UUID | None) -> None:
        if example_id is None:
            self.detail_ready.emit(None)
            return
        generation, loader = self.generation, self.detail_loader
        self.db.submit(lambda: loader(example_id),
                       on_done=lambda d: generation == self.generation and self.detail_ready.emit(d),
                       on_error=self.show_error)
