"""Each example counts its objections: verdicts (peer or lead) of incorrect or flagged.

A validator who says incorrect or flagged disagrees with the author even where the validators
agree among themselves, which ``disagreement_count`` (verdicts against the peers' majority) does
not show. The review filters, sorts and counts by it; stored and indexed, as the other counts,
to stay within DESIGN.md §5 (a correlated count over 100k examples took ~350 ms).

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN in place: a batch copy of the examples table would take minutes on a large desk
    op.add_column("examples", sa.Column("objection_count", sa.Integer(), nullable=False, server_default="0"))
    op.execute("UPDATE examples SET objection_count = (SELECT count(*) FROM validations v "
               "WHERE v.example_id = examples.id AND v.verdict IN ('incorrect', 'flagged')) "
               "WHERE validation_count > 0")
    op.create_index("ix_examples_objection_count", "examples", ["objection_count"])  # sorting by it
    op.create_index("ix_examples_task_objections", "examples", ["task_id", "objection_count", "status"])  # counting


def downgrade() -> None:
    op.drop_index("ix_examples_task_objections", "examples")
    op.drop_index("ix_examples_objection_count", "examples")
    with op.batch_alter_table("examples") as batch_op:
        batch_op.drop_column("objection_count")
