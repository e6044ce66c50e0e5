"""A lazy example browser: filter → paged table → detail, with all queries on the database worker.

The first page is fetched before the count, so the table fills at once even where counting
a large filter takes longer; later pages arrive as the view scrolls (canFetchMore/fetchMore).
The newest request wins (``SerialWorker.submit_latest``): the first page, the count and the detail
of a filter or selection already replaced are dropped when they arrive; a later page lands only
on the rows of the query it continues.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.core.desk import Desk
from app.core.services.review import ExampleFilter
from app.gui.example_fetch import reading_words
from app.gui.worker import SerialWorker
from app.views.example import ExampleRowView, row_view
from widgets.example_table import PAGE_SIZE, ExampleTableModel


class ExampleBrowser(QObject):
    counted = Signal(int)  # how many match the current filter
    detail_ready = Signal(object)  # the detail view-model of the selected example, or None

    def __init__(self, desk: Desk, db: SerialWorker, model: ExampleTableModel,
                 detail_loader: Callable[[uuid.UUID], Any], show_error, parent=None, *, browsing: bool):
        super().__init__(parent)
        self.browsing = browsing  # the Data tab browses; Review reads as validating does (for the blur)
        self.desk, self.db, self.model = desk, db, model
        self.detail_loader, self.show_error = detail_loader, show_error
        self.filter = ExampleFilter()
        self._key = f"browser-{id(self)}"  # one browser's requests replace only its own
        self._shown: tuple | None = None  # the query (filter, sort) whose rows the table shows
        model.page_wanted.connect(self._fetch_page)
        model.sort_requested.connect(lambda *_: self.refresh())

    def set_filter(self, flt: ExampleFilter) -> None:
        self.filter = flt
        self.refresh()

    def _query(self) -> tuple:
        return self.filter, self.model.sort_key, self.model.descending

    def _rows(self, query: tuple, **page) -> Callable[[], list[ExampleRowView]]:
        (flt, sort, descending), review, desk, browsing = query, self.desk.review, self.desk, self.browsing

        def rows() -> list[ExampleRowView]:
            words = reading_words(desk, browsing=browsing)
            return [row_view(r, words(r.task_code)) for r in review.rows(flt, sort=sort, descending=descending, **page)]

        return rows

    def refresh(self) -> None:
        flt, review, query = self.filter, self.desk.review, self._query()

        def show(rows: list[ExampleRowView]) -> None:
            self._shown = query
            # until the count arrives: exact if the page is short, otherwise "at least one more page"
            self.model.reset(len(rows) + (PAGE_SIZE if len(rows) == PAGE_SIZE else 0), rows)
            self.detail_ready.emit(None)

        def show_count(total: int) -> None:
            self.model.set_total(total)
            self.counted.emit(total)

        self.db.submit_latest(f"{self._key}-rows", self._rows(query, limit=PAGE_SIZE), on_done=show,
                              on_error=self.show_error)
        self.db.submit_latest(f"{self._key}-count", lambda: review.count(flt), on_done=show_count,
                              on_error=self.show_error)

    def _fetch_page(self, offset: int, limit: int) -> None:
        query = self._shown  # the rows this page continues

        def show(rows: list[ExampleRowView]) -> None:
            if query is self._shown:  # else the table shows another query's rows by now
                self.model.add_page(offset, rows)

        if query is not None:
            self.db.submit(self._rows(query, offset=offset, limit=limit), on_done=show, on_error=self.show_error)

    def select(self, example_id: uuid.UUID | None) -> None:
        if example_id is None:
            self.detail_ready.emit(None)
            return
        loader = self.detail_loader
        self.db.submit_latest(f"{self._key}-detail", lambda: loader(example_id), on_done=self.detail_ready.emit,
                              on_error=self.show_error)
