"""The Create page's state, free of Qt: the task and its open round, the draft on screen, the
original of a perturbation, the last prediction and the inputs it is for, a submit waiting for
that prediction, the time spent writing, the outputs frozen for the metadata form, and a round
switch waiting for its target model.

Every change goes through a method named after what happened (``text_changed``,
``prediction_arrived``, ``submit_requested`` …); a method whose precondition does not hold raises
``TransitionError`` rather than leave the state half changed. The Qt controller
(app/gui/workspace.py) only translates between this object, the workers and the widgets.
"""

from __future__ import annotations

import enum
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from app.core.assist.types import Assistance

if TYPE_CHECKING:
    from app.core.domain import ModelOutput
    from app.core.services.writing_sessions import WritingSession
    from app.core.tasks.definition import TaskDefinition
    from app.views.create import PredictedView

IDLE_GAP_S = 60  # pauses longer than this do not count as time spent writing


class TransitionError(RuntimeError):
    """A transition the session's present state does not allow (a bug in the caller)."""


@dataclass
class DraftRef:
    """The draft of the example on screen. Its id is set on the database worker only, so the
    serial worker's order guarantees exactly one draft however many autosaves are queued."""

    task_code: str
    round_number: int
    author_id: uuid.UUID
    context_id: uuid.UUID | None = None
    perturbation_of: uuid.UUID | None = None
    origin: dict[str, Any] | None = None
    id: uuid.UUID | None = None
    assistance: Assistance | None = None  # the session's arm and the suggestion applied, if any


@dataclass
class Original:
    """The example a perturbation starts from, with what is known about it."""

    id: uuid.UUID
    text: str
    label: str | None
    prediction: PredictedView | None  # its stored outputs' ensemble
    attribution: list[tuple[str, float]] | None = None  # per word of ``text``, once explained (raw units)
    edited_attribution: list[tuple[str, float]] | None = None
    target: str | None = None
    units: str = "probability"  # what the attributions measure (of ``target``)


class WritingClock:
    """Time spent writing: the gaps between changes, except pauses longer than ``idle_gap_s``."""

    def __init__(self, idle_gap_s: float = IDLE_GAP_S) -> None:
        self.idle_gap_s = idle_gap_s
        self.active_s = 0.0
        self.last_change: float | None = None

    def tick(self, now: float) -> None:
        if self.last_change is not None and now - self.last_change < self.idle_gap_s:
            self.active_s += now - self.last_change
        self.last_change = now

    def restart(self, active_s: float = 0.0) -> None:
        self.active_s, self.last_change = active_s, None

    @property
    def ms(self) -> int:
        return int(self.active_s * 1000)


class LoadOutcome(enum.Enum):
    STALE = "stale"  # the models of a round that is no longer awaited: ignore
    SWITCH = "switch"  # the awaited round's target answered: switch to that round, then as LOADED
    LOADED = "loaded"  # the round's target is ready: predict the text on screen


class RoundChange(enum.Enum):
    SAME = "same"  # nothing changed
    RESTART = "restart"  # no round was open on screen and one is now: open the task afresh
    CLOSED = "closed"  # the round on screen closed and none is open
    PENDING = "pending"  # another round (or target) is open: load its target, then switch_round


class Submit(enum.Enum):
    WAIT_ROUND = "wait_round"  # a round switch is loading its target
    MOVE = "move"  # the draft belongs to a round no longer open
    NOT_LOADED = "not_loaded"  # the target model is not loaded yet
    WAIT_PREDICTION = "wait_prediction"  # the prediction of this very text is on its way
    READY = "ready"  # outputs frozen: ask for the metadata


class CreateSession:
    """The Create page's state machine (see the module docstring). Read the attributes freely;
    change them only through the methods."""

    def __init__(self, idle_gap_s: float = IDLE_GAP_S) -> None:
        self.task_code: str | None = None  # the task open on the page
        self.task_asked: str | None = None  # the task chosen last (open, or being looked up)
        self.definition: TaskDefinition | None = None
        self.round: Any = None  # the open round written in (app.core.services round record)
        self.records: list[Any] = []  # its target models, in load order
        self.loaded: Any = None  # the loaded target (app.gui.inference.LoadedModels)
        self.draft: DraftRef | None = None
        self.original: Original | None = None
        self.last_prediction: Any = None  # the newest prediction shown (PredictionResult)
        self.last_outputs: list[ModelOutput] = []  # it, as the outputs an example stores
        self.prediction_inputs: dict[str, str] | None = None  # the inputs it is for
        self._requested: tuple[int, dict[str, str]] | None = None  # the newest prediction request: id and inputs
        self.pending_submit = False
        self.frozen_outputs: list[ModelOutput] | None = None
        self.pinned = False
        self.explaining_original = False  # the attribution awaited is the original's (of a perturbation)
        self.pending_round: Any = None  # a round noticed, waiting for its target to answer
        self.pending_records: list[Any] = []
        self.pending_load: int | None = None  # the load request of the pending round's target
        self.offered: list[Any] = []  # drafts offered for restoring, newest first, as (draft, its round's number)
        self.writing: WritingSession | None = None  # the writer's session in the open round: its assistant arm
        self.clock = WritingClock(idle_gap_s)

    def task_chosen(self, task_code: str) -> None:
        """The writer chose a task; it is open once ``open_task`` gets what was looked up for it."""
        self.task_asked = task_code

    def open_task(self, task_code: str, definition: TaskDefinition, round_: Any, records: Sequence[Any]) -> None:
        """A task is opened (``round_`` None: it has no open round). Forgets everything of the
        previous task but the draft, which the caller saved before."""
        self.task_code = self.task_asked = task_code
        self.definition = definition
        self.round, self.records = round_, list(records) if round_ is not None else []
        self.pending_round, self.pending_records, self.pending_load = None, [], None
        self.original = None
        self._forget_target()

    def targets_changed(self, records: Sequence[Any]) -> None:
        """The open round's target models changed (a lead attached one); load them next."""
        if self.round is None:
            raise TransitionError("no round is open")
        self.records = list(records)

    def models_requested(self, request_id: int | None = None) -> None:
        """The round's target models are being loaded (``request_id``: the load request of a
        pending round's target). Nothing is judged by the previous target any more."""
        if request_id is not None and self.pending_round is None:
            raise TransitionError("a round switch's load without a pending round")
        self.pending_load = request_id
        self._forget_target()

    def models_loaded(self, loaded: Any) -> LoadOutcome:
        """The inference service loaded models: which ones, and what to do."""
        if self.pending_round is not None:
            if loaded.request_id != self.pending_load:
                return LoadOutcome.STALE
            self.loaded = loaded
            return LoadOutcome.SWITCH
        self.loaded = loaded
        return LoadOutcome.LOADED

    def load_failed(self) -> bool:
        """The target could not be loaded; returns whether a pending round switches all the same."""
        self.loaded = None
        self.pending_submit = False
        return self.pending_round is not None

    def round_noticed(self, current: Any, records: Sequence[Any]) -> RoundChange:
        """The task's open round as found after a sync or a lead's change (``current`` None: none is
        open), with its target models. Unless nothing changed, the old target judges nothing more."""
        if self.round is None:
            return RoundChange.RESTART if current is not None else RoundChange.SAME
        waiting_for, targets = ((self.pending_round, self.pending_records) if self.pending_round is not None
                                else (self.round, self.records))
        if current is not None and current.id == waiting_for.id and [r.id for r in records] == [r.id for r in targets]:
            return RoundChange.SAME
        self._forget_target()
        self.frozen_outputs = None
        if current is None:
            self.pending_round, self.pending_records, self.pending_load = None, [], None
            return RoundChange.CLOSED
        self.pending_round, self.pending_records, self.pending_load = current, list(records), None
        return RoundChange.PENDING

    def switch_round(self) -> Any:
        """Write against the pending round from now on; returns the round written in before."""
        if self.pending_round is None:
            raise TransitionError("no round switch is pending")
        old = self.round
        self.round, self.records = self.pending_round, self.pending_records
        self.pending_round, self.pending_records, self.pending_load = None, [], None
        return old

    def new_example(self, author_id: uuid.UUID, *, after_submit: bool) -> DraftRef:
        """A fresh example in the open round; after a submit it keeps the context written against."""
        if self.round is None or self.task_code is None:
            raise TransitionError("a new example needs an open round")
        context_id = self.draft.context_id if (after_submit and self.draft) else None
        self.draft = DraftRef(self.task_code, self.round.number, author_id, context_id=context_id)
        self._record_session(self.draft)
        self.pending_submit, self.frozen_outputs = False, None
        return self.draft

    def writing_restarted(self) -> None:
        """The new example is on screen: its writing time starts from nothing."""
        self.clock.restart()

    def writing_resumed(self, time_spent_ms: int) -> None:
        """A restored draft is on screen: its writing time goes on from what it had."""
        self.clock.active_s = time_spent_ms / 1000

    def writer_renamed(self, author_id: uuid.UUID) -> DraftRef | None:
        """The writer's profile id changed: the draft on screen is theirs. Returns the draft when
        it changed hands (its stored copy must follow)."""
        if self.draft is None or self.draft.author_id == author_id:
            return None
        self.draft.author_id = author_id
        return self.draft

    def use_draft(self, draft: DraftRef | None) -> None:
        """The example on screen is now ``draft`` (a context, a prompt, a restored or perturbed
        example; None: no draft)."""
        self.draft = draft
        if draft is not None:
            self._record_session(draft)

    def drafts_offered(self, drafts: Sequence[Any]) -> None:
        self.offered = list(drafts)

    def take_offered(self) -> Any:
        """The newest draft offered, as (draft, round number), taken off the offer (None when none is left)."""
        return self.offered.pop(0) if self.offered else None

    def text_changed(self, now: float) -> None:
        """The text, label or answer changed at ``now`` (monotonic seconds)."""
        self.clock.tick(now)

    def perturbation_started(self, original: Original) -> None:
        self.original = original

    def perturbation_ended(self) -> None:
        self.original = None

    def explaining(self, target: str | None) -> bool:
        """An attribution is asked for toward ``target``. During a perturbation the original is
        explained first (returns True), then the edit toward the same label."""
        if self.original is None:
            self.explaining_original = False
            return False
        self.original.target = target
        self.original.attribution = self.original.edited_attribution = None
        self.explaining_original = True
        return True

    def original_attributed(self, scores: list[tuple[str, float]]) -> None:
        """The original's word attributions arrived; the edit's are asked for next."""
        if self.original is None or not self.explaining_original:
            raise TransitionError("no attribution of an original was awaited")
        self.original.attribution = scores
        self.explaining_original = False

    def edit_attributed(self, scores: list[tuple[str, float]], units: str) -> None:
        """The edited text's word attributions arrived (on the original's scale)."""
        if self.original is not None:
            self.original.edited_attribution, self.original.units = scores, units

    def pin(self, pinned: bool) -> None:
        """Whether the heatmap follows the text."""
        self.pinned = pinned

    def can_predict(self) -> bool:
        return bool(self.records) and self.loaded is not None

    def prediction_requested(self, request_id: int, inputs: Mapping[str, str]) -> None:
        """A prediction of ``inputs`` was asked for; only the newest request counts."""
        if not self.can_predict():
            raise TransitionError("no target model is loaded")
        self._requested = (request_id, dict(inputs))

    def prediction_cleared(self) -> None:
        """Nothing is written: no prediction is shown, and none is awaited."""
        self.last_prediction, self.prediction_inputs, self._requested = None, None, None

    def prediction_arrived(self, result: Any) -> bool:
        """A prediction arrived; returns whether it is current (for the newest request of the loaded
        target). A stale one changes nothing."""
        if self.definition is None or self.loaded is None or self._requested is None:
            return False
        request_id, inputs = self._requested
        if result.request_id != request_id:
            return False
        self.last_prediction, self.prediction_inputs = result, inputs
        return True

    def outputs_judged(self, outputs: Sequence[ModelOutput]) -> None:
        """The current prediction as the outputs an example stores (one per target model)."""
        self.last_outputs = list(outputs)

    def prediction_failed(self) -> None:
        self.pending_submit = False

    def matches(self, inputs: Mapping[str, str]) -> bool:
        """Whether the last prediction is for exactly ``inputs``."""
        return self.prediction_inputs is not None and self.prediction_inputs == dict(inputs)

    def moved_to_round(self, number: int) -> None:
        """The draft was moved to round ``number``: the prediction shown is no longer its target's."""
        if self.draft is not None:
            self.draft.round_number = number
            self._record_session(self.draft)  # it is written on in this round's session now
        self.last_prediction, self.prediction_inputs, self.last_outputs = None, None, []

    def submit_requested(self, inputs: Mapping[str, str]) -> Submit:
        """The writer asks to submit ``inputs`` (already checked for content): freeze the outputs
        for exactly this text, or say what it waits for."""
        if self.round is None:
            raise TransitionError("nothing can be submitted without an open round")
        if self.pending_round is not None:
            return Submit.WAIT_ROUND
        if self.draft is not None and self.draft.round_number != self.round.number:
            return Submit.MOVE
        if self.records:
            if self.loaded is None:
                return Submit.NOT_LOADED
            if not self.matches(inputs):
                self.pending_submit = True
                return Submit.WAIT_PREDICTION
        self.frozen_outputs = list(self.last_outputs) if self.records else []
        return Submit.READY

    def take_pending_submit(self) -> bool:
        """Whether a submit waited for the prediction that just arrived (and no longer waits)."""
        waiting, self.pending_submit = self.pending_submit, False
        return waiting

    def submitted(self) -> None:
        """The example was stored: the pair (if any) is done; a new example follows."""
        self.original = None

    # The writing assistant ------------------------------------------------------------------

    def writing_session_began(self, writing: WritingSession) -> None:
        """The writer's session in a round began (its number and arm were looked up): the example
        on screen, if written in that round, records it."""
        self.writing = writing
        if self.draft is not None:
            self._record_session(self.draft)

    @property
    def assistant_on(self) -> bool:
        """Whether suggestions are offered for the example on screen (its session's arm is on)."""
        writing = self.writing
        return (writing is not None and writing.assisted and self.round is not None
                and writing.round_id == self.round.id and self.draft is not None
                and self.draft.round_number == self.round.number)

    def suggestion_applied(self, generator: str, edit_type: str, text: str) -> Assistance | None:
        """The writer put a suggestion into the editor. Returns the record it replaces, for undo
        (``assistance_restored``)."""
        if not self.assistant_on or self.draft is None:
            raise TransitionError("suggestions are not offered in this session")
        previous = self.draft.assistance
        base = previous or Assistance()
        self.draft.assistance = replace(base, applied=True, generator=str(generator), edit_type=edit_type,
                                        applied_text=text, edit_distance=None)
        return previous

    def assistance_restored(self, previous: Assistance | None) -> None:
        """An applied suggestion was undone: the record is what it was before."""
        if self.draft is not None:
            self.draft.assistance = previous

    def _record_session(self, draft: DraftRef) -> None:
        """A draft of the session's round records the session's arm, unless a suggestion was
        already applied to it (in an earlier session, whose arm it keeps)."""
        writing, current = self.writing, draft.assistance
        if writing is None or self.round is None or writing.round_id != self.round.id:
            return
        if draft.round_number != self.round.number or (current is not None and current.applied):
            return
        draft.assistance = writing.assistance()

    def _forget_target(self) -> None:
        self.loaded = None
        self.last_prediction, self.prediction_inputs, self._requested = None, None, None
        self.last_outputs = []
        self.pending_submit = False
