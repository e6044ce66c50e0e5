"""Review search: indexed metadata facets and a full-text index of submitted examples.

Existing examples are indexed during the upgrade: facets from each task's choice fields,
and full text from every example that is no longer a draft.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

import json

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

# The trigram tokenizer matches any substring in any script (accents folded by case only,
# emoji and right-to-left text included), which is what reviewers expect of "search".
FTS_TABLE = "CREATE VIRTUAL TABLE example_fts USING fts5(example_id UNINDEXED, text, tokenize='trigram case_sensitive 0')"

TRIGGERS = [
    """CREATE TRIGGER example_fts_insert AFTER INSERT ON examples WHEN new.status != 'draft' BEGIN
         INSERT INTO example_fts(example_id, text) VALUES (new.id, new.text);
       END""",
    """CREATE TRIGGER example_fts_publish AFTER UPDATE OF status ON examples
       WHEN old.status = 'draft' AND new.status != 'draft' BEGIN
         INSERT INTO example_fts(example_id, text) VALUES (new.id, new.text);
       END""",
    """CREATE TRIGGER example_fts_retext AFTER UPDATE OF text ON examples
       WHEN old.status != 'draft' AND new.text IS NOT old.text BEGIN
         DELETE FROM example_fts WHERE example_id = old.id;
         INSERT INTO example_fts(example_id, text) VALUES (new.id, new.text);
       END""",
    """CREATE TRIGGER example_fts_delete AFTER DELETE ON examples WHEN old.status != 'draft' BEGIN
         DELETE FROM example_fts WHERE example_id = old.id;
       END""",
]
TRIGGER_NAMES = ["example_fts_insert", "example_fts_publish", "example_fts_retext", "example_fts_delete"]


def _facet_fields(definition: dict) -> list[str]:
    return [f["name"] for f in definition.get("metadata", []) if f.get("kind") in ("choice", "multi_choice")]


def _facet_values(value) -> list[str]:
    values = value if isinstance(value, list) else [value]
    return sorted({str(v) for v in values if v not in (None, "")})


def upgrade() -> None:
    op.create_table(
        "example_facets",
        sa.Column("example_id", sa.Uuid(), nullable=False),
        sa.Column("field", sa.String(length=64), nullable=False),
        sa.Column("value", sa.String(length=200), nullable=False),
        sa.ForeignKeyConstraint(
            ["example_id"], ["examples.id"], name=op.f("fk_example_facets_example_id_examples"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("example_id", "field", "value", name=op.f("pk_example_facets")),
    )
    with op.batch_alter_table("example_facets", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_example_facets_field_value"), ["field", "value"], unique=False)

    connection = op.get_bind()
    fields_by_task = {
        task_id: _facet_fields(json.loads(definition) if isinstance(definition, str) else definition)
        for task_id, definition in connection.exec_driver_sql("SELECT id, definition FROM tasks")
    }
    facets: list[tuple[str, str, str]] = []
    for example_id, task_id, meta in connection.exec_driver_sql("SELECT id, task_id, meta FROM examples"):
        meta = json.loads(meta) if isinstance(meta, str) else (meta or {})
        for field in fields_by_task.get(task_id, []):
            facets.extend((example_id, field, value) for value in _facet_values(meta.get(field)))
    if facets:
        connection.exec_driver_sql("INSERT INTO example_facets (example_id, field, value) VALUES (?, ?, ?)", facets)

    op.execute(FTS_TABLE)
    for trigger in TRIGGERS:
        op.execute(trigger)
    op.execute("INSERT INTO example_fts(example_id, text) SELECT id, text FROM examples WHERE status != 'draft'")


def downgrade() -> None:
    for name in TRIGGER_NAMES:
        op.execute(f"DROP TRIGGER IF EXISTS {name}")
    op.execute("DROP TABLE IF EXISTS example_fts")
    with op.batch_alter_table("example_facets", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_example_facets_field_value"))
    op.drop_table("example_facets")
