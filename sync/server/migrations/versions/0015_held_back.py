"""Changes held back from desks that speak an older sync protocol: per person, how many and the range of
change numbers to send again once their desk speaks the newer one.

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = '0015'
down_revision = '0014'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('held_back',
    sa.Column('person_id', sa.Uuid(), nullable=False),
    sa.Column('protocol', sa.Integer(), nullable=False),
    sa.Column('first_seq', sa.BigInteger(), nullable=False),
    sa.Column('last_seq', sa.BigInteger(), nullable=False),
    sa.Column('changes', sa.Integer(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['person_id'], ['people.id'], name=op.f('fk_held_back_person_id_people')),
    sa.PrimaryKeyConstraint('person_id', name=op.f('pk_held_back'))
    )


def downgrade() -> None:
    op.drop_table('held_back')
