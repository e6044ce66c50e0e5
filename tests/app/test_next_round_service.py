"""What the Next round dialog reads before training: per-round counts that agree with what training
takes (training_set), the choices it starts with (last use, else the target's training data), the
candidate folders, and a CSV's columns."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from app.core.errors import DynadeskError
from app.core.next_round.inputs import (
    csv_columns,
    format_label_map,
    last_manifest,
    new_candidate_dir,
    round_counts,
    train_defaults,
)
from app.core.next_round.training_data import training_set
from app.core.services.target_models import register_model
from tests.conftest import hate_content, hate_output


def test_round_counts_agree_with_what_training_takes(desk, people, submit, target_model):
    made = [submit(f"text number {i}", "hate" if i % 2 else "not hate") for i in range(30)]
    for example in made[:20]:
        desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
    desk.validation.validate(made[20].id, people.lead.id, "flagged", reason="spam", mode="lead")  # decided: flagged
    desk.examples.flag(made[21].id, people.author.id, "unsure")  # flagged by its author, undecided
    desk.examples.retract(made[22].id, people.author.id, "typo")
    desk.examples.start_draft(people.author.id, "hate_speech", content=None)  # a draft counts nowhere
    (one,) = round_counts(desk, "hate_speech")
    taken = training_set(desk, "hate_speech", [1])
    with_undecided = training_set(desk, "hate_speech", [1], include_undecided=True)
    assert (one.number, one.status) == (1, "open")
    assert one.decided == len(taken.train) + len(taken.held_out) == 20
    assert one.held_out == len(taken.held_out)
    assert one.undecided == len(with_undecided.train) + len(with_undecided.held_out) - one.decided == 7
    assert one.left_out == 2  # the decided-flagged one and the flagged-undecided one
    desk.rounds.open_next("hate_speech", people.lead.id, [target_model.id])
    assert [(c.number, c.status, c.decided) for c in round_counts(desk, "hate_speech")] == [(1, "closed", 20),
                                                                                          (2, "open", 0)]


def test_round_counts_hold_out_a_group_whole_as_training_does(desk, people, target_model):
    import uuid

    from app.core.tasks.splits import is_held_out

    group = next(g for g in (f"templ_id={n}" for n in range(100)) if is_held_out(uuid.uuid4(), group=g))
    for i in range(12):  # one template: all held out together (one by one, about one in ten would be)
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(f"case {i}", "hate"),
                                       [hate_output(target_model, "not hate")], origin={"group": group})
        desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")
    (one,) = round_counts(desk, "hate_speech")
    assert one.held_out == len(training_set(desk, "hate_speech", [1]).held_out) == 12


def test_defaults_come_from_the_last_candidate_then_from_the_targets_training_data(desk, hate_trigger_model_dir):
    target = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
    assert desk.rounds.adopt_first_models("hate_speech", [target.id])
    first = train_defaults(desk, "hate_speech")
    assert first.warm_target == "Trigger model" and first.start_from == "target" and first.rounds == ()
    trained_on = hate_trigger_model_dir.parent.parent / "hate-trigger.csv"
    assert first.base is not None and first.base.path == str(trained_on)  # still where it was trained from
    assert (first.base.text_column, first.base.label_column) == ("sentence", "kind")
    assert "hate-trigger.csv" in first.base.source and "choose" not in first.base.source

    older = new_candidate_dir(desk.root, "hate_speech", datetime(2026, 1, 1))
    older.mkdir(parents=True)
    options = {"base_data": {"path": "/data/davidson.csv", "text_column": "tweet", "label_column": "class",
                             "label_map": {"0": "hate", "1": "not hate"}, "html_unescape": True},
               "start_from": "base", "round_weight": "12", "include_undecided": True}
    manifest = {"format": "dynadesk-training-manifest", "format_version": 1, "task": "hate_speech",
                "rounds": [1], "options": options}
    (older / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (new_candidate_dir(desk.root, "hate_speech") / "manifest.json").parent.mkdir()  # a cancelled run: no manifest
    assert last_manifest(desk.root, "hate_speech")[0] == older
    last = train_defaults(desk, "hate_speech")
    assert last.base.path == "/data/davidson.csv" and last.base.html_unescape and "as last used" in last.base.source
    assert (last.start_from, last.round_weight, last.include_undecided, last.rounds) == ("base", "12", True, (1,))
    assert format_label_map(last.base.label_map) == "0=hate,1=not hate"
    assert new_candidate_dir(desk.root, "hate_speech", datetime(2026, 1, 1)).name == "hate_speech-20260101-000000-2"


def test_csv_columns_are_read_from_the_header_or_refused_clearly(tmp_path):
    good = tmp_path / "base.csv"
    good.write_text("\ufeffid,tweet,class\n1,hello,0\n", encoding="utf-8")
    assert csv_columns(good) == ["id", "tweet", "class"]
    empty = tmp_path / "empty.csv"
    empty.write_text("", encoding="utf-8")
    with pytest.raises(DynadeskError, match="no header row"):
        csv_columns(empty)
    with pytest.raises(DynadeskError, match="There is no file"):
        csv_columns(tmp_path / "missing.csv")
    binary = tmp_path / "binary.csv"
    binary.write_bytes(b"\xff\xfe\x00bad")
    with pytest.raises(DynadeskError, match="not a readable UTF-8"):
        csv_columns(binary)


def test_imports_are_counted_by_data_set_apart_from_the_left_out(desk, people, target_model):
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("an imported text", "hate"),
                                   [hate_output(target_model, "hate")])
    from app.core.storage.models import Example

    with desk.db.write() as session:
        session.get(Example, example.id).origin = {"kind": "import", "format": "hatecheck"}
    (one,) = round_counts(desk, "hate_speech")
    assert (one.decided, one.undecided, one.left_out, dict(one.imported)) == (0, 0, 0, {"hatecheck": 1})


def test_the_targets_training_file_is_pre_filled_only_where_it_still_is(tmp_path):
    from app.core.next_round.inputs import _training_file_here
    from local_models.files import file_sha256

    data = tmp_path / "labeled_data.csv"
    data.write_text("tweet,class\nhello,2\n", encoding="utf-8")
    assert _training_file_here({"path": str(data), "sha256": file_sha256(data)}) == str(data)
    assert _training_file_here({"path": str(data), "sha256": "0" * 64}) == ""  # another file by that name now
    assert _training_file_here({"path": str(tmp_path / "gone.csv")}) == ""
    assert _training_file_here({"file": "labeled_data.csv"}) == ""  # the bundled model records no path


def test_the_dialog_counts_training_and_the_comparison_hold_out_the_same_examples(desk, people, target_model):
    """One definition of the held-out split: the dialog's counts, what training holds out (with the imported
    set named, as `--imported hatecheck` does) and what the comparison and the leaderboard score on, the
    latter read from the candidate's manifest or, without one, by the same rule."""
    import uuid

    from app.core.next_round.held_out import held_out_sets
    from app.core.storage.models import Example
    from app.core.tasks.splits import is_held_out

    held_group = next(g for g in (f"t{n}" for n in range(200)) if is_held_out(uuid.uuid4(), group=g))
    kept_group = next(g for g in (f"t{n}" for n in range(200)) if not is_held_out(uuid.uuid4(), group=g))
    imported = []
    for i in range(10):  # undecided imported cases, two templates: one held out whole, one trained on
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(f"imported case {i}", "hate"),
                                       [hate_output(target_model, "not hate")])
        imported.append(example.id)
        with desk.db.write() as session:
            session.get(Example, example.id).origin = {"kind": "import", "format": "hatecheck",
                                                       "group": held_group if i < 4 else kept_group}
    for i in range(40):
        example = desk.examples.create(people.author.id, "hate_speech", hate_content(f"written {i}", "not hate"),
                                       [hate_output(target_model, "not hate")])
        desk.validation.validate(example.id, people.lead.id, "correct", mode="lead")

    (one,) = round_counts(desk, "hate_speech")
    trained = training_set(desk, "hate_speech", [1], imported=["hatecheck"])
    held_imported = [e.id for e in trained.held_out if e.source == "imported"]
    assert held_imported == [str(i) for i in imported[:4]]
    assert dict(one.imported_held_out) == {"hatecheck": 4} and dict(one.imported) == {"hatecheck": 10}
    assert one.held_out + 4 == len(trained.held_out)
    by_rule = held_out_sets(desk, "hate_speech").sets[0]  # no manifest: the leaderboard's, and any model's
    assert sorted(c.id for c in by_rule.cases) == sorted(trained.ids("held_out"))
    assert all(c.extra.get("group") == held_group for c in by_rule.cases if c.id in held_imported)
    manifest = {"rounds": [1], "options": {"imported": ["hatecheck"], "include_undecided": False},
                "data": {"splits": {"held_out": trained.ids("held_out")[:3]}}}  # as training wrote it
    read = held_out_sets(desk, "hate_speech", manifest=manifest)
    assert [c.id for c in read.sets[0].cases] == trained.ids("held_out")[:3] and not read.notes
    gone = held_out_sets(desk, "hate_speech", manifest={**manifest, "data": {"splits": {"held_out": [
        *trained.ids("held_out")[:3], str(uuid.uuid4())]}}})
    assert len(gone.sets[0].cases) == 3 and "1 of the 4 examples" in gone.notes[0]
