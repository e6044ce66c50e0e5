"""Tabs whose pages scroll instead of growing the window.

A QTabWidget's minimum size is the largest minimum of all its pages, so one wide page (the
Dashboard's filters) or one that grows with its content (Evaluate) would push the whole window
past a laptop screen. Here each page sits in a frameless scroll area: a page larger than the
window scrolls, and the window's minimum stays that of its chrome. Callers still see their own
page widgets: ``widget``, ``currentWidget``, ``indexOf`` and ``setCurrentWidget`` look through
the scroll areas.
"""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, QSize, Qt
from PySide6.QtWidgets import QFrame, QScrollArea, QTabWidget, QWidget


class PageScroll(QScrollArea):
    """Gives its page the whole viewport, and never less than the page's minimum. (Qt's own
    ``widgetResizable`` gives pages with word-wrapped labels their preferred height instead, which
    scrolls pages that would fit.)"""

    def __init__(self, page: QWidget):
        super().__init__()
        # held here (widget() is typed as possibly None; this one is never taken out), before setWidget,
        # which installs this area as the page's event filter
        self.page = page
        self.setObjectName(f"{page.objectName() or 'page'}-scroll")
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setFocusPolicy(Qt.FocusPolicy.NoFocus)  # keys go to the page, not to the scroll bars
        self.setWidget(page)
        page.installEventFilter(self)

    def fit_page(self) -> None:
        page = self.page
        least = page.minimumSizeHint().expandedTo(page.minimumSize())
        page.resize(least.expandedTo(self.viewport().size()))

    def viewportEvent(self, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize:
            self.fit_page()
        return super().viewportEvent(event)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if watched is self.page and event.type() == QEvent.Type.LayoutRequest:
            self.fit_page()  # the page's minimum may have changed
        return False


class PageTabs(QTabWidget):
    def addTab(self, page: QWidget, *args) -> int:
        return super().addTab(PageScroll(page), *args)

    def insertTab(self, index: int, page: QWidget, *args) -> int:
        return super().insertTab(index, PageScroll(page), *args)

    def widget(self, index: int) -> QWidget | None:
        holder = super().widget(index)
        return holder.widget() if isinstance(holder, PageScroll) else holder

    def currentWidget(self) -> QWidget | None:  # type: ignore[override]  # None with no tabs, as in Qt
        return self.widget(self.currentIndex())

    def indexOf(self, page: QWidget) -> int:
        return next((i for i in range(self.count()) if self.widget(i) is page), -1)

    def setCurrentWidget(self, page: QWidget) -> None:
        index = self.indexOf(page)
        if index >= 0:
            self.setCurrentIndex(index)


class ColumnScroll(PageScroll):
    """A column of controls that scrolls up and down only: always as wide as its content needs."""

    def __init__(self, column: QWidget, name: str):
        super().__init__(column)
        self.setObjectName(name)
        self.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)

    def _width(self, content: QSize) -> int:
        return content.width() + self.verticalScrollBar().sizeHint().width() + 2 * self.frameWidth()

    def minimumSizeHint(self) -> QSize:
        column = self.page
        return QSize(self._width(column.minimumSizeHint().expandedTo(column.minimumSize())), 80)

    def sizeHint(self) -> QSize:
        return QSize(self._width(self.page.sizeHint()), super().sizeHint().height())
