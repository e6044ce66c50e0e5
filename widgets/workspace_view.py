"""The Create page: the editor with its live prediction, the heatmap, the perturbation
comparison, the metadata form, and the banners (round goal, content warning, draft recovery).

A layout of views only; the workspace controller feeds it.
"""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QUndoStack
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from widgets.example_editor import ExampleEditor
from widgets.heatmap import AttributionPanel
from widgets.metadata_form import MetadataForm
from widgets.page_tabs import PageTabs
from widgets.perturbation_view import PerturbationView
from widgets.prediction_panel import PredictionPanel


class Banner(QFrame):
    """A line of text with up to two buttons, shown above the editor."""

    def __init__(self, name: str, colour: str, parent=None):
        super().__init__(parent)
        self.setObjectName(name)
        self.setStyleSheet(f"#{name} {{ background:{colour}; border-radius:4px; }}")
        self.text = QLabel(wordWrap=True)
        self.text.setTextFormat(Qt.TextFormat.RichText)
        self.primary = QPushButton(objectName=f"{name}_primary")
        self.secondary = QPushButton(objectName=f"{name}_secondary")
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


class WorkspaceView(QWidget):
    submit_requested = Signal()
    discard_requested = Signal()

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
        actions = QHBoxLayout()
        actions.addWidget(self.discard_button)  # far left: never a slip away from Submit or Store
        actions.addWidget(self.status, 1)
        actions.addWidget(self.submit_button)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(self.editing, 1)
        left_layout.addLayout(actions)

        self.prediction = PredictionPanel()
        self.attribution = AttributionPanel()
        self.perturbation = PerturbationView()
        self.guidelines = QTextBrowser(objectName="guidelines")
        self.guidelines.setOpenExternalLinks(False)
        self.side = PageTabs(objectName="side")  # a long perturbation comparison scrolls, the page does not grow
        self.side.addTab(self.attribution, "Why (heatmap)")
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
        layout = QVBoxLayout(self)
        layout.addWidget(self.goal)
        layout.addWidget(self.warning)
        layout.addWidget(self.round_notice)
        layout.addWidget(self.move_offer)
        layout.addWidget(self.draft_offer)
        layout.addWidget(self.message)
        layout.addWidget(self.returned)
        layout.addWidget(splitter, 1)

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
