"""A lead's task settings carry their data-quality settings too (near-duplicate threshold, token and
duplicate-rate alert lines), so a team's desks get them with the agreement threshold.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0007'
down_revision = '0006'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('task_settings', sa.Column('quality', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.drop_column('quality')
