"""Sync settings: the server, the token and how often to sync, with a connection test.

A view only: it says what the user chose through signals; the sync controller checks the
connection and stores the token (in the system keyring, or a file only the user can read).
"""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
)

from app.views.sync import SyncSettingsView

ERROR, OK, INFO = "#b3261e", "#2e7d32", "#555555"


class SyncDialog(QDialog):
    test_requested = Signal(str, str)  # url, token ("" = the stored one)
    accepted_with = Signal(str, str, int)  # url, token ("" = keep the stored one), interval in seconds

    def __init__(self, settings: SyncSettingsView, parent=None):
        super().__init__(parent)
        self.setWindowTitle("Sync settings")
        self.setMinimumWidth(520)
        self.token_stored = settings.token_stored
        self.url = QLineEdit(settings.url, objectName="server-url", placeholderText="https://sync.example.org")
        self.token = QLineEdit(objectName="token", echoMode=QLineEdit.EchoMode.Password)
        self.token.setPlaceholderText("stored — leave empty to keep it" if settings.token_stored
                                      else "the token your team's owner gave you")
        self.show_token = QCheckBox("Show", objectName="show-token")
        self.show_token.toggled.connect(lambda on: self.token.setEchoMode(
            QLineEdit.EchoMode.Normal if on else QLineEdit.EchoMode.Password))
        token_row = QHBoxLayout()
        token_row.addWidget(self.token, 1)
        token_row.addWidget(self.show_token)
        self.interval = QSpinBox(objectName="interval", minimum=1, maximum=1440, suffix=" min")
        self.interval.setValue(settings.interval_min)
        self.test = QPushButton("Test connection", objectName="test-connection")
        self.test.clicked.connect(self._test)
        self.result = QLabel(objectName="test-result", wordWrap=True)
        test_row = QHBoxLayout()
        test_row.addWidget(self.test)
        test_row.addWidget(self.result, 1)
        where = QLabel(f"The token is kept in {settings.token_place}, never in the settings file.",
                       objectName="token-place",
                       wordWrap=True, styleSheet=f"color: {INFO}")
        form = QFormLayout()
        form.addRow("Server", self.url)
        form.addRow("Token", token_row)
        form.addRow("Sync every", self.interval)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        self.buttons.accepted.connect(self._accept)
        self.buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("Work syncs in the background; offline is fine, it waits and goes out later."))
        layout.addLayout(form)
        layout.addLayout(test_row)
        layout.addWidget(where)
        layout.addWidget(self.buttons)

    def _problem(self) -> str | None:
        url = self.url.text().strip()
        if not url:
            return "Enter the server's address."
        if not url.startswith(("http://", "https://")):
            return "The address starts with http:// or https://."
        if not self.token.text().strip() and not self.token_stored:
            return "Enter the token your team's owner gave you."
        return None

    def _say(self, text: str, colour: str) -> None:
        self.result.setText(text)
        self.result.setStyleSheet(f"color: {colour}")

    def explain(self, text: str) -> None:
        """Say why the dialog opened (e.g. "Sync now" with no server set)."""
        self._say(text, INFO)

    def _test(self) -> None:
        problem = self._problem()
        if problem:
            self._say(problem, ERROR)
            return
        self.test.setEnabled(False)
        self._say("Connecting…", INFO)
        self.test_requested.emit(self.url.text().strip().rstrip("/"), self.token.text().strip())

    def show_test_result(self, ok: bool, message: str) -> None:
        self.test.setEnabled(True)
        self._say(message, OK if ok else ERROR)

    def _accept(self) -> None:
        problem = self._problem()
        if problem:
            self._say(problem, ERROR)
            return
        self.accepted_with.emit(self.url.text().strip().rstrip("/"), self.token.text().strip(),
                                self.interval.value() * 60)
        self.accept()
