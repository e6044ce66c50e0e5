"""Lead review: final verdicts, adjudication of disagreements, accepting and returning work."""

import pytest

from app.core.errors import ValidationRuleError
from app.core.services.lead import NotALead
from app.core.services.review import ExampleFilter
from tests.conftest import hate_content, hate_output
from tests.validation_sim import import_anli, simulate


def test_adjudication_overrides_a_split_vote(desk, people, submit):
    """Hand-computed: two 'correct', one 'incorrect → not hate' (threshold 3, so undecided with one
    disagreement); the lead says 'incorrect → not hate', which decides it."""
    example = submit()
    desk.validation.validate(example.id, people.val1.id, "correct")
    desk.validation.validate(example.id, people.val2.id, "correct")
    desk.validation.validate(example.id, people.val3.id, "incorrect", corrected_label="not hate", reason="irony")
    state = desk.examples.get(example.id)
    assert (state.validation_state, state.validation_count, state.disagreement_count) == ("in_progress", 3, 1)
    desk.lead.adjudicate(example.id, people.lead.id, "incorrect", corrected_label="not hate", reason="it is irony")
    state = desk.examples.get(example.id)
    assert (state.validation_state, state.decided_verdict, state.decided_label) == ("decided", "incorrect", "not hate")
    assert (state.validation_count, state.disagreement_count) == (4, 1)  # the lead is not a peer
    assert desk.validation.queue(desk.people.create("Late Peer").id) == []  # decided: out of every queue


def test_a_lead_verdict_decides_an_example_that_peers_already_decided(desk, people, submit):
    example = submit()
    for peer in (people.val1, people.val2, people.val3):
        desk.validation.validate(example.id, peer.id, "correct")
    assert desk.examples.get(example.id).decided_verdict == "correct"
    desk.lead.adjudicate(example.id, people.lead.id, "flagged", reason="doxxing a real person")
    state = desk.examples.get(example.id)
    assert (state.decided_verdict, state.decided_label, state.flag_count) == ("flagged", None, 1)
    with pytest.raises(ValidationRuleError, match="already validated"):
        desk.lead.adjudicate(example.id, people.lead.id, "correct")


def test_only_leads_and_owners_adjudicate_accept_or_return(desk, people, submit):
    example = submit()
    with pytest.raises(NotALead, match="only team leads and owners"):
        desk.lead.adjudicate(example.id, people.val1.id, "correct")
    with pytest.raises(NotALead):
        desk.lead.accept_work(people.val1.id, people.author.id)
    with pytest.raises(NotALead):
        desk.lead.return_examples(people.val1.id, [example.id], "fix it")
    owner = desk.people.create("Olu Owner", "owner")
    assert desk.lead.is_lead(owner.id) and not desk.lead.is_lead(people.val1.id)
    assert desk.lead.return_examples(owner.id, [example.id], "fix it") == 1


def test_accepting_work_takes_the_authors_decided_examples_only(desk, people, submit):
    decided = submit("decided")
    open_ = submit("still open")
    someone_elses = submit("by another", author=people.val3)
    for peer in (people.val1, people.val2, people.val3):
        desk.validation.validate(decided.id, peer.id, "correct")
    desk.validation.validate(open_.id, people.val1.id, "correct")
    for peer in (people.val1, people.val2, people.author):
        desk.validation.validate(someone_elses.id, peer.id, "correct")
    assert desk.lead.accept_work(people.lead.id, people.author.id, comment="good round") == 1
    states = {e: desk.examples.get(e).review_state for e in (decided.id, open_.id, someone_elses.id)}
    assert states == {decided.id: "accepted", open_.id: None, someone_elses.id: None}
    assert desk.lead.accept_work(people.lead.id, people.author.id) == 0  # nothing new to accept
    # accepting chosen examples works whether or not they are decided
    assert desk.lead.accept_work(people.lead.id, people.author.id, example_ids=[open_.id]) == 1
    history = desk.lead.history(decided.id)
    assert [(r.lead, r.action, r.comment) for r in history] == [("Lee Lead", "accepted", "good round")]
    with pytest.raises(ValidationRuleError, match="own work"):
        desk.lead.accept_work(people.lead.id, people.lead.id)


def test_a_returned_example_reaches_its_authors_history_with_the_comment(desk, people, submit):
    first, second = submit("first"), submit("second")
    with pytest.raises(ValidationRuleError, match="needs a comment"):
        desk.lead.return_examples(people.lead.id, [first.id], "   ")
    assert desk.examples.get(first.id).review_state is None  # nothing stored by the refusal
    assert desk.lead.return_examples(people.lead.id, [first.id], "Name the target group.") == 1
    returned = desk.lead.returned_to(people.author.id)
    assert [(e.id, e.review_comment) for e in returned] == [(first.id, "Name the target group.")]
    mine = ExampleFilter(author_ids=[people.author.id], review_states=["returned"])
    rows = desk.review.rows(mine)
    assert [(r.id, r.review_state, r.review_comment) for r in rows] == [(first.id, "returned", "Name the target group.")]
    not_reviewed = desk.review.rows(ExampleFilter(author_ids=[people.author.id], review_states=[None]))
    assert [r.id for r in not_reviewed] == [second.id]
    # accepted later: the latest review wins, the history keeps both
    desk.lead.accept_work(people.lead.id, people.author.id, example_ids=[first.id])
    assert desk.lead.returned_to(people.author.id) == []
    assert [r.action for r in desk.lead.history(first.id)] == ["returned", "accepted"]


def test_simulated_anli_validators_leave_disagreements_for_the_lead(desk):
    assert import_anli(desk) == 1000
    sim = simulate(desk, examples=40)
    assert sim.verdicts > 40
    split = desk.review.rows(ExampleFilter(min_disagreements=1), limit=1000)
    assert split, "the simulation should leave disagreements"
    undecided = [r for r in split if r.validation_state != "decided"]
    for row in undecided:
        desk.lead.adjudicate(row.id, sim.lead.id, "correct")
    assert all(desk.examples.get(r.id).validation_state == "decided" for r in undecided)
    # counts the filter sees match the examples' own verdicts, computed by hand
    for row in split:
        verdicts = [(v.verdict, v.corrected_label) for v in desk.validation.validations_of(row.id) if v.mode == "peer"]
        majority = max(verdicts.count(v) for v in set(verdicts))
        assert row.disagreement_count == len(verdicts) - majority >= 1


def test_review_figures_match_a_hand_count(desk, people, submit):
    """Four examples: one split (1 disagreement), one flagged twice and returned, one decided and
    accepted, one untouched and not fooled."""
    split, flagged, decided, _quiet = submit("a"), submit("b"), submit("c"), submit("d", model_label="hate")
    desk.validation.validate(split.id, people.val1.id, "correct")
    desk.validation.validate(split.id, people.val2.id, "incorrect", corrected_label="not hate", reason="r")
    desk.validation.validate(flagged.id, people.val1.id, "flagged", reason="r")
    desk.validation.validate(flagged.id, people.val2.id, "flagged", reason="r")
    for peer in (people.val1, people.val2, people.val3):
        desk.validation.validate(decided.id, peer.id, "correct")
    desk.lead.return_examples(people.lead.id, [flagged.id], "fix")
    desk.lead.accept_work(people.lead.id, people.author.id)
    assert desk.review.summary(ExampleFilter()) == {
        "examples": 4, "disagreements": 1, "flagged": 1, "decided": 1, "unvalidated": 1, "fooled": 3,
        "returned": 1, "accepted": 1, "objected": 2}  # objected: split (incorrect) and flagged
    assert desk.review.summary(ExampleFilter(min_flags=1))["examples"] == 1


def test_sorting_by_round_pages_like_a_plain_sort(desk, people, target_model):
    """Rows sorted by round are served round by round; every page must match the order that a
    plain ORDER BY round number, rowid gives."""
    import random

    from app.core.services.review import SORT_KEYS

    task = desk.tasks.task("hate_speech")
    rng = random.Random(3)
    numbers = [1, 2, 3]
    for number in numbers[1:]:
        desk.tasks.get_or_create_round("hate_speech", number)
    for i in range(45):
        desk.examples.create(people.author.id, "hate_speech", hate_content(f"t{i}", "hate"),
                             [hate_output(target_model, "not hate")], round_number=rng.choice(numbers))
    flt = ExampleFilter(task_id=task.id)
    for descending in (True, False):
        expected = [r.id for r in desk.review._page(flt, SORT_KEYS["round"], descending, 0, 1000)]
        assert [r.id for r in desk.review.rows(flt, sort="round", descending=descending, limit=1000)] == expected
        paged = []
        for offset in range(0, 45, 7):
            paged += [r.id for r in desk.review.rows(flt, sort="round", descending=descending, offset=offset, limit=7)]
        assert paged == expected


def test_the_agreement_threshold_is_a_leads_choice_kept_on_the_desk(desk, data_dir, people, submit):
    from app.core.desk import Desk
    from app.core.services.validation import threshold_warning

    example = submit()
    desk.validation.validate(example.id, people.val1.id, "correct")
    with pytest.raises(NotALead):
        desk.set_task_settings(people.val2.id, "hate_speech", agreement_threshold=1)
    assert desk.examples.get(example.id).validation_state == "in_progress"
    assert desk.set_task_settings(people.lead.id, "hate_speech", agreement_threshold=1).decided == 1
    assert desk.examples.get(example.id).decided_verdict == "correct"
    with Desk(data_dir) as reopened:  # kept in the desk's database
        assert reopened.tasks.agreement_threshold(reopened.tasks.task("hate_speech").id) == 1
    stored = desk.set_task_settings(people.lead.id, "hate_speech", agreement_threshold=3)  # the task's own again
    assert stored.settings.agreement_threshold is None  # no override kept: the task's own number is in force
    assert desk.examples.get(example.id).validation_state == "in_progress"
    assert threshold_warning(3, 4) is None and "at most 1 can validate" in threshold_warning(3, 2)


def test_returned_work_leaves_the_authors_list_when_retracted(desk, people, submit):
    first, second = submit("first"), submit("second")
    desk.lead.return_examples(people.lead.id, [first.id, second.id], "Name the target group.")
    assert desk.lead.returned_count(people.author.id) == 2
    desk.examples.retract(first.id, people.author.id, "rewriting it")
    assert [e.id for e in desk.lead.returned_to(people.author.id)] == [second.id]
    assert desk.lead.returned_count(people.author.id) == 1
    objected = desk.review.rows(ExampleFilter(objected=True))
    assert objected == []  # nobody said incorrect or flagged
    # resubmitted as a revision: no longer waiting either
    desk.examples.create(people.author.id, "hate_speech", hate_content("second, fixed", "hate"),
                         [hate_output(desk.models.all()[0], "not hate")],
                         origin={"kind": "revision", "of": str(second.id)})
    assert desk.lead.returned_to(people.author.id) == [] and desk.lead.returned_count(people.author.id) == 0


def test_a_desk_from_before_objection_counts_gets_them_on_upgrade(data_dir, desk, people, submit):
    import sqlite3

    from app.core import paths
    from app.core.desk import Desk

    objected, quiet = submit("a"), submit("b")
    desk.validation.validate(objected.id, people.val1.id, "incorrect", corrected_label="not hate", reason="r")
    desk.validation.validate(objected.id, people.val2.id, "flagged", reason="r")
    desk.validation.validate(quiet.id, people.val1.id, "correct")
    desk.close()
    with sqlite3.connect(paths.database_path(data_dir)) as raw:  # as revision 0009 left it
        for index in ("ix_examples_objection_count", "ix_examples_task_objections"):
            raw.execute(f"DROP INDEX {index}")
        raw.execute("ALTER TABLE examples DROP COLUMN objection_count")
        raw.execute("DROP TABLE leaderboard_cells")  # revision 0012's
        for trigger in ("example_changes_insert", "example_changes_update", "example_changes_delete"):
            raw.execute(f"DROP TRIGGER {trigger}")  # revision 0013's
        raw.execute("DROP TABLE example_signatures")
        raw.execute("DROP TABLE example_changes")
        raw.execute("ALTER TABLE examples DROP COLUMN assistance")  # revision 0014's
        raw.execute("DROP TABLE exposure_spans")  # revision 0015's
        raw.execute("DROP TABLE wellbeing_breaks")
        raw.execute("UPDATE alembic_version SET version_num = '0009'")
    with Desk(data_dir) as upgraded:
        assert [r.id for r in upgraded.review.rows(ExampleFilter(objected=True))] == [objected.id]
        assert upgraded.examples.get(objected.id).objection_count == 2
