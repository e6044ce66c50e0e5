"""The desk's outbox: written in the same unit of work as the record, one entry per record,
drafts and imported data sets never queued unless asked, older databases backfilled; and
the record format on the wire is the desk's own (``app.core.io.records``)."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import datetime

import pytest
from sqlalchemy import select

from app.core.errors import InvalidExample
from app.core.io.importers import import_file
from app.core.io.records import dump_example
from app.core.storage import outbox
from app.core.storage.db import Database
from app.core.storage.models import Example, OutboxEntry
from sync.local import local_status
from sync.outgoing import settle
from sync.protocol import ExampleRecord, RecordResult, manifest_sha256
from tests.conftest import FIXTURES, hate_content, hate_output


def entries(desk) -> list[OutboxEntry]:
    with desk.db.read() as session:
        return list(session.scalars(select(OutboxEntry).order_by(OutboxEntry.seq)))


def test_submitting_queues_the_example_in_the_same_unit_of_work(desk, people, target_model):
    draft = desk.examples.start_draft(people.author.id, "hate_speech")
    desk.examples.save_draft(draft.id, inputs={"text": "half a thought"})
    assert entries(desk) == []  # drafts never leave the desk

    with pytest.raises(InvalidExample):
        desk.examples.submit(draft.id, [hate_output(target_model, "hate")], hate_content("", "hate"))
    assert entries(desk) == []  # a failed submission queues nothing

    example = desk.examples.submit(draft.id, [hate_output(target_model, "not hate")],
                                   hate_content("they are all the same", "hate"))
    [entry] = entries(desk)
    assert (entry.kind, entry.record_id, entry.person_id, entry.revision) == ("example", example.id, people.author.id, 1)

    desk.examples.retract(example.id, people.author.id, "wrong label")
    [entry] = entries(desk)  # still one entry, now for the newer revision
    assert (entry.record_id, entry.revision) == (example.id, 2)

    other = desk.examples.create(people.author.id, "hate_speech", hate_content("a second one", "not hate"),
                                 [hate_output(target_model, "not hate")])
    verdict = desk.validation.validate(other.id, people.val1.id, "correct")
    assert [(e.kind, e.record_id, e.person_id) for e in entries(desk)] == [
        ("example", example.id, people.author.id), ("example", other.id, people.author.id),
        ("validation", verdict.id, people.val1.id)]
    status = local_status(desk.db, people.author.id)
    assert (status.pending, status.held) == (2, 1)  # val1's verdict goes out with val1's token


def test_a_unit_of_work_that_fails_leaves_no_entry(desk, people, target_model):
    with pytest.raises(RuntimeError):
        with desk.db.write() as session:
            example = Example(task_id=desk.tasks.task("hate_speech").id, round_id=desk.tasks.round("hate_speech").id,
                              author_id=people.author.id, inputs={"text": "x"}, text="x", status="submitted",
                              sync_state="pending")
            session.add(example)
            session.flush()
            outbox.enqueue(session, example)
            raise RuntimeError("power cut")
    assert entries(desk) == []


def test_imported_data_sets_stay_until_asked(desk, people):
    import_file(desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    assert entries(desk) == []
    with desk.db.write() as session:
        queued = outbox.queue_local(session, people.lead.id, source="dynahate")
    with desk.db.read() as session:
        examples = list(session.scalars(select(Example).where(Example.source == "dynahate")))
    assert queued == len(examples) == 10
    assert {e.record_id for e in entries(desk)} == {e.id for e in examples}
    assert {e.person_id for e in entries(desk)} == {people.lead.id}  # sent with the owner's token
    assert all(e.sync_state == "pending" for e in examples)
    with desk.db.write() as session:
        assert outbox.queue_local(session, people.lead.id, source="dynahate") == 0  # asked twice, queued once


def test_a_leads_review_of_an_imported_example_goes_out_with_it_under_the_leads_token(desk, people):
    import_file(desk, FIXTURES / "dynahate_sample.csv", "dynahate")
    with desk.db.read() as session:
        imported = session.scalars(select(Example).where(Example.source == "dynahate")).first()
    desk.lead.return_examples(people.lead.id, [imported.id], "Name the target group.")
    assert entries(desk) == []  # kept on the desk, as the example is
    owner = desk.people.create("Olga Owner", "owner")
    with desk.db.write() as session:
        assert outbox.queue_local(session, owner.id, source="dynahate") == 11  # 10 examples and the review
    by_kind = {}
    for entry in entries(desk):
        by_kind.setdefault(entry.kind, set()).add(entry.person_id)
    assert by_kind == {"example": {owner.id}, "example_review": {people.lead.id}}


def test_settling_keeps_an_entry_that_changed_while_it_was_on_its_way(desk, people, target_model):
    example = desk.examples.create(people.author.id, "hate_speech", hate_content("sent as revision 1", "hate"),
                                   [hate_output(target_model, "not hate")])
    from sync.outgoing import pending_batch

    batch = pending_batch(desk.db, people.author.id, after=0, limit=10)
    desk.examples.retract(example.id, people.author.id, "changed my mind")  # while the push is in flight
    result = RecordResult(index=0, id=example.id, record="example", status="stored", revision=1)
    settle(desk.db, batch, [result])
    [entry] = entries(desk)
    assert entry.revision == 2 and entry.state == "pending"  # revision 2 still goes out
    with desk.db.read() as session:
        assert session.get(Example, example.id).sync_state == "pending"

    batch = pending_batch(desk.db, people.author.id, after=0, limit=10)
    before = desk.examples.get(example.id).updated_at
    settle(desk.db, batch, [result.model_copy(update={"revision": 2})])
    assert entries(desk) == []
    after = desk.examples.get(example.id)
    assert after.sync_state == "synced" and after.updated_at == before  # the record itself is untouched


def test_refusals_stay_in_the_outbox_with_their_reasons(desk, people, target_model):
    made = [desk.examples.create(people.author.id, "hate_speech", hate_content(f"number {i}", "hate"),
                                 [hate_output(target_model, "not hate")]) for i in range(3)]
    from sync.local import problems, retry_problems
    from sync.outgoing import pending_batch

    batch = pending_batch(desk.db, people.author.id, after=0, limit=10)
    results = [RecordResult(index=0, id=made[0].id, record="example", status="conflict", revision=3, reason="edited"),
               RecordResult(index=1, id=made[1].id, record="example", status="rejected", reason="bad label"),
               RecordResult(index=2, id=made[2].id, record="example", status="deferred", reason="round 9")]
    settled = settle(desk.db, batch, results)
    assert (settled.conflicts, settled.rejected, settled.deferred) == (1, 1, 1)
    status = local_status(desk.db, people.author.id)
    assert (status.pending, status.deferred, status.rejected, status.conflicts) == (1, 1, 1, 1)
    assert {(p.state, p.last_error) for p in problems(desk.db)} == {("conflict", "conflict: edited"),
                                                                    ("rejected", "rejected: bad label")}
    assert retry_problems(desk.db) == 2
    assert local_status(desk.db, people.author.id).pending == 3


def test_an_older_database_gets_its_waiting_records_queued_on_upgrade(tmp_path):
    path = tmp_path / "old.sqlite"
    Database(path, upgrade=False).upgrade("0003")
    ids = {name: uuid.uuid4().hex for name in ("task", "round", "person", "ex1", "ex2", "draft", "val", "synced")}
    now = datetime(2026, 1, 2, 3, 4, 5).isoformat(sep=" ")
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?)",
                    ("hate_speech", "Hate speech", json.dumps({"code": "hate_speech"}), "f" * 64, 1, ids["task"], now, now))
        raw.execute("INSERT INTO people VALUES (?,?,?,?,?,?)", ("Old Timer", "annotator", 1, ids["person"], now, now))
        raw.execute("INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (ids["task"], 1, "r1", "", "open", "mean", now, None, "{}", 1, ids["round"], now, now))
        for name, status, sync_state, minute in (("ex2", "retracted", "pending", 2), ("ex1", "submitted", "pending", 1),
                                                 ("draft", "draft", "local", 3), ("synced", "submitted", "synced", 0)):
            raw.execute(
                "INSERT INTO examples (id, task_id, round_id, author_id, inputs, text, fooled_rule, meta, origin, status,"
                " time_spent_ms, submitted_at, sync_state, validation_state, validation_count, flag_count,"
                " disagreement_count, revision, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (ids[name], ids["task"], ids["round"], ids["person"], "{}", name, "mean", "{}", "{}", status, 0,
                 f"2026-01-02 03:0{minute}:00", sync_state, "unvalidated", 0, 0, 0, 2 if status == "retracted" else 1,
                 now, now))
        raw.execute("INSERT INTO validations (id, example_id, validator_id, verdict, mode, time_spent_ms, sync_state,"
                    " revision, created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                    (ids["val"], ids["ex1"], ids["person"], "correct", "peer", 0, "pending", 1, now, now))
    db = Database(path)
    with db.read() as session:
        queued = [(e.kind, e.record_id.hex, e.revision, e.state)
                  for e in session.scalars(select(OutboxEntry).order_by(OutboxEntry.seq))]
    assert queued == [("example", ids["ex1"], 1, "pending"), ("example", ids["ex2"], 2, "pending"),
                      ("validation", ids["val"], 1, "pending")]
    db.close()


def test_the_wire_format_is_the_desks_record_format(desk, people, target_model):
    example = desk.examples.create(people.author.id, "hate_speech",
                                   hate_content("Ça suffit — they never learn 🙄", "hate"),
                                   [hate_output(target_model, "not hate")])
    record = dump_example(desk.examples.get(example.id), "hate_speech")
    record.update(round_number=1, context_hash=None)
    wire = ExampleRecord.model_validate(record)  # nothing renamed, nothing extra
    assert str(wire.id) == record["id"] and wire.inputs == {"text": "Ça suffit — they never learn 🙄"}


def test_the_model_checksum_on_the_wire_is_the_model_layers_checksum(tmp_path):
    from local_models.files import file_sha256, files_sha256

    (tmp_path / "model.onnx").write_bytes(b"\x08\x07" * 999)
    (tmp_path / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    named = [("model/model.onnx", tmp_path / "model.onnx"), ("tokenizer/tokenizer.json", tmp_path / "tokenizer.json")]
    assert manifest_sha256((name, file_sha256(path)) for name, path in named) == files_sha256(named)
