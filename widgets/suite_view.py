"""The Suite tab (a view only): the task's adaptive suite as a tree, target group → edit type → seed,
each row with its variants, validated variants and per model how many of those the model gets wrong;
the selected seed with its variants; Generate variants (leads), Score models, Cancel.

The tree's model holds the typed rows (app/views/suite.py) and makes indexes on demand: nothing is
built per variant or per seed up front, so thousands of topics open at once. The controller
(app/gui/suite.py) hands in view-models and listens to the signals.
"""

from __future__ import annotations

import uuid
from typing import Any

from PySide6.QtCore import QAbstractItemModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QMenu,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from app.views.suite import ModelColumn, SeedDetailView, SuiteNode, SuiteTreeView, TopicRow
from widgets.masked_text import MaskedTextBrowser

Index = QModelIndex | QPersistentModelIndex
FIGURES = 2  # the columns after the topic: variants, validated; the models' columns follow
STATE_COLOURS = {"valid": QColor("#1e6b35"), "corrected": QColor("#8a6100"), "rejected": QColor("#b3261e")}


class SuiteTreeModel(QAbstractItemModel):
    """Three levels over the view-model's nodes. An index's internal id names its parent: 0 for a
    group (top level), 1 + g for an edit type of group g, and for a seed the edit type's own number."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.tree: SuiteTreeView | None = None
        self._groups: tuple[SuiteNode, ...] = ()
        self._kind_ids: list[tuple[int, int]] = []  # per edit-type parent id (from 1 + groups): (group, kind)
        self._kind_number: dict[tuple[int, int], int] = {}
        self._first_kind_id = 0

    def set_tree(self, tree: SuiteTreeView) -> None:
        self.beginResetModel()
        self.tree, self._groups = tree, tree.groups
        self._first_kind_id = 1 + len(tree.groups)
        self._kind_ids = [(g, k) for g, group in enumerate(tree.groups) for k in range(len(group.children))]
        self._kind_number = {pair: self._first_kind_id + i for i, pair in enumerate(self._kind_ids)}
        self.endResetModel()

    # where an index is -------------------------------------------------------------------------
    def node(self, index: Index) -> SuiteNode | TopicRow | None:
        if not index.isValid():
            return None
        parent = index.internalId()
        if parent == 0:
            return self._groups[index.row()]
        if parent < self._first_kind_id:
            return self._groups[parent - 1].children[index.row()]
        g, k = self._kind_ids[parent - self._first_kind_id]
        return self._groups[g].children[k].topics[index.row()]

    def index(self, row: int, column: int, parent: Index = QModelIndex()) -> QModelIndex:
        if row < 0 or column < 0 or column >= self.columnCount():
            return QModelIndex()
        if not parent.isValid():
            return self.createIndex(row, column, 0) if row < len(self._groups) else QModelIndex()
        owner = parent.internalId()
        if owner == 0:  # the parent is a group: its edit types
            group = parent.row()
            return self.createIndex(row, column, 1 + group) if row < len(self._groups[group].children) \
                else QModelIndex()
        if owner < self._first_kind_id:  # the parent is an edit type: its seeds
            pair = (owner - 1, parent.row())
            if row < len(self._groups[pair[0]].children[pair[1]].topics):
                return self.createIndex(row, column, self._kind_number[pair])
        return QModelIndex()

    def parent(self, index: Index = QModelIndex()) -> QModelIndex:  # type: ignore[override]
        if not index.isValid():
            return QModelIndex()
        owner = index.internalId()
        if owner == 0:
            return QModelIndex()
        if owner < self._first_kind_id:
            return self.createIndex(owner - 1, 0, 0)
        g, k = self._kind_ids[owner - self._first_kind_id]
        return self.createIndex(k, 0, 1 + g)

    def rowCount(self, parent: Index = QModelIndex()) -> int:
        if parent.column() > 0:
            return 0
        node = self.node(parent) if parent.isValid() else None
        if not parent.isValid():
            return len(self._groups)
        if isinstance(node, SuiteNode):
            return len(node.children) or len(node.topics)
        return 0

    def columnCount(self, parent: Index = QModelIndex()) -> int:
        return len(self.tree.headers) if self.tree is not None else 1

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        node = self.node(index)
        if node is None:
            return None
        column = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if column == 0:
                return node.text if isinstance(node, TopicRow) else node.name
            if column <= FIGURES:
                return f"{(node.variants, node.validated)[column - 1]:,}"
            return node.wrong[column - 1 - FIGURES] if column - 1 - FIGURES < len(node.wrong) else ""
        if role == Qt.ItemDataRole.ToolTipRole and column == 0:
            return node.tooltip if isinstance(node, TopicRow) else f"{node.name}: {node.variants:,} variants, " \
                                                                  f"{node.validated:,} validated"
        if role == Qt.ItemDataRole.TextAlignmentRole and column > 0:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if orientation != Qt.Orientation.Horizontal or self.tree is None or section >= len(self.tree.headers):
            return None
        text = self.tree.headers[section]
        if role == Qt.ItemDataRole.DisplayRole:  # a model's long name: its start, the whole in the tooltip
            return text if section <= FIGURES or len(text) <= 14 else text[:12].rstrip() + "…"
        if role == Qt.ItemDataRole.ToolTipRole:
            return text if section <= FIGURES else f"{text}: of the validated variants, how many the model gets wrong"
        return None

    def seeds_under(self, index: Index) -> list[uuid.UUID]:
        """The seeds of a row: itself, or every seed of its group or edit type."""
        node = self.node(index)
        if isinstance(node, TopicRow):
            return [node.seed_id]
        if isinstance(node, SuiteNode):
            kinds = node.children or (node,)
            return [t.seed_id for kind in kinds for t in kind.topics]
        return []

    def find_seed(self, seed_id: uuid.UUID) -> QModelIndex:
        for g, group in enumerate(self._groups):
            for k, kind in enumerate(group.children):
                for row, topic in enumerate(kind.topics):
                    if topic.seed_id == seed_id:
                        return self.createIndex(row, 0, self._kind_number[(g, k)])
        return QModelIndex()


class SuiteView(QWidget):
    seed_selected = Signal(object)  # the seed's id (uuid.UUID), or None
    generate_requested = Signal(list, int)  # the seeds (uuid.UUID), the per-seed limit
    score_requested = Signal()
    cancel_requested = Signal()
    models_picked = Signal(list)  # keys of the other models to score besides the targets

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("suite-view")
        self.summary = QLabel()
        self.summary.setObjectName("suite-summary")
        self.summary.setWordWrap(True)
        self.model = SuiteTreeModel(self)
        self.tree = QTreeView()
        self.tree.setObjectName("suite-tree")
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)  # thousands of rows lay out without measuring each
        self.tree.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        self.tree.setAlternatingRowColors(True)
        self.tree.selectionModel().currentRowChanged.connect(self._current_changed)
        self.empty = QLabel()
        self.empty.setObjectName("suite-empty")
        self.empty.setWordWrap(True)

        self.models_button = QToolButton()
        self.models_button.setObjectName("suite-models")
        self.models_button.setText("Models…")
        self.models_button.setToolTip("Other models of the task to score on the suite, besides the round's targets")
        self.models_button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
        self.models_menu = QMenu(self.models_button)
        self.models_button.setMenu(self.models_menu)
        self.score_button = QPushButton("&Score models")
        self.score_button.setObjectName("suite-score")
        self.score_button.setToolTip("Count, per model, the validated variants it gets wrong (only new ones are run)")
        self.score_button.clicked.connect(self.score_requested)
        self.per_seed = QSpinBox()
        self.per_seed.setObjectName("suite-per-seed")
        self.per_seed.setRange(1, 200)
        self.per_seed.setPrefix("at most ")
        self.per_seed.setSuffix(" per seed")
        self.per_seed.setToolTip("The task's limit of variants per seed: a lead's setting for the whole team, stored "
                                 "when you generate with another number")
        self.generate_button = QPushButton("&Generate variants")
        self.generate_button.setObjectName("suite-generate")
        self.generate_button.clicked.connect(self._generate)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setObjectName("suite-cancel")
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.cancel_button.hide()
        self.progress = QProgressBar()
        self.progress.setObjectName("suite-progress")
        self.progress.setMaximumWidth(220)
        self.progress.hide()
        self.status = QLabel()
        self.status.setObjectName("suite-status")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        bar = QHBoxLayout()
        for widget in (self.generate_button, self.per_seed, self.score_button, self.models_button,
                       self.progress, self.cancel_button):
            bar.addWidget(widget)
        bar.addStretch(1)

        self.heading = QLabel("Select a seed to read it and its variants.")
        self.heading.setObjectName("suite-seed-heading")
        self.heading.setWordWrap(True)
        self.seed_text = MaskedTextBrowser()  # the seed: masked where the reader chose blur
        self.seed_text.setObjectName("suite-seed-text")
        self.seed_text.setMaximumHeight(self.seed_text.fontMetrics().lineSpacing() * 3 + 12)
        self.detail_summary = QLabel()
        self.detail_summary.setObjectName("suite-seed-summary")
        self.detail_summary.setWordWrap(True)
        self.variants = QTableWidget(0, 5)
        self.variants.setObjectName("suite-variants")
        self.variants.setHorizontalHeaderLabels(["Variant", "Rule", "State", "Label", "Target said"])
        self.variants.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.variants.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.variants.verticalHeader().hide()
        self.variants.setWordWrap(False)
        header = self.variants.horizontalHeader()
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        for column in range(1, 5):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
        detail = QWidget()
        detail_layout = QVBoxLayout(detail)
        detail_layout.setContentsMargins(0, 0, 0, 0)
        for widget in (self.heading, self.seed_text, self.detail_summary):
            detail_layout.addWidget(widget)
        detail_layout.addWidget(self.variants, 1)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.tree, 1)
        left_layout.addWidget(self.empty)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.setObjectName("suite-splitter")
        splitter.addWidget(left)
        splitter.addWidget(detail)
        splitter.setStretchFactor(0, 1)
        splitter.setStretchFactor(1, 1)
        splitter.setSizes([640, 640])
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addLayout(bar)
        layout.addWidget(self.status)
        layout.addWidget(splitter, 1)
        self.empty.hide()
        self._model_actions: dict[str, QAction] = {}
        self._seed: uuid.UUID | None = None
        self._generate_allowed = False

    # what the controller shows ------------------------------------------------------------------
    def _expanded(self) -> set[tuple[str, ...]]:
        """The groups and edit types open now, by name."""
        model, opened = self.model, set[tuple[str, ...]]()
        for g in range(model.rowCount()):
            group = model.index(g, 0)
            if self.tree.isExpanded(group):
                opened.add((str(group.data()),))
                for k in range(model.rowCount(group)):
                    kind = model.index(k, 0, group)
                    if self.tree.isExpanded(kind):
                        opened.add((str(group.data()), str(kind.data())))
        return opened

    def show_tree(self, tree: SuiteTreeView) -> None:
        """The suite again; the seed read stays selected, what was open stays open, the scroll stays."""
        first = self.model.tree is None or self.model.tree.task_code != tree.task_code
        opened = set() if first else self._expanded()
        scrolled = self.tree.verticalScrollBar().value()
        self.model.set_tree(tree)
        header = self.tree.header()
        header.setStretchLastSection(False)
        header.setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)  # the seed's text takes what is left
        numbers = header.fontMetrics().horizontalAdvance("Validated") + 24
        for column in range(1, len(tree.headers)):
            header.setSectionResizeMode(column, QHeaderView.ResizeMode.Interactive)
            header.resizeSection(column, numbers if column <= FIGURES else numbers + 24)
        for g, group in enumerate(tree.groups):
            index = self.model.index(g, 0)
            if first or (group.name,) in opened:
                self.tree.expand(index)
            for k, kind in enumerate(group.children):
                if (group.name, kind.name) in opened:
                    self.tree.expand(self.model.index(k, 0, index))
        self.summary.setText(tree.summary)
        self.empty.setText(tree.empty)
        self.empty.setVisible(bool(tree.empty))
        if self._seed is not None:
            found = self.model.find_seed(self._seed)
            if found.isValid():
                self.tree.setCurrentIndex(found)
            else:
                self._seed = None
                self.show_seed(None)
        self.tree.verticalScrollBar().setValue(scrolled)

    def show_seed(self, detail: SeedDetailView | None) -> None:
        if detail is None:
            self.heading.setText("Select a seed to read it and its variants.")
            self.seed_text.setPlainText("")
            self.detail_summary.setText("")
            self.variants.setRowCount(0)
            return
        if detail.seed_id != self._seed:
            return  # another seed was chosen since
        self.heading.setText(detail.heading)
        text = detail.blur.texts[0].text if detail.blur.texts else ""
        self.seed_text.setPlainText(text)
        self.seed_text.apply_blur(detail.blur)
        self.detail_summary.setText(detail.summary)
        self.variants.setRowCount(len(detail.variants))
        for row, variant in enumerate(detail.variants):
            for column, value in enumerate((variant.text, variant.rule, variant.state, variant.label,
                                            variant.prediction)):
                item = QTableWidgetItem(value)
                if column == 0:
                    item.setToolTip(f"{value}\n{variant.provenance}" if variant.provenance else value)
                    item.setData(Qt.ItemDataRole.UserRole, variant.example_id)
                if column == 1:
                    item.setToolTip(variant.rule_detail or value)
                if column == 2 and variant.state in STATE_COLOURS:
                    item.setForeground(STATE_COLOURS[variant.state])
                self.variants.setItem(row, column, item)
        for column in range(1, 5):  # short columns fit their text; a composed rule's name is cut (its tooltip)
            self.variants.resizeColumnToContents(column)
        self.variants.setColumnWidth(1, min(self.variants.columnWidth(1),
                                            self.variants.fontMetrics().horizontalAdvance("M" * 10)))

    def set_models(self, others: list[ModelColumn], picked: set[str]) -> None:
        """The task's other models the lead may add to the scoring."""
        self.models_menu.clear()
        self._model_actions = {}
        for column in others:
            action = self.models_menu.addAction(column.name)
            action.setCheckable(True)
            action.setChecked(column.key in picked)
            action.toggled.connect(lambda _checked: self.models_picked.emit(
                [key for key, a in self._model_actions.items() if a.isChecked()]))
            self._model_actions[column.key] = action
        self.models_button.setEnabled(bool(others))

    def set_can_generate(self, allowed: bool, why: str = "", *, running: bool = False) -> None:
        """Leads and owners generate (not while a job of the tab runs); for anyone else the tree is
        read-only, and says why."""
        self._generate_allowed = allowed
        self.generate_button.setEnabled(allowed and not running)
        self.per_seed.setEnabled(allowed)
        self.generate_button.setToolTip(
            "Generate label-keeping variants of the selected seeds (or of every seed of a selected group or "
            "edit type), checked against the round's target" if allowed else why)

    def set_per_seed(self, value: int) -> None:
        self.per_seed.blockSignals(True)
        self.per_seed.setValue(value)
        self.per_seed.blockSignals(False)

    def set_running(self, running: bool) -> None:
        self.cancel_button.setVisible(running)
        self.progress.setVisible(running)
        self.score_button.setDisabled(running)
        self.generate_button.setEnabled(self._generate_allowed and not running)
        if running:
            self.progress.setRange(0, 0)

    def set_progress(self, done: int, total: int) -> None:
        self.progress.setRange(0, max(total, 1))
        self.progress.setValue(min(done, max(total, 1)))

    def set_status(self, text: str, *, error: bool = False) -> None:
        self.status.setText(text)
        self.status.setStyleSheet("color: #b3261e" if error else "")

    # what the user does -------------------------------------------------------------------------
    def selected_seeds(self) -> list[uuid.UUID]:
        seen: dict[uuid.UUID, None] = {}
        for index in self.tree.selectionModel().selectedRows(0):
            seen.update(dict.fromkeys(self.model.seeds_under(index)))
        return list(seen)

    @property
    def current_seed(self) -> uuid.UUID | None:
        return self._seed

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        node = self.model.node(current)
        seed = node.seed_id if isinstance(node, TopicRow) else None
        if seed != self._seed:
            self._seed = seed
            if seed is None:
                self.show_seed(None)
            self.seed_selected.emit(seed)

    def _generate(self) -> None:
        seeds = self.selected_seeds()
        if not seeds:
            self.set_status("Select one or more seeds, an edit type or a group first.", error=True)
            return
        self.generate_requested.emit(seeds, self.per_seed.value())
