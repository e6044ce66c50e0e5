"""The main window's profile actions: the working person in the toolbar, the profile dialog, switching to
or creating a profile (refused on a desk that syncs with a team server, where a person is who the
server's token says). Every read and write runs on the window's database worker."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.core.domain import Role
from app.core.errors import DynadeskError
from app.gui.wellbeing import profile_dialog, profile_dialog_data

if TYPE_CHECKING:
    from PySide6.QtGui import QAction
    from PySide6.QtWidgets import QLabel

    from app.core.desk import Desk
    from app.gui.next_round import NextRoundController
    from app.gui.sync_controller import SyncController
    from app.gui.worker import SerialWorker


class ProfileActions:
    """Mixed into the main window, which makes these attributes."""

    desk: Desk
    db: SerialWorker
    sync: SyncController
    person_label: QLabel
    next_round: NextRoundController
    named_actions: dict[str, QAction]
    show_error: Callable[[BaseException], None]

    def _show_person(self, person=None) -> None:
        """The working profile in the toolbar (read on the worker unless given)."""
        if person is None:
            self.db.submit(self.desk.current_person, on_done=self._show_person, on_error=self.show_error)
            return
        self.person_label.setText(f"{person.display_name} · {person.role} ")
        self.next_round.person_shown(person, self.named_actions["next-round"])

    def open_profiles(self) -> None:
        self.db.submit(lambda: profile_dialog_data(self.desk, self.sync.team_server()), on_done=self._open_profiles,
                       on_error=self.show_error)

    def _open_profiles(self, data) -> None:
        dialog = profile_dialog(self, data)  # with the working person's Wellbeing section
        dialog.chosen.connect(self._profile_chosen)
        dialog.created.connect(self._profile_created)
        dialog.open()

    def _profile_chosen(self, person_id: str) -> None:
        desk = self.desk

        def switch():
            self._refuse_on_team_desk(uuid.UUID(person_id))
            desk.switch_person(uuid.UUID(person_id))
            return desk.current_person()

        self.db.submit(switch, on_done=self._show_person, on_error=self.show_error)

    def _refuse_on_team_desk(self, person_id: uuid.UUID | None) -> None:
        """On the worker: a desk that syncs with a team server works as its token's holder only."""
        server = self.sync.team_server()
        if server is not None and person_id != self.desk.current_person_id:
            raise DynadeskError(f"This desk syncs with {server}: it works as the person its sync token names. "
                                "Someone else works with their own token (Sync ▸ Sync settings…).")

    def _profile_created(self, name: str, role: Role) -> None:
        def create():
            self._refuse_on_team_desk(None)
            return self.desk.people.create(name, role)

        self.db.submit(create, on_done=lambda person: self._profile_chosen(str(person.id)), on_error=self.show_error)
