"""A lead's task settings are one JSON column, ``settings`` (``TaskSettings.to_json()``), instead of a
column per setting (0005's agreement threshold, 0007's quality settings, 0010's assistant word lists,
0011's blur words): a new setting is a field of ``TaskSettings``, never a migration. Every stored
value is kept; the downgrade writes them back to their columns.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-28
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

# The settings that had a column each, in their order; a frozen copy (migrations never import live code).
COLUMNS = ('agreement_threshold', 'quality', 'assist_words', 'blur_words')
# What a task definition's agreement threshold is when it names none (``TaskDefinition``, frozen here).
DEFINITION_THRESHOLD = 3


def _table(*columns: sa.ColumnClause) -> sa.TableClause:
    return sa.table('task_settings', sa.column('id', sa.Uuid()), *columns)


def upgrade() -> None:
    op.add_column('task_settings', sa.Column('settings', sa.JSON(), nullable=True))
    old = _table(sa.column('agreement_threshold', sa.Integer()), sa.column('quality', sa.JSON()),
                 sa.column('assist_words', sa.JSON()), sa.column('blur_words', sa.JSON()),
                 sa.column('settings', sa.JSON()))
    bind = op.get_bind()
    rows = bind.execute(sa.select(old.c.id, *(old.c[name] for name in COLUMNS))).all()
    # A setting a desk from before it sent as None is left out: the default, which is what desks took it as.
    values = [{'b_id': row[0],
               'b_settings': {name: value for name, value in zip(COLUMNS, row[1:], strict=True) if value is not None}}
              for row in rows]
    if values:
        bind.execute(old.update().where(old.c.id == sa.bindparam('b_id'))
                     .values(settings=sa.bindparam('b_settings', type_=sa.JSON())), values)
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.alter_column('settings', existing_type=sa.JSON(), nullable=False)
        for name in COLUMNS:
            batch_op.drop_column(name)


def downgrade() -> None:
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.add_column(sa.Column('agreement_threshold', sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column('quality', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('assist_words', sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column('blur_words', sa.JSON(), nullable=True))
    table = _table(sa.column('task_id', sa.Uuid()), sa.column('settings', sa.JSON()),
                   *(sa.column(name, sa.Integer() if name == 'agreement_threshold' else sa.JSON()) for name in COLUMNS))
    tasks = sa.table('tasks', sa.column('id', sa.Uuid()), sa.column('definition', sa.JSON()))
    bind = op.get_bind()
    definitions = dict(bind.execute(sa.select(tasks.c.id, tasks.c.definition)).all())
    values = []
    for row_id, task_id, settings in bind.execute(sa.select(table.c.id, table.c.task_id, table.c.settings)).all():
        settings = settings if isinstance(settings, dict) else {}
        threshold = settings.get('agreement_threshold')
        if threshold is None:  # "the task's own number": the old column always named one
            threshold = (definitions.get(task_id) or {}).get('agreement_threshold', DEFINITION_THRESHOLD)
        values.append({'b_id': row_id, 'b_threshold': threshold, 'b_quality': settings.get('quality'),
                       'b_assist': settings.get('assist_words'), 'b_blur': settings.get('blur_words')})
    if values:
        nullable = sa.JSON(none_as_null=True)  # a setting left out is SQL NULL, as it was
        bind.execute(table.update().where(table.c.id == sa.bindparam('b_id')).values(
            agreement_threshold=sa.bindparam('b_threshold'), quality=sa.bindparam('b_quality', type_=nullable),
            assist_words=sa.bindparam('b_assist', type_=nullable), blur_words=sa.bindparam('b_blur', type_=nullable)),
            values)
    with op.batch_alter_table('task_settings') as batch_op:
        batch_op.alter_column('agreement_threshold', existing_type=sa.Integer(), nullable=False)
        batch_op.drop_column('settings')
