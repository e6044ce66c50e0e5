"""Quarantine: stored records the change feed cannot send (nested too deep, too large) are set
aside there, so one record no longer fails every page that carries it.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('quarantine',
    sa.Column('record_id', sa.Uuid(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=True),
    sa.Column('owner_id', sa.Uuid(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('quarantined_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('record_id', name=op.f('pk_quarantine'))
    )


def downgrade() -> None:
    op.drop_table('quarantine')
