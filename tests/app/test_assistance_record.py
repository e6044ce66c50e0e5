"""The assistant's record on examples: stored with drafts and submissions, the edit distance
measured at submit, bad records refused with a clear message, old desks upgraded losing nothing."""

import json
import sqlite3
import uuid
from datetime import datetime

import pytest

from app.core.assist.provenance import assistance_record, at_submit, read_assistance
from app.core.assist.types import Assistance
from app.core.desk import Desk
from app.core.errors import InvalidExample
from app.core.services.rounds import parse_settings
from app.core.services.writing_sessions import begin_writing_session
from app.core.storage.db import Database, head_revision
from app.core.storage.models import Example
from tests.conftest import hate_content, hate_output

APPLIED = Assistance(arm="on", session=1, applied=True, generator="obfuscation", edit_type="leetspeak",
                     applied_text="they are all v3rmin and should leave")


def test_a_draft_keeps_the_applied_suggestion_across_a_restart_and_submit_measures_the_edit(data_dir, target_model):
    desk = Desk(data_dir)
    author = desk.people.create("Writer", "annotator")
    draft = desk.examples.start_draft(author.id, "hate_speech", assistance=Assistance(arm="on", session=1))
    desk.examples.save_draft(draft.id, inputs={"text": APPLIED.applied_text}, true_label="hate",
                             assistance=APPLIED)
    desk.close()

    desk = Desk(data_dir)  # a restart: the draft comes back with the suggestion it was given
    (kept,) = desk.examples.drafts(author.id)
    assert read_assistance(kept.assistance) == APPLIED
    # the writer changes two words of the suggestion ("all" deleted, "leave" → "go") before submitting
    content = hate_content("they are v3rmin and should go", "hate")
    example = desk.examples.submit(kept.id, [hate_output(target_model, "not hate")], content,
                                   assistance=read_assistance(kept.assistance))
    stored = desk.examples.get(example.id)
    assert stored.assistance == {"arm": "on", "session": 1, "applied": True, "generator": "obfuscation",
                                 "edit_type": "leetspeak", "applied_text": APPLIED.applied_text, "edit_distance": 2}
    desk.close()


def test_a_client_figure_is_never_kept_the_distance_is_measured_again(desk, people, target_model):
    claimed = Assistance(arm="on", session=3, applied=True, generator="rules", edit_type="negation",
                         applied_text="they are not vermin", edit_distance=0)
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("they are not vermin at all", "hate"),
                                   [hate_output(target_model, "not hate")], assistance=claimed)
    assert desk.examples.get(example.id).assistance["edit_distance"] == 2  # "at all" added


def test_an_unassisted_example_records_its_arm_and_an_example_without_one_records_nothing(desk, people):
    off = desk.examples.create(people.author.id, "hate_speech", hate_content("a plain text", "hate"),
                               assistance=Assistance(arm="off", session=2))
    assert desk.examples.get(off.id).assistance == assistance_record(Assistance(arm="off", session=2))
    plain = desk.examples.create(people.author.id, "hate_speech", hate_content("an imported text", "hate"))
    assert desk.examples.get(plain.id).assistance is None


def test_submit_replaces_the_drafts_record_when_the_writer_undid_the_suggestion(desk, people):
    draft = desk.examples.start_draft(people.author.id, "hate_speech", assistance=APPLIED)
    example = desk.examples.submit(draft.id, [], hate_content("my own words entirely", "hate"),
                                   assistance=Assistance(arm="on", session=1))
    assert desk.examples.get(example.id).assistance["applied"] is False
    assert desk.examples.get(example.id).assistance["edit_distance"] is None


@pytest.mark.parametrize("assistance, message", [
    (Assistance(arm="maybe"), "arm must be 'on' or 'off'"),
    (Assistance(arm="off", applied=True, generator="rules", edit_type="negation", applied_text="x y"),
     "applied in a session without the assistant"),
    (Assistance(arm="on", applied=True, generator="oracle", edit_type="negation", applied_text="x y"),
     "Unknown generator 'oracle'"),
    (Assistance(arm="on", applied=True, generator="rules", edit_type="", applied_text="x y"), "needs its edit type"),
    (Assistance(arm="on", applied=True, generator="rules", edit_type="negation"), "needs the text it put"),
    (Assistance(arm="on", generator="rules"), "No suggestion was applied, yet"),
    (Assistance(arm="on", session=0), "session's number must be a whole number from 1"),
])
def test_a_bad_record_gets_a_clear_message_and_stores_nothing(desk, people, assistance, message):
    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "kept as typed"})
    with pytest.raises(InvalidExample, match=message):
        desk.examples.save_draft(draft.id, inputs={"text": "lost?"}, assistance=assistance)
    with pytest.raises(InvalidExample, match=message):
        desk.examples.submit(draft.id, [], hate_content("a text", "hate"), assistance=assistance)
    (kept,) = desk.examples.drafts(people.author.id)
    assert kept.text == "kept as typed" and kept.assistance is None and kept.status == "draft"


def test_read_assistance_refuses_unknown_fields_and_non_objects():
    assert read_assistance(None) is None
    assert read_assistance(assistance_record(APPLIED)) == APPLIED
    with pytest.raises(InvalidExample, match="unknown field"):
        read_assistance({"applied": False, "speed": 3})
    with pytest.raises(InvalidExample, match="must be an object"):
        read_assistance(["on"])


def test_at_submit_counts_words_with_the_one_segmentation():
    # punctuation and emoji are words of their own (app.core.text.words): "!" and "☠️" are two edits
    assert at_submit(APPLIED, "they are all v3rmin and should leave ! ☠️", max_chars=5000).edit_distance == 2
    assert at_submit(APPLIED, APPLIED.applied_text, max_chars=5000).edit_distance == 0
    assert at_submit(Assistance(arm="on"), "whatever", max_chars=5000).edit_distance is None


def test_writing_sessions_are_numbered_after_the_ones_recorded_in_the_round(desk, people):
    round_ = desk.tasks.round("hate_speech")
    desk.rounds.update(round_.id, people.lead.id, settings=parse_settings({"assistant": "ab"}))
    first = begin_writing_session(desk.db, round_.id, people.author.id)
    assert (first.number, first.mode) == (1, "ab") and first.arm in ("on", "off")
    assert begin_writing_session(desk.db, round_.id, people.author.id).number == 1  # nothing written yet
    desk.examples.start_draft(people.author.id, "hate_speech", assistance=first.assistance())
    second = begin_writing_session(desk.db, round_.id, people.author.id)
    assert second.number == 2 and {first.arm, second.arm} == {"on", "off"}  # a pair: one of each
    assert begin_writing_session(desk.db, round_.id, people.val1.id).number == 1  # per writer


def test_an_old_desk_opens_with_its_examples_intact_and_no_assistance(tmp_path):
    path = tmp_path / "old.sqlite"
    Database(path, upgrade=False).upgrade("0013")
    with sqlite3.connect(path) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(examples)")]
        assert "assistance" not in columns
        now = datetime(2026, 1, 2).isoformat(sep=" ")
        task, round_, person, example = (uuid.uuid4().hex for _ in range(4))
        raw.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?)",
                    ("hate_speech", "Hate speech", json.dumps({"code": "hate_speech"}), "f" * 64, 1, task, now, now))
        raw.execute("INSERT INTO people VALUES (?,?,?,?,?,?)", ("Old Timer", "annotator", 3, person, now, now))
        raw.execute("INSERT INTO rounds (task_id, number, description, goal_message, status, fooled_rule, opened_at,"
                    " settings, revision, id, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (task, 1, "r1", "", "open", "mean", now, '{"context_policy": "random"}', 1, round_, now, now))
        raw.execute("INSERT INTO examples (task_id, round_id, author_id, inputs, text, true_label, fooled_rule, meta,"
                    " origin, status, time_spent_ms, sync_state, validation_state, validation_count, flag_count,"
                    " disagreement_count, objection_count, revision, id, created_at, updated_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (task, round_, person, '{"text": "old words"}', "old words", "hate", "mean", "{}", "{}",
                     "submitted", 900, "synced", "unvalidated", 0, 0, 0, 0, 1, example, now, now))
        before = raw.execute("SELECT * FROM examples").fetchall()
    db = Database(path)  # opening upgrades
    assert db.current_revision() == head_revision()
    with sqlite3.connect(path) as raw:
        after = raw.execute("SELECT * FROM examples").fetchall()
        columns = [row[1] for row in raw.execute("PRAGMA table_info(examples)")]
    assert [row[:len(before[0])] for row in after] == before  # nothing lost
    assert after[0][columns.index("assistance")] is None
    with db.read() as session:
        assert session.get(Example, uuid.UUID(example)).assistance is None
    db.close()


def test_exports_carry_the_record_and_an_import_measures_the_distance_again(desk, people, target_model, tmp_path):
    import csv

    from app.core.io.exporters import export
    from app.core.io.importers import import_file

    assisted = desk.examples.create(people.author.id, "hate_speech", hate_content(APPLIED.applied_text + " now", "hate"),
                                    [hate_output(target_model, "not hate")], assistance=APPLIED)
    plain = desk.examples.create(people.author.id, "hate_speech", hate_content("no help at all", "hate"),
                                 [hate_output(target_model, "not hate")], assistance=Assistance(arm="off", session=2))
    path = tmp_path / "out.jsonl"
    export(desk, path, "jsonl", keep_identities=True)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    exported = next(r for r in records if r.get("id") == str(assisted.id))
    assert exported["assistance"] == {**assistance_record(APPLIED), "edit_distance": 1}
    exported["assistance"]["edit_distance"] = 0  # a file that claims otherwise is not believed
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    with Desk(tmp_path / "fresh") as fresh:
        assert import_file(fresh, path, "jsonl").problems == []
        assert fresh.examples.get(assisted.id).assistance["edit_distance"] == 1
        assert fresh.examples.get(plain.id).assistance == desk.examples.get(plain.id).assistance

    table = tmp_path / "hate.csv"
    export(desk, table, "csv", task_code="hate_speech")
    with table.open(encoding="utf-8", newline="") as handle:
        rows = {r["id"]: r for r in csv.DictReader(handle)}
    row = rows[str(assisted.id)]
    assert (row["assistant_arm"], row["assistant_session"], row["suggestion_applied"], row["suggestion_generator"],
            row["suggestion_edit_type"], row["suggestion_text"], row["suggestion_edit_distance"]) == (
        "on", "1", "True", "obfuscation", "leetspeak", APPLIED.applied_text, "1")
    row = rows[str(plain.id)]
    assert (row["assistant_arm"], row["suggestion_applied"], row["suggestion_edit_distance"]) == ("off", "False", "-1")


def test_the_hf_features_name_every_flat_column(desk):
    from app.core.io.exporters import _assistance_columns, _hf_features

    names = {f["name"] for f in _hf_features(desk.tasks.definition_by_code("hate_speech"))}
    assert set(_assistance_columns(assistance_record(APPLIED))) <= names


def test_the_bounded_distance_is_the_diffs_distance_and_unknown_beyond_its_bound():
    import random

    from app.core.text import word_distance, word_edits

    rng = random.Random(7)
    vocabulary = ["they", "are", "v3rmin", "n\u200bice", "(all)", "I❤️you", "!", "sh!t", "leave,", "rats"]
    for _ in range(200):
        a = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))
        b = " ".join(rng.choice(vocabulary) for _ in range(rng.randint(0, 12)))
        assert word_distance(a, b, max_chars=200) == word_edits(a, b)[1], (a, b)
    assert word_distance("x " * 60, "x", max_chars=100) is None  # the suggestion is over the bound
    assert word_distance("x", "x " * 60, max_chars=100) is None  # the text is
    assert word_distance("x " * 50, "x", max_chars=100) == 49


def test_the_bound_is_the_tasks_own_max_chars_capped_for_every_task(desk):
    from app.core.assist.provenance import MAX_DISTANCE_CHARS, distance_bound

    assert distance_bound(desk.tasks.definition_by_code("hate_speech")) == 5000
    assert distance_bound(desk.tasks.definition_by_code("nli")) == 2000  # the hypothesis, not the premise
    wide = desk.tasks.definition_by_code("hate_speech").model_copy(
        update={"inputs": [f.model_copy(update={"max_chars": 200_000})
                           for f in desk.tasks.definition_by_code("hate_speech").inputs]})
    assert distance_bound(wide) == MAX_DISTANCE_CHARS


def test_a_suggestion_longer_than_the_task_allows_is_stored_with_its_distance_unknown(desk, people, target_model,
                                                                                     tmp_path):
    from app.core.io.exporters import export
    from app.core.io.importers import import_file

    huge = Assistance(arm="on", session=1, applied=True, generator="rules", edit_type="negation",
                      applied_text="word " * 20_000)
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("they are not vermin", "hate"),
                                   [hate_output(target_model, "not hate")], assistance=huge)
    stored = desk.examples.get(example.id).assistance
    assert stored["edit_distance"] is None and stored["applied_text"] == huge.applied_text
    path = tmp_path / "out.jsonl"
    export(desk, path, "jsonl", keep_identities=True)
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    next(r for r in records if r.get("id") == str(example.id))["assistance"]["edit_distance"] = 3
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n", encoding="utf-8")
    with Desk(tmp_path / "fresh") as fresh:  # an import measures within the same bound
        assert import_file(fresh, path, "jsonl").problems == []
        assert fresh.examples.get(example.id).assistance["edit_distance"] is None


WRITER = uuid.UUID("00000000-0000-4000-8000-000000000001")


def drawn(arm: str) -> int:
    from app.core.assist.arms import session_arm

    return next(n for n in range(1, 20) if session_arm("ab", WRITER, n, round_key="hate_speech/1") == arm)


@pytest.mark.parametrize("mode, claim, why", [
    ("off", {"arm": "on", "applied": False}, "the assistant is off in round hate_speech/1"),
    ("off", {"arm": "off", "session": "off", "applied": False}, "the assistant is off in round hate_speech/1"),
    ("on", {"arm": "off", "session": "off", "applied": False}, "the assistant is on in every session of round hate_speech/1"),
    ("ab", {"arm": "on", "session": "off"}, "the A-B draw puts session"),
    ("ab", {"arm": None}, "a suggestion is marked applied in a session without the assistant"),
    ("on", {"arm": None}, "a suggestion is marked applied in a session without the assistant"),
])
def test_a_claim_the_rounds_setting_does_not_allow_is_kept_as_unassisted_with_the_reason(mode, claim, why):
    from app.core.assist.provenance import received_assistance

    session = drawn(claim.pop("session", "on"))
    record = {**assistance_record(APPLIED), "session": session, **claim}
    if not record["applied"]:
        record.update(generator=None, edit_type=None, applied_text=None)
    received = received_assistance(record, "they are all v3rmin", max_chars=5000, writer_id=WRITER,
                                   round_key="hate_speech/1", mode=mode)
    assert received.record == assistance_record(Assistance(session=session))
    assert received.note is not None and why in received.note and "outside the A-B figures" in received.note


def test_a_claim_the_rounds_setting_allows_is_kept_and_measured():
    from app.core.assist.provenance import received_assistance

    honest = {**assistance_record(APPLIED), "session": drawn("on")}
    for mode in ("ab", "on"):
        received = received_assistance(honest, APPLIED.applied_text + " now", max_chars=5000, writer_id=WRITER,
                                       round_key="hate_speech/1", mode=mode)
        assert received.record == {**honest, "edit_distance": 1} and received.note is None
    unassisted = assistance_record(Assistance(arm="off", session=drawn("off")))
    assert received_assistance(unassisted, "x", max_chars=5000, writer_id=WRITER, round_key="hate_speech/1",
                               mode="ab").record == unassisted
    with pytest.raises(InvalidExample, match="A-B draw gives it the assistant"):  # no desk sends this: refused
        received_assistance({**unassisted, "session": drawn("on")}, "x", max_chars=5000, writer_id=WRITER,
                            round_key="hate_speech/1", mode="ab")


@pytest.mark.parametrize("edit_type", ["leet\x1b[2Jspeak", "neg\u202eation", "negation\x00"])
def test_an_edit_type_with_control_characters_is_refused(edit_type):
    with pytest.raises(InvalidExample, match="control characters"):
        read_assistance(assistance_record(Assistance(arm="on", session=1, applied=True, generator="rules",
                                                     edit_type=edit_type, applied_text="x")))
