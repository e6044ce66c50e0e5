"""What the target model(s) say about the text on screen, as labelled probability bars.

The panel shows what it is given: ``show_prediction`` with a PredictionView, ``set_stale`` while a
newer prediction is being computed. It decides nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter
from PySide6.QtWidgets import QFrame, QLabel, QSizePolicy, QVBoxLayout, QWidget

from app.views.create import MemberView, PredictionView

FOOLED = QColor("#1e6b35")  # fooling the model is the writer's success
HELD = QColor("#5f6b7a")  # the model held: not an error, just not there yet
BAR = QColor("#5b7db1")
GOAL_BAR = QColor("#c77c02")
TRACK = QColor("#e6e6e6")
RESERVED_ROWS = 2  # room for a two-label prediction before the first one arrives: nothing jumps


class ProbabilityBars(QWidget):
    """One row per label: name, bar, percentage. The goal label's bar is drawn in its own colour."""

    def __init__(self, parent=None, compact: bool = False):
        super().__init__(parent)
        self.compact = compact
        self.rows: list[tuple[str, float]] = []
        self.goal: str | None = None
        self.predicted: str | None = None
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)

    def set_values(self, probabilities: Mapping[str, float], labels: Sequence[str], goal: str | None,
                   predicted: str | None):
        self.rows = [(label, float(probabilities.get(label, 0.0))) for label in labels]
        self.goal, self.predicted = goal, predicted
        self.updateGeometry()
        self.update()

    def _row_height(self) -> int:
        return self.fontMetrics().height() + (4 if self.compact else 10)

    def sizeHint(self) -> QSize:
        return QSize(260, max(RESERVED_ROWS, len(self.rows)) * self._row_height())

    def paintEvent(self, _event) -> None:
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        bold_font = QFont(self.font())
        bold_font.setBold(True)
        metrics = QFontMetrics(bold_font)
        name_width = max([metrics.horizontalAdvance(label) for label, _ in self.rows] + [40]) + 10
        value_width = metrics.horizontalAdvance("100.0%") + 14
        height = self._row_height()
        for i, (label, value) in enumerate(self.rows):
            top = i * height
            bold = QFont(self.font())
            bold.setBold(label == self.predicted)
            painter.setFont(bold)
            painter.setPen(self.palette().text().color())
            painter.drawText(QRectF(0, top, name_width, height), Qt.AlignmentFlag.AlignVCenter, label)
            track = QRectF(name_width, top + height * 0.2, max(10, self.width() - name_width - value_width - 4),
                           height * 0.6)
            painter.setPen(Qt.PenStyle.NoPen)
            painter.setBrush(TRACK)
            painter.drawRoundedRect(track, 3, 3)
            painter.setBrush(GOAL_BAR if label == self.goal else BAR)
            painter.drawRoundedRect(QRectF(track.left(), track.top(), track.width() * max(0.0, min(1.0, value)),
                                           track.height()), 3, 3)
            painter.setPen(self.palette().text().color())
            painter.drawText(QRectF(self.width() - value_width, top, value_width - 2, height),
                             Qt.AlignmentFlag.AlignVCenter | Qt.AlignmentFlag.AlignRight, f"{100 * value:.1f}%")
        painter.end()


class PredictionPanel(QFrame):
    """The live prediction: a verdict line (fooled or not), the ensemble's bars, each member's bars."""

    def __init__(self, parent=None):
        super().__init__(parent)
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.verdict = QLabel(objectName="verdict", wordWrap=True)
        self.verdict.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.verdict.setMinimumHeight(self.fontMetrics().height() * 2)
        self.stale = QLabel("recomputing…", objectName="stale", styleSheet="color:#6b6b6b; font-style:italic")
        self.stale.setAlignment(Qt.AlignmentFlag.AlignRight)
        # wraps rather than widening the page: a long model name with "not hate" no longer fits 1366 px
        self.combined_title = QLabel(objectName="combined_title", wordWrap=True)
        self.combined = ProbabilityBars()
        self.answer = QLabel(objectName="answer", wordWrap=True)
        self.answer.setTextFormat(Qt.TextFormat.PlainText)
        self.members_box = QWidget()
        self.members_layout = QVBoxLayout(self.members_box)
        self.members_layout.setContentsMargins(0, 0, 0, 0)
        self.note = QLabel(objectName="note", wordWrap=True, styleSheet="color:#6b6b6b")
        self.combined_title.setText("<b>Prediction</b>: –")
        self.combined_title.setMinimumHeight(self.combined_title.sizeHint().height())
        for line in (self.stale, self.combined_title):  # hidden, they still hold their place
            policy = line.sizePolicy()
            policy.setRetainSizeWhenHidden(True)
            line.setSizePolicy(policy)
        layout = QVBoxLayout(self)
        layout.addWidget(self.verdict)
        layout.addWidget(self.stale)
        layout.addWidget(self.combined_title)
        layout.addWidget(self.combined)
        layout.addWidget(self.answer)
        layout.addWidget(self.members_box)
        layout.addStretch(1)
        layout.addWidget(self.note)
        self.member_bars: list[tuple[QLabel, ProbabilityBars]] = []
        self.clear("Type to see what the model predicts.")

    def clear(self, message: str) -> None:
        self._set_verdict(message, None)
        self.combined_title.hide()
        self.combined.set_values({}, [], None, None)
        self.answer.hide()
        self._set_members(())
        self.note.setText("")
        self.set_stale(False)

    def set_stale(self, stale: bool) -> None:
        """A newer prediction is on its way: say so, and grey out the one shown."""
        self.stale.setVisible(stale)
        self.combined.setEnabled(not stale)

    def _set_verdict(self, text: str, fooled: bool | None) -> None:
        self.verdict.setText(text)
        if fooled is None:
            self.verdict.setStyleSheet("color:#444; border:1px solid #ccc; border-radius:4px; padding:4px")
        else:
            colour = FOOLED if fooled else HELD
            self.verdict.setStyleSheet(f"color:white; background:{colour.name()}; border:1px solid {colour.name()};"
                                       "border-radius:4px; padding:4px; font-weight:bold")  # the same box as above

    def show_prediction(self, view: PredictionView) -> None:
        self._set_verdict(view.verdict, view.fooled)
        labels, goal, combined = list(view.labels), view.goal, view.combined
        if labels:
            yours = f" · <span style='color:{GOAL_BAR.name()}'>■</span> your label" if goal else ""
            self.combined_title.setText(f"<b>{view.title}</b>: {combined.label or '–'}{yours}")
            self.combined_title.show()
            self.combined.set_values(combined.probabilities, labels, goal, combined.label)
            self.answer.hide()
        else:  # extractive QA: an answer span, and its overlap with the annotator's
            self.combined_title.hide()
            self.combined.set_values({}, [], None, None)
            f1 = view.answer_f1
            overlap = "" if f1 is None else f"\nWord overlap with your answer: F1 {f1:.2f}"
            self.answer.setText(f"Model's answer: {combined.answer or '(none)'}{overlap}")
            self.answer.show()
        self._set_members(view.members if len(view.members) > 1 else (), labels, goal)
        self.note.setText(view.note)
        self.set_stale(False)

    def _set_members(self, members: Sequence[MemberView], labels: Sequence[str] = (), goal: str | None = None) -> None:
        while len(self.member_bars) > len(members):
            title, bars = self.member_bars.pop()
            title.deleteLater()
            bars.deleteLater()
        while len(self.member_bars) < len(members):
            title, bars = QLabel(), ProbabilityBars(compact=True)
            self.members_layout.addWidget(title)
            self.members_layout.addWidget(bars)
            self.member_bars.append((title, bars))
        for (title, bars), member in zip(self.member_bars, members):
            shown = member.label if labels else member.answer
            title.setText(f"{member.name}: {shown or '–'}")
            bars.set_values(member.probabilities, labels, goal, member.label)
            bars.setVisible(bool(labels))
