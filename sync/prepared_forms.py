"""A model's prepared faster forms from the team's server: a desk whose lead published them (with
the model, ``SyncClient.publish``) downloads one instead of exporting it. Qt-free.

    record = fetch_prepared_form(desk, clients, torch_record)   # None: prepare it here

Every file is checked against its sha256 and the whole against the form's checksum; a damaged
arrival is refused at once (``Damaged``, an ``Interrupted``), and the caller prepares its own.

A form is taken on what it answers, not on its provenance's word: before it is used, it and the model
it stands for answer the same bounded set of task texts (this desk's own texts of the task, filled up
with a fixed set), and ``local_models.parity.judge_sample`` judges the two (``form_parity``). An int8 form
built from a recipe also carries, in its provenance, the recipe's check texts and the answers of the graph
whose parity was checked: it must give those answers here too (``recipe_answers``, the rule of
``local_models.int8_check``). A form that fails either is refused (``FormRefused``) and nothing of it stays
registered.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from sqlalchemy import select

from app.core.storage.models import Context, Example, ModelRecord, Round, Task
from local_models.parity import ParityVerdict, judge_sample
from sync.protocol import ModelForms, ModelRecordWire
from sync.transport import AuthError, Offline, SyncError, SyncHandle, SyncReport

if TYPE_CHECKING:
    from local_models.int8_check import CheckOutcome
    from sync.client import ClientFactory

log = logging.getLogger(__name__)

PARITY_TEXTS = 200  # the most texts a fetched form is checked on: a few seconds on a desk's CPU
MIN_PARITY_TEXTS = 40
# The fixed part of the check: everyday and hostile sentences about groups and people, so that both
# sides of a hate-speech decision are asked even on a desk that has no texts of its own yet.
_SUBJECTS = ("women", "immigrants", "my neighbours", "the new teacher", "people from that city", "Muslims",
             "gay people", "football fans")
_PREDICATES = ("are wonderful people", "should go back where they came from", "are ruining everything",
               "made dinner for us tonight", "are vermin and should be removed", "deserve the same rights as anyone",
               "never stop complaining about the weather", "helped me move house last week")
FIXED_TEXTS = tuple(f"{subject.capitalize()} {predicate}." for subject in _SUBJECTS for predicate in _PREDICATES)


class FormRefused(SyncError):
    """A fetched form does not answer as the model it stands for (the parity check failed)."""


def fetch_prepared_form(desk, clients: ClientFactory, model: ModelRecord, *,
                        handle: SyncHandle | None = None) -> ModelRecord | None:
    """The fastest published form of ``model`` (int8 first), downloaded and registered on this desk;
    None when no server or token is set, it cannot be reached, or it has none. A form found but damaged on
    the way raises ``SyncError`` (nothing of it is used)."""
    client = clients.ready()
    if client is None:
        return None
    handle = handle or SyncHandle()
    try:
        with client:
            # a server from before forms were published: 404
            response = client.request("GET", f"/models/{model.sha256}/forms", handle, ok=(200, 404))
            if response.status_code == 404:
                return None
            forms = [f for f in ModelForms.model_validate_json(response.content).forms if f.files]
            if not forms:
                return None
            chosen = forms[0]
            record, created = _local_record(desk, chosen)
            try:
                client.download_model(record, chosen, handle, SyncReport(), damaged_attempts=1)
                with desk.db.read() as session:
                    downloaded = session.get(ModelRecord, record.id)
                verdict = form_parity(desk, model, downloaded)
                if not verdict.passed:
                    raise FormRefused(f"the team's prepared form {chosen.name} does not answer as {model.name} "
                                      f"does ({verdict.reason}); it is not used")
                checked = recipe_answers(downloaded)
                if checked is not None and not checked.passed:
                    raise FormRefused(f"the team's prepared form {chosen.name} is not the int8 graph whose parity was "
                                      f"checked ({checked.summary}); it is not used")
            except SyncError:
                if created:  # a record without its files would be taken for the form prepared here
                    with desk.db.write() as session:
                        session.delete(session.get(ModelRecord, record.id))
                raise
    except (Offline, AuthError) as exc:
        log.info("no prepared form from the team's server: %s", exc)
        return None
    with desk.db.read() as session:
        return session.get(ModelRecord, record.id)


def _local_record(desk, wire: ModelRecordWire) -> tuple[ModelRecord, bool]:
    """This desk's record of the published form (by checksum), made from the server's when missing
    (then True)."""
    with desk.db.write() as session:
        same = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == wire.sha256))
        if same is not None:
            return same, False
        task = session.scalar(select(Task).where(Task.code == wire.task)) if wire.task else None
        record_id = wire.id if session.get(ModelRecord, wire.id) is None else uuid.uuid4()
        record = ModelRecord(id=record_id, name=wire.name, format=wire.format.value, sha256=wire.sha256,
                             label_map=dict(wire.label_map), task_id=task.id if task else None,
                             provenance=dict(wire.provenance), created_at=wire.created_at,
                             updated_at=wire.updated_at, revision=wire.revision)
        session.add(record)
        session.flush()
        return record, True


def parity_texts(desk, model: ModelRecord, limit: int = PARITY_TEXTS) -> list[str]:
    """The texts a fetched form is checked on: this desk's newest texts of the model's task (examples,
    then contexts), filled up with ``FIXED_TEXTS``; at most ``limit``."""
    texts: list[str] = []
    with desk.db.read() as session:
        if model.task_id is not None:
            texts += session.scalars(select(Example.text).where(Example.task_id == model.task_id, Example.text != "")
                                     .order_by(Example.created_at.desc()).limit(limit))
            texts += session.scalars(select(Context.text).join(Round, Round.id == Context.round_id)
                                     .where(Round.task_id == model.task_id, Context.text != "")
                                     .limit(max(0, limit - len(texts))))
    texts = list(dict.fromkeys(t[:2000] for t in texts))
    return [*texts, *(t for t in FIXED_TEXTS if t not in texts)][:limit]


def recipe_answers(form: ModelRecord) -> CheckOutcome | None:
    """How an int8 form answers its recipe's check texts beside the checked graph's recorded answers (both
    from its provenance, where the export put them); None for a form that carries none (fp32, older)."""
    from app.core.services.target_models import load_engine_for
    from local_models.backends.onnx import MODEL_FILENAME
    from local_models.int8_check import verify_check

    export = (form.provenance or {}).get("export")
    parity = export.get("parity") if isinstance(export, dict) else None
    answers = parity.get("answers") if isinstance(parity, dict) else None
    if not isinstance(answers, dict) or not form.path:
        return None
    engine = load_engine_for(form, num_threads=1)
    try:
        return verify_check(engine, Path(form.path) / MODEL_FILENAME, answers)
    finally:
        engine.close()


def form_parity(desk, model: ModelRecord, form: ModelRecord, texts: Sequence[str] | None = None) -> ParityVerdict:
    """How ``form`` answers beside ``model`` on a bounded set of task texts, judged by the parity rule's
    sample check (the full rule, on 2,000 texts, ran where the form was made)."""
    from app.core.services.target_models import load_engine_for

    asked = list(texts) if texts is not None else parity_texts(desk, model)
    reference = load_engine_for(model, num_threads=1)
    try:
        candidate = load_engine_for(form, num_threads=1)
        try:
            expected, answered = reference.predict_batched(asked), candidate.predict_batched(asked)
        finally:
            candidate.close()
    finally:
        reference.close()
    labels = sorted(expected[0].probabilities) if expected else []
    if not asked or any(sorted(p.probabilities) != labels for p in answered):
        return judge_sample(np.ones((1, 1)), np.zeros((1, 1)), "the form's labels differ", min_texts=MIN_PARITY_TEXTS)
    return judge_sample(np.array([[p.probabilities[k] for k in labels] for p in expected]),
                        np.array([[p.probabilities[k] for k in labels] for p in answered]),
                        f"{len(asked)} task texts on this desk", min_texts=MIN_PARITY_TEXTS)
