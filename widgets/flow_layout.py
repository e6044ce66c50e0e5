"""A row of controls that wraps onto further lines when the window is too narrow for it, as words
do in a paragraph: with a large system font on a laptop screen a filter row keeps every control
whole instead of widening the page past the screen (Qt ships this layout as an example only)."""

from __future__ import annotations

from PySide6.QtCore import QMargins, QPoint, QRect, QSize, Qt
from PySide6.QtWidgets import QLayout, QLayoutItem, QWidget


class FlowLayout(QLayout):
    def __init__(self, parent: QWidget | None = None, *, across: int = 12, down: int = 4):
        super().__init__(parent)
        self._items: list[QLayoutItem] = []
        self._across, self._down = across, down  # the gaps between items, and between lines
        self.setContentsMargins(QMargins(0, 0, 0, 0))

    def addItem(self, item: QLayoutItem) -> None:
        self._items.append(item)

    def count(self) -> int:
        return len(self._items)

    def itemAt(self, index: int) -> QLayoutItem | None:
        return self._items[index] if 0 <= index < len(self._items) else None

    def takeAt(self, index: int) -> QLayoutItem | None:
        return self._items.pop(index) if 0 <= index < len(self._items) else None

    def expandingDirections(self) -> Qt.Orientation:
        return Qt.Orientation(0)

    def hasHeightForWidth(self) -> bool:
        return True

    def heightForWidth(self, width: int) -> int:
        return self._arrange(QRect(0, 0, width, 0), move=False)

    def setGeometry(self, rect: QRect) -> None:
        super().setGeometry(rect)
        self._arrange(rect, move=True)

    def sizeHint(self) -> QSize:
        return self.minimumSize()

    def minimumSize(self) -> QSize:
        size = QSize()
        for item in self._items:
            if not item.isEmpty():
                size = size.expandedTo(item.minimumSize())
        margins = self.contentsMargins()
        return size + QSize(margins.left() + margins.right(), margins.top() + margins.bottom())

    def _arrange(self, rect: QRect, *, move: bool) -> int:
        """Place the items line by line (when ``move``); the height they take."""
        margins = self.contentsMargins()
        area = rect.adjusted(margins.left(), margins.top(), -margins.right(), -margins.bottom())
        x, y, line_height = area.x(), area.y(), 0
        line: list[tuple[QLayoutItem, int, QSize]] = []

        def place_line() -> None:
            for item, left, size in line:  # each item centred on its line
                if move:
                    item.setGeometry(QRect(QPoint(left, y + (line_height - size.height()) // 2), size))

        for item in self._items:
            if item.isEmpty():
                continue
            size = item.sizeHint().expandedTo(item.minimumSize()).boundedTo(QSize(area.width(), 1 << 20))
            if line and x + size.width() > area.right() + 1:
                place_line()
                y += line_height + self._down
                x, line_height, line = area.x(), 0, []
            line.append((item, x, size))
            x += size.width() + self._across
            line_height = max(line_height, size.height())
        place_line()
        return y + line_height - rect.y() + margins.bottom()

