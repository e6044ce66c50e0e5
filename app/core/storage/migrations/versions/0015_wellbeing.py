"""Analyst wellbeing: spans of work with hateful content and the break prompts answered,
kept per person and pushed to the leads of their team.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def _synced() -> list[sa.Column]:
    return [sa.Column("id", sa.Uuid(), nullable=False), sa.Column("created_at", sa.DateTime(), nullable=False),
            sa.Column("updated_at", sa.DateTime(), nullable=False), sa.Column("revision", sa.Integer(), nullable=False)]


def upgrade() -> None:
    op.create_table(
        "exposure_spans",
        sa.Column("person_id", sa.Uuid(), nullable=False),
        sa.Column("activity", sa.String(length=16), nullable=False),
        sa.Column("task_code", sa.String(length=64), nullable=False),
        sa.Column("example_id", sa.Uuid(), nullable=True),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.Column("ended_at", sa.DateTime(), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("team", sa.String(length=64), nullable=True),
        sa.Column("sync_state", sa.String(length=16), nullable=False),
        *_synced(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exposure_spans")),
    )
    op.create_index("ix_exposure_spans_person_id_ended_at", "exposure_spans", ["person_id", "ended_at"])
    op.create_index("ix_exposure_spans_sync_state", "exposure_spans", ["sync_state"])
    op.create_table(
        "wellbeing_breaks",
        sa.Column("person_id", sa.Uuid(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("break_min", sa.Integer(), nullable=False),
        sa.Column("continuous_min", sa.Integer(), nullable=False),
        sa.Column("daily_min", sa.Integer(), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("team", sa.String(length=64), nullable=True),
        sa.Column("sync_state", sa.String(length=16), nullable=False),
        *_synced(),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_wellbeing_breaks")),
    )
    op.create_index("ix_wellbeing_breaks_person_id_at", "wellbeing_breaks", ["person_id", "at"])
    op.create_index("ix_wellbeing_breaks_sync_state", "wellbeing_breaks", ["sync_state"])


def downgrade() -> None:
    op.drop_table("wellbeing_breaks")
    op.drop_table("exposure_spans")
