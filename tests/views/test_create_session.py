"""The Create page's session, without Qt: writing time, stale predictions, a submit waiting for
the prediction of the text on screen, frozen outputs, and a round switch waiting for its target."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from app.core.domain import ModelOutput
from app.core.tasks.definition import builtin_tasks_dir, load_task_file
from app.views.create_session import (
    CreateSession,
    LoadOutcome,
    Original,
    RoundChange,
    Submit,
    TransitionError,
)

HATE = load_task_file(builtin_tasks_dir() / "hate_speech.yaml")
WRITER = uuid.uuid4()


@dataclass
class Round:
    number: int
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class Record:
    name: str
    id: uuid.UUID = field(default_factory=uuid.uuid4)


@dataclass
class Loaded:
    request_id: int


@dataclass
class Result:
    request_id: int


def output(label: str) -> ModelOutput:
    return ModelOutput(uuid.uuid4(), "sha", label, {label: 1.0})


def ready(records=1) -> CreateSession:
    """A session on round 1 of the hate task, its target loaded, a fresh example on screen."""
    session = CreateSession()
    session.open_task("hate", HATE, Round(1), [Record(f"m{i}") for i in range(records)])
    session.models_requested()
    assert session.models_loaded(Loaded(1)) is LoadOutcome.LOADED
    session.new_example(WRITER, after_submit=False)
    session.writing_restarted()
    return session


def predicted(session: CreateSession, request_id: int, text: str, label: str = "not hate") -> bool:
    session.prediction_requested(request_id, {"text": text})
    current = session.prediction_arrived(Result(request_id))
    if current:
        session.outputs_judged([output(label)])
    return current


def test_writing_time_counts_the_gaps_between_changes_but_not_idle_pauses():
    session = ready()
    for now in (100.0, 101.5, 103.0):  # typing: 3 s
        session.text_changed(now)
    session.text_changed(103.0 + 600)  # back from a long break: the break does not count
    session.text_changed(703.0 + 2)
    assert session.clock.ms == 5000
    session.new_example(WRITER, after_submit=True)
    session.writing_restarted()
    session.text_changed(800.0)
    assert session.clock.ms == 0  # a new example starts from nothing
    session.writing_resumed(42_000)  # a restored draft goes on from its time
    session.text_changed(801.0)
    assert session.clock.ms == 43_000


def test_a_prediction_for_an_older_request_or_an_unloaded_target_is_dropped():
    session = ready()
    session.prediction_requested(1, {"text": "old"})
    session.prediction_requested(2, {"text": "new"})
    assert not session.prediction_arrived(Result(1))  # an older request: stale
    assert session.last_prediction is None and not session.matches({"text": "old"})
    assert session.prediction_arrived(Result(2))
    assert session.matches({"text": "new"}) and not session.matches({"text": "newer"})
    session.models_requested()  # a new target: the old one judges nothing more
    assert session.last_prediction is None and session.last_outputs == []
    assert not session.prediction_arrived(Result(2))
    with pytest.raises(TransitionError):
        session.prediction_requested(3, {"text": "x"})  # nothing loaded to ask


def test_submit_waits_for_the_prediction_of_the_text_on_screen_and_freezes_its_outputs():
    session = ready()
    assert predicted(session, 1, "old banana", "hate")
    assert session.submit_requested({"text": "old"}) is Submit.WAIT_PREDICTION  # the text changed since
    assert session.pending_submit and session.frozen_outputs is None
    assert predicted(session, 2, "old", "not hate")
    assert session.take_pending_submit() and not session.take_pending_submit()
    assert session.submit_requested({"text": "old"}) is Submit.READY
    assert [o.label for o in session.frozen_outputs] == ["not hate"]
    predicted(session, 3, "old!", "hate")  # typing after the form opened does not change what is stored
    assert [o.label for o in session.frozen_outputs] == ["not hate"]
    session.new_example(WRITER, after_submit=True)
    assert session.frozen_outputs is None and not session.pending_submit


def test_submit_says_what_it_waits_for():
    session = CreateSession()
    with pytest.raises(TransitionError):
        session.submit_requested({"text": "x"})  # no task, no round
    session.open_task("hate", HATE, Round(1), [Record("m")])
    session.new_example(WRITER, after_submit=False)
    assert session.submit_requested({"text": "x"}) is Submit.NOT_LOADED
    no_target = ready(records=0)
    assert no_target.submit_requested({"text": "x"}) is Submit.READY and no_target.frozen_outputs == []
    session = ready()
    session.prediction_requested(1, {"text": "x"})
    session.load_failed()
    assert session.submit_requested({"text": "x"}) is Submit.NOT_LOADED and not session.pending_submit


def test_a_new_round_waits_for_its_target_before_the_switch():
    session = ready()
    predicted(session, 1, "text")
    assert session.round_noticed(session.round, session.records) is RoundChange.SAME
    second, targets = Round(2), [Record("r2")]
    assert session.round_noticed(second, targets) is RoundChange.PENDING
    assert session.loaded is None and session.last_prediction is None  # never judged by the old target
    assert session.round_noticed(second, targets) is RoundChange.SAME  # already awaited
    assert session.submit_requested({"text": "text"}) is Submit.WAIT_ROUND
    session.models_requested(7)
    assert session.models_loaded(Loaded(6)) is LoadOutcome.STALE  # the old round's models
    assert session.models_loaded(Loaded(7)) is LoadOutcome.SWITCH
    old = session.switch_round()
    assert old.number == 1 and session.round is second and session.records == targets
    assert session.pending_round is None
    with pytest.raises(TransitionError):
        session.switch_round()  # nothing pending
    assert session.draft.round_number == 1
    assert session.submit_requested({"text": "text"}) is Submit.MOVE  # written in round 1
    session.moved_to_round(2)
    assert session.draft.round_number == 2


def test_a_closed_round_and_a_restart():
    session = ready()
    assert session.round_noticed(None, []) is RoundChange.CLOSED
    assert session.loaded is None and session.pending_round is None
    empty = CreateSession()
    empty.open_task("hate", HATE, None, [])
    assert empty.round_noticed(None, []) is RoundChange.SAME
    assert empty.round_noticed(Round(1), []) is RoundChange.RESTART
    with pytest.raises(TransitionError):
        empty.new_example(WRITER, after_submit=False)


def test_after_a_submit_the_context_stays_and_a_perturbation_ends():
    session = ready()
    context = uuid.uuid4()
    session.use_draft(session.draft.__class__("hate", 1, WRITER, context_id=context))
    session.perturbation_started(Original(uuid.uuid4(), "old text", "hate", None))
    session.submitted()
    assert session.original is None
    assert session.new_example(WRITER, after_submit=True).context_id == context
    assert session.new_example(WRITER, after_submit=False).context_id is None


def test_a_perturbation_is_explained_original_first():
    session = ready()
    assert not session.explaining("hate")  # no original: the text on screen directly
    session.perturbation_started(Original(uuid.uuid4(), "old text", "hate", None))
    assert session.explaining("hate") and session.original.target == "hate"
    session.original_attributed([("old", 0.5), ("text", 0.1)])
    assert not session.explaining_original
    with pytest.raises(TransitionError):
        session.original_attributed([])  # the edit's answer is awaited, not the original's
    session.edit_attributed([("new", 0.2), ("text", 0.1)], "probability")
    assert session.original.edited_attribution == [("new", 0.2), ("text", 0.1)]


def test_a_renamed_writer_takes_the_draft_once():
    session = ready()
    other = uuid.uuid4()
    assert session.writer_renamed(other) is session.draft and session.draft.author_id == other
    assert session.writer_renamed(other) is None


def writing(session: CreateSession, arm: str | None, number: int = 1):
    from app.core.assist.types import AssistantMode
    from app.core.services.writing_sessions import WritingSession

    mode = {None: AssistantMode.OFF, "on": AssistantMode.ON}.get(arm, AssistantMode.AB)
    return WritingSession(session.round.id, WRITER, mode if arm != "off" else AssistantMode.AB, number, arm)


def test_every_example_records_its_sessions_arm_and_an_applied_suggestion_can_be_undone():
    from app.core.assist.types import Assistance

    session = ready()
    assert not session.assistant_on and session.draft.assistance is None  # the session is being looked up
    session.writing_session_began(writing(session, "on", 3))
    assert session.assistant_on and session.draft.assistance == Assistance(arm="on", session=3)
    previous = session.suggestion_applied("obfuscation", "leetspeak", "th3y")
    assert session.draft.assistance == Assistance(arm="on", session=3, applied=True, generator="obfuscation",
                                                  edit_type="leetspeak", applied_text="th3y")
    session.assistance_restored(previous)  # undo
    assert session.draft.assistance == Assistance(arm="on", session=3)
    session.new_example(WRITER, after_submit=True)
    assert session.draft.assistance == Assistance(arm="on", session=3)


def test_no_suggestion_is_applied_in_a_session_without_the_assistant():
    session = ready()
    session.writing_session_began(writing(session, "off", 2))
    assert not session.assistant_on and session.draft.assistance.arm == "off"
    with pytest.raises(TransitionError):
        session.suggestion_applied("rules", "negation", "not so")


def test_a_restored_draft_keeps_the_arm_its_suggestion_was_applied_under():
    from app.core.assist.types import Assistance
    from app.views.create_session import DraftRef

    session = ready()
    session.writing_session_began(writing(session, "off", 2))
    applied = Assistance(arm="on", session=1, applied=True, generator="rules", edit_type="negation",
                         applied_text="not so")
    session.use_draft(DraftRef("hate", 1, WRITER, assistance=applied, id=uuid.uuid4()))
    assert session.draft.assistance == applied
    session.use_draft(DraftRef("hate", 1, WRITER, assistance=Assistance(arm="on", session=1), id=uuid.uuid4()))
    assert session.draft.assistance == Assistance(arm="off", session=2)  # written on in this session
