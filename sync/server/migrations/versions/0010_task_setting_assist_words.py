"""A lead's task settings carry their changes to the writing assistant's word lists too, so a
team's desks suggest edits from the same lists.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0010'
down_revision = '0009'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('task_settings', sa.Column('assist_words', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.drop_column('assist_words')
