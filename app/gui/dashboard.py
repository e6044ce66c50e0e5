"""The review dashboard's controller: runs the dashboard service on its own worker thread and
shows the figures in :class:`widgets.dashboard_view.DashboardView`.

The first build of the snapshot takes seconds over 100k examples; later refreshes and filter
changes take milliseconds, but still run on the worker so the GUI thread never waits. The newest
request wins (``SerialWorker.submit_latest``): figures of a request already replaced are not shown.
The service's results become a typed :class:`app.views.dashboard.FiguresView` on the worker.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from PySide6.QtCore import QObject, Signal, Slot

from app.core.changes import Data
from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.core.services.agreement import MIN_OVERLAP
from app.core.services.dashboard import DashboardView as Figures
from app.core.services.dashboard_snapshot import DashboardFilter
from app.core.services.dashboard_tables import ANNOTATOR_COLUMNS, BREAKDOWN_COLUMNS, export_csv
from app.core.services.validation import threshold_warning
from app.gui.assistant_split import AssistantSplitController
from app.gui.exposure import ExposureController
from app.gui.pages import Menu, MenuAction, Page, Tab
from app.gui.quality import QualityController
from app.gui.worker import SerialWorker
from app.views.dashboard import FiguresView, FilterChoices, FilterValues, build_choices, build_figures
from widgets.dashboard_view import DashboardView

log = logging.getLogger(__name__)
LATEST = "figures"  # the worker's key for newest-wins figure requests
# what the figures are made of (and whose they are): a store that touches any of it brings them up to date
FIGURES_DATA = (Data.EXAMPLES | Data.VALIDATIONS | Data.REVIEWS | Data.ROUNDS | Data.PEOPLE | Data.PROFILE
           | Data.TASK_SETTINGS)


def figures_view(figures: Figures, breakdown: str, chart_people_chosen: bool,
                 threshold_warning: str | None = None) -> FiguresView:
    """What DashboardView.show_figures takes, with the service's column definitions."""
    return build_figures(figures, breakdown=breakdown, chart_people_chosen=chart_people_chosen,
                         annotator_columns=ANNOTATOR_COLUMNS, breakdown_columns=BREAKDOWN_COLUMNS,
                         min_overlap=MIN_OVERLAP, threshold_warning=threshold_warning)


def own_figures_only(desk: Desk) -> uuid.UUID | None:
    """On the worker: the working person's id when per-person figures other than theirs are not for
    them (per-person performance is for leads and owners); None when they see everyone's."""
    person_id = desk.current_person_id
    return None if desk.lead.is_lead(person_id) else person_id


class DashboardController(QObject):
    updated = Signal()  # figures for the newest request are on screen
    exported = Signal(list)  # files written in the background by an export of everything

    def __init__(self, desk: Desk, view: DashboardView, task_code: Callable[[], str | None],
                 show_error: Callable[[BaseException], None], parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.view, self._task_code, self.show_error = desk, view, task_code, show_error
        self.worker = SerialWorker("dynadesk-dashboard", self)
        self.breakdown = "round"
        self.chart_people: tuple[str, ...] = ()
        self.values: FilterValues = view.values()
        self.figures: Figures | None = None  # the figures on screen
        self._shown_filter: DashboardFilter | None = None  # and the filter they are for
        self._stale: tuple[bool, bool] | None = (True, True)  # (load, thorough) owed for when the view is next shown
        self._asked_task: str | None = None  # the task of the newest request
        self._choices_task: str | None = None  # the task whose filter choices are shown
        self._choices_owed = False  # a request that wanted new choices may have been replaced by a newer one
        view.filters_changed.connect(self._filters_changed)
        view.breakdown_changed.connect(self._breakdown_changed)
        view.chart_people_changed.connect(self._people_changed)
        view.export_requested.connect(self._export_requested)
        view.shown.connect(self._shown)
        self.exported.connect(lambda files: self._tell(f"Exported {len(files)} more breakdown tables to "
                                                       f"{files[0].parent}" if files else ""))

    @Slot()
    def refresh(self) -> None:
        """New data may be stored (a verdict, an example, an import): bring the figures up to date."""
        self._request(load=True)

    def refresh_thoroughly(self) -> None:
        """Also look for rows changed elsewhere (sync); the user's explicit refresh."""
        self._request(load=True, thorough=True)

    def _filters_changed(self, values: FilterValues) -> None:
        self.values = values
        self._request(load=False)

    def _breakdown_changed(self, name: str) -> None:
        self.breakdown = name
        self._request(load=False)

    def _people_changed(self, keys: tuple) -> None:
        self.chart_people = tuple(keys)
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
        # Requests are answered newest first: an older request still running finishes (a refresh it
        # made stays made), but only the newest one's figures are shown.
        if self.figures is None:
            self.view.show_loading()  # the first build reads every example
        desk, task_code = self.desk, self._task_code()
        if self._asked_task is not None and task_code != self._asked_task:
            # Another task: its rounds, labels and fields differ; start without filters.
            self.view.reset_filters()
            self.values, self.chart_people = self.view.values(), ()
        self._asked_task = task_code
        values, breakdown, people = self.values, self.breakdown, self.chart_people
        wants_choices = task_code != self._choices_task or load or self._choices_owed
        self._choices_owed = wants_choices

        def compute():
            service = desk.dashboard
            if load:
                service.refresh(thorough=thorough)
            task_id = desk.tasks.task(task_code).id if task_code else None
            flt = self._filter(task_id, values)
            only = own_figures_only(desk)
            figures = service.view(flt, breakdown=breakdown, chart_people=people, only_person=only)
            choices = self._choices(task_code, task_id, only) if wants_choices else None
            warning = threshold_warning(desk.tasks.agreement_threshold(task_id),
                                        len(desk.people.all())) if task_id else None
            view = figures_view(figures, breakdown, bool(people), warning)
            return task_code, figures, view, choices, flt, wants_choices

        self.worker.submit_latest(LATEST, compute, on_done=self._computed, on_error=self._failed)

    @staticmethod
    def _filter(task_id, values: FilterValues) -> DashboardFilter:
        def when(seconds):
            return None if seconds is None else datetime.fromtimestamp(seconds, UTC)

        return DashboardFilter(
            task_id=task_id,
            round_ids=[uuid.UUID(values.round)] if values.round else (),
            author_ids=[uuid.UUID(values.author)] if values.author else (),
            labels=[values.label] if values.label else (),
            facets={name: [value] for name, value in values.facets if value},
            since=when(values.since), until=when(values.until),
        )

    def _choices(self, task_code: str | None, task_id, only_person: uuid.UUID | None = None) -> FilterChoices | None:
        """Filter choices for the task, from the catalogue and what the snapshot has seen (on the worker);
        ``only_person``: someone who sees their own figures only, and so picks no colleague."""
        if task_code is None:
            return None
        desk = self.desk
        definition = desk.tasks.definition_by_code(task_code)
        _titles, facet_titles = desk.dashboard.breakdown_titles(task_id)
        facets = []
        for spec in definition.metadata:
            if spec.name in facet_titles:
                seen = desk.dashboard.facet_fields.get(spec.name)
                facets.append((spec.name, spec.label, tuple(spec.choices), seen.values if seen else ()))
        return build_choices(((r.id.hex, r.number) for r in desk.tasks.rounds(task_code)),
                             ((p.id.hex, p.display_name) for p in desk.people.all()
                              if only_person is None or p.id == only_person), definition.labels, facets)

    def _computed(self, result) -> None:
        task_code, figures, view, choices, self._shown_filter, asked_choices = result
        if asked_choices:
            self._choices_owed = False
        if choices is not None:
            self._choices_task = task_code
            self.view.show_choices(choices)
        elif asked_choices:
            self._choices_task = task_code
        self.figures = figures
        self.breakdown = view.breakdown
        self.view.show_figures(view)
        self.updated.emit()

    def _failed(self, error: BaseException) -> None:
        self.show_error(error)

    def export_to(self, what: str, path: str | Path) -> list[Path]:
        """Write what is on screen: 'annotators' or 'breakdown' as CSV, a chart (its name) as
        PNG, or 'all' of them into a folder. Returns the files written."""
        if self.figures is None:
            raise DynadeskError("The dashboard has no figures yet; wait for them to load.")
        path = Path(path)
        charts = self.view.chart_names()
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


def dashboard_page(desk: Desk, task_code: Callable[[], str | None], show_error, parent, inference=None) -> Page:
    """The Dashboard tab (Ctrl+5), declared for MainWindow.mount. ``inference``: the inference service,
    which measures the quality view's embedding spread."""
    view = DashboardView()
    view.setObjectName("dashboard")
    controller = DashboardController(desk, view, task_code, show_error, parent)
    controller.quality = QualityController(desk, view.quality, controller.worker, task_code, lambda: controller.values,
                                           inference, controller)
    controller.updated.connect(controller.quality.refresh)
    controller.assistant = AssistantSplitController(desk, view.assistant, controller.worker, task_code,
                                                    lambda: controller._shown_filter, show_error, controller)
    controller.updated.connect(controller.assistant.refresh)
    # exposure: figures for care, in a section of their own, never in the per-annotator table
    controller.exposure = ExposureController(desk, view.exposure, controller.worker, show_error, controller)
    refresh = MenuAction(Menu.VIEW, "Refresh the dashboard (also changes from sync)", controller.refresh_thoroughly,
                         name="dashboard-refresh")
    return Page(controller, view, Tab("Dash&board", "Ctrl+5", "tab-dashboard"), actions=(refresh,),
                task_changed=controller.refresh, watches=FIGURES_DATA, changed=lambda _changes: controller.refresh(),
                shutdown=controller.shutdown)
