"""The model leaderboard's cells: every model the task has had, scored on every round's held-out
split, kept so that a cell is scored again only when its split changed.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "leaderboard_cells",
        sa.Column("round_id", sa.Uuid(), nullable=False),
        sa.Column("model_key", sa.String(length=64), nullable=False),
        sa.Column("model_name", sa.String(length=200), nullable=False),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("n", sa.Integer(), nullable=False),
        sa.Column("accuracy", sa.Float(), nullable=True),
        sa.Column("macro_f1", sa.Float(), nullable=True),
        sa.Column("accuracy_low", sa.Float(), nullable=True),
        sa.Column("accuracy_high", sa.Float(), nullable=True),
        sa.Column("fooling_n", sa.Integer(), nullable=False),
        sa.Column("fooling_right", sa.Float(), nullable=True),
        sa.Column("problem", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["round_id"], ["rounds.id"], name=op.f("fk_leaderboard_cells_round_id_rounds"),
                                ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_leaderboard_cells")),
        sa.UniqueConstraint("round_id", "model_key", name=op.f("uq_leaderboard_cells_round_id_model_key")),
    )
    op.create_index(op.f("ix_leaderboard_cells_round_id"), "leaderboard_cells", ["round_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_leaderboard_cells_round_id"), table_name="leaderboard_cells")
    op.drop_table("leaderboard_cells")
