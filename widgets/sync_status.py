"""The sync status in the status bar: state, records waiting, last successful sync, progress.

A view only: the sync controller tells it what to show (``show_status`` with a SyncView,
``set_progress``); it asks for a sync or the settings through signals. The words come from
app.views.sync; the widget re-words them every 30 s, so relative times age.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QTimer, Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget

from app.views.sync import SyncLight, SyncView, progress_message, sync_line


class SyncStatusWidget(QWidget):
    sync_requested = Signal()
    settings_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("sync-status")
        self.dot = QLabel("●", objectName="sync-dot")
        self.text = QLabel(objectName="sync-text")
        self.text.setToolTip("Click for sync settings")
        self.text.mousePressEvent = lambda _event: self.settings_requested.emit()
        self.bar = QProgressBar(objectName="sync-progress", maximumWidth=140, maximumHeight=14, textVisible=False)
        self.bar.hide()
        self.button = QToolButton(objectName="sync-now", text="Sync now", autoRaise=True)
        self.button.setToolTip("Push what is waiting and pull what is new (Ctrl+Shift+S)")
        self.button.clicked.connect(self.sync_requested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(6, 0, 2, 0)
        layout.setSpacing(6)
        layout.addWidget(self.dot)
        layout.addWidget(self.text)
        layout.addWidget(self.bar)
        layout.addWidget(self.button)
        self.view = SyncView(SyncLight.OFF, 0, None)
        # Relative times ("5 min ago") age while nothing else happens.
        self._clock = QTimer(self, interval=30_000, timeout=self._render)
        self._clock.start()
        self._render()

    @property
    def state(self) -> SyncLight:
        return self.view.state

    def show_status(self, view: SyncView) -> None:
        self.view = view
        if view.state is not SyncLight.SYNCING:
            self.bar.hide()
        self._render()

    def set_progress(self, phase: str, done: int, total: int) -> None:
        if total > 0:
            self.bar.setRange(0, total)
            self.bar.setValue(min(done, total))
        else:
            self.bar.setRange(0, 0)  # busy
        self.bar.show()
        self.view = replace(self.view, state=SyncLight.SYNCING, message=progress_message(phase, done, total))
        self._render()

    def _render(self) -> None:
        line = sync_line(self.view)
        self.text.setText(line.text)
        self.dot.setStyleSheet(f"color: {line.colour};")
        self.text.setToolTip(line.tooltip)
        self.button.setEnabled(line.can_sync)
