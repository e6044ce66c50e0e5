"""The server judges "fooled" itself. Examples stored before kept their desk's claim;
judge them again as a push now does (``store.judge``: the outputs of the round's target models,
the true label or answer, the round's rule), and send those that change to desks again. Examples of
imported data sets' token-less authors keep their data set's flag, as at push.

Revision ID: 0004
Revises: 0002
Create Date: 2026-11-24
"""

import uuid

import sqlalchemy as sa
from alembic import op

from app.core.domain import Span
from app.core.tasks.definition import TaskDefinition
from sync.server.store.judging import judge

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None

# Only the columns this step reads or writes, as they are at this revision.
tasks = sa.table("tasks", sa.column("id", sa.Uuid()), sa.column("definition", sa.JSON()))
models = sa.table("models", sa.column("id", sa.Uuid()), sa.column("sha256", sa.String()))
rounds = sa.table("rounds", sa.column("id", sa.Uuid()), sa.column("fooled_rule", sa.String()),
                  sa.column("target_models", sa.JSON()))
people = sa.table("people", sa.column("id", sa.Uuid()), sa.column("token_hash", sa.String()))
examples = sa.table("examples", sa.column("id", sa.Uuid()), sa.column("task_id", sa.Uuid()),
                    sa.column("round_id", sa.Uuid()), sa.column("author_id", sa.Uuid()),
                    sa.column("true_label", sa.String()), sa.column("answer", sa.JSON()),
                    sa.column("model_fooled", sa.Boolean()), sa.column("fooled_rule", sa.String()),
                    sa.column("outputs", sa.JSON()))
counters = sa.table("counters", sa.column("name", sa.String()), sa.column("value", sa.BigInteger()))
changes = sa.table("changes", sa.column("record_id", sa.Uuid()), sa.column("seq", sa.BigInteger()))


def upgrade() -> None:
    bind = op.get_bind()
    definitions = {i: TaskDefinition.model_validate(d) for i, d in bind.execute(sa.select(tasks.c.id, tasks.c.definition))}
    sha_of = dict(bind.execute(sa.select(models.c.id, models.c.sha256)).all())
    targets = {i: ([sha_of[uuid.UUID(str(m))] for m in ids or [] if uuid.UUID(str(m)) in sha_of], rule)
               for i, rule, ids in bind.execute(sa.select(rounds.c.id, rounds.c.fooled_rule, rounds.c.target_models))}
    rows = bind.execute(sa.select(examples).join(people, people.c.id == examples.c.author_id)
                        .where(people.c.token_hash.is_not(None))).all()
    changed = []
    for row in rows:
        shas, rule = targets[row.round_id]
        verdict = judge(definitions[row.task_id], shas, rule, row.true_label, Span.from_json(row.answer),
                        row.outputs or [])
        if (verdict.fooled, verdict.outputs, rule) != (row.model_fooled, row.outputs or [], row.fooled_rule):
            bind.execute(examples.update().where(examples.c.id == row.id)
                         .values(model_fooled=verdict.fooled, fooled_rule=rule, outputs=verdict.outputs))
            changed.append(row.id)
    if not changed:
        return
    # New change numbers, after every existing one, so that desks pull the judged examples again.
    top = bind.execute(sa.select(counters.c.value).where(counters.c.name == "change_seq")).scalar_one()
    bind.execute(counters.update().where(counters.c.name == "change_seq").values(value=top + len(changed)))
    bind.execute(changes.update().where(changes.c.record_id == sa.bindparam("b_id")).values(seq=sa.bindparam("b_seq")),
                 [{"b_id": record_id, "b_seq": top + n} for n, record_id in enumerate(changed, start=1)])


def downgrade() -> None:
    pass  # the server's judgement is a better value than the claim it replaced
