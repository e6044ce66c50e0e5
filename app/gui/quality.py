"""The Dashboard's data-quality view: its controller.

Figures are computed on the dashboard's worker (newest request wins), after the dashboard's own
figures, whose refresh they follow: the round and annotator filters of the dashboard choose the
artifact table shown. The embedding spread needs the target model: it runs as a job of the
inference service, once per state of the data, and is shown when it arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal

from app.core.quality.report import (
    AlertThresholds,
    QualityData,
    QualityReport,
    embedding_spreads,
    quality_report,
    with_spreads,
)
from app.core.quality.service import (
    DuplicateFigures,
    duplicate_figures,
    load_quality_data,
    spread_model,
    with_duplicates,
)
from app.gui.example_fetch import reading_words
from app.gui.worker import SerialWorker
from app.views.dashboard import FilterValues
from app.views.quality_dashboard import build_quality, build_term_examples
from widgets.quality_view import QualityView

log = logging.getLogger(__name__)


class QualityController(QObject):
    updated = Signal()  # the quality figures for the newest request are on screen
    term_shown = Signal(str)  # the examples of a clicked term are listed
    spread_ready = Signal()  # embedding spreads arrived and are shown

    def __init__(self, desk, view: QualityView, worker: SerialWorker, task_code: Callable[[], str | None],
                 values: Callable[[], FilterValues], inference=None, parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self.worker, self.inference = desk, view, worker, inference
        self._task_code, self._values = task_code, values
        self.thresholds = AlertThresholds()
        self._thresholds_set = False  # until the lead moves them, the task's own lines (read on the worker)
        # on the worker only: the data and the near-duplicate figures for one state of the snapshot
        self._data: tuple[tuple, QualityData] | None = None
        self._duplicates: tuple[tuple, DuplicateFigures] | None = None
        self._duplicates_asked: tuple | None = None  # (GUI thread) the data state whose duplicates are on their way
        # on the GUI thread: per task, the model measured with (sha) and per round (spread, sample, examples)
        self._spreads: dict[str, tuple[str, dict[int, tuple[float | None, int, int]]]] = {}
        self._spread_task: str | None = None  # the task whose spreads the running job measures
        self._spread_tried: dict[str, tuple] = {}  # task -> the data state whose measurement failed
        self._spread_note = ""
        self.report: QualityReport | None = None
        view.thresholds_changed.connect(self._thresholds_changed)
        view.term_clicked.connect(self.show_term)

    def _thresholds_changed(self, z: float, duplicate_rate: float) -> None:
        self.thresholds = replace(self.thresholds, artifact_z=z, duplicate_rate=duplicate_rate)
        self._thresholds_set = True
        self.refresh()

    def _read(self, task_code: str) -> tuple[tuple, QualityData]:
        """The task's examples, read again only when the dashboard's snapshot changed (on the worker)."""
        key = (task_code, self.desk.dashboard.version)
        if self._data is None or self._data[0] != key:
            self._data = (key, load_quality_data(self.desk, task_code))
        return self._data

    def _near_duplicates(self, key: tuple, data: QualityData) -> DuplicateFigures:
        """The index's figures walk every example (seconds over 100k): once per state of the data."""
        if self._duplicates is None or self._duplicates[0] != key:
            self._duplicates = (key, duplicate_figures(self.desk, key[0], data))
        return self._duplicates[1]

    def refresh(self) -> None:
        task_code, values, thresholds = self._task_code(), self._values(), self.thresholds
        if task_code is None:
            return
        desk, task_lines, note = self.desk, not self._thresholds_set, self._spread_note
        _sha, known = self._spreads.get(task_code, ("", {}))
        measured = {n: (spread, sample) for n, (spread, sample, _count) in known.items()}

        def compute():
            key, data = self._read(task_code)
            lines = AlertThresholds.of(desk.tasks.settings(task_code).quality) if task_lines else thresholds
            report = with_spreads(quality_report(data, by_annotator=values.author is not None, thresholds=lines),
                                  measured)
            known = self._duplicates[1] if self._duplicates is not None and self._duplicates[0] == key else None
            duplicates = "Duplicate rates: being computed…"
            if known is not None:
                report, duplicates = with_duplicates(report, known, lines)
            number = next((n for n, rid in data.round_ids.items() if rid == values.round), None)
            figures = build_quality(report, round_number=number, author=values.author, alerts=report.alerts,
                                    spread_note=note, duplicates=duplicates,
                                    blur_words=desk.reading_words(task_code, browsing=False))  # read as Review is
            counts = {n: int(data.in_round(n).sum()) for n in data.round_numbers()}
            return key, data, report, figures, lines, counts, known is None

        self.worker.submit_latest("quality", compute, on_done=self._computed, on_error=self._failed)

    def _computed(self, result) -> None:
        key, data, self.report, figures, lines, counts, duplicates_owed = result
        if not self._thresholds_set:
            self.thresholds = lines
            self.view.set_thresholds(lines.artifact_z, lines.duplicate_rate)
        self.view.show_quality(figures)
        self.updated.emit()
        if duplicates_owed and self._duplicates_asked != key:
            # the index's figures take longest: the artifacts are on screen first, these follow
            self._duplicates_asked = key
            self.worker.submit_latest("quality-duplicates", self._near_duplicates, key, data,
                                      on_done=lambda _figures: self.refresh(), on_error=self._failed)
        if self.inference is not None and data.ids and self._spread_tried.get(key[0]) != key:
            self._measure_spreads(key, data, counts)

    def _measure_spreads(self, key: tuple, data: QualityData, counts: dict[int, int]) -> None:
        """Embed the rounds whose spread is missing, or whose examples changed by more than 5 % since
        it was measured (a new example does not re-embed the round), as one inference job."""
        task_code = key[0]
        if self._spread_task == task_code:
            return  # the running job's figures are close enough; the next refresh looks again
        sha, known = self._spreads.get(task_code, ("", {}))
        stale = [n for n, count in counts.items()
                 if n not in known or abs(count - known[n][2]) > 0.05 * max(known[n][2], 1)]
        if not stale:
            return
        desk = self.desk

        def measure(progress):
            from app.core.services.target_models import load_engine_for

            record = spread_model(desk, task_code)
            if record is None:
                return key, None, "", {}, counts
            rounds = stale if record.sha256 == sha else list(counts)  # another model: every round again
            engine = load_engine_for(record)
            try:
                return key, record.name, record.sha256, embedding_spreads(data, engine, rounds, progress), counts
            finally:
                engine.close()

        # another task's measuring (the key's older job) is cancelled: its figures would not be shown
        self._spread_task = task_code
        self.inference.run_job(measure, key="quality.spreads", on_done=self._spreads_measured,
                               on_failed=lambda failure: self._spreads_failed(key, failure))

    def _spreads_measured(self, result) -> None:
        self._spread_task = None
        key, name, sha, spreads, counts = result
        if name is None:
            self._spread_tried[key[0]] = key
            self._spread_note = "no round has a target model that runs here"
        else:
            previous_sha, known = self._spreads.get(key[0], ("", {}))
            merged = dict(known) if previous_sha == sha else {}
            merged.update({n: (value, sample, counts[n]) for n, (value, sample) in spreads.items()})
            self._spreads[key[0]] = (sha, merged)
            self._spread_note = f"in {name}"
        self.refresh()
        self.spread_ready.emit()

    def _spreads_failed(self, key: tuple, failure) -> None:
        self._spread_task = None
        self._spread_tried[key[0]] = key
        self._spread_note = f"not measured: {failure.message}"
        self.refresh()

    def show_term(self, term: str) -> None:
        """List the examples behind an artifact row (in the round and annotator shown)."""
        task_code, values = self._task_code(), self._values()
        if task_code is None:
            return

        desk = self.desk

        def find():
            _key, data = self._read(task_code)
            number = next((n for n, rid in data.round_ids.items() if rid == values.round), None)
            if number is None:
                number = max(data.round_numbers(), default=None)
            mask = data.in_round(number)
            if values.author is not None:
                mask = mask & data.by_author(values.author)
            found = data.examples_with(term, mask)
            where = f"round {number}" + (f", {data.author_names.get(values.author, '')}" if values.author else "")
            return build_term_examples(
                term, [data.texts[i] for i in found],
                [data.label_names[data.labels[i]] if data.labels[i] >= 0 else "" for i in found],
                [data.author_names.get(data.author_keys[data.authors[i]], "") for i in found], where=where,
                blur_words=reading_words(desk, browsing=False)(task_code))  # read as Review is

        self.worker.submit_latest("quality-term", find, on_done=self._term_found, on_error=self._failed)

    def _term_found(self, found) -> None:
        self.view.show_term_examples(found)
        self.term_shown.emit(found.term)

    def _failed(self, error: BaseException) -> None:
        log.error("quality figures failed", exc_info=(type(error), error, error.__traceback__))
        self.view.show_problem(f"The quality figures could not be computed: {error}")
