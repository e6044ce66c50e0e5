"""One model, one checksum: strip build paths from exported ONNX models and re-point predictions.

ONNX files exported by earlier versions held the absolute source paths of the exporting desk, so
the same model got another sha256 on every desk, and examples written against "another" one were
never accepted by the server. Registered ONNX models lose those bytes (their answers do not
change); each record, and every stored prediction naming it, takes the new checksum.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-24
"""

from alembic import op
from sqlalchemy.orm import Session

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    from app.core.services.target_models import repair_stale_exports

    session = Session(bind=op.get_bind())
    repair_stale_exports(session)
    session.flush()


def downgrade() -> None:
    pass  # the stripped bytes were never part of the model
