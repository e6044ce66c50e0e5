"""Proposals: a lead's trained candidate for a task's next round, offered to the owner with its files,
manifest and comparison; and task policies (whether leads may promote and publish a round themselves).

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0006'
down_revision = '0005'
branch_labels = None
depends_on = None


def _stamps() -> list[sa.Column]:
    return [sa.Column('id', sa.Uuid(), nullable=False),
            sa.Column('created_at', sa.DateTime(), nullable=False),
            sa.Column('updated_at', sa.DateTime(), nullable=False),
            sa.Column('revision', sa.Integer(), nullable=False)]


def upgrade() -> None:
    op.create_table('task_policies',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('leads_may_promote', sa.Boolean(), nullable=False),
    sa.Column('set_by_id', sa.Uuid(), nullable=False),
    *_stamps(),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_task_policies_task_id_tasks')),
    sa.ForeignKeyConstraint(['set_by_id'], ['people.id'], name=op.f('fk_task_policies_set_by_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_policies')),
    sa.UniqueConstraint('task_id', name=op.f('uq_task_policies_task_id'))
    )
    op.create_table('proposals',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('proposer_id', sa.Uuid(), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('rounds_trained_on', sa.JSON(), nullable=False),
    sa.Column('compared_with_round', sa.Integer(), nullable=True),
    sa.Column('files', sa.JSON(), nullable=False),
    sa.Column('files_sha256', sa.String(length=64), nullable=False),
    sa.Column('comparison', sa.JSON(), nullable=True),
    sa.Column('figures', sa.JSON(), nullable=False),
    sa.Column('note', sa.Text(), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('decided_by_id', sa.Uuid(), nullable=True),
    sa.Column('decided_at', sa.DateTime(), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('promoted_round', sa.Integer(), nullable=True),
    sa.Column('forced', sa.Boolean(), nullable=False),
    *_stamps(),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_proposals_task_id_tasks')),
    sa.ForeignKeyConstraint(['proposer_id'], ['people.id'], name=op.f('fk_proposals_proposer_id_people')),
    sa.ForeignKeyConstraint(['decided_by_id'], ['people.id'], name=op.f('fk_proposals_decided_by_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_proposals'))
    )
    op.create_index(op.f('ix_proposals_task_id_created_at'), 'proposals', ['task_id', 'created_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_proposals_task_id_created_at'), table_name='proposals')
    op.drop_table('proposals')
    op.drop_table('task_policies')
