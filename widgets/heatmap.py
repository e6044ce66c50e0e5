"""The attribution heatmap: the annotator's own words, coloured by how much each pushed the
model toward (warm) or away from (cool) the explained label, with a legend and per-word tooltips.

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
        self.setMinimumHeight(self.fontMetrics().height() * 2 + 10)

    def set_target(self, target: str) -> None:
        self.target = target
        self.update()

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
        painter.drawText(row, Qt.AlignmentFlag.AlignLeft, f"◀ against {self.target}")
        painter.drawText(row, Qt.AlignmentFlag.AlignHCenter, "no effect")
        painter.drawText(row, Qt.AlignmentFlag.AlignRight, f"for {self.target} ▶")
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

    def show_segments(self, segments: list[dict]) -> None:
        self.clear()
        self.words = []
        cursor = QTextCursor(self.document())
        for index, segment in enumerate(segments):
            if index:
                cursor.insertBlock()
            if len(segments) > 1:
                heading = QTextCharFormat()
                heading.setFontWeight(700)
                cursor.insertText(f"{segment['name']}\n", heading)
            base = cursor.position()
            cursor.insertText(segment["text"], QTextCharFormat())
            for word in segment["words"]:
                start = base + utf16_offset(segment["text"], word["start"])
                end = base + utf16_offset(segment["text"], word["end"])
                fmt = QTextCharFormat()
                if word.get("seen", True):
                    fmt.setBackground(score_colour(word["score"]))
                    if abs(word["score"]) > 0.6:
                        fmt.setForeground(QColor("white"))
                    tip = f"{word['text']}: {word['score']:+.2f}"
                    if word.get("raw") is not None:
                        tip += f" (raw {word['raw']:+.4f})"
                else:
                    fmt.setForeground(QColor("#999"))
                    tip = f"{word['text']}: not read by the model (beyond its length limit)"
                fmt.setToolTip(tip)
                span = QTextCursor(self.document())
                span.setPosition(start)
                span.setPosition(end, QTextCursor.MoveMode.KeepAnchor)
                span.mergeCharFormat(fmt)
                self.words.append({**word, "qt_start": start, "qt_end": end, "tooltip": tip,
                                   "shown": span.selectedText()})
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

    explain_requested = Signal(str)  # "predicted" or "goal"
    pinned_changed = Signal(bool)

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.target_choice = QComboBox(objectName="explain_target")
        self.target_choice.addItem("Explain the model's label", "predicted")
        self.target_choice.addItem("Explain my label", "goal")
        self.explain_button = QPushButton("Explain", objectName="explain")
        self.explain_button.setToolTip("Compute word attributions (Ctrl+Shift+A)")
        self.explain_button.clicked.connect(lambda: self.explain_requested.emit(self.target_choice.currentData()))
        self.pin = QCheckBox("Follow the text", objectName="pin")
        self.pin.setToolTip("Recompute the heatmap whenever the text changes")
        self.pin.toggled.connect(self.pinned_changed)
        self.header = QLabel(objectName="attribution_header", wordWrap=True)
        self.stale = QLabel("out of date: the text changed", objectName="attribution_stale",
                            styleSheet="color:#6b6b6b; font-style:italic")
        self.text = HeatmapText()
        self.legend = Legend()
        controls = QHBoxLayout()
        controls.addWidget(self.target_choice, 1)
        controls.addWidget(self.pin)
        controls.addWidget(self.explain_button)
        layout = QVBoxLayout(self)
        layout.addLayout(controls)
        layout.addWidget(self.header)
        layout.addWidget(self.stale)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.legend)
        self.clear()

    def clear(self, message: str = "Press Explain to see which words drive the prediction.") -> None:
        self.header.setText(message)
        self.text.show_segments([])
        self.legend.set_target("the label")
        self.stale.hide()

    def set_stale(self, stale: bool) -> None:
        self.stale.setVisible(stale)

    def show_attribution(self, data: dict) -> None:
        """``data``: segments [{name, text, words [{text, start, end, score, raw, seen}]}], target, predicted,
        method, latency_ms, truncated, convergence_delta."""
        details = [f"Method: {data['method']}"]
        if data.get("convergence_delta") is not None:
            details.append(f"convergence delta {data['convergence_delta']:+.3f}")
        if data.get("latency_ms") is not None:
            details.append(f"{data['latency_ms']:.0f} ms")
        header = f"Why the model {'leans to' if data['target'] == data['predicted'] else 'is kept from'} " \
                 f"<b>{data['target']}</b> (it predicts {data['predicted']}). " + " · ".join(details)
        if data.get("truncated"):
            header += "<br>Only the start of the text was read; grey words were not."
        self.header.setText(header)
        self.text.show_segments(data["segments"])
        self.legend.set_target(data["target"])
        self.stale.hide()
