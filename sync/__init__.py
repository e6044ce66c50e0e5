"""Sync between desks and the team's server (Qt-free). See docs/sync.md.

- ``protocol``: pydantic schemas of requests, responses and records (the desk's record format).
- ``client``: ``SyncClient`` (push the outbox, pull changes, model files; retries, resumable)
  with a ``SyncHandle`` for progress and cancel; ``tokens``: where the token is kept;
  ``local``: the desk-side storage steps (outbox batches, settling, pulled pages, status).
- ``server``: the FastAPI app (``app``), its database and migrations (``db``, ``models``)
  and the rules (``store``).
"""
