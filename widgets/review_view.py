"""The Review tab for team leads: filters, a lazy table, the example with every verdict, and
the lead's actions (a final verdict, accepting an annotator's work, returning examples).

Views only: the controller (``app.gui.review_page``) fills the choices, the table and the detail
with typed view-models (``app.views.review``) and receives the filter and the actions as signals.
"""

from __future__ import annotations

import uuid

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QShortcut
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QSplitter,
    QStackedWidget,
    QVBoxLayout,
    QWidget,
)

from app.core.domain import ReviewAction, ValidationState
from app.views.example import ExampleRowView, VerdictChoice
from app.views.quality import ClustersView, QualitySettingsView
from app.views.review import ReviewChoicesView, ReviewFiguresView, ReviewFilterValues, ReviewItemView, accept_text
from widgets.cluster_list import ClusterList
from widgets.example_detail import ExampleDetail
from widgets.example_table import ExampleTableModel, ExampleTableView
from widgets.quality_settings_dialog import QualitySettingsDialog
from widgets.verdict_form import VerdictForm, tint

ANY = None
SEARCH_DEBOUNCE_MS = 250
REVIEW_COLUMNS = [
    ("text", "Text"),
    ("label", "Label"),
    ("fooled", "Fooled"),
    ("validations", "Verdicts"),
    ("disagreements", "Split"),
    ("objections", "Objected"),
    ("flags", "Flags"),
    ("decided", "Decision"),
    ("review_state", "Review"),
    ("author", "Author"),
]
# what each narrow column typically holds (longer values elide; the tooltip has them whole)
NARROW_SAMPLES = {"label": "not hate", "fooled": "fooled", "validations": "9", "disagreements": "9",
                  "objections": "9", "flags": "9", "decided": "incorrect…", "review_state": "returned",
                  "author": "Ana Auth…"}
TEXT_SHARE = 0.32  # of the table's width, at least, for the text column


class ReviewFilters(QWidget):
    """Every filter of the review: emits the whole set (ReviewFilterValues) whenever one changes."""

    changed = Signal(ReviewFilterValues)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.search = QLineEdit(objectName="review-search", clearButtonEnabled=True,
                                placeholderText="Full text (any script)…")
        self.min_disagreements = self._spin("min-disagreements", "against majority ≥ ")
        self.min_disagreements.setToolTip("Examples whose validators split: at least this many peer verdicts "
                                          "differ from the most common one")
        self.min_flags = self._spin("min-flags", "flags ≥ ")
        self.objected = self._combo("review-objected", [("Objected or not", ANY),
                                                        ("Incorrect or flagged", True),
                                                        ("No objection", False)])
        self.objected.setToolTip("A validator who says incorrect or flagged disagrees with the author, "
                                 "even where the validators agree among themselves")
        self.annotator = self._combo("annotator", [("Every annotator", ANY)])
        self.round = self._combo("review-round", [("All rounds", ANY)])
        self.label = self._combo("review-label", [("Any label", ANY)])
        self.fooled = self._combo("review-fooled", [("Fooled or not", ANY), ("Model fooled", True),
                                                    ("Model not fooled", False)])
        self.validation = self._combo("review-validation", [("Any validation state", ANY),
                                                            ("Unvalidated", "unvalidated"),
                                                            ("In progress", "in_progress"), ("Decided", "decided")])
        self.review = self._combo("review-state", [("Reviewed or not", ANY), ("Not reviewed", "none"),
                                                   ("Accepted", "accepted"), ("Returned", "returned")])
        self.near_duplicates = self._combo("review-near-duplicates", [("Every example", False),
                                                                      ("Near-duplicates", True)])
        self.near_duplicates.setToolTip("Clusters of near-duplicate examples (the task's threshold, set by its "
                                        "lead); the round and annotator filters apply")
        self.facets: dict[str, QComboBox] = {}
        self.grid = QGridLayout(self)
        self.grid.setContentsMargins(0, 0, 0, 0)
        self.grid.addWidget(QLabel("Find:"), 0, 0)
        self.grid.addWidget(self.search, 0, 1, 1, 3)
        self.grid.addWidget(self.min_disagreements, 0, 4)
        self.grid.addWidget(self.min_flags, 0, 5)
        self.grid.addWidget(self.objected, 0, 6)
        for column, combo in enumerate((self.annotator, self.round, self.label, self.fooled, self.validation,
                                        self.review, self.near_duplicates), start=0):
            self.grid.addWidget(combo, 1, column)
        self._facet_row = QHBoxLayout()
        self.grid.addLayout(self._facet_row, 2, 0, 1, 7)
        self._debounce = QTimer(self, singleShot=True, interval=SEARCH_DEBOUNCE_MS)
        self._debounce.timeout.connect(self._emit)
        self.search.textChanged.connect(self._debounce.start)
        self.search.returnPressed.connect(self._emit)

    def _spin(self, name: str, prefix: str) -> QSpinBox:
        spin = QSpinBox(objectName=name, minimum=0, maximum=50, prefix=prefix)
        spin.setSpecialValueText(prefix.replace(" ≥ ", ": any"))
        spin.valueChanged.connect(self._emit)
        return spin

    def _combo(self, name: str, items) -> QComboBox:
        combo = QComboBox(objectName=name)
        # shrink before the window grows past a small screen; the popup still shows whole choices
        combo.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        combo.setMinimumContentsLength(7)
        for text, value in items:
            combo.addItem(text, value)
        combo.currentIndexChanged.connect(self._emit)
        return combo

    def set_choices(self, choices: ReviewChoicesView) -> None:
        """The task's annotators, rounds, labels and facets (e.g. hate type and target groups)."""
        self.blockSignals(True)
        for combo, first, items in ((self.annotator, "Every annotator", choices.annotators),
                                    (self.round, "All rounds", choices.rounds),
                                    (self.label, "Any label", [(label, label) for label in choices.labels])):
            combo.blockSignals(True)
            combo.clear()
            combo.addItem(first, ANY)
            for text, value in items:
                combo.addItem(text, value)
            combo.blockSignals(False)
        for combo in self.facets.values():
            self._facet_row.removeWidget(combo)
            combo.deleteLater()
        self.facets = {}
        while self._facet_row.count():
            item = self._facet_row.takeAt(0)
            if item.widget():
                item.widget().deleteLater()
        for facet in choices.facets:
            combo = self._combo(f"facet-{facet.name}", [(f"{facet.question.rstrip('?:')}: any", ANY),
                                                        *[(choice, choice) for choice in facet.choices]])
            self.facets[facet.name] = combo
            self._facet_row.addWidget(combo, 1)
        self._facet_row.addStretch(2)
        self.blockSignals(False)

    def value(self) -> ReviewFilterValues:
        annotator, round_, state, review = (self.annotator.currentData(), self.round.currentData(),
                                            self.validation.currentData(), self.review.currentData())
        return ReviewFilterValues(
            text=self.search.text().strip(),
            min_disagreements=self.min_disagreements.value() or None,
            min_flags=self.min_flags.value() or None,
            annotator=uuid.UUID(annotator) if annotator else None,
            round=uuid.UUID(round_) if round_ else None,
            label=self.label.currentData(),
            fooled=self.fooled.currentData(),
            validation_state=ValidationState(state) if state else None,
            review_states=(None,) if review == "none" else ((ReviewAction(review),) if review else ()),
            objected=self.objected.currentData(),
            facets=tuple((name, combo.currentData()) for name, combo in self.facets.items() if combo.currentData()),
            near_duplicates=bool(self.near_duplicates.currentData()),
        )

    def _emit(self) -> None:
        self._debounce.stop()
        self.changed.emit(self.value())


class LeadActions(QFrame):
    """What a lead does with the selected example(s)."""

    accept_requested = Signal()
    return_requested = Signal(str)  # the comment
    threshold_requested = Signal(int)  # matching verdicts that decide an example of the task
    quality_settings_requested = Signal()  # the lead opens the task's data-quality settings
    blur_words_requested = Signal()  # the lead opens the task's blur words (analyst wellbeing)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("lead-actions")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.not_lead = tint(QLabel(objectName="not-lead", wordWrap=True, margin=6), "#fff4e5", "#6b3d00")
        self.not_lead.hide()  # until the profile's role is known
        self.form = VerdictForm(allow_skip=False, title="Lead verdict (final: it decides the example)")
        self.comment = QLineEdit(objectName="return-comment",
                                 placeholderText="Comment for the annotator (required to return)…")
        # short labels: the side keeps a narrow minimum, so the table's text column gets the width
        self.return_button = QPushButton("Return to the author", objectName="return")
        self.return_button.setToolTip("Return the selected examples to their author, with the comment above")
        self.accept_button = QPushButton("Accept their decided work…", objectName="accept")
        self.accept_button.setToolTip("Accept the decided work of the selected example's author")
        self.return_button.clicked.connect(lambda: self.return_requested.emit(self.comment.text().strip()))
        self.comment.returnPressed.connect(lambda: self.return_requested.emit(self.comment.text().strip()))
        self.accept_button.clicked.connect(self.accept_requested)
        self.message = QLabel(objectName="lead-message", wordWrap=True)
        self.threshold = QSpinBox(objectName="agreement-threshold", minimum=1, maximum=20)  # the protocol's limit
        self.threshold.setToolTip("How many matching peer verdicts decide an example of this task on this desk. "
                                  "Nobody validates their own example, so a team of N can reach at most N − 1.")
        self.threshold_button = QPushButton("Set", objectName="set-threshold")
        self.threshold_button.clicked.connect(lambda: self.threshold_requested.emit(self.threshold.value()))
        self.threshold_note = QLabel(objectName="threshold-note", wordWrap=True)
        self.threshold_note.setStyleSheet("color:#6b6b6b")
        rule = QHBoxLayout()
        rule.addWidget(QLabel("Matching verdicts to decide:"))
        rule.addWidget(self.threshold)
        rule.addWidget(self.threshold_button)
        rule.addWidget(self.threshold_note, 1)
        self.quality_button = QPushButton("Data quality…", objectName="quality-settings-button")
        self.quality_button.setToolTip("The task's near-duplicate threshold and the dashboard's alert lines")
        self.quality_button.clicked.connect(self.quality_settings_requested)
        quality = QHBoxLayout()
        quality.addWidget(QLabel("Near-duplicates and alerts:"))
        quality.addWidget(self.quality_button)
        self.blur_words_button = QPushButton("Blur words…", objectName="blur-words-button")
        self.blur_words_button.setToolTip("Words the reading views mask for this task, besides its bundled list")
        self.blur_words_button.clicked.connect(self.blur_words_requested)
        quality.addWidget(self.blur_words_button)
        quality.addStretch(1)
        work = QGridLayout()
        # one button a row: the accept button names the author, and beside Return it held the panel wide
        work.addWidget(self.comment, 0, 0, 1, 2)
        work.addWidget(self.return_button, 1, 0)
        work.addWidget(self.accept_button, 2, 0, 1, 2)
        layout = QVBoxLayout(self)
        layout.addWidget(self.not_lead)
        layout.addWidget(self.form)
        layout.addWidget(QLabel("<b>Annotator's work</b>"))
        layout.addLayout(work)
        layout.addLayout(rule)
        layout.addLayout(quality)
        layout.addWidget(self.message)

    def set_lead(self, is_lead: bool, who: str) -> None:
        self.not_lead.setVisible(not is_lead)
        self.not_lead.setText(f"{who} is not a team lead: you can browse and filter, but adjudicating, accepting "
                              "and returning work are for a lead or owner, at their own desk or profile.")
        self.form.set_locked(not is_lead)
        for widget in (self.comment, self.return_button, self.accept_button, self.threshold, self.threshold_button,
                       self.quality_button):
            widget.setEnabled(is_lead)

    def set_threshold(self, threshold: int, default: int) -> None:
        """The task's current number of matching verdicts, and the task definition's."""
        self.threshold.setValue(threshold)
        self.threshold_note.setText("the task's own" if threshold == default else f"the task says {default}")

    def show_message(self, text: str, problem: bool = False) -> None:
        tint(self.message, "#00000000", "#b3261e" if problem else "#1e6b35").setAutoFillBackground(False)
        self.message.setText(text)


class ReviewView(QWidget):
    selection_changed = Signal(list)  # ids of the selected rows, current one first
    filters_changed = Signal(ReviewFilterValues)
    verdict_submitted = Signal(VerdictChoice)  # the lead's verdict
    return_requested = Signal(str)  # the comment
    accept_requested = Signal()
    threshold_requested = Signal(int)
    quality_settings_requested = Signal()
    quality_settings_chosen = Signal(int, float, int)  # near-duplicate %, token z-score, duplicate-rate %

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("review-view")
        self.filters = ReviewFilters()
        self.figures = QLabel(objectName="review-figures", textFormat=Qt.TextFormat.RichText, wordWrap=True)
        self.figures.setToolTip("<p><b>A validator said incorrect or flagged</b>: at least one verdict (peer or lead) "
                                "disagrees with the author.<br><b>Validators split</b>: at least one peer verdict "
                                "differs from the most common peer verdict (another verdict or corrected label)."
                                "</p>")
        self.model = ExampleTableModel(self, REVIEW_COLUMNS)
        self.table = ExampleTableView(self.model)
        self.table.setObjectName("review-table")
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)
        # a click changes both the selection and the current row: say so once, with what is selected
        self._selected_ids: list = []
        self.table.selectionModel().selectionChanged.connect(self._selection)
        self.table.selectionModel().currentRowChanged.connect(self._selection)
        # Qt clears the selection silently at a reset, and the table then selects again the example being
        # read (ExampleTableView): say what is selected now
        self.model.modelReset.connect(self._selection)
        self.clusters = ClusterList()
        self.clusters.selection_changed.connect(self._selection)
        self.listing = QStackedWidget(objectName="review-listing")  # the table, or the near-duplicate clusters
        self.listing.addWidget(self.table)
        self.listing.addWidget(self.clusters)
        self.detail = ExampleDetail()
        self.actions_panel = LeadActions()
        self.filters.changed.connect(self.filters_changed)
        self.actions_panel.form.submitted.connect(self.verdict_submitted)
        self.actions_panel.return_requested.connect(self.return_requested)
        self.actions_panel.accept_requested.connect(self.accept_requested)
        self.actions_panel.threshold_requested.connect(self.threshold_requested)
        self.actions_panel.quality_settings_requested.connect(self.quality_settings_requested)
        self.quality_dialog: QualitySettingsDialog | None = None
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.detail)
        right.addWidget(self.actions_panel)
        right.setSizes([440, 360])
        splitter = QSplitter(Qt.Orientation.Horizontal, objectName="review-splitter")
        splitter.addWidget(self.listing)
        splitter.addWidget(right)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 2)
        splitter.setSizes([900, 440])  # the table first: the right side keeps its minimum on a small screen
        # the narrow columns as wide as their heading, in the font on screen, while the text column keeps
        # TEXT_SHARE of the table; on a narrow table they give way down to a typical value (headings
        # elide; their tooltips stay whole)
        self.table.horizontalHeader().setTextElideMode(Qt.TextElideMode.ElideRight)
        self.table.viewport().installEventFilter(self)
        self._shared_width = -1
        layout = QVBoxLayout(self)
        layout.addWidget(self.filters)
        layout.addWidget(self.figures)
        layout.addWidget(splitter, 1)
        # verdict keys work from the table too; text fields keep their digits (they override shortcuts)
        for key, verdict in (("1", "correct"), ("2", "incorrect"), ("3", "flagged")):
            shortcut = QShortcut(QKeySequence(key), self, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
            shortcut.activated.connect(lambda v=verdict: self._choose(v))

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.table.viewport() and event.type() == QEvent.Type.Resize:
            self._share_columns()
        return False

    def _share_columns(self) -> None:
        width = self.table.viewport().width()
        if width == self._shared_width:
            return  # only a new width re-shares: widths a reader set by hand stay until then
        self._shared_width = width
        metrics = self.table.horizontalHeader().fontMetrics()
        keys = [key for key, _ in REVIEW_COLUMNS]
        pad = 16  # margins and the sort arrow's room
        whole = {key: max(metrics.horizontalAdvance(title), metrics.horizontalAdvance(NARROW_SAMPLES[key])) + pad
                 for key, title in REVIEW_COLUMNS if key in NARROW_SAMPLES}
        least = {key: metrics.horizontalAdvance(NARROW_SAMPLES[key]) + pad for key in whole}
        room = max(int(width * (1 - TEXT_SHARE)), sum(least.values()))
        spare = sum(whole.values()) - sum(least.values())
        give = min(1.0, (room - sum(least.values())) / spare) if spare > 0 else 1.0
        for key in whole:
            self.table.setColumnWidth(keys.index(key), least[key] + int((whole[key] - least[key]) * give))

    def _choose(self, verdict: str) -> None:
        form = self.actions_panel.form
        if form.isEnabled() and self.current_row() is not None:
            form.choose(verdict=verdict)

    def edit_quality_settings(self, view: QualitySettingsView) -> None:
        """Open the task's data-quality settings; OK emits quality_settings_chosen."""
        self.quality_dialog = QualitySettingsDialog(view, self)
        self.quality_dialog.chosen.connect(self.quality_settings_chosen)
        self.quality_dialog.open()

    def clusters_shown(self) -> bool:
        return self.listing.currentWidget() is self.clusters

    def show_clusters(self, view: ClustersView | None) -> None:
        """The near-duplicate clusters in place of the table (None: the table again)."""
        if view is None:
            self.listing.setCurrentWidget(self.table)
            return
        self.listing.setCurrentWidget(self.clusters)
        self.clusters.show_clusters(view)
        self.figures.setText(view.summary)

    def selected_ids(self) -> list[uuid.UUID]:
        if self.clusters_shown():
            return self.clusters.selected_ids()
        current = self.model.row_data(self.table.currentIndex().row())
        rows = sorted({index.row() for index in self.table.selectionModel().selectedRows()})
        ids = [row.id for row in map(self.model.row_data, rows) if row is not None]
        if current is not None and current.id in ids:
            ids.remove(current.id)
            ids.insert(0, current.id)
        return ids

    def current_row(self) -> ExampleRowView | None:
        return self.model.row_data(self.table.currentIndex().row())

    def shown_rows(self) -> list[ExampleRowView]:
        """The rows loaded so far, in the order shown."""
        return [self.model.row_data(r) for r in range(self.model.rowCount())]

    def select_row(self, row: int) -> None:
        """Select a row and give the table the keys (the verdict keys work from it)."""
        self.table.selectRow(row)
        self.table.setFocus()

    def show_choices(self, choices: ReviewChoicesView) -> None:
        self.filters.set_choices(choices)
        self.actions_panel.set_threshold(choices.threshold, choices.default_threshold)

    def filter_values(self) -> ReviewFilterValues:
        return self.filters.value()

    def show_item(self, item: ReviewItemView | None) -> None:
        """The selected example (with every verdict) and the lead's form for it."""
        self.detail.show_example(None if item is None else item.detail)
        form = self.actions_panel.form
        if item is None:
            form.set_labels([], None)
            return
        form.set_labels(item.labels, item.label)
        self.actions_panel.accept_button.setText(accept_text(item))

    def set_lead(self, is_lead: bool, who: str) -> None:
        self.actions_panel.set_lead(is_lead, who)

    def set_threshold(self, threshold: int, default: int) -> None:
        self.actions_panel.set_threshold(threshold, default)

    def show_message(self, text: str, problem: bool = False) -> None:
        self.actions_panel.show_message(text, problem)

    def show_problem(self, text: str) -> None:
        """The lead's verdict was refused (or has nothing to judge): say so in the form."""
        self.actions_panel.form.show_problem(text)

    def unlock_form(self) -> None:
        """An action failed: the form takes input again (unless the profile may not act)."""
        form = self.actions_panel.form
        form.setEnabled(not form.locked)

    def action_done(self, message: str) -> None:
        """An action is stored: say so, and clear the form for the next example."""
        self.actions_panel.show_message(message)
        self.actions_panel.form.reset()

    def ask_for_comment(self) -> None:
        self.actions_panel.show_message("Returning work needs a comment: tell the annotator what to fix.",
                                        problem=True)
        self.actions_panel.comment.setFocus()

    def clear_comment(self) -> None:
        self.actions_panel.comment.clear()

    def _selection(self, *_args) -> None:
        ids = self.selected_ids()
        if ids != self._selected_ids:
            self._selected_ids = ids
            self.selection_changed.emit(ids)

    def set_figures(self, figures: ReviewFiguresView) -> None:
        if self.clusters_shown():
            return  # the clusters' summary stands in for the figures
        parts = [f"<b>{figures.examples}</b> examples",
                 f"<b style='color:#b3261e'>{figures.objected}</b> a validator said incorrect or flagged",
                 f"<b style='color:#b3261e'>{figures.disagreements}</b> where validators split",
                 f"<b style='color:#8a5a00'>{figures.flagged}</b> flagged",
                 f"<b>{figures.decided}</b> decided", f"{figures.unvalidated} unvalidated",
                 f"{figures.fooled} fooled the model",
                 f"{figures.accepted} accepted · {figures.returned} returned"]
        self.figures.setText(" · ".join(parts))
