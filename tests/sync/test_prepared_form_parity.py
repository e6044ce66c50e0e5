"""A prepared form from the team's server is taken on what it answers, not on its provenance's word: a form
that claims to be a model's ONNX form but gives other answers (here: its labels swapped) is refused
after a bounded parity check on task texts, and nothing of it stays registered; a true form passes. A form
that carries its recipe's check texts must also give the answers recorded with them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from app.core.services.target_models import register_model
from app.core.storage.models import ModelRecord
from sync.client import ClientFactory, SyncClient
from sync.prepared_forms import (
    FIXED_TEXTS,
    FormRefused,
    fetch_prepared_form,
    form_parity,
    parity_texts,
    recipe_answers,
)
from tests.sync.proposal_helpers import TASK, team_desk
from tests.sync.test_client import QUICK

AS_TASK = {"fruit": "hate", "plain": "not hate"}  # the trigger model's labels, as the task names them
SQLITE_ONLY = pytest.mark.parametrize("server_db_url", ["sqlite"], indirect=True)


def claimed(folder: Path, out: Path, parent: str) -> Path:
    """A copy of an ONNX form whose description names ``parent`` as the model it was exported from."""
    shutil.copytree(folder, out)
    description_path = out / "dynadesk_model.json"
    description = json.loads(description_path.read_text(encoding="utf-8"))
    description.setdefault("export", {})["parent_sha256"] = parent
    description_path.write_text(json.dumps(description), encoding="utf-8")
    return out


def labels_swapped(folder: Path, out: Path) -> Path:
    """A copy of an ONNX form whose graph names its two outputs the other way round: a real model, mostly wrong."""
    import onnx

    shutil.copytree(folder, out)
    model = onnx.load(str(out / "model.onnx"))
    for prop in model.metadata_props:
        if prop.key == "id2label":
            labels = json.loads(prop.value)
            prop.value = json.dumps({"0": labels["1"], "1": labels["0"]})
    onnx.save(model, str(out / "model.onnx"))
    return out


@SQLITE_ONLY

def _publish_next_round_and_close(owner, team, torch) -> None:
    """The owner opens the next round on ``torch``, publishes it with the forms its desk holds, and closes."""
    opened = owner.rounds.open_next(TASK, team.owner.id, [torch.id], close_previous=True)
    with SyncClient(owner, team.url, team.owner.token, policy=QUICK) as client:
        client.run(fetch_models=False)
        assert {r.status for r in client.publish(TASK, [opened.number]).results} <= {"stored", "already_stored"}
    owner.close()

def test_a_form_that_answers_otherwise_is_refused_whatever_its_provenance_says(team, tmp_path, trigger_model_dir,
                                                                              trigger_onnx_dir):
    owner = team_desk(tmp_path / "owner", team.owner, team.url)
    torch = register_model(owner, trigger_model_dir, name="hate trigger", task_code=TASK, label_map=AS_TASK)
    true_dir = claimed(trigger_onnx_dir, tmp_path / "true-onnx", torch.sha256)
    true_form = register_model(owner, true_dir, name="hate trigger (true onnx)", task_code=TASK, label_map=AS_TASK)
    forged = register_model(owner, labels_swapped(true_dir, tmp_path / "forged-onnx"), name="hate trigger (onnx)",
                            task_code=TASK, label_map=AS_TASK)
    texts = parity_texts(owner, torch)
    assert 40 <= len(texts) <= 200 and set(FIXED_TEXTS) <= set(texts)
    assert form_parity(owner, torch, true_form).passed
    verdict = form_parity(owner, torch, forged)
    assert not verdict.passed and "label changed" in verdict.reason, verdict.reason
    with owner.db.write() as session:  # only the forged form travels with the model
        session.delete(session.get(ModelRecord, true_form.id))
    _publish_next_round_and_close(owner, team, torch)

    ann = team_desk(tmp_path / "ann", team.ann, team.url)
    mine = register_model(ann, trigger_model_dir, name="hate trigger", task_code=TASK, label_map=AS_TASK)
    assert mine.sha256 == torch.sha256
    with pytest.raises(FormRefused, match="does not answer as"):
        fetch_prepared_form(ann, ClientFactory(ann), mine)
    with ann.db.read() as session:
        assert session.scalar(select(ModelRecord).where(ModelRecord.sha256 == forged.sha256)) is None
    ann.close()


def test_the_sample_check_passes_a_form_within_the_rule_and_refuses_one_that_is_not_the_models():
    import numpy as np

    from local_models.parity import judge_sample

    rng = np.random.default_rng(3)
    first = rng.uniform(0.02, 0.98, 64)
    reference = np.stack([first, 1 - first], axis=1)
    near = np.clip(first + rng.normal(0, 0.01, 64), 0, 1)
    near[0] = 1 - first[0]  # one text on the boundary flips, as an int8 form's may
    within = judge_sample(reference, np.stack([near, 1 - near], axis=1), "sample", min_texts=40)
    assert within.passed, within.reason
    swapped = judge_sample(reference, reference[:, ::-1], "sample", min_texts=40)
    assert not swapped.passed and "label changed" in swapped.reason
    drifted = np.clip(first + 0.2, 0, 1)
    moved = judge_sample(reference, np.stack([drifted, 1 - drifted], axis=1), "sample", min_texts=40)
    assert not moved.passed and "moved by more than" in moved.reason
    assert not judge_sample(reference[:10], reference[:10], "sample", min_texts=40).passed


def with_recorded_answers(folder: Path, out: Path, parent: str, moved: float = 0.0) -> Path:
    """A copy of an ONNX form whose provenance carries check texts and its graph's answers on them (as an int8
    form built from a recipe does), the first answer moved by ``moved``."""
    from local_models.engine import load_engine
    from local_models.int8_check import record_check

    claimed(folder, out, parent)
    engine = load_engine(out)
    try:
        check = record_check(engine, out / "model.onnx")
    finally:
        engine.close()
    first = check["probabilities"][0]
    check["probabilities"][0] = [first[0] + moved, first[1] - moved]
    description_path = out / "dynadesk_model.json"
    description = json.loads(description_path.read_text(encoding="utf-8"))
    description["export"]["parity"] = {"answers": check}
    description_path.write_text(json.dumps(description), encoding="utf-8")
    return out


@SQLITE_ONLY
def test_a_form_whose_graph_does_not_give_its_recorded_answers_is_refused(team, tmp_path, trigger_model_dir,
                                                                          trigger_onnx_dir):
    """The answers travel with the form (its provenance); the desk that fetches it asks its graph again, and a
    form whose answers moved by 2e-4 on one check text (over the 1e-4 the check allows) is not used."""
    owner = team_desk(tmp_path / "owner", team.owner, team.url)
    torch = register_model(owner, trigger_model_dir, name="hate trigger", task_code=TASK, label_map=AS_TASK)
    assert recipe_answers(torch) is None  # a model without recorded answers is judged by its parity alone
    true_form = register_model(owner, with_recorded_answers(trigger_onnx_dir, tmp_path / "true", torch.sha256),
                               name="hate trigger (true onnx)", task_code=TASK, label_map=AS_TASK)
    assert recipe_answers(true_form).passed
    with owner.db.write() as session:  # the same graph: one record per checksum
        session.delete(session.get(ModelRecord, true_form.id))
    moved = register_model(owner, with_recorded_answers(trigger_onnx_dir, tmp_path / "moved", torch.sha256, 2e-4),
                           name="hate trigger (onnx)", task_code=TASK, label_map=AS_TASK)
    assert moved.provenance["export"]["parity"]["answers"]["probabilities"][0] != \
        true_form.provenance["export"]["parity"]["answers"]["probabilities"][0]
    assert form_parity(owner, torch, moved).passed  # the sample check alone would take it
    _publish_next_round_and_close(owner, team, torch)

    ann = team_desk(tmp_path / "ann", team.ann, team.url)
    mine = register_model(ann, trigger_model_dir, name="hate trigger", task_code=TASK, label_map=AS_TASK)
    with pytest.raises(FormRefused, match=r"is not the int8 graph whose parity was checked \(1 of \d+ check texts "
                                          r"answer otherwise \(largest probability change 0.0002, allowed 0.0001"):
        fetch_prepared_form(ann, ClientFactory(ann), mine)
    with ann.db.read() as session:
        assert session.scalar(select(ModelRecord).where(ModelRecord.sha256 == moved.sha256)) is None
    ann.close()
