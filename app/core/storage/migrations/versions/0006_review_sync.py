"""Lead reviews sync: accept/return records travel to the author's desk like validations.

``example_reviews`` gets a ``revision`` and a ``sync_state``. Reviews written before this
version go into the outbox during the upgrade (under the lead who wrote them), unless their
example never leaves this desk (an imported data set): then they stay local, as the example does.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.add_column(sa.Column("revision", sa.Integer(), nullable=False, server_default="1"))
        batch_op.add_column(sa.Column("sync_state", sa.String(length=16), nullable=False, server_default="local"))
    op.execute(
        "UPDATE example_reviews SET sync_state = 'pending' WHERE example_id IN "
        "(SELECT id FROM examples WHERE sync_state != 'local' AND status != 'draft')"
    )
    op.execute(
        "INSERT INTO sync_outbox (kind, record_id, person_id, revision, state, attempts, created_at, updated_at) "
        "SELECT 'example_review', id, lead_id, revision, 'pending', 0, CURRENT_TIMESTAMP, CURRENT_TIMESTAMP "
        "FROM example_reviews WHERE sync_state = 'pending' ORDER BY created_at"
    )


def downgrade() -> None:
    op.execute("DELETE FROM sync_outbox WHERE kind = 'example_review'")
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.drop_column("sync_state")
        batch_op.drop_column("revision")
