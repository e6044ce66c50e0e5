"""The workspace's round following: a round opened or closed elsewhere (a sync, a lead), the
switch once its target answers, and moving a draft written in an older round."""

from __future__ import annotations

from app.core.errors import DynadeskError
from app.core.services.target_models import TargetModelError, model_spec
from app.views.create_session import RoundChange


class RoundFollower:
    """Follows the task's open round for a WorkspaceController: reads and changes its session,
    and shows what happened on its view."""

    def __init__(self, ws) -> None:
        self.ws = ws

    def follow(self) -> None:
        """The task's rounds may have changed: when the round on screen is no longer the open one,
        hold the prediction and switch to the open round once its target model answers."""
        session = self.ws.session
        if session.task_code is None or session.task_asked != session.task_code:
            return  # no task yet, or one being opened: what it looks up is the newest already
        tasks, models, code = self.ws.desk.tasks, self.ws.desk.models, self.ws.session.task_code

        def find():
            try:
                current = tasks.round(code)
            except DynadeskError:
                return None, []
            return current, models.round_models(current.id)

        self.ws.db.submit(find, on_done=lambda found: self._round_found(*found), on_error=self.ws._show_error)

    def _round_found(self, current, records: list) -> None:
        ws, session, view = self.ws, self.ws.session, self.ws.view
        before = session.round
        change = session.round_noticed(current, records)
        if change is RoundChange.SAME:
            if current is not None:
                ws.assistant.round_seen(current)  # the lead may have changed its assistant setting
            return
        if change is RoundChange.RESTART:  # nothing could be written: start afresh in the new round
            ws.set_task(session.task_code)
            return
        ws.save_draft()  # what is on screen is kept in the round it was written in
        if view.form_shown():
            view.show_form(False)  # the form keeps its values; it comes back at the next submit
        view.clear_attribution()
        if change is RoundChange.CLOSED:
            view.clear_prediction(f"Round {before.number} is closed and no round is open.")
            view.set_locked(True, f"Round {before.number} has closed; your text is kept as a draft. "
                            "A lead can open the next round (Round menu).")
            ws.status_changed.emit("No open round")
            return
        number = current.number
        what = f"Round {number}'s target changed" if current.id == before.id else f"Round {number} is open"
        view.clear_prediction(f"{what} — loading its target…")
        view.set_status("Your example is kept; it is judged by the new target once that answers.")
        if not records:
            self.switch_round()
            return
        try:
            specs = [model_spec(record) for record in records]
        except TargetModelError as exc:
            view.clear_prediction(str(exc))
            self.switch_round()
            return
        ws.status_changed.emit(f"Round {number}: loading " + ", ".join(r.name for r in records) + "…")
        session.models_requested(ws.request_models(specs))

    def switch_round(self) -> None:
        """The new round's target answered (or it has none): write against it from now on."""
        ws, session, view = self.ws, self.ws.session, self.ws.view
        old = session.switch_round()
        new = session.round
        ws.assist.task_opened()  # suggestions checked against the old round's target are gone
        view.show_goal(f"<b>Round {new.number}</b> · {new.goal_message or session.definition.description}")
        targets = ", ".join(r.name for r in session.records) or "no target model yet"
        change = ("'s target changed" if new.id == old.id else " is open" if new.number > old.number
                  else " is now the open round")
        view.show_round_notice(f"<b>Round {new.number}{change}.</b> You now write against its target: {targets}.")
        if not session.records:
            view.clear_prediction(ws.no_model_message)
        view.set_status("")
        if not view.warning_shown():  # a content warning not yet read keeps the editor locked
            view.set_locked(False)
        ws.assistant.begin(new)
        if new.id == old.id:
            return  # the same round: the text stays, and the new target predicts it (see _models_loaded)
        draft = session.draft
        if draft is not None and draft.round_number != new.number and view.content().written(session.definition):
            self.offer_move(draft.round_number)
        else:
            session.perturbation_ended()
            view.clear_pair()
            ws._new_example(after_submit=False)

    def offer_move(self, number: int) -> None:
        current = self.ws.session.round.number
        self.ws.view.offer_move(
            f"This example was written in round {number}, which is no longer open. Move it to round "
            f"{current} (text, label and metadata are kept; its target predicts again), or keep it "
            f"as a draft.", current)

    def move_to_current_round(self) -> None:
        """Move the example on screen to the open round; its prediction comes from that round's target."""
        ws, session = self.ws, self.ws.session
        ref, examples, number = session.draft, ws.desk.examples, session.round.number
        ws.view.offer_move(None)
        ws.hold_autosave()

        def move():
            if ref.id is not None:
                examples.move_draft(ref.id, number)
            ref.round_number = number  # on the worker: saves queued after this one store it in the new round

        def moved(_result) -> None:
            session.moved_to_round(number)
            ws.view.show_message(f"Moved to round {number}: the prediction shown is its target's.")
            ws._text_edited()
            ws.save_draft()

        ws.db.submit(move, on_done=moved, on_error=ws._show_error)

    def keep_as_draft(self) -> None:
        """Leave the example in its round as a draft (offered again later) and start afresh here."""
        ws, session, view = self.ws, self.ws.session, self.ws.view
        number = session.draft.round_number
        view.offer_move(None)
        ws.save_draft()
        session.use_draft(None)
        session.perturbation_ended()
        view.clear_pair()
        ws._new_example(after_submit=False)
        view.show_message(f"Kept as a draft of round {number}: it is offered again when you come "
                          "back to this task.")
