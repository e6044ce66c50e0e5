"""Sync outbox: records waiting to be pushed to the sync server.

Examples and validations that were already waiting (sync_state 'pending', not drafts) are put
in the outbox during the upgrade, so that nothing written before this version is left behind.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sync_outbox",
        sa.Column("seq", sa.Integer(), nullable=False, autoincrement=True),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("record_id", sa.Uuid(), nullable=False),
        sa.Column("person_id", sa.Uuid(), nullable=False),
        sa.Column("revision", sa.Integer(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_sync_outbox")),
        sa.UniqueConstraint("record_id", name=op.f("uq_sync_outbox_record_id")),
        sqlite_autoincrement=True,
    )
    with op.batch_alter_table("sync_outbox") as batch_op:
        batch_op.create_index("ix_sync_outbox_state_person_id_seq", ["state", "person_id", "seq"])
    # Backfill in the order the records were written, examples before the validations of them.
    op.execute(
        "INSERT INTO sync_outbox (kind, record_id, person_id, revision, state, attempts, created_at, updated_at) "
        "SELECT 'example', id, author_id, revision, 'pending', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP "
        "FROM examples WHERE sync_state = 'pending' AND status != 'draft' ORDER BY submitted_at, created_at"
    )
    op.execute(
        "INSERT INTO sync_outbox (kind, record_id, person_id, revision, state, attempts, created_at, updated_at) "
        "SELECT 'validation', id, validator_id, revision, 'pending', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP "
        "FROM validations WHERE sync_state = 'pending' ORDER BY created_at"
    )


def downgrade() -> None:
    with op.batch_alter_table("sync_outbox") as batch_op:
        batch_op.drop_index("ix_sync_outbox_state_person_id_seq")
    op.drop_table("sync_outbox")
