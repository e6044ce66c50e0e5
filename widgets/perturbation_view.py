"""Comparing a perturbation with its original: the word diff inline, both predictions side by
side, whether the true label flipped and whether the model followed, and how each word's
attribution moved."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QFrame,
    QGridLayout,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QTextEdit,
    QVBoxLayout,
)

from app.views.create import DiffKind, DiffPiece, PairView
from widgets.heatmap import score_colour
from widgets.prediction_panel import ProbabilityBars

DELETED_BG, DELETED_FG = QColor("#fbe3e4"), QColor("#9b1c1c")
INSERTED_BG, INSERTED_FG = QColor("#e3f4e6"), QColor("#1e6b35")


class DiffText(QTextEdit):
    """Inline word diff: deletions struck through in red, insertions underlined in green."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)

    def show_pieces(self, pieces: tuple[DiffPiece, ...]) -> None:
        """The edit in reading order."""
        self.clear()
        cursor = QTextCursor(self.document())
        previous = None
        for piece in pieces:
            if previous is DiffKind.DELETE and piece.kind is DiffKind.INSERT:
                cursor.insertText(" ", QTextCharFormat())  # keep a replaced word apart from its replacement
            previous = piece.kind
            fmt = QTextCharFormat()
            if piece.kind is DiffKind.DELETE:
                fmt.setFontStrikeOut(True)
                fmt.setBackground(DELETED_BG)
                fmt.setForeground(DELETED_FG)
                fmt.setToolTip("removed")
            elif piece.kind is DiffKind.INSERT:
                fmt.setFontUnderline(True)
                fmt.setBackground(INSERTED_BG)
                fmt.setForeground(INSERTED_FG)
                fmt.setToolTip("added")
            cursor.insertText(piece.text, fmt)


class PerturbationView(QFrame):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.summary = QLabel(objectName="summary", wordWrap=True)
        self.diff = DiffText()
        font = self.diff.font()
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.diff.setFont(font)
        self.diff.setMaximumHeight(self.diff.fontMetrics().height() * 5)
        # side by side, each title names two labels and the model's answer: they wrap rather than widen the pane
        self.original_title = QLabel(objectName="original_title", wordWrap=True)
        self.edited_title = QLabel(objectName="edited_title", wordWrap=True)
        self.original_bars = ProbabilityBars(compact=True)
        self.edited_bars = ProbabilityBars(compact=True)
        self.changes = QTableWidget(0, 4, objectName="attribution_changes")
        self.changes.setHorizontalHeaderLabels(["Word", "Original", "Edited", "Change"])
        self.changes.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.Stretch)
        self.changes.verticalHeader().setVisible(False)
        self.changes.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.changes_note = QLabel(objectName="changes_note", wordWrap=True, styleSheet="color:#6b6b6b")
        sides = QGridLayout()
        sides.addWidget(self.original_title, 0, 0)
        sides.addWidget(self.edited_title, 0, 1)
        sides.addWidget(self.original_bars, 1, 0)
        sides.addWidget(self.edited_bars, 1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("<b>Edit</b> (struck through: removed; underlined: added)", wordWrap=True))
        layout.addWidget(self.diff)
        layout.addWidget(self.summary)
        layout.addLayout(sides)
        layout.addWidget(QLabel("<b>How each word's attribution moved</b>", wordWrap=True))
        layout.addWidget(self.changes_note)
        layout.addWidget(self.changes, 1)
        self.clear()

    def clear(self) -> None:
        self.summary.setText("Open a submitted example and start a perturbation to compare the pair.")
        self.diff.clear()
        for title in (self.original_title, self.edited_title):
            title.clear()
        for bars in (self.original_bars, self.edited_bars):
            bars.set_values({}, [], None, None)
        self.changes.setRowCount(0)
        self.changes_note.setText("")

    def show_pair(self, pair: PairView) -> None:
        labels = list(pair.labels)
        original, edited = pair.original, pair.edited
        self.diff.show_pieces(pair.diff)
        words = pair.edit_distance
        lines = [f"{words} word{'s' if words != 1 else ''} changed."]
        if original.label and edited.label:
            flipped = original.label != edited.label
            lines.append(f"True label: {original.label} → {edited.label}"
                         + (" (flipped)." if flipped else " (not flipped: a perturbation should flip it)."))
            before = original.prediction.label if original.prediction else None
            after = edited.prediction.label if edited.prediction else None
            if before and after:
                if after == edited.label:
                    lines.append(f"The model followed: {before} → {after}.")
                else:
                    lines.append(f"<b style='color:#b3261e'>The model did not follow</b>: it says {after} — "
                                 "the perturbation fools it.")
        self.summary.setText(" ".join(lines))
        for title, bars, side, name in ((self.original_title, self.original_bars, original, "Original"),
                                        (self.edited_title, self.edited_bars, edited, "Edited")):
            predicted = side.prediction.label if side.prediction else None
            title.setText(f"<b>{name}</b> · your label: {side.label or '–'} · model: {predicted or '…'}")
            bars.set_values(side.prediction.probabilities if side.prediction else {}, labels, side.label, predicted)
        changes = pair.changes
        if changes is None:
            self.changes.setRowCount(0)
            self.changes_note.setText("Press Explain to compare the words' attributions in both texts.")
            return
        scale = pair.scale
        if scale is None:
            self.changes_note.setText(f"Attributions toward {pair.target}; "
                                      "missing means the word is not in that text.")
        else:
            self.changes_note.setText(f"Each word's effect on the {pair.units} of "
                                      f"{pair.target}, on one scale for both texts (full colour "
                                      f"±{scale:.2f}); – means the word is not in that text.")
        digits = 2 if scale is None else 3
        self.changes.setRowCount(len(changes))
        for row, change in enumerate(changes):
            before, after, delta = change.before, change.after, change.delta
            cells = [change.word, "–" if before is None else f"{before:+.{digits}f}",
                     "–" if after is None else f"{after:+.{digits}f}", f"{delta:+.{digits}f}"]
            for column, text in enumerate(cells):
                item = QTableWidgetItem(text)
                if column == 3:
                    item.setBackground(score_colour(delta if scale is None else delta / scale))
                if column:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.changes.setItem(row, column, item)
