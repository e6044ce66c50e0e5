"""The review dashboard's controller: runs the dashboard service on its own worker thread and
shows the figures in :class:`widgets.dashboard_view.DashboardView`.

The first build of the snapshot takes seconds over 100k examples; later refreshes and filter
changes take milliseconds, but still run on the worker so the GUI thread never waits. Requests
coalesce: while one computation runs, only the newest request is kept.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

from PySide6.QtCore import QObject, Signal, Slot

from app.desk import Desk
from app.errors import DynadeskError
from app.gui.pages import Menu, MenuAction, Page, Tab
from app.gui.worker import SerialWorker
from app.services.agreement import MIN_OVERLAP
from app.services.validation import threshold_warning
from app.services.dashboard import DashboardView as Figures
from app.services.dashboard_snapshot import DashboardFilter
from app.services.dashboard_tables import ANNOTATOR_COLUMNS, BREAKDOWN_COLUMNS, export_csv
from widgets.dashboard_view import DashboardView

log = logging.getLogger(__name__)
PAIR_COLUMNS = [
    ("a", "Validator", "text", ""), ("b", "Validator", "text", ""),
    ("items", "Shared", "int", "Examples both validated"),
    ("observed", "Same", "rate", "Share of shared examples given the same verdict"),
    ("kappa", "κ", "kappa", "Agreement beyond chance: 1 perfect, 0 chance level, below 0 worse than chance"),
]


def interpretation(value: float | None) -> str:
    """Landis and Koch's (1977) words for a κ or α, as reviewers usually read them."""
    if value is None:
        return ""
    for limit, words in ((0, "poor"), (0.2, "slight"), (0.4, "fair"), (0.6, "moderate"), (0.8, "substantial")):
        if value < limit:
            return f"Agreement is {words} (Landis & Koch)."
    return "Agreement is almost perfect (Landis & Koch)."


def annotator_rows(figures: Figures) -> tuple[list, list[dict]]:
    return ANNOTATOR_COLUMNS, [asdict(g) for g in figures.annotators]


def figures_for_view(figures: Figures, breakdown: str, chart_people_chosen: bool) -> dict:
    """The plain data DashboardView.show_figures takes."""
    agreement = figures.agreement
    pairs = sorted(agreement.pairs, key=lambda p: (p.kappa is None, p.kappa if p.kappa is not None else 0))
    names = figures.rater_names
    columns, rows = annotator_rows(figures)
    filtered = figures.matching != figures.total_examples
    return {
        "summary": (f"{figures.matching:,} of {figures.total_examples:,} examples" if filtered
                    else f"{figures.total_examples:,} examples"),
        "annotator_columns": columns, "annotators": rows,
        "breakdown": breakdown, "breakdown_titles": figures.breakdown_titles,
        "breakdown_columns": BREAKDOWN_COLUMNS, "breakdown_rows": [asdict(g) for g in figures.breakdowns[breakdown]],
        "agreement": {
            "fleiss": agreement.fleiss_kappa, "fleiss_items": agreement.fleiss_items,
            "alpha": agreement.krippendorff_alpha, "ratings": agreement.ratings, "min_overlap": MIN_OVERLAP,
            "interpretation": interpretation(agreement.krippendorff_alpha),
            "columns": PAIR_COLUMNS,
            "pairs": [{"key": f"{p.rater_a}-{p.rater_b}", "a": names.get(p.rater_a, "?"), "b": names.get(p.rater_b, "?"),
                       "items": p.items, "observed": p.observed, "kappa": p.kappa} for p in pairs],
        },
        "time_edges": figures.time_edges, "bin_seconds": figures.bin_seconds,
        "series": [(s.key, s.name, s.mer, s.vmer) for s in figures.time_series],
        "chart_people_chosen": chart_people_chosen,
        "rounds": [(b.key, b.name, b.value, b.second) for b in figures.fooling_by_round],
        "labels": [(b.key, b.name, b.value, None) for b in figures.labels],
        "facets": {name: [(b.key, b.name, b.value, None) for b in bars] for name, bars in figures.facets.items()},
        "backlog_times": figures.backlog_times, "backlog": [float(v) for v in figures.backlog],
    }


class DashboardController(QObject):
    updated = Signal()  # figures for the newest request are on screen
    exported = Signal(list)  # files written in the background by an export of everything

    def __init__(self, desk: Desk, view: DashboardView, task_code: Callable[[], str | None],
                 show_error: Callable[[BaseException], None], parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self._task_code, self.show_error = desk, view, task_code, show_error
        self.worker = SerialWorker("dynadesk-dashboard", self)
        self.breakdown = "round"
        self.chart_people: list[str] = []
        self.values: dict = view.values()
        self.figures: Figures | None = None  # the figures on screen
        self._shown_filter: DashboardFilter | None = None  # and the filter they are for
        self._busy = False
        self._pending: tuple[bool, bool] | None = None  # (load, thorough) of a request waiting its turn
        self._stale = (True, True)  # a refresh is owed for when the view is next shown
        self._choices_task: str | None = None
        view.filters_changed.connect(self._filters_changed)
        view.breakdown_changed.connect(self._breakdown_changed)
        view.chart_people_changed.connect(self._people_changed)
        view.export_requested.connect(self._export_requested)
        view.shown.connect(self._shown)
        self.exported.connect(lambda files: self._tell(f"Exported {len(files)} more breakdown tables to "
                                                       f"{files[0].parent}" if files else ""))

    # --- requests --------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        """New data may be stored (a verdict, an example, an import): bring the figures up to date."""
        self._request(load=True)

    def refresh_thoroughly(self) -> None:
        """Also look for rows changed elsewhere (sync); the user's explicit refresh."""
        self._request(load=True, thorough=True)

    def _filters_changed(self, values: dict) -> None:
        self.values = values
        self._request(load=False)

    def _breakdown_changed(self, name: str) -> None:
        self.breakdown = name
        self._request(load=False)

    def _people_changed(self, keys: list) -> None:
        self.chart_people = list(keys)
        self._request(load=False)

    def _shown(self) -> None:
        if self._stale is not None:
            load, thorough = self._stale
            self._request(load=load, thorough=thorough)

    def _request(self, *, load: bool, thorough: bool = False) -> None:
        if not self.view.isVisible():
            previous = self._stale or (False, False)
            self._stale = (previous[0] or load, previous[1] or thorough)
            return
        if self._stale is not None:
            load, thorough = load or self._stale[0], thorough or self._stale[1]
            self._stale = None
        if self._busy:
            previous = self._pending or (False, False)
            self._pending = (previous[0] or load, previous[1] or thorough)
            return
        self._busy = True
        if self.figures is None:
            self.view.summary.setText("Loading the figures…")  # the first build reads every example
        desk, task_code = self.desk, self._task_code()
        if self._choices_task is not None and task_code != self._choices_task:
            # Another task: its rounds, labels and fields differ; start without filters.
            self.view.reset_filters()
            self.values, self.chart_people = self.view.values(), []
        values, breakdown, people = dict(self.values), self.breakdown, list(self.chart_people)
        wants_choices = task_code != self._choices_task or load

        def compute():
            service = desk.dashboard
            if load:
                service.refresh(thorough=thorough)
            task_id = desk.tasks.task(task_code).id if task_code else None
            flt = self._filter(task_id, values)
            figures = service.view(flt, breakdown=breakdown, chart_people=people)
            choices = self._choices(task_code, task_id) if wants_choices else None
            data = figures_for_view(figures, figures_breakdown(figures, breakdown), bool(people))
            data["threshold_warning"] = threshold_warning(desk.tasks.agreement_threshold(task_id),
                                                          len(desk.people.all())) if task_id else None
            return task_code, figures, data, choices, flt

        self.worker.submit(compute, on_done=self._computed, on_error=self._failed)

    @staticmethod
    def _filter(task_id, values: dict) -> DashboardFilter:
        def when(seconds):
            return None if seconds is None else datetime.fromtimestamp(seconds, timezone.utc)

        return DashboardFilter(
            task_id=task_id,
            round_ids=[uuid.UUID(values["round"])] if values.get("round") else (),
            author_ids=[uuid.UUID(values["author"])] if values.get("author") else (),
            labels=[values["label"]] if values.get("label") else (),
            facets={name: [value] for name, value in (values.get("facets") or {}).items() if value},
            since=when(values.get("since")), until=when(values.get("until")),
        )

    def _choices(self, task_code: str | None, task_id) -> dict | None:
        """Filter choices for the task, from the catalogue and what the snapshot has seen."""
        if task_code is None:
            return None
        desk = self.desk
        definition = desk.tasks.definition_by_code(task_code)
        rounds = [(r.id.hex, f"Round {r.number}") for r in desk.tasks.rounds(task_code)]
        people = sorted(((p.id.hex, p.display_name) for p in desk.people.all()), key=lambda p: p[1].casefold())
        _titles, facet_titles = desk.dashboard.breakdown_titles(task_id)
        facets = {}
        for spec in definition.metadata:
            if spec.name in facet_titles:
                seen = desk.dashboard.facet_fields.get(spec.name)
                extra = [v for v in (seen.values if seen else []) if v not in spec.choices]
                facets[spec.name] = (spec.label, list(spec.choices) + sorted(extra))
        return {"task": task_code, "rounds": rounds, "people": people, "labels": list(definition.labels),
                "facets": facets}

    def _computed(self, result) -> None:
        self._busy = False
        task_code, figures, data, choices, self._shown_filter = result
        if choices is not None:
            self._choices_task = task_code
            self.view.set_choices(choices["rounds"], choices["people"], choices["labels"], choices["facets"])
        self.figures = figures
        self.breakdown = data["breakdown"]
        self.view.show_figures(data)
        if self._pending is not None:
            load, thorough = self._pending
            self._pending = None
            self._request(load=load, thorough=thorough)
        else:
            self.updated.emit()

    def _failed(self, error: BaseException) -> None:
        self._busy = False
        self._pending = None
        self.show_error(error)

    # --- export ----------------------------------------------------------------------------

    def export_to(self, what: str, path: str | Path) -> list[Path]:
        """Write what is on screen: 'annotators' or 'breakdown' as CSV, a chart (its name) as
        PNG, or 'all' of them into a folder. Returns the files written."""
        if self.figures is None:
            raise DynadeskError("The dashboard has no figures yet; wait for them to load.")
        path = Path(path)
        charts = self.view.charts()
        if what == "all":
            try:
                path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise DynadeskError(f"Could not create the folder {path}: {exc.strerror or exc}") from exc
            written = self.export_to("annotators", path / "annotators.csv")
            written += self.export_to("breakdown", path / f"breakdown-{self.breakdown}.csv")
            for name in charts:
                written += self.export_to(name, path / f"chart-{name}.png")
            self._export_other_breakdowns(path)
            return written
        if what == "annotators":
            return [export_csv(self.figures.annotators, path, per_person=True)]
        if what == "breakdown":
            return [export_csv(self.figures.breakdowns[self.breakdown], path, per_person=False)]
        if what in charts:
            if not self.view.save_chart(what, str(path)):
                raise DynadeskError(f"Could not write the image {path}.")
            return [path]
        raise DynadeskError(f"Nothing called '{what}' to export.")

    def _export_other_breakdowns(self, folder: Path) -> None:
        """The breakdowns not on screen are computed on the worker; ``exported`` tells when written."""
        service, flt, shown = self.desk.dashboard, self._shown_filter, self.breakdown
        names = [name for name in self.figures.breakdown_titles if name != shown]

        def write() -> list[Path]:
            return [export_csv(service.breakdown(name, flt), folder / f"breakdown-{name}.csv", per_person=False)
                    for name in names]

        self.worker.submit(write, on_done=self.exported.emit, on_error=self.show_error)

    def _export_requested(self, what: str, path: str) -> None:
        try:
            written = self.export_to(what, path)
        except DynadeskError as exc:
            self.show_error(exc)
            return
        self._tell(f"Exported {len(written)} file{'s' if len(written) != 1 else ''} to "
                   f"{Path(path) if what == 'all' else Path(path).parent}")

    def _tell(self, message: str) -> None:
        window = self.view.window()
        if message and hasattr(window, "statusBar"):
            window.statusBar().showMessage(message, 8000)

    def shutdown(self) -> None:
        # Not waiting: a first build still reading would hold the window open for seconds; it only reads.
        self.worker.shutdown(wait=False)


def figures_breakdown(figures: Figures, wanted: str) -> str:
    return wanted if wanted in figures.breakdowns else next(iter(figures.breakdowns))


def dashboard_page(desk: Desk, task_code: Callable[[], str | None], show_error, parent) -> Page:
    """The Dashboard tab (Ctrl+5), declared for MainWindow.mount."""
    view = DashboardView()
    view.setObjectName("dashboard")
    controller = DashboardController(desk, view, task_code, show_error, parent)
    refresh = MenuAction(Menu.VIEW, "Refresh the dashboard (also changes from sync)", controller.refresh_thoroughly,
                         name="dashboard-refresh")
    return Page(controller, view, Tab("Dash&board", "Ctrl+5", "tab-dashboard"), actions=(refresh,),
                task_changed=controller.refresh, shutdown=controller.shutdown)
