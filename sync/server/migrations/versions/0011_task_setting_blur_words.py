"""A lead's task settings carry the words they added to the task's blur list (analyst wellbeing),
so a team's desks blur them too.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('task_settings', sa.Column('blur_words', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.drop_column('blur_words')
