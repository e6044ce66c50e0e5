"""A server on several machines: model files in the database (chunked, by upload; a blob is served only
once its whole content matched its sha256) and request counts every server process shares.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('blob_uploads',
    sa.Column('id', sa.Uuid(), nullable=False),
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_blob_uploads'))
    )
    op.create_table('blob_chunks',
    sa.Column('upload_id', sa.Uuid(), nullable=False),
    sa.Column('seq', sa.Integer(), nullable=False),
    sa.Column('data', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['upload_id'], ['blob_uploads.id'], name=op.f('fk_blob_chunks_upload_id_blob_uploads')),
    sa.PrimaryKeyConstraint('upload_id', 'seq', name=op.f('pk_blob_chunks'))
    )
    if op.get_bind().dialect.name == 'postgresql':
        # model files do not compress: store chunks out of line without trying
        op.execute('ALTER TABLE blob_chunks ALTER COLUMN data SET STORAGE EXTERNAL')
    op.create_table('blob_contents',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('upload_id', sa.Uuid(), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('chunks', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['upload_id'], ['blob_uploads.id'], name=op.f('fk_blob_contents_upload_id_blob_uploads')),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_blob_contents')),
    sa.UniqueConstraint('upload_id', name=op.f('uq_blob_contents_upload_id'))
    )
    op.create_table('request_counts',
    sa.Column('key', sa.String(length=80), nullable=False),
    sa.Column('window_start', sa.BigInteger(), nullable=False),
    sa.Column('hits', sa.Integer(), nullable=False),
    sa.PrimaryKeyConstraint('key', 'window_start', name=op.f('pk_request_counts'))
    )


def downgrade() -> None:
    op.drop_table('request_counts')
    op.drop_table('blob_contents')
    op.drop_table('blob_chunks')
    op.drop_table('blob_uploads')
