"""Initial schema: people, tasks, rounds, contexts, model records, examples, validations, suites.

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
    op.create_table('meta',
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('key', name=op.f('pk_meta'))
    )
    op.create_table('people',
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('role', sa.String(length=20), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_people'))
    )
    op.create_table('tasks',
    sa.Column('code', sa.String(length=64), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('definition', sa.JSON(), nullable=False),
    sa.Column('fingerprint', sa.String(length=64), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tasks')),
    sa.UniqueConstraint('code', name=op.f('uq_tasks_code'))
    )
    op.create_table('model_records',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('format', sa.String(length=32), nullable=False),
    sa.Column('path', sa.Text(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('label_map', sa.JSON(), nullable=False),
    sa.Column('task_id', sa.Uuid(), nullable=True),
    sa.Column('provenance', sa.JSON(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_model_records_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_records')),
    sa.UniqueConstraint('sha256', name=op.f('uq_model_records_sha256'))
    )
    with op.batch_alter_table('model_records', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_records_task_id'), ['task_id'], unique=False)

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
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_rounds_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rounds')),
    sa.UniqueConstraint('task_id', 'number', name=op.f('uq_rounds_task_id_number'))
    )
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_rounds_task_id'), ['task_id'], unique=False)

    op.create_table('suites',
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('format', sa.String(length=32), nullable=False),
    sa.Column('task_id', sa.Uuid(), nullable=True),
    sa.Column('source', sa.Text(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_suites_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_suites')),
    sa.UniqueConstraint('sha256', name=op.f('uq_suites_sha256'))
    )
    op.create_table('contexts',
    sa.Column('round_id', sa.Uuid(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('data', sa.JSON(), nullable=True),
    sa.Column('tag', sa.String(length=200), nullable=False),
    sa.Column('source', sa.String(length=500), nullable=False),
    sa.Column('content_hash', sa.String(length=64), nullable=False),
    sa.Column('times_used', sa.Integer(), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_contexts_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_contexts')),
    sa.UniqueConstraint('round_id', 'content_hash', name=op.f('uq_contexts_round_id_content_hash'))
    )
    with op.batch_alter_table('contexts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_contexts_round_id'), ['round_id'], unique=False)

    op.create_table('round_models',
    sa.Column('round_id', sa.Uuid(), nullable=False),
    sa.Column('model_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.ForeignKeyConstraint(['model_id'], ['model_records.id'], name=op.f('fk_round_models_model_id_model_records')),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_round_models_round_id_rounds'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('round_id', 'model_id', name=op.f('pk_round_models'))
    )
    op.create_table('suite_cases',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('suite_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('case_id', sa.String(length=64), nullable=False),
    sa.Column('functionality', sa.String(length=200), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('gold_label', sa.String(length=200), nullable=False),
    sa.Column('target', sa.String(length=200), nullable=True),
    sa.Column('extra', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['suite_id'], ['suites.id'], name=op.f('fk_suite_cases_suite_id_suites'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_suite_cases')),
    sa.UniqueConstraint('suite_id', 'case_id', name=op.f('uq_suite_cases_suite_id_case_id'))
    )
    with op.batch_alter_table('suite_cases', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_suite_cases_functionality'), ['functionality'], unique=False)

    op.create_table('examples',
    sa.Column('task_id', sa.Uuid(), nullable=False),
    sa.Column('round_id', sa.Uuid(), nullable=False),
    sa.Column('context_id', sa.Uuid(), nullable=True),
    sa.Column('author_id', sa.Uuid(), nullable=False),
    sa.Column('inputs', sa.JSON(), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
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
    sa.Column('time_spent_ms', sa.Integer(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(), nullable=True),
    sa.Column('source', sa.String(length=200), nullable=True),
    sa.Column('external_id', sa.String(length=200), nullable=True),
    sa.Column('sync_state', sa.String(length=16), nullable=False),
    sa.Column('validation_state', sa.String(length=16), nullable=False),
    sa.Column('validation_count', sa.Integer(), nullable=False),
    sa.Column('flag_count', sa.Integer(), nullable=False),
    sa.Column('disagreement_count', sa.Integer(), nullable=False),
    sa.Column('decided_verdict', sa.String(length=16), nullable=True),
    sa.Column('decided_label', sa.String(length=200), nullable=True),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['author_id'], ['people.id'], name=op.f('fk_examples_author_id_people')),
    sa.ForeignKeyConstraint(['context_id'], ['contexts.id'], name=op.f('fk_examples_context_id_contexts')),
    sa.ForeignKeyConstraint(['perturbation_of'], ['examples.id'], name=op.f('fk_examples_perturbation_of_examples')),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_examples_round_id_rounds')),
    sa.ForeignKeyConstraint(['task_id'], ['tasks.id'], name=op.f('fk_examples_task_id_tasks')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_examples'))
    )
    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_examples_author_id'), ['author_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_context_id'), ['context_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_model_fooled'), ['model_fooled'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_perturbation_of'), ['perturbation_of'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_round_id'), ['round_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_source_external_id'), ['source', 'external_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_status'), ['status'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_submitted_at'), ['submitted_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_task_id_round_id_status'), ['task_id', 'round_id', 'status'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_true_label'), ['true_label'], unique=False)
        batch_op.create_index(batch_op.f('ix_examples_validation_state'), ['validation_state'], unique=False)

    op.create_table('model_outputs',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('example_id', sa.Uuid(), nullable=False),
    sa.Column('model_id', sa.Uuid(), nullable=False),
    sa.Column('position', sa.Integer(), nullable=False),
    sa.Column('model_sha256', sa.String(length=64), nullable=False),
    sa.Column('label', sa.String(length=200), nullable=False),
    sa.Column('probabilities', sa.JSON(), nullable=False),
    sa.Column('latency_ms', sa.Float(), nullable=True),
    sa.Column('answer', sa.JSON(), nullable=True),
    sa.Column('fooled', sa.Boolean(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_model_outputs_example_id_examples'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['model_id'], ['model_records.id'], name=op.f('fk_model_outputs_model_id_model_records')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_model_outputs')),
    sa.UniqueConstraint('example_id', 'model_id', name=op.f('uq_model_outputs_example_id_model_id'))
    )
    with op.batch_alter_table('model_outputs', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_model_outputs_model_id'), ['model_id'], unique=False)

    op.create_table('validations',
    sa.Column('example_id', sa.Uuid(), nullable=False),
    sa.Column('validator_id', sa.Uuid(), nullable=False),
    sa.Column('verdict', sa.String(length=16), nullable=False),
    sa.Column('corrected_label', sa.String(length=200), nullable=True),
    sa.Column('reason', sa.Text(), nullable=True),
    sa.Column('model_note', sa.Text(), nullable=True),
    sa.Column('mode', sa.String(length=16), nullable=False),
    sa.Column('time_spent_ms', sa.Integer(), nullable=False),
    sa.Column('sync_state', sa.String(length=16), nullable=False),
    sa.Column('revision', sa.Integer(), nullable=False),
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['example_id'], ['examples.id'], name=op.f('fk_validations_example_id_examples')),
    sa.ForeignKeyConstraint(['validator_id'], ['people.id'], name=op.f('fk_validations_validator_id_people')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_validations')),
    sa.UniqueConstraint('example_id', 'validator_id', 'mode', name=op.f('uq_validations_example_id_validator_id_mode'))
    )
    with op.batch_alter_table('validations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_validations_example_id'), ['example_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_validations_validator_id'), ['validator_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('validations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_validations_validator_id'))
        batch_op.drop_index(batch_op.f('ix_validations_example_id'))

    op.drop_table('validations')
    with op.batch_alter_table('model_outputs', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_outputs_model_id'))

    op.drop_table('model_outputs')
    with op.batch_alter_table('examples', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_examples_validation_state'))
        batch_op.drop_index(batch_op.f('ix_examples_true_label'))
        batch_op.drop_index(batch_op.f('ix_examples_task_id_round_id_status'))
        batch_op.drop_index(batch_op.f('ix_examples_submitted_at'))
        batch_op.drop_index(batch_op.f('ix_examples_status'))
        batch_op.drop_index(batch_op.f('ix_examples_source_external_id'))
        batch_op.drop_index(batch_op.f('ix_examples_round_id'))
        batch_op.drop_index(batch_op.f('ix_examples_perturbation_of'))
        batch_op.drop_index(batch_op.f('ix_examples_model_fooled'))
        batch_op.drop_index(batch_op.f('ix_examples_context_id'))
        batch_op.drop_index(batch_op.f('ix_examples_author_id'))

    op.drop_table('examples')
    with op.batch_alter_table('suite_cases', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_suite_cases_functionality'))

    op.drop_table('suite_cases')
    op.drop_table('round_models')
    with op.batch_alter_table('contexts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_contexts_round_id'))

    op.drop_table('contexts')
    op.drop_table('suites')
    with op.batch_alter_table('rounds', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_rounds_task_id'))

    op.drop_table('rounds')
    with op.batch_alter_table('model_records', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_model_records_task_id'))

    op.drop_table('model_records')
    op.drop_table('tasks')
    op.drop_table('people')
    op.drop_table('meta')
