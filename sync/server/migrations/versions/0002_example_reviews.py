"""Lead reviews on the server: a lead's accept or return of an example, pushed from their desk
and pulled by the team's desks (the author's among them).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('example_reviews',
    sa.Column('example_id', sa.Uuid(), nullable=False),
    sa.Column('lead_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('action', sa.String(length=16), nullable=False),
    sa.Column('comment', sa.Text(), nullable=True),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_example_reviews_example_id_examples')),
    sa.ForeignKeyConstraint(['lead_id'], ['people.id'], name=op.f('fk_example_reviews_lead_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_example_reviews'))
    )
    op.create_index(op.f('ix_example_reviews_example_id'), 'example_reviews', ['example_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_example_reviews_example_id'), table_name='example_reviews')
    op.drop_table('example_reviews')
