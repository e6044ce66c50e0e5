"""Examples carry the writing assistant's record: the session's arm and number, the
suggestion applied and the word edit distance the server measured from it to the stored text.
Empty (NULL) for every example stored before.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0008'
down_revision = '0007'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('examples', sa.Column('assistance', sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table('examples') as batch_op:
        batch_op.drop_column('assistance')
