"""Lead reviews remember when the server received them.

An example shows its latest review; "latest" is the server's arrival order (``received_at``),
not ``created_at``, which the writing desk's clock chose. Reviews already here keep NULL: they
are ordered by ``created_at`` as before.

Revision ID: 0008
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.add_column(sa.Column("received_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.drop_column("received_at")
