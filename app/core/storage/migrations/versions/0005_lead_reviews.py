"""Lead reviews: a lead accepts an annotator's work or returns examples with a comment.

``example_reviews`` keeps every accept/return as a record (who, when, why); the example
carries the latest state (``review_state``: accepted or returned, ``review_comment``,
``reviewed_at``) so the review table filters on it without a join. Indexes on the verdict
counts let the review table sort by disagreements, flags and verdicts within DESIGN.md §5. Old databases get
NULL review states: nothing has been reviewed yet.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "example_reviews",
        sa.Column("example_id", sa.Uuid(), nullable=False),
        sa.Column("lead_id", sa.Uuid(), nullable=False),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.ForeignKeyConstraint(["example_id"], ["examples.id"], name=op.f("fk_example_reviews_example_id_examples")),
        sa.ForeignKeyConstraint(["lead_id"], ["people.id"], name=op.f("fk_example_reviews_lead_id_people")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_example_reviews")),
    )
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.create_index("ix_example_reviews_example_id", ["example_id"])
        batch_op.create_index("ix_example_reviews_lead_id", ["lead_id"])
    with op.batch_alter_table("examples") as batch_op:
        batch_op.add_column(sa.Column("review_state", sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column("review_comment", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("reviewed_at", sa.DateTime(), nullable=True))
        batch_op.create_index("ix_examples_review_state", ["review_state"])
        batch_op.create_index("ix_examples_author_id_review_state", ["author_id", "review_state"])
        # sorting the review table by these counts serves its first page from an index
        batch_op.create_index("ix_examples_disagreement_count", ["disagreement_count"])
        batch_op.create_index("ix_examples_flag_count", ["flag_count"])
        batch_op.create_index("ix_examples_validation_count", ["validation_count"])
        batch_op.create_index("ix_examples_decided_verdict", ["decided_verdict"])
        # covers the review tab's figures and the queue's remaining count for a whole task
        batch_op.create_index("ix_examples_review_summary", ["task_id", "status", "validation_state", "model_fooled",
                                                             "review_state", "disagreement_count", "flag_count"])


def downgrade() -> None:
    with op.batch_alter_table("examples") as batch_op:
        for name in ("ix_examples_review_summary", "ix_examples_decided_verdict", "ix_examples_validation_count", "ix_examples_flag_count", "ix_examples_disagreement_count",
                     "ix_examples_author_id_review_state"):
            batch_op.drop_index(name)
        batch_op.drop_index("ix_examples_review_state")
        batch_op.drop_column("reviewed_at")
        batch_op.drop_column("review_comment")
        batch_op.drop_column("review_state")
    with op.batch_alter_table("example_reviews") as batch_op:
        batch_op.drop_index("ix_example_reviews_lead_id")
        batch_op.drop_index("ix_example_reviews_example_id")
    op.drop_table("example_reviews")
