"""Training data from the desk: which examples a new model learns from, the held-out split, and
de-duplication, each rule checked on a hand-built desk."""

from __future__ import annotations

import pytest

from app.core.next_round.training_data import TrainingDataError, normalised, training_set
from app.core.tasks.splits import is_held_out
from local_models.train import LabelledData
from tests.conftest import hate_content, hate_output


@pytest.fixture
def make(desk, people, target_model):
    """Submit an example; ``decide`` is None (undecided), a label the lead settles on, or "flagged"."""

    def create(text, label="hate", *, decide=None, round_number=None, origin=None, perturbation_of=None):
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(text, label),
                                       [hate_output(target_model, "not hate")], round_number=round_number,
                                       origin=origin, perturbation_of=perturbation_of)
        if decide == "flagged":
            desk.validation.validate(example.id, people.lead.id, "flagged", reason="not a real example", mode="lead")
        elif decide == label:
            desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
        elif decide is not None:
            desk.validation.validate(example.id, people.lead.id, "incorrect", corrected_label=decide,
                                     reason="the label is wrong", mode="lead")
        return example

    return create


def placed(data):
    """id -> (label, split) of every example the set takes."""
    return {**{e.id: (e.label, "train") for e in data.train}, **{e.id: (e.label, "held_out") for e in data.held_out}}


def test_which_examples_are_taken_and_with_which_label(desk, people, make):
    correct = make("they all belong in jail", "hate")
    for validator in (people.val1, people.val2, people.val3):
        desk.validation.validate(correct.id, validator.id, "correct")
    corrected = make("what a lovely morning", "hate")
    for validator in (people.val1, people.val2, people.val3):
        desk.validation.validate(corrected.id, validator.id, "incorrect", corrected_label="not hate", reason="kind")
    adjudicated = make("go back where you came from", "not hate")
    desk.validation.validate(adjudicated.id, people.val1.id, "correct")
    desk.validation.validate(adjudicated.id, people.lead.id, "incorrect", corrected_label="hate",
                             reason="it tells people to leave", mode="lead")
    retracted = make("retracted text", decide="hate")
    desk.examples.retract(retracted.id, people.author.id)
    desk.examples.start_draft(people.author.id, "hate_speech", content=hate_content("a draft", "hate"))
    flagged_by_author = make("flagged by its author")
    desk.examples.flag(flagged_by_author.id, people.author.id, "unsure about this one")
    flagged_by_validator = make("flagged by a validator")
    desk.validation.validate(flagged_by_validator.id, people.val1.id, "flagged", reason="unclear")
    decided_flagged = make("decided as flagged", decide="flagged")
    undecided = make("nobody looked at this yet", "not hate")
    in_progress = make("one verdict so far", "hate")
    desk.validation.validate(in_progress.id, people.val1.id, "correct")

    data = training_set(desk, "hate_speech", [1])
    taken = placed(data)
    assert {k: v[0] for k, v in taken.items()} == {
        str(correct.id): "hate", str(corrected.id): "not hate", str(adjudicated.id): "hate"}
    assert data.excluded == {"decided_flagged": 1, "draft": 1, "flagged_undecided": 2, "retracted": 1, "undecided": 2}
    assert str(retracted.id) not in taken and str(decided_flagged.id) not in taken
    for example_id, (_label, split) in taken.items():
        assert (split == "held_out") == is_held_out(__import__("uuid").UUID(example_id))

    opted_in = training_set(desk, "hate_speech", [1], include_undecided=True)
    taken = placed(opted_in)
    assert taken[str(undecided.id)][0] == "not hate" and taken[str(in_progress.id)][0] == "hate"
    assert opted_in.excluded.get("undecided") is None and opted_in.summary()["include_undecided"] is True
    assert opted_in.summary()["per_source"] == {"decided": 3, "undecided": 2}
    assert str(flagged_by_validator.id) not in taken and str(flagged_by_author.id) not in taken


def test_rounds_are_taken_only_when_chosen(desk, people, make, target_model):
    first = make("round one text", decide="hate")
    desk.rounds.open_next("hate_speech", people.lead.id, [target_model.id])
    second = make("round two text", decide="not hate", round_number=2)
    assert set(placed(training_set(desk, "hate_speech", [1]))) == {str(first.id)}
    assert set(placed(training_set(desk, "hate_speech", [2]))) == {str(second.id)}
    both = training_set(desk, "hate_speech", [1, 2])
    assert set(placed(both)) == {str(first.id), str(second.id)}
    assert sum(sum(c.values()) for c in both.summary()["per_round"].values()) == 2
    with pytest.raises(TrainingDataError, match="has no round 3 .*its rounds: 1, 2"):
        training_set(desk, "hate_speech", [3])


def test_imported_data_sets_only_when_named(desk, make):
    own = make("written on this desk", decide="hate")
    imported = make("from a file", "not hate", origin={"kind": "import", "format": "anli", "file": "dev.jsonl"})
    data = training_set(desk, "hate_speech", [1])
    assert set(placed(data)) == {str(own.id)} and data.excluded == {"imported_not_named": 1}
    named = training_set(desk, "hate_speech", [1], imported=["anli"])
    assert placed(named)[str(imported.id)][0] == "not hate"  # its own gold label
    assert named.summary()["per_source"] == {"decided": 1, "imported": 1}
    with pytest.raises(TrainingDataError, match="No imported data set named snli"):
        training_set(desk, "hate_speech", [1], imported=["snli"])


def _held_out_one(make, text):
    for attempt in range(300):  # about one in ten ids is held out
        example = make(f"{text} {attempt}", decide="hate")
        if is_held_out(example.id):
            return example
    raise AssertionError("no held-out example in 300 tries")


def _trained_one(desk, people, make, text, label="hate"):
    """An example of ``text`` that is trained on (held-out tries are retracted)."""
    while is_held_out((example := make(text, label, decide=label)).id):
        desk.examples.retract(example.id, people.author.id)
    return example


def test_both_halves_of_a_pair_fall_on_one_side(desk, make):
    pairs = []
    for i in range(40):
        original = make(f"original sentence number {i}", decide="hate")
        edited = make(f"edited sentence number {i}", "not hate", decide="not hate", perturbation_of=original.id)
        pairs.append((original, edited))
    held = _held_out_one(make, "another original")
    pairs.append((held, make("its perturbation", "not hate", decide="not hate", perturbation_of=held.id)))
    taken = placed(training_set(desk, "hate_speech", [1]))
    for original, edited in pairs:
        assert taken[str(original.id)][1] == taken[str(edited.id)][1]
    assert taken[str(pairs[-1][1].id)][1] == "held_out"


def test_duplicates_are_kept_once_and_conflicts_reported(desk, people, make):
    first, again = (_trained_one(desk, people, make, text) for text in ("Send them  all home", "send them all HOME"))
    conflict_a = make("they are animals", decide="hate")
    conflict_b = make("They are animals", "not hate", decide="not hate")
    held = _held_out_one(make, "held out text")
    copy_of_held = make(held.text.upper(), decide="hate")
    while is_held_out(copy_of_held.id):  # the copy must be one that would be trained on
        desk.examples.retract(copy_of_held.id, people.author.id)
        copy_of_held = make(held.text.upper(), decide="hate")
    base = LabelledData(["send them all home", "THEY are animals", "a base sentence", "A base  sentence", "base only"],
                        [0, 1, 1, 0, 1], ["hate", "not hate"])

    data = training_set(desk, "hate_speech", [1], base=base)
    assert normalised("Send them  all home") == normalised("send them all HOME")
    train_ids = data.ids("train")
    assert str(first.id) in train_ids and str(again.id) not in train_ids
    assert str(copy_of_held.id) not in train_ids and str(held.id) in data.ids("held_out")
    assert not {str(conflict_a.id), str(conflict_b.id)} & set(train_ids)
    assert data.ids("base") == ["base:4"]  # duplicates of round text, a conflict inside the base data, a conflict
    conflicts = {c.text.casefold(): dict(c.members) for c in data.conflicts}
    assert conflicts["they are animals"] == {str(conflict_a.id): "hate", str(conflict_b.id): "not hate",
                                             "base:1": "not hate"}
    assert conflicts["a base sentence"] == {"base:2": "not hate", "base:3": "hate"}
    dropped = {d.id: d.kept for d in data.duplicates}
    assert dropped[str(again.id)] == str(first.id) and dropped["base:0"] == str(first.id)
    assert dropped[str(copy_of_held.id)] == str(held.id)
    assert data.summary()["conflicts"] == 2 and len(data.hashes()) == len(train_ids) + len(data.held_out) + 1


def test_bad_requests_are_refused_clearly(desk):
    with pytest.raises(TrainingDataError, match="labels offensive are not labels of the task"):
        training_set(desk, "hate_speech", [1], base=LabelledData(["x", "y"], [0, 1], ["hate", "offensive"]))
    with pytest.raises(TrainingDataError, match="at least one round"):
        training_set(desk, "hate_speech", [])
    refused = [code for code in desk.catalog.tasks if desk.catalog.tasks[code].is_extractive]
    assert refused
    for code in refused:
        with pytest.raises(TrainingDataError, match="extractive QA: .* not the span head"):
            training_set(desk, code, [1])
