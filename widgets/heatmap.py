"""The attribution heatmap: the annotator's own words, coloured by how much each pushed the
model toward (warm) or away from (cool) the explained label, with a legend and per-word tooltips.

Colours are on the scale the view-model gives (``scale``: the effect shown at full colour, in
probability units), and the legend names it, so a weak effect looks weak.

Spans arrive as Python string offsets (code points); Qt positions count UTF-16 units, so
they are converted before formatting. Emoji, right-to-left text and zero-width characters stay
exactly where the annotator put them.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QLinearGradient, QPainter, QTextCharFormat, QTextCursor
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFrame,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTextEdit,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from app.views.create import AttributionView, ExplainTarget, SegmentView

# A diverging scale (ColorBrewer RdBu): blue against the label, white neutral, red for it.
NEGATIVE = QColor(33, 102, 172)
NEUTRAL = QColor(247, 247, 247)
POSITIVE = QColor(178, 24, 43)


def utf16_offset(text: str, index: int) -> int:
    """Qt's position for Python's ``text[index]``: characters beyond the BMP take two units."""
    return index + sum(1 for ch in text[:index] if ord(ch) > 0xFFFF)


def score_colour(score: float) -> QColor:
    """``score`` in [-1, 1] on the diverging scale."""
    score = max(-1.0, min(1.0, score))
    end = POSITIVE if score >= 0 else NEGATIVE
    t = abs(score)
    return QColor(round(NEUTRAL.red() + (end.red() - NEUTRAL.red()) * t),
                  round(NEUTRAL.green() + (end.green() - NEUTRAL.green()) * t),
                  round(NEUTRAL.blue() + (end.blue() - NEUTRAL.blue()) * t))


class Legend(QWidget):
    def __init__(self, parent=None):
        super().__init__(parent)
        self.target = ""
        self.scale: float | None = None  # the effect at either end, when known
        self.setMinimumHeight(self.fontMetrics().height() * 2 + 10)

    def set_target(self, target: str, scale: float | None = None) -> None:
        self.target, self.scale = target, scale
        self.update()

    def end_texts(self) -> tuple[str, str]:
        if self.scale is None:
            return f"◀ against {self.target}", f"for {self.target} ▶"
        return f"◀ −{self.scale:.2f} against {self.target}", f"for {self.target} +{self.scale:.2f} ▶"

    def sizeHint(self) -> QSize:
        return QSize(300, self.fontMetrics().height() * 2 + 10)

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        bar = QRectF(4, 2, self.width() - 8, self.fontMetrics().height() * 0.8)
        gradient = QLinearGradient(QPointF(bar.left(), 0), QPointF(bar.right(), 0))
        gradient.setColorAt(0.0, NEGATIVE)
        gradient.setColorAt(0.5, NEUTRAL)
        gradient.setColorAt(1.0, POSITIVE)
        painter.fillRect(bar, gradient)
        painter.setPen(QColor("#888"))
        painter.drawRect(bar)
        text_top = bar.bottom() + 2
        painter.setPen(self.palette().text().color())
        row = QRectF(4, text_top, self.width() - 8, self.fontMetrics().height() + 4)
        left, right = self.end_texts()
        painter.drawText(row, Qt.AlignmentFlag.AlignLeft, left)
        painter.drawText(row, Qt.AlignmentFlag.AlignHCenter, "no effect")
        painter.drawText(row, Qt.AlignmentFlag.AlignRight, right)
        painter.end()


class HeatmapText(QTextEdit):
    """Read-only text whose words carry a background colour and a tooltip."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setReadOnly(True)
        self.setUndoRedoEnabled(False)
        self.viewport().setMouseTracking(True)
        font = self.font()
        font.setPointSizeF(font.pointSizeF() * 1.3)  # words and emoji must be easy to read
        self.setFont(font)
        self.words: list[dict] = []  # as shown, with Qt positions, for tooltips and tests

    def show_segments(self, segments: tuple[SegmentView, ...], scale: float | None = None, measure: str = "") -> None:
        """``scale``: the raw effect shown at full colour (None: the words' normalised scores);
        ``measure``: what raw scores measure, for the tooltips ("probability of hate")."""
        self.clear()
        self.words = []
        cursor = QTextCursor(self.document())
        for index, segment in enumerate(segments):
            if index:
                cursor.insertBlock()
            if len(segments) > 1:
                heading = QTextCharFormat()
                heading.setFontWeight(700)
                cursor.insertText(f"{segment.name}\n", heading)
            base = cursor.position()
            cursor.insertText(segment.text, QTextCharFormat())
            for word in segment.words:
                start = base + utf16_offset(segment.text, word.start)
                end = base + utf16_offset(segment.text, word.end)
                fmt = QTextCharFormat()
                if word.seen:
                    shade = word.score if scale is None else (word.raw or 0.0) / scale
                    fmt.setBackground(score_colour(shade))
                    if abs(shade) > 0.6:
                        fmt.setForeground(QColor("white"))
                    if scale is None:
                        tip = f"{word.text}: {word.score:+.2f}"
                        if word.raw is not None:
                            tip += f" (raw {word.raw:+.4f})"
                    else:
                        tip = f"{word.text}: {word.raw or 0.0:+.3f} {measure}".rstrip()
                else:
                    fmt.setForeground(QColor("#999"))
                    tip = f"{word.text}: not read by the model (beyond its length limit)"
                fmt.setToolTip(tip)
                span = QTextCursor(self.document())
                span.setPosition(start)
                span.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                span.mergeCharFormat(fmt)
                self.words.append({"text": word.text, "start": word.start, "end": word.end, "score": word.score,
                                   "raw": word.raw, "seen": word.seen, "qt_start": start, "qt_end": end,
                                   "tooltip": tip, "shown": span.selectedText()})
        self.moveCursor(QTextCursor.MoveOperation.Start)

    def tooltip_at(self, point) -> str:
        position = self.cursorForPosition(point).position()
        for word in self.words:
            if word["qt_start"] <= position < word["qt_end"]:
                return word["tooltip"]
        return ""

    def viewportEvent(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            tip = self.tooltip_at(event.pos())
            if tip:
                QToolTip.showText(event.globalPos(), tip, self)
            else:
                QToolTip.hideText()
            return True
        return super().viewportEvent(event)


class AttributionPanel(QFrame):
    """Heatmap with its controls: which label to explain, pin to follow the text, refresh."""

    explain_requested = Signal(object)  # the ExplainTarget
    pinned_changed = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.target_choice = QComboBox(objectName="explain_target")
        self.target_choice.addItem("Explain the model's label", ExplainTarget.PREDICTED)
        self.target_choice.addItem("Explain my label", ExplainTarget.GOAL)
        # two labels: one view only, as "toward the other label" is its mirror image
        self.fixed_target = QLabel(objectName="explain_fixed_target", wordWrap=True)
        self.fixed_target.hide()
        self.explain_button = QPushButton("Explain", objectName="explain")
        self.explain_button.setToolTip("Compute word attributions (Ctrl+Shift+A)")
        self.explain_button.clicked.connect(lambda: self.explain_requested.emit(self.explain_target()))
        self.pin = QCheckBox("Follow the text", objectName="pin")
        self.pin.setToolTip("Recompute the heatmap whenever the text changes")
        self.pin.toggled.connect(self.pinned_changed)
        self.header = QLabel(objectName="attribution_header", wordWrap=True)
        self.stale = QLabel("out of date: the text changed", objectName="attribution_stale",
                            styleSheet="color:#6b6b6b; font-style:italic")
        self.text = HeatmapText()
        self.legend = Legend()
        self.scale_note = QLabel(objectName="attribution_scale", wordWrap=True, styleSheet="color:#6b6b6b")
        controls = QHBoxLayout()
        controls.addWidget(self.target_choice, 1)
        controls.addWidget(self.fixed_target, 1)
        controls.addWidget(self.pin)
        controls.addWidget(self.explain_button)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.header)
        layout.addWidget(self.stale)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.legend)
        layout.addWidget(self.scale_note)
        self.clear()

    def explain_target(self) -> ExplainTarget:
        """Which label the writer chose to explain."""
        return ExplainTarget(self.target_choice.currentData())

    def set_labels(self, labels: tuple[str, ...] | list[str]) -> None:
        """The task's labels: with two, the heatmap always explains the first, and offers no choice."""
        two = len(labels) == 2
        self.target_choice.setVisible(not two)
        self.fixed_target.setVisible(two)
        if two:
            self.fixed_target.setText(f"Explains <b>{labels[0]}</b>: red pushes toward it, blue toward "
                                      f"<b>{labels[1]}</b>.")

    def clear(self, message: str = "Press Explain to see which words drive the prediction.") -> None:
        self.header.setText(message)
        self.text.show_segments(())
        self.legend.set_target("the label")
        self.scale_note.clear()
        self.stale.hide()

    def set_stale(self, stale: bool) -> None:
        self.stale.setVisible(stale)

    def show_attribution(self, view: AttributionView) -> None:
        details = [f"Method: {view.method}"]
        if view.convergence_delta is not None:
            details.append(f"convergence delta {view.convergence_delta:+.3f}")
        if view.latency_ms is not None:
            details.append(f"{view.latency_ms:.0f} ms")
        header = f"Why the model {'leans to' if view.target == view.predicted else 'is kept from'} " \
                 f"<b>{view.target}</b> (it predicts {view.predicted}). " + " · ".join(details)
        if view.truncated:
            header += "<br>Only the start of the text was read; grey words were not."
        self.header.setText(header)
        scale = view.scale
        self.text.show_segments(view.segments, scale, view.measure)
        self.legend.set_target(view.target, scale)
        if scale is None:
            self.scale_note.setText("Colours are relative: the strongest word is at full colour.")
        else:
            strongest = view.strongest()
            weak = abs(strongest) < scale * 0.999  # below the minimum full scale: say how weak
            self.scale_note.setText(f"Colour: each word's effect on the {view.measure}; full colour is ±{scale:.2f}"
                                    + (f", the strongest word here only {strongest:+.3f}." if weak
                                       else " (the strongest word here)."))
        self.stale.hide()
