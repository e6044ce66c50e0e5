"""Review indexes: covering indexes for MER/vMER figures, and indexes for sorting by text and author.

Also: the facet index covers example_id, and a partial index serves the validation queue
in its own order. Measured on 100k examples (bench/bench_storage.py): figures per annotator and per round fall
from ~150 ms to ~17 ms, sorting the first page by text from ~120 ms to under 1 ms.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from alembic import op

revision = "0003"
down_revision = "0002"
QUEUE_CONDITION = "status IN ('submitted', 'flagged') AND validation_state != 'decided'"
branch_labels = None
depends_on = None



def upgrade() -> None:
    with op.batch_alter_table("examples") as batch_op:
        batch_op.drop_index("ix_examples_author_id")
        batch_op.drop_index("ix_examples_round_id")
        batch_op.create_index("ix_examples_author_figures",
                              ["author_id", "status", "task_id", "round_id", "model_fooled", "decided_verdict"])
        batch_op.create_index("ix_examples_round_figures",
                              ["round_id", "status", "task_id", "author_id", "model_fooled", "decided_verdict"])
        batch_op.create_index("ix_examples_id_summary", ["id", "status", "task_id", "round_id", "decided_verdict"])
        batch_op.create_index("ix_examples_text", ["text"])
    with op.batch_alter_table("model_outputs") as batch_op:
        batch_op.create_index("ix_model_outputs_figures", ["example_id", "model_id", "fooled"])
    with op.batch_alter_table("people") as batch_op:
        batch_op.create_index("ix_people_display_name_id", ["display_name", "id"])
    with op.batch_alter_table("example_facets") as batch_op:
        batch_op.drop_index("ix_example_facets_field_value")
        batch_op.create_index("ix_example_facets_field_value", ["field", "value", "example_id"])
    op.execute(f"CREATE INDEX ix_examples_queue ON examples (model_fooled DESC, validation_count, submitted_at) "
               f"WHERE {QUEUE_CONDITION}")


def downgrade() -> None:
    op.execute("DROP INDEX ix_examples_queue")
    with op.batch_alter_table("example_facets") as batch_op:
        batch_op.drop_index("ix_example_facets_field_value")
        batch_op.create_index("ix_example_facets_field_value", ["field", "value"])
    with op.batch_alter_table("people") as batch_op:
        batch_op.drop_index("ix_people_display_name_id")
    with op.batch_alter_table("model_outputs") as batch_op:
        batch_op.drop_index("ix_model_outputs_figures")
    with op.batch_alter_table("examples") as batch_op:
        for name in ("ix_examples_text", "ix_examples_id_summary", "ix_examples_round_figures", "ix_examples_author_figures"):
            batch_op.drop_index(name)
        batch_op.create_index("ix_examples_round_id", ["round_id"])
        batch_op.create_index("ix_examples_author_id", ["author_id"])
