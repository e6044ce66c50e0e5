"""What the server does with records: push, publish, pull, team figures. No HTTP here.

Rules:
- Push is idempotent by record id and revision. The same revision with the same content is
  ``already_stored``; anything else that disagrees with what the server holds is a
  ``conflict``, reported with the server's version and never overwritten.
- Submitted examples are immutable except for their status (submitted → flagged → retracted,
  by a higher revision). Validations and lead reviews (accept/return) are append-only; only
  leads and owners of the example's team review.
- Nobody writes as someone else: an example's author and a validation's validator must be the
  token's holder. The one exception: owners publishing an imported data set write it under the
  data set's own (pseudonymous, token-less) authors.
- "Fooled" is judged here (``judge``), never taken from a desk, for every example by someone with
  an account: the figures that rate annotators must not be forgeable by them (docs/sync.md).
- A request with a forbidden record stores nothing (403, every such record named); a record
  that breaks a content rule is ``rejected`` on its own, with the rule in its words.
- Every stored change gets the next number of one counter, taken at the very end of the
  transaction. The counter row lock orders commits, so changes become visible in number order
  and "changes since N" never skips one that commits late. Duplicate texts are looked for
  under the same lock, so two desks sending the same text at once still get one marked.
"""

from sync.server.store.feed import changes
from sync.server.store.judging import Judgement, judge
from sync.server.store.people import add_person, authenticate, hash_token, new_token, new_token_for, people, set_active
from sync.server.store.publish import publish
from sync.server.store.push import push
from sync.server.store.quarantine import QuarantineEntry, drop_quarantined, quarantined
from sync.server.store.rules import Forbidden
from sync.server.store.settings import team_settings
from sync.server.store.team import duplicates, team_assistant_split, team_figures
from sync.server.store.wire import (
    comparable_example,
    context_wire,
    example_review_wire,
    example_wire,
    model_forms,
    model_manifest,
    model_wire,
    person_wire,
    round_wire,
    task_setting_wire,
    task_wire,
    validation_wire,
)

__all__ = [
    "Forbidden", "Judgement", "QuarantineEntry", "add_person", "authenticate", "changes", "comparable_example",
    "context_wire", "drop_quarantined", "duplicates", "example_review_wire", "example_wire", "hash_token", "judge",
    "model_forms", "model_manifest", "model_wire", "new_token", "new_token_for", "people", "person_wire", "publish", "push",
    "quarantined", "round_wire", "set_active", "task_setting_wire", "task_wire", "team_assistant_split",
    "team_figures", "team_settings",
    "validation_wire",
]
