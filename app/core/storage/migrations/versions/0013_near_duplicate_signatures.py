"""The near-duplicate index's store: each example's MinHash signature (computed once, so an
open desk does not hash 100,000 texts again) and a change log that SQLite triggers fill whenever
an example is stored, changes its text, status, round or author, or goes, by whatever path
(submit, import, sync pull). The open index reads the log past the last entry it applied, so it
stays current without rescanning examples. Signatures of existing examples are filled in by the
index's first build (``app.core.quality.near_duplicates``), not here: hashing belongs to the app.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

_CHANGED = ("OLD.text IS NOT NEW.text OR OLD.status IS NOT NEW.status OR OLD.round_id IS NOT NEW.round_id "
            "OR OLD.author_id IS NOT NEW.author_id OR OLD.task_id IS NOT NEW.task_id")


def upgrade() -> None:
    op.create_table(
        "example_signatures",
        sa.Column("example_id", sa.Uuid(), nullable=False),
        sa.Column("scheme", sa.String(length=64), nullable=False),
        sa.Column("text_hash", sa.String(length=32), nullable=False),
        sa.Column("normalised", sa.Text(), nullable=False),
        sa.Column("minhash", sa.LargeBinary(), nullable=False),
        sa.ForeignKeyConstraint(["example_id"], ["examples.id"], name=op.f("fk_example_signatures_example_id_examples"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("example_id", name=op.f("pk_example_signatures")),
    )
    op.create_table(
        "example_changes",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("example_id", sa.Uuid(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_example_changes")),
        sqlite_autoincrement=True,
    )
    op.execute("CREATE TRIGGER example_changes_insert AFTER INSERT ON examples "
               "BEGIN INSERT INTO example_changes (example_id) VALUES (NEW.id); END")
    op.execute(f"CREATE TRIGGER example_changes_update AFTER UPDATE ON examples WHEN {_CHANGED} "
               "BEGIN INSERT INTO example_changes (example_id) VALUES (NEW.id); END")
    op.execute("CREATE TRIGGER example_changes_delete AFTER DELETE ON examples "
               "BEGIN INSERT INTO example_changes (example_id) VALUES (OLD.id); END")


def downgrade() -> None:
    for trigger in ("example_changes_insert", "example_changes_update", "example_changes_delete"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger}")
    op.drop_table("example_changes")
    op.drop_table("example_signatures")
