"""Server schema: people and their token hashes, published tasks, rounds, contexts and model
records, pushed examples and validations, and the change feed with its counter.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

import sqlalchemy as sa
from alembic import op

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('changes',
    sa.Column('record_id', sa.Uuid(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('seq', sa.BigInteger(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=True),
    sa.Column('owner_id', sa.Uuid(), nullable=True),
    sa.PrimaryKeyConstraint('record_id', name=op.f('pk_changes')),
    sa.UniqueConstraint('seq', name=op.f('uq_changes_seq'))
    )
    counters = op.create_table('counters',
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('value', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('name', name=op.f('pk_counters'))
    )
    op.bulk_insert(counters, [{'name': 'change_seq', 'value': 0}])
    op.create_table('models',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('format', sa.String(length=32), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('label_map', sa.JSON(), nullable=False),
    sa.Column('task_code', sa.String(length=64), nullable=True),
    sa.Column('provenance', sa.JSON(), nullable=False),
    sa.Column('files', sa.JSON(), nullable=True),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_models')),
    sa.UniqueConstraint('sha256', name=op.f('uq_models_sha256'))
    )
    op.create_table('people',
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=20), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=True),
    sa.Column('active', sa.Boolean(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_people')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_people_token_hash'))
    )
    op.create_index(op.f('ix_people_team'), 'people', ['team'], unique=False)

    op.create_table('tasks',
    sa.Column('code', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('definition', sa.JSON(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tasks')),
    sa.UniqueConstraint('code', name=op.f('uq_tasks_code'))
    )
    op.create_table('rounds',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('description', sa.Text(), nullable=False),
    sa.Column('goal_message', sa.Text(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('fooled_rule', sa.String(length=16), nullable=False),
    sa.Column('opened_at', sa.DateTime(), nullable=True),
    sa.Column('closed_at', sa.DateTime(), nullable=True),
    sa.Column('settings', sa.JSON(), nullable=False),
    sa.Column('target_models', sa.JSON(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_rounds_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rounds')),
    sa.UniqueConstraint('task_id', 'number', name=op.f('uq_rounds_task_id_number'))
    )
    op.create_table('contexts',
    sa.Column('round_id', sa.Uuid(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=True),
    sa.Column('tag', sa.String(length=200), nullable=False),
    sa.Column('source', sa.String(length=500), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('times_used', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_contexts_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_contexts')),
    sa.UniqueConstraint('round_id', 'content_hash', name=op.f('uq_contexts_round_id_content_hash'))
    )
    op.create_table('examples',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('round_id', sa.Uuid(), nullable=False),
    sa.Column('context_id', sa.Uuid(), nullable=True),
    sa.Column('author_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('inputs', sa.JSON(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('text_hash', sa.String(length=64), nullable=False),
    sa.Column('true_label', sa.String(length=200), nullable=True),
    sa.Column('answer', sa.JSON(), nullable=True),
    sa.Column('model_fooled', sa.Boolean(), nullable=True),
    sa.Column('fooled_rule', sa.String(length=16), nullable=False),
    sa.Column('meta', sa.JSON(), nullable=False),
    sa.Column('origin', sa.JSON(), nullable=False),
    sa.Column('perturbation_of', sa.Uuid(), nullable=True),
    sa.Column('edit_ops', sa.JSON(), nullable=True),
    sa.Column('edit_distance', sa.Integer(), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.Text(), nullable=True),
    sa.Column('time_spent_ms', sa.BigInteger(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(), nullable=True),
    sa.Column('source', sa.String(length=200), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('outputs', sa.JSON(), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.Column('stored_seq', sa.BigInteger(), nullable=False),
    sa.Column('duplicate_of', sa.Uuid(), nullable=True),
    sa.Column('validation_state', sa.String(length=16), nullable=False),
    sa.Column('validation_count', sa.Integer(), nullable=False),
    sa.Column('flag_count', sa.Integer(), nullable=False),
    sa.Column('disagreement_count', sa.Integer(), nullable=False),
    sa.Column('decided_verdict', sa.String(length=16), nullable=True),
    sa.Column('decided_label', sa.String(length=200), nullable=True),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['author_id'], ['people.id'], name=op.f('fk_examples_author_id_people')),
    sa.ForeignKeyConstraint(['context_id'], ['contexts.id'], name=op.f('fk_examples_context_id_contexts')),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_examples_round_id_rounds')),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_examples_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_examples'))
    )
    op.create_index(op.f('ix_examples_author_id_status'), 'examples', ['author_id', 'status'], unique=False)
    op.create_index(op.f('ix_examples_round_id_text_hash'), 'examples', ['round_id', 'text_hash'], unique=False)
    op.create_index(op.f('ix_examples_team_round_id_status'), 'examples', ['team', 'round_id', 'status'], unique=False)

    op.create_table('validations',
    sa.Column('example_id', sa.Uuid(), nullable=False),
    sa.Column('validator_id', sa.Uuid(), nullable=False),
    sa.Column('team', sa.String(length=64), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('corrected_label', sa.String(length=200), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('model_note', sa.Text(), nullable=True),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('time_spent_ms', sa.BigInteger(), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_validations_example_id_examples')),
    sa.ForeignKeyConstraint(['validator_id'], ['people.id'], name=op.f('fk_validations_validator_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_validations')),
    sa.UniqueConstraint('example_id', 'validator_id', 'mode', name=op.f('uq_validations_example_id_validator_id_mode'))
    )
    op.create_index(op.f('ix_validations_example_id'), 'validations', ['example_id'], unique=False)



def downgrade() -> None:
    op.drop_index(op.f('ix_validations_example_id'), table_name='validations')

    op.drop_table('validations')
    op.drop_index(op.f('ix_examples_team_round_id_status'), table_name='examples')
    op.drop_index(op.f('ix_examples_round_id_text_hash'), table_name='examples')
    op.drop_index(op.f('ix_examples_author_id_status'), table_name='examples')

    op.drop_table('examples')
    op.drop_table('contexts')
    op.drop_table('rounds')
    op.drop_table('tasks')
    op.drop_index(op.f('ix_people_team'), table_name='people')

    op.drop_table('people')
    op.drop_table('models')
    op.drop_table('counters')
    op.drop_table('changes')
