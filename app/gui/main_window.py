"""The main window: task and profile at the top, the data browser, import and export (its menus are
in menus.py, the first start's model preparation in first_start.py).

All database work runs on one serial worker; the GUI thread only shows results.
"""

from __future__ import annotations

import base64
import logging
import uuid
from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import QByteArray, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QFont, QUndoStack
from PySide6.QtWidgets import (
    QComboBox,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QSplitter,
    QToolBar,
    QVBoxLayout,
    QWidget,
)

from app.core.about import version_info
from app.core.changes import Data
from app.core.desk import Desk
from app.core.domain import ReviewAction
from app.core.errors import DynadeskError
from app.core.services.review import NOT_DRAFT, ExampleFilter
from app.core.services.validation import VALIDATABLE
from app.gui.breaks import break_page
from app.gui.browser import ExampleBrowser
from app.gui.changes import (
    CREATE,
    DATA_TABLE,
    RETURNED_WORK,
    REVIEW_TABLE,
    SYNC_STATE,
    VALIDATE_QUEUE,
    ChangeRelay,
    ChangeRoutes,
)
from app.gui.dashboard import dashboard_page
from app.gui.deferred_int8 import DeferredInt8
from app.gui.evaluation import EvaluationController
from app.gui.example_fetch import for_data_tab
from app.gui.first_start import FirstStart
from app.gui.inference import InferenceService
from app.gui.leaderboard import LeaderboardController
from app.gui.menus import build_menus, example_actions, make_action, table_menu, window_actions
from app.gui.next_round import NextRoundController
from app.gui.pages import Menu, MenuAction, Page, Tab
from app.gui.profiles import ProfileActions
from app.gui.proposals import ProposalsController
from app.gui.returned_work import ReturnedWork
from app.gui.review_page import ReviewController
from app.gui.rounds_controller import RoundsController
from app.gui.suite import suite_page
from app.gui.sync_controller import SyncController, sync_page
from app.gui.validate import ValidateController
from app.gui.worker import SerialWorker
from app.gui.workspace import WorkspaceController
from app.views.example import DataFilterValues
from app.views.shell import Choice, ExportView, about_html, import_view, task_choices
from widgets.elided_label import ElidedLabel
from widgets.evaluation_view import EvaluationView
from widgets.example_detail import ExampleDetail
from widgets.example_table import ExampleTableModel, ExampleTableView
from widgets.filter_bar import FilterBar
from widgets.import_dialog import ExportDialog, ImportDialog
from widgets.page_tabs import PageTabs
from widgets.review_view import ReviewView
from widgets.validate_view import ValidateView
from widgets.workspace_view import WorkspaceView

log = logging.getLogger(__name__)
DEFAULT_TASK = "hate_speech"  # the task a fresh desk opens on
DAMAGED_STATUS = "The database is damaged: nothing more is saved. Restore a backup (see the message)."


class MainWindow(ChangeRoutes, ProfileActions, QMainWindow):
    database_damaged = Signal(str)  # from the database's background check: queued to the GUI thread

    def __init__(self, desk: Desk):
        super().__init__()
        self.desk = desk
        self.db = SerialWorker("dynadesk-db", self)
        self.db.failed.connect(self.show_error)
        # every store's changes come through here to _route, which sends them to the pages they touch
        self.changes = ChangeRelay(desk.changes, self)
        self.changes.changed.connect(self._route)
        self._task_code: str | None = None
        self._task_ids: dict[str, uuid.UUID] = {}
        self._tasks: tuple[Choice, ...] = ()  # the tasks (name, code), read at start
        self.setWindowTitle("Dynadesk")
        self.resize(1280, 800)
        self.setMinimumSize(960, 560)  # below this nothing is usable; pages scroll down to it

        self.task_combo = QComboBox(objectName="task")
        self.task_combo.currentIndexChanged.connect(self._task_chosen)
        self.person_label = QLabel(objectName="person")
        self.round_label = QLabel(objectName="round")
        self.round_label.setTextFormat(Qt.TextFormat.PlainText)
        toolbar = QToolBar("Task", objectName="main-toolbar", movable=False)
        toolbar.addWidget(QLabel(" Task: "))
        toolbar.addWidget(self.task_combo)
        toolbar.addWidget(QLabel("   "))
        toolbar.addWidget(self.round_label)
        spacer = QWidget()
        spacer.setSizePolicy(spacer.sizePolicy().horizontalPolicy().Expanding, spacer.sizePolicy().verticalPolicy())
        toolbar.addWidget(spacer)
        toolbar.addWidget(self.person_label)
        self.addToolBar(toolbar)

        self.filter_bar = FilterBar()
        self.filter_bar.changed.connect(self._filters_changed)
        self.table_model = ExampleTableModel(self)
        self.table = ExampleTableView(self.table_model)
        self.table.selectionModel().currentRowChanged.connect(self._row_selected)
        self.detail = ExampleDetail()
        splitter = QSplitter(Qt.Orientation.Horizontal, objectName="data-splitter")
        splitter.addWidget(self.table)
        splitter.addWidget(self.detail)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([1000, 300])  # the table's text column takes what the other columns leave
        self.data_page = data_page = QWidget(objectName="data-page")
        layout = QVBoxLayout(data_page)
        layout.addWidget(self.filter_bar)
        layout.addWidget(splitter, 1)
        self.tabs = PageTabs(objectName="tabs")  # pages scroll: the window never outgrows a laptop screen
        self.setCentralWidget(self.tabs)

        # Every part of the window is a Page (app/gui/pages.py), mounted the same way: its tab, its menu
        # entries (the menus are built here and kept by reference), its status-bar widgets.
        self.pages: list[Page] = []
        self.named_actions: dict[str, QAction] = {}  # the named menu actions, by object name
        self.undo_stack = QUndoStack(self)
        self.inference = InferenceService(self)
        self.menus = build_menus(self)
        for declared in window_actions(self):
            self._add_action(declared)
        self.menus[Menu.VIEW].addSeparator()  # the pages' entries follow
        self.workspace_view = WorkspaceView(self.undo_stack)
        self.workspace = WorkspaceController(self.desk, self.db, self.inference, self.workspace_view, self.undo_stack)
        self.model_label = ElidedLabel(objectName="models")
        self.workspace.status_changed.connect(self.model_label.setText)
        self.mount(Page(self.workspace, self.workspace_view, Tab("&Create", "Ctrl+1", "tab-create"),
                        actions=example_actions(self), status=(self.model_label,), shutdown=self._close_workspace,
                        watches=CREATE, changed=lambda _changes: self.workspace.assist.wellbeing_changed()))

        self.count_label = QLabel(objectName="count")
        self.browser = ExampleBrowser(desk, self.db, self.table_model, lambda example_id: for_data_tab(desk, example_id),
                                      self.show_error, self, browsing=True)
        self.browser.counted.connect(lambda total: self.count_label.setText(f"{total:,} example{'s' if total != 1 else ''}"))
        self.browser.detail_ready.connect(self.detail.show_example)
        self.mount(Page(self.browser, data_page, Tab("&Data", "Ctrl+2", "tab-data"), status=(self.count_label,),
                        watches=DATA_TABLE, changed=self._data_changed))
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(
            lambda position: table_menu(self, self.named_actions, position))
        (self.import_action, self.export_action, self.submit_action, self.perturb_action, self.retract_action,
         self.revise_action, self.flag_action) = (self.named_actions[name] for name in (
             "import", "export", "submit", "perturb", "retract", "revise", "flag"))

        returned_label = QLabel(objectName="returned-count")
        self.returned_work = ReturnedWork(self.desk, self.db, self.workspace_view.returned, returned_label,
                                          self.show_returned, self.show_error, self)
        self.mount(Page(self.returned_work, status=(returned_label,), watches=RETURNED_WORK,
                        changed=lambda _changes: self.returned_work.refresh()))
        self.statusBar().messageChanged.connect(self._make_room_for_message)
        self._data_folder_owed = True  # said once the status bar has its widgets and the window its width

        self.rounds = RoundsController(desk, self.db, self.show_error, self)
        # the task's rounds in the toolbar, the Data filter and Create: here, by a sync, a promotion or an import
        self.mount(Page(self.rounds, watches=Data.ROUNDS | Data.TASKS, changed=lambda _changes: self._task_chosen()))

        self.validate_view = ValidateView()
        self.validate = ValidateController(self.desk, self.db, self.validate_view, self.show_error, self, self.inference)
        self.mount(Page(self.validate, self.validate_view, Tab("&Validate", "Ctrl+3", "tab-validate"),
                        shown=self._validate_shown, watches=VALIDATE_QUEUE, changed=self._validate_changed))
        self.review_view = ReviewView()
        self.review_page = ReviewController(self.desk, self.db, self.review_view, self.show_error, self)
        self.mount(Page(self.review_page, self.review_view, Tab("&Review", "Ctrl+4", "tab-review"),
                        shown=self._review_shown, watches=REVIEW_TABLE, changed=self._review_changed))
        self.breaks = self.mount(break_page(self)).controller  # after Create, Validate and Review: it watches them
        dashboard = self.mount(dashboard_page(desk, lambda: self._task_code, self.show_error, self, self.inference))
        self.dashboard, self.dashboard_view = dashboard.controller, dashboard.view
        self.evaluation_view = EvaluationView()
        self.evaluation = EvaluationController(self.desk, self.db, self.inference, self.evaluation_view)
        self.evaluation.case_opened.connect(self.open_evaluation_case)
        # the model leaderboard fills in the background: when the tab opens and after a round change (_show_rounds
        # sees every change, made here, by a sync or by a promotion, once: each reaches it through _route)
        self.leaderboard = LeaderboardController(self.desk, self.db, self.inference, self.evaluation_view.leaderboard)
        self._round_states: dict[str, tuple] = {}  # per task, its rounds as last shown: a change fills the board
        self.mount(Page(self.evaluation, self.evaluation_view, Tab("Evaluate", "Ctrl+6", "tab-evaluate", "E&valuate"),
                        shown=self._evaluation_shown, shutdown=self.leaderboard.shutdown))

        suite = self.mount(suite_page(desk, self.db, self.inference, lambda: self._task_code, self))
        self.suite, self.suite_view = suite.controller, suite.view

        self.next_round = NextRoundController(desk, self.db, self.inference, lambda: self.sync, self)
        self._restore_settings()
        # The first read waits for the database worker (the GUI thread runs no query): the window opens on
        # its profile, task and rounds, before it is shown.
        person, tasks, task_code, definition, task_rounds = self.db.submit(self._read_start).result()
        self._show_person(person)
        self._load_tasks(tasks, task_code, definition, task_rounds)
        if desk.settings_store.problem:
            QMessageBox.warning(self, "Settings", desk.settings_store.problem)

        self.sync = SyncController(desk, self)
        self.sync_status = self.mount(replace(sync_page(self.sync, self, self.statusBar().showMessage),
                                              watches=SYNC_STATE, changed=lambda _changes: self.sync.refresh())).status[0]
        self.sync.identity_changed.connect(self._show_person)
        self.sync.identity_changed.connect(self.workspace.writer_renamed)
        self.workspace.assist.gradient_fetch.use_team(self.sync.clients)  # word substitution's PyTorch form
        self.sync.start()
        self.proposals = ProposalsController(desk, self.db, self.sync.worker, self.inference, self.show_error, self,
                                             clients=self.sync.clients)
        self.next_round.propose_requested.connect(
            lambda code, folder: self.proposals.propose(code, folder, self.next_round.proposal_answered))
        self._add_action(MenuAction(Menu.ROUND, "&Proposals…", self.open_proposals, name="proposals"))
        self.first_start = FirstStart(self)
        self.deferred_int8 = DeferredInt8(self)  # int8 forms a promotion left for later, in the background
        self._damage_shown: str | None = None
        self.database_damaged.connect(self._show_damage, Qt.ConnectionType.QueuedConnection)
        desk.db.on_damage(lambda error: self.database_damaged.emit(str(error)))

    def mount(self, page: Page) -> Page:
        """A part of the window: its tab (with its View-menu entry and shortcut), its menu entries and its
        status-bar widgets. ``page.shown`` runs when the tab comes into view and when the task changes while
        it is in view (pages load only when looked at); ``page.task_changed`` whenever the task changes."""
        view = page.view
        if page.tab is not None and view is not None:
            self.tabs.addTab(view, page.tab.title)
            self._add_action(MenuAction(Menu.VIEW, page.tab.menu_text or page.tab.title,
                                        lambda: self.tabs.setCurrentWidget(view), page.tab.shortcut, page.tab.name))
        for declared in page.actions:
            self._add_action(declared)
        for widget in page.status:
            self.statusBar().addPermanentWidget(widget)
        if page.shown is not None:
            shown = page.shown
            when_in_view = lambda *_: self.tabs.currentWidget() is view and shown()  # noqa: E731
            self.tabs.currentChanged.connect(when_in_view)
            self.task_combo.currentIndexChanged.connect(when_in_view)
        if page.task_changed is not None:
            task_changed = page.task_changed
            self.task_combo.currentIndexChanged.connect(lambda *_: task_changed())
        self.pages.append(page)
        return page

    def _add_action(self, declared: MenuAction) -> QAction:
        action = make_action(self, self.menus[declared.menu], declared)
        if declared.name:
            self.named_actions[declared.name] = action
        return action

    def _close_workspace(self) -> None:
        self.workspace.save_draft()
        self.workspace.assist.shutdown()
        self.inference.shutdown()

    def revise_returned(self) -> None:
        """Create, starting from the selected returned example; once submitted, the original no longer
        counts as waiting for its author (LeadReviewService.returned_to)."""
        from app.core.services.lead import REVISION

        row = self.table_model.row_data(self.table.currentIndex().row())
        if row is None or row.review_state != ReviewAction.RETURNED:
            self.statusBar().showMessage("Select an example a lead returned to you (Data: Returned to me).", 6000)
            return
        self.tabs.setCurrentWidget(self.workspace_view)
        self.workspace.start_from_text(row.text, row.label, origin={"kind": REVISION, "of": str(row.id)},
                                       note=f"Revising a returned example. The lead wrote: {row.review_comment}")

    def show_returned(self) -> None:
        """The Data tab with the profile's returned examples."""
        self.tabs.setCurrentWidget(self.data_page)
        self.filter_bar.show_returned()

    def _evaluation_shown(self) -> None:
        code = self.task_combo.currentData()
        self.evaluation.refresh(code)
        self.leaderboard.fill(code)

    def _validate_shown(self) -> None:
        code = self.task_combo.currentData()
        if code != self.validate.task_code:
            self.validate.set_task(code)
        else:
            self.validate.refresh()
        self.validate_view.setFocus()

    def _review_shown(self) -> None:
        code = self.task_combo.currentData()
        if code != self.review_page.task_code:
            self.review_page.set_task(code)
        else:
            self.review_page.refresh()

    def open_sync_settings(self, why: str = "") -> None:
        self.sync.open_settings(self, why)

    def find_in_data(self) -> None:
        self.filter_bar.focus_search()

    def open_evaluation_case(self, task_code: str, case: dict) -> None:
        """A case the model failed in an evaluation: open it in Create, with its attributions."""
        if self.task_combo.currentData() != task_code:
            self.task_combo.setCurrentIndex(max(0, self.task_combo.findData(task_code)))
        self.tabs.setCurrentWidget(self.workspace_view)
        where = " · ".join(x for x in (case.get("functionality"), case.get("target")) if x)
        self.workspace.start_from_text(
            case["text"], case.get("gold"), origin={"kind": "evaluation", "case": str(case.get("id")),
                                                   "functionality": case.get("functionality")},
            note=f"From the evaluation{' (' + where + ')' if where else ''}: the model said “{case.get('predicted')}”, "
                 f"the gold label is “{case.get('gold')}”. Edit it into a new example that fools the model.")

    def prepare_first_start(self) -> None:
        """A fresh desk: prepare the bundled target model (see FirstStart.prepare)."""
        self.first_start.prepare()

    def start_perturbation(self) -> None:
        row = self.table_model.row_data(self.table.currentIndex().row())
        if row is None:
            self.statusBar().showMessage("Select a submitted example to perturb.", 5000)
            return
        self.tabs.setCurrentWidget(self.workspace_view)
        self.workspace.start_perturbation(row.id)

    def _author_action(self, kind: str) -> None:
        row = self.table_model.row_data(self.table.currentIndex().row())
        if row is None:
            return
        reason, ok = QInputDialog.getText(self, "Retract example" if kind == "retract" else "Flag example",
                                          "Why? (validators and leads will see this)")
        if not ok:
            return
        examples, person = self.desk.examples, self.desk.current_person_id
        call = examples.retract if kind == "retract" else examples.flag
        self.db.submit(lambda: call(row.id, person, reason), on_error=self.show_error)  # _route shows it

    def _restore_settings(self) -> None:
        settings = self.desk.settings
        self._apply_font_size(settings.font_size)
        if settings.window_geometry:
            self.restoreGeometry(QByteArray(base64.b64decode(settings.window_geometry)))
        if settings.window_state:
            self.restoreState(QByteArray(base64.b64decode(settings.window_state)))

    def _apply_font_size(self, size: int) -> None:
        font = QFont(self.font())
        font.setPointSize(size)
        self.setFont(font)

    def change_font_size(self, step: int) -> None:
        size = min(48, max(6, self.desk.settings.font_size + step))
        self.desk.settings.font_size = size
        self._apply_font_size(size)
        self.desk.save_settings()

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        # once the status bar has its new width: the model status fits itself around the message
        QTimer.singleShot(0, lambda: self._make_room_for_message(self.statusBar().currentMessage()))

    def closeEvent(self, event) -> None:
        settings = self.desk.settings
        settings.window_geometry = base64.b64encode(bytes(self.saveGeometry())).decode()
        settings.window_state = base64.b64encode(bytes(self.saveState())).decode()
        settings.last_task = self._task_code
        try:
            self.desk.save_settings()
        except OSError as exc:
            log.warning("could not save settings: %s", exc)
        self.first_start.shutdown()  # the next start finishes it
        self.deferred_int8.shutdown()  # likewise
        for page in reversed(self.pages):  # a running sync is cancelled first; it resumes at the next start
            if page.shutdown is not None:
                page.shutdown()
        self.changes.close()
        self.db.shutdown(wait=True)
        super().closeEvent(event)

    def open_rounds(self) -> None:
        if self._task_code:
            self.rounds.open_dialog(self._task_code, self)

    def open_proposals(self) -> None:
        if self._task_code:
            self.proposals.open_dialog(self._task_code, self)

    def open_next_round(self) -> None:
        self.next_round.open(self._task_code, self)

    def _read_start(self):
        """On the worker: the profile, the tasks, and the task the window opens on with its rounds."""
        desk = self.desk
        # the desk keeps the profile's id once read: GUI code asks for it later without a query
        person = desk.people.get(desk.current_person_id)
        tasks = desk.tasks.tasks()
        codes = [task.code for task in tasks]
        code = desk.settings.last_task or DEFAULT_TASK
        code = code if code in codes else (codes[0] if codes else None)
        if code is None:
            return person, tasks, None, None, []
        return person, tasks, code, desk.tasks.definition_by_code(code), desk.tasks.rounds(code)

    def _load_tasks(self, tasks: list, code: str | None, definition, task_rounds: list) -> None:
        self.task_combo.blockSignals(True)
        self.task_combo.clear()
        self._tasks = task_choices(tasks)
        self._task_ids = {task.code: task.id for task in tasks}
        for task in tasks:
            self.task_combo.addItem(task.name, task.code)
        self.task_combo.blockSignals(False)
        self.task_combo.setCurrentIndex(max(0, self.task_combo.findData(code)))
        if code is not None:
            self._task_code = code
            self._show_task(code, definition, task_rounds)

    def _task_chosen(self, *_) -> None:
        """Another task (or its rounds changed): its definition and rounds are read on the worker."""
        code = self.task_combo.currentData()
        if code is None:
            return
        self._task_code = code
        tasks = self.desk.tasks
        # every answer is shown, in order (the worker is serial): the newest choice is shown last
        self.db.submit(lambda: (tasks.definition_by_code(code), tasks.rounds(code)),
                       on_done=lambda found: self._show_task(code, *found), on_error=self.show_error)

    def _show_task(self, code: str, definition, task_rounds: list) -> None:
        self._show_rounds(code, task_rounds)
        rounds = [(f"Round {r.number} ({r.status})", str(r.id)) for r in task_rounds]
        self.filter_bar.set_choices(rounds, definition.labels)
        self._filters_changed(self.filter_bar.value())

    def _show_rounds(self, code: str, task_rounds: list) -> None:
        states = tuple((r.number, str(r.status)) for r in task_rounds)
        if self._round_states.setdefault(code, states) != states:  # opened or closed here, by sync, by a promotion
            self._round_states[code] = states
            self.leaderboard.round_changed(code)
        open_rounds = [r for r in task_rounds if r.status == "open"]
        if open_rounds:
            current = open_rounds[-1]
            goal = f" · {current.goal_message}" if current.goal_message else ""
            self.round_label.setText(f"Round {current.number}{goal}")
            self.round_label.setToolTip(current.description)
        else:
            self.round_label.setText("No open round")
        if self.workspace.task_code != code:
            self.workspace.set_task(code)
        else:
            self.workspace.follow_rounds()

    def _filters_changed(self, values: DataFilterValues) -> None:
        task_id = self._task_ids.get(self._task_code)
        self.browser.set_filter(ExampleFilter(
            task_id=task_id,
            round_ids=[values.round] if values.round else (),
            author_ids=[self.desk.current_person_id] if values.mine or values.returned else (),
            review_states=[ReviewAction.RETURNED.value] if values.returned else (),
            labels=[values.label] if values.label else (),
            fooled=values.fooled,
            validation_states=[values.validation_state.value] if values.validation_state else (),
            # returned work the author retracted is dealt with
            statuses=[values.status.value] if values.status else (
                VALIDATABLE if values.returned else NOT_DRAFT),
            text=values.text,
        ))

    def refresh(self) -> None:
        """View ▸ Refresh, the user's: read again what the window shows (a store needs none of this:
        _route sends its changes to the pages they touch)."""
        self.dashboard.refresh()
        self.returned_work.refresh()
        self._reload_data()

    def _row_selected(self, current, _previous) -> None:
        row = self.table_model.row_data(current.row())
        self.browser.select(row.id if row else None)

    def open_import(self) -> None:
        from app.core.io.importers import IMPORTERS

        dialog = ImportDialog(import_view(IMPORTERS.values(), self._tasks), self)
        dialog.accepted_with.connect(self.run_import)
        dialog.open()

    def run_import(self, path: str, format_: str, task_code: str | None, skip_bad_rows: bool) -> None:
        from app.core.io.importers import import_file

        self.statusBar().showMessage(f"Importing {Path(path).name}…")
        desk = self.desk

        def done(report):  # what it stored reaches the views through _route
            self.statusBar().showMessage(f"Imported {Path(path).name}", 10_000)
            QMessageBox.information(self, "Import finished", report.summary())

        def run():
            with desk.changes.batch():  # the views look once, at the whole import
                return import_file(desk, path, format_, task_code=task_code, skip_bad_rows=skip_bad_rows)

        self.db.submit(run, on_done=done, on_error=self.show_error)

    def open_export(self) -> None:
        dialog = ExportDialog(ExportView(self._tasks, self._task_code), self)
        dialog.accepted_with.connect(self.run_export)
        dialog.open()

    def run_export(self, path: str, format_: str, task_code: str | None, keep_identities: bool) -> None:
        from app.core.io.exporters import export

        desk = self.desk
        self.db.submit(lambda: export(desk, path, format_, task_code=task_code, keep_identities=keep_identities),
                       on_done=lambda report: QMessageBox.information(self, "Export finished", report.summary()),
                       on_error=self.show_error)

    def showEvent(self, event) -> None:
        super().showEvent(event)
        if self._data_folder_owed:
            self._data_folder_owed = False
            QTimer.singleShot(0, lambda: self.show_data_folder(self.desk.root))

    def show_data_folder(self, root, timeout_ms: int = 10_000) -> None:
        """'Data folder: …' in the status bar, its middle elided where the whole path would run into the
        status widgets beside it (the model status keeps at least its narrowest width)."""
        bar = self.statusBar()
        beside = [w for w in bar.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
                  if w.isVisible() and w is not self.model_label and w.geometry().left() > 0]
        room = self.width() - sum(w.sizeHint().width() for w in beside) - 60 - 48
        prefix = "Data folder: "
        path = bar.fontMetrics().elidedText(str(root), Qt.TextElideMode.ElideMiddle,
                                            max(80, room - bar.fontMetrics().horizontalAdvance(prefix)))
        bar.showMessage(prefix + path, timeout_ms)

    def _make_room_for_message(self, message: str) -> None:
        """A status-bar message is shown whole: the model status beside it shortens while it is up
        (its full text stays in its tooltip)."""
        label, bar = self.model_label, self.statusBar()
        label.setMaximumWidth(16_777_215)
        if message:
            # widgets placed before the model status (a progress bar) keep their width
            shown = bar.findChildren(QWidget, options=Qt.FindChildOption.FindDirectChildrenOnly)
            before = label.geometry().left() - min(
                [w.geometry().left() for w in shown if w.isVisible() and w.geometry().right() <= label.geometry().left()]
                or [label.geometry().left()])
            allowed = label.geometry().right() - before - bar.fontMetrics().horizontalAdvance(message) - 24
            label.setMaximumWidth(max(60, allowed))

    def show_error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError) and str(error) == self._damage_shown:
            self.statusBar().showMessage(DAMAGED_STATUS)  # said once, in its own dialog
            return
        self.statusBar().clearMessage()
        if isinstance(error, DynadeskError):
            QMessageBox.warning(self, "Dynadesk", str(error))
        else:
            log.error("unexpected error", exc_info=(type(error), error, error.__traceback__))
            QMessageBox.critical(self, "Unexpected error",
                                 f"{error.__class__.__name__}: {error}\n\nYour work is saved; details are in the log.")

    def _show_damage(self, message: str) -> None:
        self._damage_shown = message  # set first: the dialog's own event loop may deliver the same refusal
        self.statusBar().showMessage(DAMAGED_STATUS)
        QMessageBox.critical(self, "Database damaged", message)

    def show_about(self) -> None:
        QMessageBox.about(self, "About Dynadesk", about_html(version_info(), self.desk.root))
