"""The application's side of target models: registration with checksums and label maps,
engines for records, stored outputs, and model inputs built from a task's fields."""

from __future__ import annotations

import json
import uuid

import pytest

from app.core.domain import ModelFormat
from app.core.services.target_models import (
    TargetModelError,
    load_engine_for,
    model_input,
    model_spec,
    register_model,
    to_model_output,
)
from local_models.engine import model_sha256
from tests.model_fixtures import LABELS


def test_register_checks_the_model_and_records_its_checksum(desk, tiny_classifier_dir):
    record = register_model(desk, tiny_classifier_dir, task_code="hate_speech")
    assert record.format == "hf-torch" and record.sha256 == model_sha256(tiny_classifier_dir)
    assert record.label_map == {"0": "hate", "1": "not hate"}
    assert record.task_id == desk.tasks.task("hate_speech").id
    assert record.provenance["runtime"]["kind"] == "classification"
    assert record.path == str(tiny_classifier_dir.resolve())
    again = register_model(desk, tiny_classifier_dir, task_code="hate_speech", name="another name")
    assert again.id == record.id and len(desk.models.all()) == 1


def test_labels_that_do_not_match_need_a_map(desk, tiny_classifier_dir):
    with pytest.raises(TargetModelError, match="--label-map"):
        register_model(desk, tiny_classifier_dir, task_code="sentiment")
    record = register_model(desk, tiny_classifier_dir, task_code="sentiment",
                            label_map={"hate": "negative", "not hate": "positive"})
    assert record.label_map == {"0": "negative", "1": "positive"}
    output = to_model_output(load_engine_for(record).predict_one("lovely"), record)
    assert set(output.probabilities) == {"negative", "positive"}


def test_the_model_kind_must_suit_the_task(desk, tiny_qa_dir):
    with pytest.raises(TargetModelError, match="needs a classification model"):
        register_model(desk, tiny_qa_dir, task_code="hate_speech")
    record = register_model(desk, tiny_qa_dir, task_code="extractive_qa")
    engine = load_engine_for(record)
    definition = desk.tasks.definition_by_code("extractive_qa")
    context = "The bridge was finished in 1932 after six years of work."
    prediction = engine.predict_one(model_input(definition, {"context": context, "question": "When?"}))
    output = to_model_output(prediction, record)
    assert output.answer is not None and context[output.answer.start:output.answer.end] == output.answer.text


def test_outputs_name_the_record_that_made_them(desk, tiny_classifier_dir):
    record = register_model(desk, tiny_classifier_dir, task_code="hate_speech")
    prediction = load_engine_for(record).predict_one("I ❤️ you")
    output = to_model_output(prediction, record)
    assert output.model_id == record.id and output.model_sha256 == record.sha256
    assert output.label in LABELS and output.latency_ms == prediction.latency_ms
    other = desk.models.register("other", ModelFormat.HF_TORCH, "cd" * 32, path=record.path)
    with pytest.raises(TargetModelError, match="not by other"):
        to_model_output(prediction, other)


def test_changed_files_are_refused(desk, tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    record = register_model(desk, copy, task_code="hate_speech")
    config = json.loads((copy / "config.json").read_text())
    config["classifier_dropout"] = 0.3
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(TargetModelError, match="changed since the model was registered"):
        load_engine_for(record)


def test_imported_models_cannot_run(desk):
    record = desk.models.register("ANLI adversary", ModelFormat.IMPORTED, uuid.uuid4().hex * 2)
    with pytest.raises(TargetModelError, match="recorded elsewhere"):
        model_spec(record)


def test_onnx_with_a_tokenizer_elsewhere_remembers_where(desk, trigger_onnx_dir, tmp_path):
    import shutil

    lone = tmp_path / "lone.onnx"
    shutil.copy2(trigger_onnx_dir / "model.onnx", lone)
    record = register_model(desk, lone, tokenizer_dir=trigger_onnx_dir, label_map={"0": "fruit", "1": "plain"})
    spec = model_spec(record)
    assert spec.tokenizer_dir == trigger_onnx_dir.resolve() and spec.expected_sha256 == record.sha256
    assert load_engine_for(record).predict_one("a banana").label == "fruit"


def test_a_trained_part_is_assembled_then_registered(desk, trigger_part_dir):
    record = register_model(desk, trigger_part_dir)
    assert record.provenance["metrics"]["test"]["accuracy"] == 1.0
    assert record.label_map == {"0": "fruit", "1": "plain"}
    assert str(desk.root) in record.path  # assembled into the data folder's model cache
    assert register_model(desk, trigger_part_dir).id == record.id


@pytest.mark.parametrize("task, inputs, expected", [
    ("hate_speech", {"text": "some words"}, "some words"),
    ("nli", {"context": "A man sleeps.", "hypothesis": "Nobody sleeps."}, ("A man sleeps.", "Nobody sleeps.")),
    ("extractive_qa", {"context": "Paris is in France.", "question": "Where is Paris?"},
     ("Where is Paris?", "Paris is in France.")),
])
def test_model_input_follows_the_task(desk, task, inputs, expected):
    assert model_input(desk.tasks.definition_by_code(task), inputs) == expected
