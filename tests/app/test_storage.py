import json
import sqlite3
import uuid
from datetime import UTC, datetime

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import select

from app.core.errors import DatabaseError
from app.core.storage.db import NO_FSYNC_FOR_TESTS, Database, head_revision
from app.core.storage.models import Base, Example, Person, include_name


def test_sqlite_runs_with_wal_foreign_keys_and_a_busy_timeout(tmp_path, monkeypatch):
    monkeypatch.delenv(NO_FSYNC_FOR_TESTS)  # as a desk runs: the suite turns fsync off for speed
    db = Database(tmp_path / "d.sqlite")
    with db.engine.connect() as connection:
        pragma = lambda name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
        assert pragma("journal_mode") == "wal"
        assert pragma("foreign_keys") == 1
        assert pragma("busy_timeout") >= 5000
        assert pragma("synchronous") == 2  # FULL
    assert db.current_revision() == head_revision()
    db.close()


@pytest.mark.filterwarnings("ignore:autogenerate skipping metadata-specified expression-based index")
def test_the_models_and_the_migrated_schema_agree(tmp_path):
    db = Database(tmp_path / "d.sqlite")
    with db.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"include_name": include_name, "compare_type": True})
        assert compare_metadata(context, Base.metadata) == []
    db.close()


def test_a_failed_unit_of_work_leaves_nothing_behind(tmp_path):
    db = Database(tmp_path / "d.sqlite")
    with pytest.raises(RuntimeError):
        with db.write() as session:
            session.add(Person(display_name="Half", role="annotator"))
            session.flush()
            raise RuntimeError("power cut in the middle")
    with db.read() as session:
        assert session.scalars(select(Person)).all() == []
    db.close()


def test_a_file_that_is_not_a_database_gets_a_clear_message(tmp_path):
    path = tmp_path / "d.sqlite"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(DatabaseError, match="cannot be opened as a Dynadesk database"):
        Database(path)
    assert path.read_bytes().startswith(b"this is not sqlite")  # left as it was


def test_a_database_from_a_newer_dynadesk_is_refused_untouched(tmp_path):
    path = tmp_path / "d.sqlite"
    Database(path).close()
    with sqlite3.connect(path) as raw:
        raw.execute("UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(DatabaseError, match="newer Dynadesk"):
        Database(path)


def test_an_old_database_upgrades_in_place_with_nothing_lost(tmp_path):
    """Build a database at the first revision, fill it, upgrade to head, and check every row."""
    path = tmp_path / "old.sqlite"
    Database(path, upgrade=False).upgrade("0001")
    hate_definition = {"code": "hate_speech", "metadata": [
        {"name": "hate_type", "kind": "choice"}, {"name": "target_groups", "kind": "multi_choice"},
        {"name": "label_explanation", "kind": "text"}]}
    ids = {name: uuid.uuid4().hex for name in ("task", "round", "person", "model", "ex1", "ex2", "draft", "val", "out")}
    now = datetime(2026, 1, 2, 3, 4, 5).isoformat(sep=" ")
    with sqlite3.connect(path) as raw:
        raw.execute("INSERT INTO tasks VALUES (?,?,?,?,?,?,?,?)",
                    ("hate_speech", "Hate speech", json.dumps(hate_definition), "f" * 64, 1, ids["task"], now, now))
        raw.execute("INSERT INTO people VALUES (?,?,?,?,?,?)", ("Old Timer", "annotator", 3, ids["person"], now, now))
        raw.execute("INSERT INTO model_records VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    ("m", "hf-torch", "/models/m", "c" * 64, "{}", ids["task"], "{}", 1, ids["model"], now, now))
        raw.execute("INSERT INTO rounds VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
                    (ids["task"], 1, "r1", "", "open", "mean", now, None, "{}", 1, ids["round"], now, now))
        rows = [
            (ids["ex1"], "they are vermin ☠️ يا", "submitted", {"hate_type": "dehumanization",
                                                             "target_groups": ["immigrants", "Sikhs"]}, "hate"),
            (ids["ex2"], "a lovely day", "retracted", {}, "not hate"),
            (ids["draft"], "half written", "draft", {}, None),
        ]
        for example_id, text, status, meta, label in rows:
            raw.execute(
                "INSERT INTO examples (task_id, round_id, context_id, author_id, inputs, text, true_label, answer,"
                " model_fooled, fooled_rule, meta, origin, perturbation_of, edit_ops, edit_distance, status,"
                " status_reason, time_spent_ms, submitted_at, source, external_id, sync_state, validation_state,"
                " validation_count, flag_count, disagreement_count, decided_verdict, decided_label, revision, id,"
                " created_at, updated_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (ids["task"], ids["round"], None, ids["person"], json.dumps({"text": text}), text, label, None, 1,
                 "mean", json.dumps(meta), "{}", None, None, None, status, None, 1234, now, None, None, "pending",
                 "unvalidated", 0, 0, 0, None, None, 2, example_id, now, now))
        raw.execute("INSERT INTO model_outputs VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
                    (ids["out"], ids["ex1"], ids["model"], 0, "c" * 64, "not hate", '{"hate": 0.2}', 3.5, None, 1,
                     now, now))
        before = {table: raw.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
                  for table in ("tasks", "people", "model_records", "rounds", "examples", "model_outputs")}

    db = Database(path)  # opening upgrades
    assert db.current_revision() == head_revision()
    assert db.backup_path is not None and db.backup_path.exists()
    with sqlite3.connect(db.backup_path) as raw:
        assert raw.execute("SELECT version_num FROM alembic_version").fetchone() == ("0001",)
    with sqlite3.connect(path) as raw:
        for table, rows in before.items():
            after = raw.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            # columns added by later revisions come last and start empty (e.g. review_state in 0005), counts at 0
            assert [row[:len(rows[0])] for row in after] == rows, table
            assert all(value in (None, 0) for row in after for value in row[len(rows[0]):]), table
        facets = set(raw.execute("SELECT example_id, field, value FROM example_facets").fetchall())
        assert facets == {(ids["ex1"], "hate_type", "dehumanization"), (ids["ex1"], "target_groups", "immigrants"),
                          (ids["ex1"], "target_groups", "Sikhs")}
        indexed = dict(raw.execute("SELECT example_id, text FROM example_fts").fetchall())
        assert indexed == {ids["ex1"]: "they are vermin ☠️ يا", ids["ex2"]: "a lovely day"}  # drafts are not indexed
    with db.read() as session:
        example = session.get(Example, uuid.UUID(ids["ex1"]))
        assert example.submitted_at == datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        assert example.meta["target_groups"] == ["immigrants", "Sikhs"]
        assert example.outputs[0].probabilities == {"hate": 0.2}
    assert db.integrity_check() == "ok"
    db.close()


def test_planner_statistics_cover_our_tables_but_never_the_fts_shadow_tables(desk, people):
    from tests.conftest import hate_content

    assert desk.db.refresh_statistics() is False  # nothing to learn from an empty table
    for i in range(5):
        desk.examples.create(people.author.id, "hate_speech", hate_content(f"text {i}", "not hate"))
    assert desk.db.refresh_statistics() is True
    with desk.db.engine.connect() as connection:
        tables = {row[0] for row in connection.exec_driver_sql("SELECT tbl FROM sqlite_stat1")}
    assert "examples" in tables
    assert not {t for t in tables if t.startswith("example_fts")}
    assert desk.db.refresh_statistics() is False  # not again until the table has grown


def _plan(db, statement) -> str:
    from sqlalchemy.dialects import sqlite as sqlite_dialect

    sql = str(statement.compile(dialect=sqlite_dialect.dialect(), compile_kwargs={"literal_binds": True}))
    with db.engine.connect() as connection:
        return "\n".join(row[-1] for row in connection.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))


def test_review_queries_are_served_by_their_indexes(desk, people):
    """Guards the plans that keep review queries within budget at 100k rows (bench/bench_storage.py)."""
    from sqlalchemy import func

    from app.core.services.review import ROWID, ExampleFilter
    from tests.conftest import hate_content

    for i in range(30):
        desk.examples.create(people.author.id, "hate_speech", hate_content(f"text {i}", "hate"))
    desk.db.refresh_statistics(force=True)
    queue = _plan(desk.db, desk.validation.queue_query(people.val1.id).limit(1))
    assert "USING INDEX ix_examples_queue" in queue and "TEMP B-TREE" not in queue
    by_annotator = select(Example.author_id, func.count()).where(Example.status.in_(["submitted", "flagged"])).group_by(
        Example.author_id)
    assert "COVERING INDEX ix_examples_author_figures" in _plan(desk.db, by_annotator)
    page = desk.review._filtered([Example.id], ExampleFilter()).order_by(Example.submitted_at.desc(),
                                                                          ROWID.desc()).limit(100)
    assert "TEMP B-TREE" not in _plan(desk.db, page)
