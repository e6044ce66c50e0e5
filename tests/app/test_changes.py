"""Every store says what it changed: the change log tells each committed write's kinds of data."""

import threading

import pytest

from app.core.changes import Changes, Data
from app.core.errors import DynadeskError
from app.core.services.review import ExampleFilter
from app.core.storage.change_log import TABLE_DATA, ChangeLog, meta_data
from app.core.storage.models import Base
from tests.conftest import hate_content, hate_output


@pytest.fixture
def told(desk):
    """What the desk's change log tells, one entry a commit."""
    heard: list[Data] = []
    listener = lambda changes: heard.append(changes.data)  # noqa: E731
    desk.changes.subscribe(listener)
    yield heard
    desk.changes.unsubscribe(listener)


def test_every_table_is_a_kind_of_data():
    """A new table gets a kind here (or Data.NONE, said on purpose); else its writes are guessed at."""
    assert set(Base.metadata.tables) == set(TABLE_DATA)


def test_writing_a_draft_is_not_a_new_example_and_submitting_it_is(desk, people, target_model, told):
    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "still writing"})
    assert told == [Data.DRAFTS, Data.DRAFTS]  # the Data tab and the figures need not look again
    told.clear()
    desk.examples.submit(draft.id, [hate_output(target_model, "not hate")], hate_content("still writing", "hate"))
    assert len(told) == 1 and Data.EXAMPLES | Data.DRAFTS | Data.SYNC in told[0]  # no longer a draft; to be sent
    assert not told[0] & (Data.VALIDATIONS | Data.REVIEWS | Data.ROUNDS | Data.PEOPLE)


def test_a_verdict_a_return_and_a_retraction_each_say_what_they_touched(desk, people, submit, told):
    example = submit()
    told.clear()
    desk.validation.validate(example.id, people.val1.id, "correct")
    # the example's verdict summary moves with it: still a verdict, not an edited example
    assert Data.VALIDATIONS in told[-1] and not told[-1] & (Data.EXAMPLES | Data.REVIEWS | Data.ROUNDS | Data.PEOPLE)
    desk.lead.return_examples(people.lead.id, [example.id], "Name the target group.")
    assert Data.REVIEWS in told[-1] and not told[-1] & (Data.EXAMPLES | Data.VALIDATIONS)
    desk.examples.retract(example.id, people.author.id, "a duplicate")
    assert Data.EXAMPLES in told[-1] and not told[-1] & (Data.VALIDATIONS | Data.REVIEWS)


def test_lead_settings_rounds_and_people_are_their_own_kinds(desk, people, told):
    desk.set_task_settings(people.lead.id, "hate_speech", agreement_threshold=2)
    assert Data.TASK_SETTINGS in told[-1]
    desk.people.create("New Person", "annotator")
    assert told[-1] == Data.PEOPLE
    round_ = desk.tasks.round("hate_speech")
    desk.rounds.update(round_.id, people.lead.id, description="Harder this time")
    assert Data.ROUNDS in told[-1] and Data.EXAMPLES not in told[-1]


def test_switching_profile_is_told_once_and_only_when_it_switches(desk, people, told):
    desk.switch_person(people.val1.id)
    desk.switch_person(people.val1.id)
    assert told == [Data.PROFILE]


def test_a_refused_write_and_a_read_tell_nothing(desk, people, submit, told):
    example = submit()
    told.clear()
    with pytest.raises(DynadeskError):
        desk.validation.validate(example.id, people.author.id, "correct")  # nobody validates their own work
    with pytest.raises(DynadeskError):
        desk.lead.return_examples(people.lead.id, [example.id], "   ")  # a return needs a comment
    assert desk.review.count(ExampleFilter()) == 1
    with desk.db.write():
        pass  # a unit of work that changes no row
    assert told == []


def test_a_rolled_back_unit_of_work_tells_nothing_of_what_it_flushed(desk, told):
    from app.core.storage.models import Person

    with pytest.raises(RuntimeError):
        with desk.db.write() as session:
            session.add(Person(display_name="Never kept", role="annotator"))
            session.flush()
            raise RuntimeError("the write fails after its rows were flushed")
    assert told == []
    desk.people.create("Kept", "annotator")
    assert told == [Data.PEOPLE]  # nothing of the rolled-back write rides along


def test_a_failing_listener_does_not_fail_the_store(desk, people, submit, told, caplog):
    def broken(_changes):
        raise RuntimeError("a window already closed")

    desk.changes.subscribe(broken)
    example = submit()  # stored, and the other listeners are told
    assert desk.examples.get(example.id).text == "some text"
    assert Data.EXAMPLES in told[-1]
    assert "a listener of database changes failed" in caplog.text
    desk.changes.unsubscribe(broken)


def test_changes_from_another_thread_are_told_on_that_thread(desk, people):
    threads: list = []
    desk.changes.subscribe(lambda _changes: threads.append(threading.current_thread()))
    worker = threading.Thread(target=lambda: desk.people.create("From a worker", "annotator"))
    worker.start()
    worker.join()
    assert threads == [worker]


def test_a_batch_of_commits_is_told_once_at_its_end_even_when_it_fails(desk, people, submit, told):
    with desk.changes.batch():
        example = submit()
        with desk.changes.batch():  # nested: still the outer one's
            desk.validation.validate(example.id, people.val1.id, "correct")
        assert told == []  # nothing half-told
    assert len(told) == 1 and Data.EXAMPLES | Data.VALIDATIONS in told[0]
    told.clear()
    with pytest.raises(RuntimeError), desk.changes.batch():
        desk.people.create("Stored before the failure", "annotator")
        raise RuntimeError("the sync went offline")
    assert told == [Data.PEOPLE]  # committed, so told
    desk.people.create("After the batch", "annotator")
    assert told == [Data.PEOPLE, Data.PEOPLE]


def test_meta_keys_and_change_sets():
    assert meta_data("sync.cursor.abc") is Data.SYNC
    assert meta_data("wellbeing.team") is Data.WELLBEING
    assert meta_data("agreement_threshold.hate_speech") is Data.TASK_SETTINGS
    assert meta_data("a_setting_added_later.nli") is Data.TASK_SETTINGS  # unknown: looked at again, not missed
    both = Changes(Data.EXAMPLES) | Changes(Data.SYNC)
    assert both.touches(Data.SYNC | Data.PEOPLE) and not both.touches(Data.REVIEWS)
    assert str(both) == "examples, sync" and not Changes() and str(Changes()) == "nothing"
    ChangeLog().publish(Changes())  # nothing to tell, nobody to tell: no error
