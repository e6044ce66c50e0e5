"""The Create page: the editor with its live prediction, the heatmap, the perturbation
comparison, the metadata form, and the banners (round goal, content warning, draft recovery).

A layout of views only; the workspace controller feeds it through intent-level methods
(``show_task``, ``show_prediction``, ``offer_drafts`` …) and hears it through typed signals. The
children stay attributes for tests; controllers do not reach into them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QKeySequence, QResizeEvent, QShortcut, QUndoStack
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QStackedWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from app.views.assist import AssistPanelView
from app.views.create import (
    AttributionView,
    EditorContent,
    ExplainTarget,
    MetadataValues,
    PairView,
    PredictionView,
    TaskView,
)
from app.views.quality import DuplicateWarningView, NoveltyView
from widgets.assist_panel import AssistPanel
from widgets.example_editor import ExampleEditor
from widgets.heatmap import AttributionPanel
from widgets.metadata_form import MetadataForm
from widgets.page_tabs import PageTabs
from widgets.perturbation_view import PerturbationView
from widgets.prediction_panel import PredictionPanel


class Banner(QFrame):
    """A line of text with up to two buttons, shown above the editor."""

    primary_clicked = Signal()
    secondary_clicked = Signal()
    presented = Signal()  # shown with a message, also when it was showing already

    def __init__(self, name: str, colour: str, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self.setStyleSheet(f"#{name} {{ background:{colour}; border-radius:4px; }}")
        self.text = QLabel(wordWrap=True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.primary = QPushButton(objectName=f"{name}_primary")
        self.secondary = QPushButton(objectName=f"{name}_secondary")
        self.primary.clicked.connect(self.primary_clicked)
        self.secondary.clicked.connect(self.secondary_clicked)
        layout = QHBoxLayout(self)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.secondary)
        layout.addWidget(self.primary)
        self.hide()

    def show_message(self, html: str, primary: str | None = None, secondary: str | None = None) -> None:
        self.text.setText(html)
        self.primary.setVisible(primary is not None)
        self.secondary.setVisible(secondary is not None)
        self.primary.setText(primary or "")
        self.secondary.setText(secondary or "")
        self.show()
        self.presented.emit()


class BannerStack(QScrollArea):
    """The banners above the editor, in one column. However many show at once (a round notice, a
    move offer, returned work, a recovered draft…), they take at most ``share`` of the page: beyond
    that they scroll among themselves, so that the text, the label buttons, Submit and the
    prediction stay on screen. A banner that appears, or says something again (an offer the writer is
    pointed back to), is scrolled into view; with none, no gap."""

    def __init__(self, banners: list[Banner], share: float = 0.3):
        super().__init__()
        self.setObjectName("banners")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.setWidgetResizable(True)
        self.share = share
        self._cap = 1 << 20
        self._banners = banners
        column = QWidget(objectName="banner-column")
        layout = QVBoxLayout(column)
        layout.setContentsMargins(0, 0, 0, 0)
        for banner in banners:
            layout.addWidget(banner)
            banner.installEventFilter(self)
            banner.presented.connect(lambda banner=banner: self.bring_into_view(banner))
        self.setWidget(column)
        self.hide()

    def fit_to(self, page_height: int) -> None:
        """The page's height changed: the banners' share of it follows."""
        cap = max(int(page_height * self.share), 1)
        if cap != self._cap:
            self._cap = cap
            self.updateGeometry()

    def bring_into_view(self, banner: QWidget) -> None:
        """Scroll ``banner`` into view now, and again once the column is laid out with its new text."""
        self.ensureWidgetVisible(banner, 0, 0)
        QTimer.singleShot(0, lambda: self.ensureWidgetVisible(banner, 0, 0))

    def _content_height(self) -> int:
        layout = self.widget().layout()
        width = self.viewport().width()
        if width > 0 and layout.hasHeightForWidth():
            return layout.totalHeightForWidth(width)
        return layout.totalSizeHint().height()

    def sizeHint(self) -> QSize:
        return QSize(super().sizeHint().width(), min(self._content_height(), self._cap))

    def minimumSizeHint(self) -> QSize:
        return QSize(0, min(self._content_height(), self._cap))

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        if event.oldSize().width() != event.size().width():
            self.updateGeometry()  # wrapped text: another width, another height

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        kind = event.type()
        if kind in (QEvent.Type.ShowToParent, QEvent.Type.HideToParent):
            self.setVisible(any(not banner.isHidden() for banner in self._banners))
            self.updateGeometry()
            if kind is QEvent.Type.ShowToParent and isinstance(watched, QWidget):
                # once the column is laid out with it
                QTimer.singleShot(0, lambda banner=watched: self.ensureWidgetVisible(banner, 0, 0))
        elif kind is QEvent.Type.LayoutRequest:
            self.updateGeometry()
        return False


class WorkspaceView(QWidget):
    submit_requested = Signal()
    discard_requested = Signal()
    content_changed = Signal(object)  # the EditorContent, after every change of text, label or answer
    text_edited = Signal()  # a keystroke (or undo) in a written input: the live-prediction trigger
    next_context_requested = Signal()
    prompt_requested = Signal()
    metadata_confirmed = Signal(dict)  # the metadata form's values (MetadataValues), all required ones filled in
    explain_requested = Signal(object)  # an ExplainTarget
    pinned_changed = Signal(bool)  # the heatmap follows the text
    warning_acknowledged = Signal()
    restore_draft_requested = Signal()
    discard_drafts_requested = Signal()
    move_requested = Signal()  # move the example to the open round
    keep_requested = Signal()  # keep it as a draft of its own round
    submit_anyway_requested = Signal()  # the writer saw the near-duplicate warning and submits all the same
    duplicate_edit_requested = Signal()  # … or goes back to change the text
    suggest_requested = Signal()  # the writing assistant: suggest edits for the text on screen
    assist_goal_changed = Signal(object)  # a Goal
    assist_slurs_toggled = Signal(bool)  # the writer asks for description → slur edits, or stops
    assist_contrast_label_changed = Signal(object)  # the new label a contrast edit should make true
    suggestion_apply_requested = Signal(int)  # apply the suggestion at this index (rank order)
    suggestions_more_requested = Signal()  # list the next suggestions too
    assist_label_confirmed = Signal(str)  # contrast: the writer sets the applied edit's new label
    replacement_toggled = Signal(int, bool)  # an applied suggestion's undo step: token, applied now

    def __init__(self, undo_stack: QUndoStack, parent=None):
        super().__init__(parent)
        self.goal = QLabel(objectName="goal_banner", wordWrap=True)
        self.goal.setStyleSheet("padding:4px; color:#333")
        self.warning = Banner("content_warning", "#fff4ce")
        self.draft_offer = Banner("draft_offer", "#e3f0fb")
        self.message = Banner("workspace_message", "#e8f4ea")
        self.message.primary.clicked.connect(self.message.hide)
        # A round that opened or closed while the app was open, and work written in a closed round.
        self.round_notice = Banner("round_notice", "#e3f0fb")
        self.round_notice.primary.clicked.connect(self.round_notice.hide)
        self.move_offer = Banner("move_offer", "#fff4ce")
        self.returned = Banner("returned_notice", "#fdecea")  # work a lead sent back to this writer
        self.duplicate_warning = Banner("duplicate_warning", "#fdecea")  # at submit: a near-duplicate

        self.editor = ExampleEditor(undo_stack)
        self.form = MetadataForm()
        self.editing = QStackedWidget(objectName="editing")
        self.editing.addWidget(self.editor)
        self.editing.addWidget(self.form)
        self.submit_button = QPushButton("Submit (Ctrl+Enter)", objectName="submit")
        self.submit_button.clicked.connect(self.submit_requested)
        self.discard_button = QPushButton("Discard draft", objectName="discard")
        self.discard_button.clicked.connect(self.discard_requested)
        self.status = QLabel(objectName="example_status", styleSheet="color:#6b6b6b")
        self.novelty = QLabel(objectName="novelty")  # how far the draft is from the round's examples
        self.novelty.hide()
        actions = QHBoxLayout()
        actions.addWidget(self.discard_button)  # far left: never a slip away from Submit or Store
        actions.addWidget(self.status, 1)
        actions.addWidget(self.novelty)
        actions.addWidget(self.submit_button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.editing, 1)
        left_layout.addLayout(actions)

        self.prediction = PredictionPanel()
        self.attribution = AttributionPanel()
        self.perturbation = PerturbationView()
        self.assist = AssistPanel()
        self.guidelines = QTextBrowser(objectName="guidelines")
        self.guidelines.setOpenExternalLinks(False)
        self.side = PageTabs(objectName="side")  # a long perturbation comparison scrolls, the page does not grow
        self.side.addTab(self.attribution, "Why (heatmap)")
        self.side.addTab(self.assist, "Suggestions")
        self.side.addTab(self.perturbation, "Perturbation")
        self.side.addTab(self.guidelines, "Guidelines")
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.prediction)
        right.addWidget(self.side)
        right.setSizes([260, 440])
        splitter = QSplitter(Qt.Orientation.Horizontal, objectName="workspace_splitter")
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setSizes([700, 520])
        # the content warning locks the editor until read: it stays above the banners, never scrolled away
        self.banners = BannerStack([self.round_notice, self.move_offer, self.draft_offer,
                                    self.message, self.returned, self.duplicate_warning])
        layout = QVBoxLayout(self)
        layout.addWidget(self.goal)
        layout.addWidget(self.warning)
        layout.addWidget(self.banners)
        layout.addWidget(splitter, 1)

        self.editor.content_changed.connect(self.content_changed)
        self.editor.text_edited.connect(self.text_edited)
        self.editor.next_context_requested.connect(self.next_context_requested)
        self.editor.prompt_requested.connect(self.prompt_requested)
        self.form.confirmed.connect(self.metadata_confirmed)
        self.form.cancelled.connect(lambda: self.show_form(False))
        self.attribution.explain_requested.connect(self.explain_requested)
        self.attribution.pinned_changed.connect(self.pinned_changed)
        self.warning.primary.clicked.connect(self.warning_acknowledged)
        self.draft_offer.primary.clicked.connect(self.restore_draft_requested)
        self.draft_offer.secondary.clicked.connect(self.discard_drafts_requested)
        self.move_offer.primary.clicked.connect(self.move_requested)
        self.move_offer.secondary.clicked.connect(self.keep_requested)
        self.duplicate_warning.primary.clicked.connect(self.submit_anyway_requested)
        self.duplicate_warning.secondary.clicked.connect(self.duplicate_edit_requested)
        self.assist.suggest_requested.connect(self.suggest_requested)
        self.assist.goal_changed.connect(self.assist_goal_changed)
        self.assist.slurs_toggled.connect(self.assist_slurs_toggled)
        self.assist.contrast_label_changed.connect(self.assist_contrast_label_changed)
        self.assist.apply_requested.connect(self.suggestion_apply_requested)
        self.assist.more_requested.connect(self.suggestions_more_requested)
        self.assist.confirm_label_requested.connect(self.assist_label_confirmed)
        self.editor.replacement_toggled.connect(self.replacement_toggled)
        # Choosing and applying a suggestion without leaving the text (or from the panel itself).
        self.suggestion_keys: list[QShortcut] = []
        for owner in (self.editor, self.assist):
            for keys, act in (("Alt+Return", self.assist.apply_selected), ("Alt+Enter", self.assist.apply_selected),
                              ("Alt+Down", lambda: self.assist.move_selection(1)),
                              ("Alt+Up", lambda: self.assist.move_selection(-1))):
                shortcut = QShortcut(QKeySequence(keys), owner, context=Qt.ShortcutContext.WidgetWithChildrenShortcut)
                shortcut.activated.connect(act)
                self.suggestion_keys.append(shortcut)

    def resizeEvent(self, event: QResizeEvent) -> None:
        super().resizeEvent(event)
        self.banners.fit_to(event.size().height())

    def show_novelty(self, view: NoveltyView | None) -> None:
        """The novelty indicator beside Submit, with the closest example on hover (None: hidden)."""
        if view is None:
            self.novelty.hide()
            return
        self.novelty.setText(f"<span style='color:{view.level.colour}'>●</span> {view.text}")
        self.novelty.setToolTip(view.tooltip)
        self.novelty.setAccessibleDescription(view.tooltip)
        self.novelty.show()

    def show_duplicate_warning(self, view: DuplicateWarningView | None) -> None:
        """The near-duplicate warning at submit (None: hidden)."""
        if view is None:
            self.duplicate_warning.hide()
            return
        self.duplicate_warning.show_message(view.html, "Submit anyway", "Go back and edit")

    def duplicate_warning_shown(self) -> bool:
        return not self.duplicate_warning.isHidden()

    def show_task(self, task: TaskView) -> None:
        """Lay the page out for a task: its inputs, labels, metadata and guidelines; nothing shown
        of a previous task remains."""
        self.round_notice.hide()
        self.move_offer.hide()
        self.editor.configure(task.editor)
        self.form.configure(task.form)
        self.show_form(False)
        self.guidelines.setMarkdown(task.guidelines)
        self.prediction.clear("Type to see what the model predicts.")
        self.attribution.clear()
        self.attribution.set_labels(task.labels)
        self.perturbation.clear()
        self.message.hide()

    def show_goal(self, html: str) -> None:
        self.goal.setText(html)

    def show_warning(self, html: str | None) -> None:
        """A content warning to read first (None: none), with the guidelines beside it."""
        if html is None:
            self.warning.hide()
            return
        self.warning.show_message(html, "I understand")
        self.side.setCurrentWidget(self.guidelines)

    def warning_shown(self) -> bool:
        return not self.warning.isHidden()

    def show_guidelines(self) -> None:
        self.side.setCurrentWidget(self.guidelines)

    def content(self) -> EditorContent:
        return self.editor.current()

    def show_content(self, content: EditorContent, *, record_undo: bool = False) -> None:
        self.editor.set_content(content, record_undo=record_undo)

    def show_context(self, names: list[str], text: str) -> None:
        """The round's context (premise, passage) in each of the inputs ``names``."""
        for name in names:
            self.editor.set_context(name, text)

    def focus_editor(self) -> None:
        self.editor.focus_first_written()

    def set_metadata(self, values: MetadataValues, label: str | None) -> None:
        """The metadata form's values, and the label that decides which fields apply."""
        self.form.set_values(values)
        self.form.set_label(label)

    def set_metadata_label(self, label: str | None) -> None:
        self.form.set_label(label)

    def metadata(self) -> MetadataValues:
        return self.form.values()

    def confirm_metadata(self) -> None:
        self.form.confirm()

    def show_metadata_problem(self, text: str) -> None:
        self.form.problem.setText(text)

    def can_submit(self) -> bool:
        return self.submit_button.isEnabled()

    def set_status(self, text: str) -> None:
        self.status.setText(text)

    def show_prediction(self, view: PredictionView) -> None:
        self.prediction.show_prediction(view)

    def clear_prediction(self, message: str) -> None:
        self.prediction.clear(message)

    def set_prediction_stale(self, stale: bool) -> None:
        self.prediction.set_stale(stale)

    def explain_target(self) -> ExplainTarget:
        return self.attribution.explain_target()

    def show_attribution(self, view: AttributionView) -> None:
        self.attribution.show_attribution(view)

    def clear_attribution(self, message: str | None = None) -> None:
        if message is None:
            self.attribution.clear()
        else:
            self.attribution.clear(message)

    def set_attribution_stale(self, stale: bool) -> None:
        self.attribution.set_stale(stale)

    def show_heatmap(self) -> None:
        self.side.setCurrentWidget(self.attribution)

    def show_assist(self, view: AssistPanelView, *, bring_forward: bool = False) -> None:
        """The writing assistant's panel (suggestions, or why there are none)."""
        self.assist.show_panel(view)
        if bring_forward:
            self.side.setCurrentWidget(self.assist)

    def set_contrast_choices(self, choices: tuple[str, ...], chosen: str | None) -> None:
        self.assist.set_contrast_choices(choices, chosen)

    def replace_written(self, name: str, text: str, token: int) -> None:
        """Put a suggestion into the input ``name``, as one undo step reported with ``token``."""
        self.editor.replace_text(name, text, token)

    def choose_label(self, label: str) -> None:
        """The label the writer confirmed (an undoable label change, as Alt+1 makes)."""
        self.editor.choose_label(label)

    def show_pair(self, pair: PairView, *, bring_forward: bool = False) -> None:
        self.perturbation.show_pair(pair)
        if bring_forward:
            self.side.setCurrentWidget(self.perturbation)

    def clear_pair(self) -> None:
        self.perturbation.clear()

    def show_message(self, html: str) -> None:
        self.message.show_message(html, "OK")

    def show_round_notice(self, html: str) -> None:
        self.round_notice.show_message(html, "OK")

    def offer_drafts(self, html: str | None) -> None:
        """Offer to restore an unfinished draft (None: nothing to offer)."""
        if html is None:
            self.draft_offer.hide()
        else:
            self.draft_offer.show_message(html, "Restore it", "Discard")

    def offer_move(self, html: str | None, number: int | None = None) -> None:
        """Offer to move the example to round ``number`` (None: withdraw the offer)."""
        if html is None:
            self.move_offer.hide()
        else:
            self.move_offer.show_message(html, f"Move to round {number}", "Keep as draft")

    def show_form(self, shown: bool) -> None:
        self.editing.setCurrentWidget(self.form if shown else self.editor)
        self.submit_button.setVisible(not shown)  # the form has its own Store and Back buttons
        if shown:
            self.form.focus_first()
        else:
            self.editor.focus_first_written()

    def form_shown(self) -> bool:
        return self.editing.currentWidget() is self.form

    def set_locked(self, locked: bool, reason: str = "") -> None:
        """Nothing can be written until the content warning is acknowledged."""
        self.editing.setEnabled(not locked)
        self.submit_button.setEnabled(not locked)
        self.discard_button.setEnabled(not locked)
        self.status.setText(reason)
