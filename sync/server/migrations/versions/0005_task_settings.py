"""A lead's agreement threshold for their team's examples of a task, pushed from their desk: the
server and the team's desks decide examples with the latest one.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

import sqlalchemy as sa
from alembic import op

revision = '0005'
down_revision = '0004'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('task_settings',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('lead_id', sa.Uuid(), nullable=False),
    sa.Column('agreement_threshold', sa.Integer(), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_task_settings_task_id_tasks')),
    sa.ForeignKeyConstraint(['lead_id'], ['people.id'], name=op.f('fk_task_settings_lead_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_task_settings'))
    )
    op.create_index(op.f('ix_task_settings_team_task_id_received_at'), 'task_settings',
                    ['team', 'task_id', 'received_at'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_task_settings_team_task_id_received_at'), table_name='task_settings')
    op.drop_table('task_settings')
