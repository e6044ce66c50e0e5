"""Each example records the writing assistant's part in it: the arm of the session it
was written in, whether a suggestion was applied, its generator and edit type, the suggestion's
text and the word edit distance from it to the submitted text. One JSON column, empty (NULL) for
every example written before: those had no assistant.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # ADD COLUMN in place: a batch copy of the examples table would take minutes on a large desk
    op.add_column("examples", sa.Column("assistance", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("examples") as batch_op:
        batch_op.drop_column("assistance")
