"""A one-line label that gives way when space is short: it shows as much of its text as fits,
with an ellipsis in the middle, and the whole text in its tooltip (status-bar details)."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QLabel

MINIMUM_WIDTH = 140


class ElidedLabel(QLabel):
    def __init__(self, text: str = "", parent=None, *, elide: Qt.TextElideMode = Qt.TextElideMode.ElideMiddle,
                 **kwargs):
        super().__init__(parent, **kwargs)
        self._full = ""
        self._elide = elide
        self.setText(text)

    def text(self) -> str:  # the whole text, not what fits
        return self._full

    def setText(self, text: str) -> None:
        self._full = text
        self.setToolTip(text)
        self._fit()
        self.updateGeometry()

    def sizeHint(self) -> QSize:
        return QSize(self.fontMetrics().horizontalAdvance(self._full) + 8, super().sizeHint().height())

    def minimumSizeHint(self) -> QSize:
        return QSize(min(MINIMUM_WIDTH, self.sizeHint().width()), super().minimumSizeHint().height())

    def resizeEvent(self, event) -> None:
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        shown = self.fontMetrics().elidedText(self._full, self._elide, max(0, self.width() - 4))
        super().setText(shown)
