"""Blob quotas: who uploaded each stored model file (their quota counts it; the sweep of unreferenced files
keeps it through a grace period), and a per-person quota an owner may set.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27
"""

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column('people', sa.Column('blob_quota', sa.BigInteger(), nullable=True))
    op.create_table('blobs',
    sa.Column('sha256', sa.String(length=64), nullable=False),
    sa.Column('size', sa.BigInteger(), nullable=False),
    sa.Column('uploaded_by', sa.Uuid(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['uploaded_by'], ['people.id'], name=op.f('fk_blobs_uploaded_by_people')),
    sa.PrimaryKeyConstraint('sha256', name=op.f('pk_blobs'))
    )
    op.create_index(op.f('ix_blobs_uploaded_by'), 'blobs', ['uploaded_by'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_blobs_uploaded_by'), table_name='blobs')
    op.drop_table('blobs')
    # Not a batch (copy-and-rename) on SQLite: other tables' foreign keys point at people, and dropping it
    # fails with them enforced; SQLite (3.35+) and PostgreSQL both drop a column in place.
    op.execute('ALTER TABLE people DROP COLUMN blob_quota')
