"""The workspace's round following: a round opened or closed elsewhere (a sync, a lead), the
switch once its target answers, and moving a draft written in an older round."""

from __future__ import annotations

from app.errors import DynadeskError
from app.services.target_models import TargetModelError, model_spec


class RoundFollower:
    """Follows the task's open round for a WorkspaceController, whose state it reads and sets."""

    def __init__(self, ws) -> None:
        self.ws = ws

    def follow(self) -> None:
        """The task's rounds may have changed: when the round on screen is no longer the open one,
        hold the prediction and switch to the open round once its target model answers."""
        if self.ws.task_code is None:
            return
        tasks, models, code = self.ws.desk.tasks, self.ws.desk.models, self.ws.task_code

        def find():
            try:
                current = tasks.round(code)
            except DynadeskError:
                return None, []
            return current, models.round_models(current.id)

        self.ws.db.submit(find, on_done=lambda found: self._round_found(*found), on_error=self.ws._show_error)

    def _round_found(self, current, records: list) -> None:
        if self.ws.round is None:  # nothing could be written: start afresh in the new round
            if current is not None:
                self.ws.set_task(self.ws.task_code)
            return
        if self.ws.pending_round is not None:
            waiting_for, targets = self.ws.pending_round, self.ws.pending_records
        else:
            waiting_for, targets = self.ws.round, self.ws.records
        if current is not None and current.id == waiting_for.id and [r.id for r in records] == [r.id for r in targets]:
            return
        self.ws.save_draft()  # what is on screen is kept in the round it was written in
        self.ws.loaded, self.ws.last_prediction, self.ws.last_outputs = None, None, []  # never judge by the old target
        self.ws.frozen_outputs, self.ws.pending_submit = None, False
        if self.ws.view.form_shown():
            self.ws.view.show_form(False)  # the form keeps its values; it comes back at the next submit
        self.ws.view.attribution.clear()
        if current is None:
            self.ws.pending_round, self.ws.pending_records, self.ws._pending_load = None, [], None
            self.ws.view.prediction.clear(f"Round {self.ws.round.number} is closed and no round is open.")
            self.ws.view.set_locked(True, f"Round {self.ws.round.number} has closed; your text is kept as a draft. "
                                    "A lead can open the next round (Round menu).")
            self.ws.status_changed.emit("No open round")
            return
        self.ws.pending_round, self.ws.pending_records = current, records
        number = current.number
        what = f"Round {number}'s target changed" if current.id == self.ws.round.id else f"Round {number} is open"
        self.ws.view.prediction.clear(f"{what} — loading its target…")
        self.ws.view.status.setText("Your example is kept; it is judged by the new target once that answers.")
        if not records:
            self.switch_round()
            return
        try:
            specs = [model_spec(record) for record in records]
        except TargetModelError as exc:
            self.ws.view.prediction.clear(str(exc))
            self.switch_round()
            return
        self.ws.status_changed.emit(f"Round {current.number}: loading " + ", ".join(r.name for r in records) + "…")
        self.ws._pending_load = self.ws.inference.load(specs)

    def switch_round(self) -> None:
        """The new round's target answered (or it has none): write against it from now on."""
        new, old = self.ws.pending_round, self.ws.round
        self.ws.round, self.ws.records = new, self.ws.pending_records
        self.ws.pending_round, self.ws.pending_records, self.ws._pending_load = None, [], None
        goal = new.goal_message or self.ws.definition.description
        self.ws.view.goal.setText(f"<b>Round {new.number}</b> · {goal}")
        targets = ", ".join(r.name for r in self.ws.records) or "no target model yet"
        change = ("'s target changed" if new.id == old.id else " is open" if new.number > old.number
                  else " is now the open round")
        self.ws.view.round_notice.show_message(
            f"<b>Round {new.number}{change}.</b> You now write against its target: {targets}.", "OK")
        if not self.ws.records:
            self.ws.view.prediction.clear(self.ws.no_model_message)
        self.ws.view.status.setText("")
        if self.ws.view.warning.isHidden():  # a content warning not yet read keeps the editor locked
            self.ws.view.set_locked(False)
        if new.id == old.id:
            return  # the same round: the text stays, and the new target predicts it (see _models_loaded)
        if self.ws.draft is not None and self.ws.draft.round_number != new.number and self._written():
            self.offer_move(self.ws.draft.round_number)
        else:
            self.ws.original = None
            self.ws.view.perturbation.clear()
            self.ws._new_example(after_submit=False)

    def _written(self) -> bool:
        inputs = self.ws.view.editor.content()["inputs"]
        return any(inputs.get(f.name, "").strip() for f in self.ws.definition.written_inputs)

    def offer_move(self, number: int) -> None:
        self.ws.view.move_offer.show_message(
            f"This example was written in round {number}, which is no longer open. Move it to round "
            f"{self.ws.round.number} (text, label and metadata are kept; its target predicts again), or keep it "
            f"as a draft.", f"Move to round {self.ws.round.number}", "Keep as draft")

    def move_to_current_round(self) -> None:
        """Move the example on screen to the open round; its prediction comes from that round's target."""
        ref, examples, number = self.ws.draft, self.ws.desk.examples, self.ws.round.number
        self.ws.view.move_offer.hide()
        self.ws._autosave.stop()

        def move():
            if ref.id is not None:
                examples.move_draft(ref.id, number)
            ref.round_number = number

        def moved(_result) -> None:
            self.ws.prediction_text, self.ws.last_prediction, self.ws.last_outputs = None, None, []
            self.ws.view.message.show_message(f"Moved to round {number}: the prediction shown is its target's.", "OK")
            self.ws._text_edited()
            self.ws.save_draft()

        self.ws.db.submit(move, on_done=moved, on_error=self.ws._show_error)

    def keep_as_draft(self) -> None:
        """Leave the example in its round as a draft (offered again later) and start afresh here."""
        number = self.ws.draft.round_number
        self.ws.view.move_offer.hide()
        self.ws.save_draft()
        self.ws.draft = None
        self.ws.original = None
        self.ws.view.perturbation.clear()
        self.ws._new_example(after_submit=False)
        self.ws.view.message.show_message(f"Kept as a draft of round {number}: it is offered again when you come "
                                          "back to this task.", "OK")
