"""Analyst wellbeing: people's exposure spans and answered break prompts, served to the leads
of their team only, and each team's exposure alert lines.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0009'
down_revision = '0008'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('wellbeing_records',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('person_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('body', sa.JSON(), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['person_id'], ['people.id'], name=op.f('fk_wellbeing_records_person_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_wellbeing_records')),
    sa.UniqueConstraint('seq', name=op.f('uq_wellbeing_records_seq'))
    )
    op.create_index('ix_wellbeing_records_team_seq', 'wellbeing_records', ['team', 'seq'])
    op.create_index('ix_wellbeing_records_person_id_seq', 'wellbeing_records', ['person_id', 'seq'])
    op.create_table('wellbeing_limits',
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('lead_id', sa.Uuid(), nullable=False),
    sa.Column('daily_min', sa.Integer(), nullable=False),
    sa.Column('continuous_min', sa.Integer(), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['lead_id'], ['people.id'], name=op.f('fk_wellbeing_limits_lead_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_wellbeing_limits'))
    )
    op.create_index('ix_wellbeing_limits_team_received_at', 'wellbeing_limits', ['team', 'received_at'])
    counters = sa.table('counters', sa.column('name', sa.String), sa.column('value', sa.BigInteger))
    op.bulk_insert(counters, [{'name': 'wellbeing_seq', 'value': 0}])


def downgrade() -> None:
    op.execute("DELETE FROM counters WHERE name = 'wellbeing_seq'")
    op.drop_table('wellbeing_limits')
    op.drop_table('wellbeing_records')
