"""Sync between desks and the team's server (Qt-free). See docs/sync.md.

- ``protocol``: pydantic schemas of requests, responses and records (the desk's record format).
- ``client``: ``SyncClient`` (a whole sync: push the outbox, pull changes, publish; resumable) and
  ``ClientFactory``, where every client is made (the one owner of the token store);
  ``transport``: its HTTP side, ``Connection.request`` and ``download_blob`` (retries, pacing, TLS),
  the one map from answers and failures to errors (``refusal``, ``no_answer``) and the ``SyncHandle``
  for progress and cancel; ``model_files``: model files down and up, one identity per model;
  ``tokens``: where the token is kept.
- Features that talk to the server take a client and use only its public requests: ``proposals``,
  ``wellbeing``, ``prepared_forms``.
- Desk-side storage steps: ``outgoing`` (outbox batches, publish checks, settling),
  ``incoming`` (pulled pages), ``local`` (sync meta, status, waiting reasons, refused entries).
- ``server``: the FastAPI app (``app``), its database and migrations (``db``, ``models``)
  and the rules (``store``).
"""
