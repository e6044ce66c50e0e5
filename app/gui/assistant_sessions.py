"""The workspace's writing sessions: one per round the writer writes in while the desk runs,
numbered and given its assistant arm on the database worker (app.core.services.writing_sessions).
A lead changing the round's assistant setting starts a new session, so the change shows at once."""

from __future__ import annotations

import uuid

from PySide6.QtCore import QObject, Signal

from app.core.services.rounds import RoundSettings
from app.core.services.writing_sessions import WritingSession, begin_writing_session


class AssistantSessions(QObject):
    """Begins and remembers the writer's sessions for a WorkspaceController; ``assistant_changed``
    says whether suggestions are offered now (the assistant panel listens)."""

    assistant_changed = Signal(bool)

    def __init__(self, ws) -> None:
        super().__init__(ws)
        self.ws = ws
        self._sessions: dict[tuple[uuid.UUID, uuid.UUID], WritingSession] = {}

    def begin(self, round_) -> None:
        """The writer writes in ``round_`` (a Round row): its session, begun once per run (or anew
        when the round's assistant setting changed)."""
        writer = self.ws.desk.current_person_id
        key = (round_.id, writer)
        mode = RoundSettings.model_validate(round_.settings or {}).assistant
        known = self._sessions.get(key)
        if known is not None and known.mode == mode:
            self._began(known)
            return
        db, round_id = self.ws.desk.db, round_.id

        def began(writing: WritingSession) -> None:
            self._sessions[key] = writing
            if self.ws.session.round is not None and self.ws.session.round.id == writing.round_id:
                self._began(writing)

        self.ws.db.submit(lambda: begin_writing_session(db, round_id, writer), on_done=began,
                          on_error=self.ws._show_error)

    def round_seen(self, round_) -> None:
        """The open round as read again (after a sync or a lead's change)."""
        writing = self.ws.session.writing
        if writing is not None and writing.round_id == round_.id:
            if RoundSettings.model_validate(round_.settings or {}).assistant != writing.mode:
                self.begin(round_)

    def _began(self, writing: WritingSession) -> None:
        self.ws.session.writing_session_began(writing)
        self.assistant_changed.emit(self.ws.session.assistant_on)
