"""The writing assistant's panel: the goal, Suggest, and the checked suggestions, ranked.

Each row shows its edit type, the inline word diff from the writer's text, the model's new
probabilities and whether it now fools the model. A click selects a row, a double click (or
Enter, or Alt+Enter from the editor) asks to apply it; the controller does the applying, through
the editor's undo stack. The panel shows what it is given (an AssistPanelView) and decides nothing.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QButtonGroup,
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QProgressBar,
    QPushButton,
    QRadioButton,
    QScrollArea,
    QSizePolicy,
    QVBoxLayout,
    QWidget,
)

from app.views.assist import APPLY_KEYS, GOAL_NAMES, SUGGEST_KEYS, AssistPanelView, Goal, SuggestionRow
from app.views.create import DiffKind, DiffPiece

FOOLS = "#1e6b35"
HOLDS = "#5f6b7a"
SELECTED = "#e3f0fb"
DELETED = "background:#fbe3e4; color:#9b1c1c; text-decoration:line-through"
INSERTED = "background:#e3f4e6; color:#1e6b35; text-decoration:underline"


def diff_html(pieces: tuple[DiffPiece, ...]) -> str:
    """The edit in reading order: removed words struck through in red, added ones underlined in green."""
    out, previous = [], None
    for piece in pieces:
        if previous is DiffKind.DELETE and piece.kind is DiffKind.INSERT:
            out.append(" ")
        previous = piece.kind
        text = escape(piece.text)
        if piece.kind is DiffKind.DELETE:
            out.append(f"<span style='{DELETED}'>{text}</span>")
        elif piece.kind is DiffKind.INSERT:
            out.append(f"<span style='{INSERTED}'>{text}</span>")
        else:
            out.append(text)
    return "".join(out)


class SuggestionRowWidget(QFrame):
    """One suggestion: title and verdict, the diff, the model's new probabilities."""

    clicked = Signal(int)
    activated = Signal(int)

    def __init__(self, index: int, row: SuggestionRow, parent=None):
        super().__init__(parent)
        self.index, self.row = index, row
        self.setObjectName(f"suggestion_{index}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        colour = FOOLS if row.fools else HOLDS
        mark = "✓" if row.fools else "✗"
        judgement = " · <i>check the meaning</i>" if row.needs_judgement else ""
        self.title = QLabel(f"<b>{escape(row.title)}</b> · <span style='color:{colour}'><b>{mark} "
                            f"{row.verdict}</b></span>{judgement}", objectName="suggestion_title", wordWrap=True)
        self.diff = QLabel(diff_html(row.diff), objectName="suggestion_diff", wordWrap=True)
        self.diff.setTextFormat(Qt.TextFormat.RichText)
        font = self.diff.font()
        font.setPointSizeF(font.pointSizeF() * 1.1)
        self.diff.setFont(font)
        claimed = f" · meant to be <b>{escape(row.claimed_label)}</b>" if row.claimed_label else ""
        lookalikes = f"<br><i>{escape(row.lookalikes)}</i>" if row.lookalikes else ""
        self.probabilities = QLabel(f"Model: {escape(row.probability_line)}{claimed}{lookalikes}",
                                    objectName="suggestion_probabilities", wordWrap=True,
                                    styleSheet="color:#444")
        if row.note:
            self.setToolTip(row.note)
        self.setAccessibleName(row.accessible_text)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(6, 4, 6, 4)
        layout.setSpacing(2)
        layout.addWidget(self.title)
        layout.addWidget(self.diff)
        layout.addWidget(self.probabilities)
        self.set_selected(False)

    def set_selected(self, selected: bool) -> None:
        self.selected = selected
        border = "#5b7db1" if selected else "#d0d0d0"
        background = SELECTED if selected else "white"
        self.setStyleSheet(f"#{self.objectName()} {{ background:{background}; border:1px solid {border}; "
                           "border-radius:4px; }")

    def mousePressEvent(self, event) -> None:
        self.clicked.emit(self.index)
        super().mousePressEvent(event)

    def mouseDoubleClickEvent(self, event) -> None:
        self.activated.emit(self.index)


class AssistPanel(QWidget):
    suggest_requested = Signal()
    goal_changed = Signal(object)  # a Goal
    contrast_label_changed = Signal(object)  # the new label a contrast edit should make true (str or None)
    apply_requested = Signal(int)  # the row's index (0-based, in rank order)
    confirm_label_requested = Signal(str)  # contrast: the writer confirms the applied edit's new label
    more_requested = Signal()  # list the next suggestions too
    slurs_toggled = Signal(bool)  # the writer asks for (or stops) description → slur edits

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setObjectName("assist_panel")
        self.view = AssistPanelView(available=False)
        self.rows: list[SuggestionRowWidget] = []
        self.selected = -1
        self._select_when_listed: int | None = None  # Alt+↓ past the last row listed: select it once it is
        self.reason = QLabel(objectName="assist_reason", wordWrap=True, styleSheet="color:#6b6b6b")
        self.goals = QButtonGroup(self)
        self.goal_buttons: dict[Goal, QRadioButton] = {}
        goal_row = QHBoxLayout()
        for goal in Goal:
            button = QRadioButton(GOAL_NAMES[goal], objectName=f"goal_{goal.value}")
            self.goals.addButton(button)
            self.goal_buttons[goal] = button
            button.toggled.connect(lambda on, value=goal: on and self._goal_clicked(value))
            goal_row.addWidget(button)
        self.contrast_title = QLabel("New label:")
        self.contrast = QComboBox(objectName="contrast_label")
        self.contrast.activated.connect(lambda _i: self.contrast_label_changed.emit(self.contrast.currentData()))
        goal_row.addStretch(1)
        # the new label and Suggest on a row of their own: beside the goals they cut "Suggest (Ctrl…" short
        # in the side pane of a 1366 px screen
        ask_row = QHBoxLayout()
        ask_row.addWidget(self.contrast_title)
        ask_row.addWidget(self.contrast)
        ask_row.addStretch(1)
        self.suggest_button = QPushButton(f"Suggest ({SUGGEST_KEYS})", objectName="suggest")
        self.suggest_button.clicked.connect(self.suggest_requested)
        ask_row.addWidget(self.suggest_button)
        self.status = QLabel(objectName="assist_status", wordWrap=True, textFormat=Qt.TextFormat.RichText)
        # word substitution's PyTorch form, coming from the team's server (or why it is not here)
        self.fetch = QLabel(objectName="assist_fetch", wordWrap=True, styleSheet="color:#6b6b6b",
                            textFormat=Qt.TextFormat.PlainText)
        self.fetch_bar = QProgressBar(objectName="assist_fetch_bar", maximum=1000, textVisible=False)
        self.fetch_bar.setMaximumHeight(6)
        self.confirm = QFrame(objectName="assist_confirm")
        self.confirm.setStyleSheet("#assist_confirm { background:#fff4ce; border-radius:4px; }")
        self.confirm_text = QLabel(wordWrap=True)
        self.confirm_button = QPushButton(objectName="assist_confirm_label")
        self.confirm_button.clicked.connect(lambda: self.confirm_label_requested.emit(self.view.confirm_label or ""))
        confirm_layout = QHBoxLayout(self.confirm)
        confirm_layout.addWidget(self.confirm_text, 1)
        confirm_layout.addWidget(self.confirm_button)
        self.list_holder = QWidget()
        self.list_layout = QVBoxLayout(self.list_holder)
        self.list_layout.setContentsMargins(0, 0, 0, 0)
        self.list_layout.setSpacing(4)
        self.more_button = QPushButton(objectName="assist_more")
        self.more_button.setFlat(True)
        self.more_button.clicked.connect(self.more_requested)
        self.list_layout.addWidget(self.more_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.list_layout.addStretch(1)
        self.scroll = QScrollArea(objectName="suggestions")
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QFrame.Shape.NoFrame)
        self.scroll.setWidget(self.list_holder)
        self.scroll.setFocusPolicy(Qt.FocusPolicy.NoFocus)
        self.notes = QLabel(objectName="assist_notes", wordWrap=True, styleSheet="color:#6b6b6b",
                            textFormat=Qt.TextFormat.RichText)
        self.apply_button = QPushButton(f"Apply ({APPLY_KEYS})", objectName="assist_apply")
        self.apply_button.clicked.connect(self.apply_selected)
        self.apply_button.setSizePolicy(QSizePolicy.Policy.Maximum, QSizePolicy.Policy.Fixed)  # not the row's width
        self.slurs = QCheckBox("Offer slurs", objectName="assist_slurs")
        self.slurs.setToolTip("Description → slur edits put slurs you did not type into your text; off unless you ask")
        self.slurs.toggled.connect(self.slurs_toggled)
        bottom = QHBoxLayout()
        bottom.addWidget(self.slurs, 0, Qt.AlignmentFlag.AlignTop)
        bottom.addWidget(self.notes, 1)
        bottom.addWidget(self.apply_button, 0, Qt.AlignmentFlag.AlignTop | Qt.AlignmentFlag.AlignRight)
        self.body = QWidget()
        body = QVBoxLayout(self.body)
        body.setContentsMargins(0, 0, 0, 0)
        body.addLayout(goal_row)
        body.addLayout(ask_row)
        body.addWidget(self.status)
        body.addWidget(self.fetch)
        body.addWidget(self.fetch_bar)
        body.addWidget(self.confirm)
        body.addWidget(self.scroll, 1)
        body.addLayout(bottom)
        layout = QVBoxLayout(self)
        layout.addWidget(self.reason)
        layout.addWidget(self.body, 1)
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        for button in (self.suggest_button, self.apply_button, self.more_button, self.confirm_button):
            button.setFocusPolicy(Qt.FocusPolicy.TabFocus)  # a click leaves the writer's cursor in the text
        self.show_panel(self.view)

    # What the controller calls -------------------------------------------------------------------
    def show_panel(self, view: AssistPanelView) -> None:
        rows_changed = view.rows != self.view.rows
        self.view = view
        self.reason.setVisible(not view.available)
        self.reason.setText(view.reason)
        self.slurs.blockSignals(True)
        self.slurs.setChecked(view.slurs)
        self.slurs.blockSignals(False)
        self.body.setVisible(view.available)
        if not view.available:
            self._set_rows(())
            return
        for goal, button in self.goal_buttons.items():
            button.blockSignals(True)
            button.setChecked(goal is view.goal)
            button.blockSignals(False)
        contrast = view.goal is Goal.CONTRAST
        self.contrast_title.setVisible(contrast)
        self.contrast.setVisible(contrast)
        self.status.setText(escape(view.status))
        self.suggest_button.setEnabled(not view.busy)
        self.confirm.setVisible(view.confirm_label is not None)
        if view.confirm_label is not None:
            self.confirm_text.setText(f"This edit is meant to make the true label <b>{escape(view.confirm_label)}</b>. "
                                      "Is it? Only you decide the label.")
            self.confirm_button.setText(f"Set my label to “{view.confirm_label}”")
        self.fetch.setText(view.fetch_line)
        self.fetch.setVisible(bool(view.fetch_line))
        self.fetch_bar.setVisible(view.fetch_fraction is not None)
        self.fetch_bar.setValue(round(1000 * (view.fetch_fraction or 0.0)))
        self.notes.setText("<br>".join(escape(note) for note in view.notes))
        self.notes.setVisible(bool(view.notes))
        if rows_changed:
            self._set_rows(view.rows)
        left = view.total - len(view.rows)
        self.more_button.setVisible(left > 0)
        self.more_button.setText(f"Show more ({left} left)")
        if self._select_when_listed is not None and self._select_when_listed < len(self.rows):
            self.select(self._select_when_listed)
        self._select_when_listed = None
        self.list_holder.setEnabled(view.current)
        self.apply_button.setEnabled(view.current and self.selected >= 0)

    def set_contrast_choices(self, choices: tuple[str, ...], chosen: str | None) -> None:
        """The labels a contrast edit can aim at (all but the writer's), ``chosen`` selected."""
        wanted = ([None] if len(choices) != 1 else []) + list(choices)
        listed = [self.contrast.itemData(i) for i in range(self.contrast.count())]
        if listed == wanted and self.contrast.currentData() == chosen:
            return  # asked again on every keystroke: the list is rebuilt only when it changes
        self.contrast.blockSignals(True)
        self.contrast.clear()
        if len(choices) != 1:
            self.contrast.addItem("choose…", None)
        for label in choices:
            self.contrast.addItem(label, label)
        index = self.contrast.findData(chosen)
        self.contrast.setCurrentIndex(max(index, 0))
        self.contrast.blockSignals(False)

    def select(self, index: int) -> None:
        if not self.rows:
            self.selected = -1
            return
        self.selected = max(0, min(index, len(self.rows) - 1))
        for row in self.rows:
            row.set_selected(row.index == self.selected)
        self.scroll.ensureWidgetVisible(self.rows[self.selected])
        self.apply_button.setEnabled(self.view.current)

    def move_selection(self, step: int) -> None:
        wanted = self.selected + step if self.selected >= 0 else 0
        if wanted >= len(self.rows) and self.view.total > len(self.rows):
            self._select_when_listed = wanted
            self.more_requested.emit()
            return
        self.select(wanted)

    def apply_selected(self) -> None:
        if self.view.available and self.view.current and 0 <= self.selected < len(self.rows):
            self.apply_requested.emit(self.selected)

    def keyPressEvent(self, event: QKeyEvent) -> None:
        key = event.key()
        if key in (Qt.Key.Key_Down, Qt.Key.Key_Up):
            self.move_selection(1 if key == Qt.Key.Key_Down else -1)
        elif key in (Qt.Key.Key_Return, Qt.Key.Key_Enter):
            self.apply_selected()
        else:
            super().keyPressEvent(event)

    # Inside ----------------------------------------------------------------------------------------
    def _goal_clicked(self, goal: Goal) -> None:
        if goal is not self.view.goal:
            self.goal_changed.emit(goal)

    def _set_rows(self, rows: tuple[SuggestionRow, ...]) -> None:
        """List ``rows``: more of the same set are appended, another set replaces the list."""
        listed = tuple(widget.row for widget in self.rows)
        if listed and rows[:len(listed)] == listed:
            for index, row in enumerate(rows[len(listed):], start=len(listed)):
                self._add_row(index, row)
            return
        for widget in self.rows:
            self.list_layout.removeWidget(widget)
            widget.deleteLater()
        self.rows = []
        for index, row in enumerate(rows):
            self._add_row(index, row)
        self.selected = -1
        if self.rows:
            self.select(0)

    def _add_row(self, index: int, row: SuggestionRow) -> None:
        widget = SuggestionRowWidget(index, row)
        widget.clicked.connect(self._row_clicked)
        widget.activated.connect(self._row_activated)
        self.list_layout.insertWidget(index, widget)
        self.rows.append(widget)

    def _row_clicked(self, index: int) -> None:
        self.select(index)

    def _row_activated(self, index: int) -> None:
        self.select(index)
        self.apply_selected()
