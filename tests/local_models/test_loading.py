"""Loading: the registry picks a back-end, files are checked first, and every problem is a
typed error with a readable message, never a crash."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from local_models.backends import backend_for, backend_named, backends
from local_models.engine import ModelSpec, load_engine, model_sha256
from local_models.errors import (
    CorruptModel,
    DeviceUnavailable,
    LabelMismatch,
    ModelChanged,
    ModelNotFound,
    TokenizerMismatch,
    TokenizerMissing,
    UnsafeModelFile,
    UnsupportedModel,
)
from tests.model_fixtures import LABELS, TOKENIZER_FILES, minilm_dir


def test_backends_declare_capabilities():
    by_name = {b.name: b for b in backends()}
    assert set(by_name) >= {"hf-torch", "onnx"}
    assert by_name["hf-torch"].supports_gradients and by_name["hf-torch"].exportable
    assert not by_name["onnx"].supports_gradients and not by_name["onnx"].exportable
    for backend in backends():
        assert backend.devices()[0] == "cpu"


def test_registry_recognises_paths(tiny_classifier_dir, trigger_onnx_dir, tmp_path):
    assert backend_for(tiny_classifier_dir).name == "hf-torch"
    assert backend_for(trigger_onnx_dir).name == "onnx"
    assert backend_for(trigger_onnx_dir / "model.onnx").name == "onnx"
    with pytest.raises(ModelNotFound):
        backend_for(tmp_path / "nothing-here")
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(UnsupportedModel, match="not a model Dynadesk can run"):
        backend_for(tmp_path / "notes.txt")
    with pytest.raises(UnsupportedModel, match="Unknown model format 'tflite'"):
        backend_named("tflite")


def test_loads_and_reports_what_it_loaded(tiny_classifier_dir):
    engine = load_engine(tiny_classifier_dir, task_labels=LABELS)
    assert engine.format == "hf-torch" and engine.device == "cpu" and engine.kind == "classification"
    assert engine.labels == LABELS and engine.max_length == 64  # capped by the position embeddings
    assert engine.sha256 == model_sha256(tiny_classifier_dir) and len(engine.sha256) == 64


def test_checksum_survives_a_copy_and_catches_an_edit(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    assert model_sha256(copy) == model_sha256(tiny_classifier_dir)
    config = json.loads((copy / "config.json").read_text())
    config["id2label"] = {"0": "not hate", "1": "hate"}
    (copy / "config.json").write_text(json.dumps(config))
    assert model_sha256(copy) != model_sha256(tiny_classifier_dir)


def test_truncated_safetensors(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    weights = copy / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(CorruptModel, match="truncated or damaged"):
        load_engine(copy)


def test_config_that_does_not_fit_the_weights(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    config = json.loads((copy / "config.json").read_text())
    config.update(hidden_size=48, intermediate_size=96)
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorruptModel, match="do not fit its config.json"):
        load_engine(copy)


def test_labels_in_config_must_match_the_head(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    config = json.loads((copy / "config.json").read_text())
    config["id2label"] = {"0": "a", "1": "b", "2": "c"}
    config["label2id"] = {"a": 0, "b": 1, "c": 2}
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorruptModel):
        load_engine(copy)


def test_unreadable_config(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    (copy / "config.json").write_text('{"architectures": ["BertForSequenceClassification"')
    with pytest.raises(CorruptModel, match="not valid JSON"):
        load_engine(copy)


def test_encoder_without_a_head_is_not_a_target_model():
    with pytest.raises(UnsupportedModel, match="this one is a BertModel"):
        load_engine(minilm_dir())


def test_missing_head_weights(tiny_base_dir, copy_model):
    copy = copy_model(tiny_base_dir)
    config = json.loads((copy / "config.json").read_text())
    config["architectures"] = ["BertForSequenceClassification"]
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(CorruptModel, match="lack .* tensor"):
        load_engine(copy)


def test_code_in_the_model_folder_is_never_run(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    config = json.loads((copy / "config.json").read_text())
    config["architectures"] = ["EvilForSequenceClassification"]
    config["auto_map"] = {"AutoModelForSequenceClassification": "modeling_evil.EvilForSequenceClassification"}
    (copy / "config.json").write_text(json.dumps(config))
    (copy / "modeling_evil.py").write_text("raise SystemExit('this must never run')\n")
    with pytest.raises(UnsupportedModel, match="never runs such code"):
        load_engine(copy)


class _Payload:
    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def test_pickled_code_is_refused(tiny_classifier_dir, copy_model):
    import torch

    copy = copy_model(tiny_classifier_dir)
    (copy / "model.safetensors").unlink()
    torch.save({"weights": _Payload()}, copy / "pytorch_model.bin")
    with pytest.raises(UnsafeModelFile, match="unpickling code"):
        load_engine(copy)


def test_plain_tensor_pickles_load_with_weights_only(tiny_classifier_dir, copy_model):
    import torch
    from safetensors.torch import load_file

    copy = copy_model(tiny_classifier_dir)
    torch.save(load_file(copy / "model.safetensors"), copy / "pytorch_model.bin")
    (copy / "model.safetensors").unlink()
    reference = load_engine(tiny_classifier_dir).predict(["hello there"])[0]
    assert load_engine(copy).predict(["hello there"])[0].probabilities == pytest.approx(reference.probabilities)


def test_missing_tokenizer(tiny_classifier_dir, copy_model):
    copy = copy_model(tiny_classifier_dir)
    for name in TOKENIZER_FILES:
        (copy / name).unlink()
    with pytest.raises(TokenizerMissing):
        load_engine(copy)
    assert load_engine(copy, tokenizer_dir=minilm_dir()).labels == LABELS  # given alongside


def test_tokenizer_of_another_model(tiny_classifier_dir, copy_model):
    from safetensors.torch import load_file, save_file

    copy = copy_model(tiny_classifier_dir)
    tensors = load_file(copy / "model.safetensors")
    tensors["bert.embeddings.word_embeddings.weight"] = tensors["bert.embeddings.word_embeddings.weight"][:1000].clone()
    save_file(tensors, copy / "model.safetensors", metadata={"format": "pt"})
    config = json.loads((copy / "config.json").read_text())
    config["vocab_size"] = 1000
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(TokenizerMismatch, match="do not belong together"):
        load_engine(copy)


def test_truncated_onnx(trigger_onnx_dir, copy_model):
    copy = copy_model(trigger_onnx_dir)
    model = copy / "model.onnx"
    model.write_bytes(model.read_bytes()[: model.stat().st_size * 2 // 3])
    with pytest.raises(CorruptModel, match="truncated, damaged or invalid"):
        load_engine(copy)
    model.write_bytes(b"")
    with pytest.raises(CorruptModel, match="empty"):
        load_engine(copy)


def test_onnx_without_tokenizer_takes_one_given_alongside(trigger_onnx_dir, tmp_path):
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy2(trigger_onnx_dir / "model.onnx", lone / "model.onnx")
    with pytest.raises(TokenizerMissing, match="without a tokenizer"):
        load_engine(lone / "model.onnx")
    engine = load_engine(lone / "model.onnx", tokenizer_dir=trigger_onnx_dir)
    assert engine.labels == ["fruit", "plain"]  # from the labels stored in the ONNX metadata
    reference = load_engine(trigger_onnx_dir).predict_one("a banana")
    assert engine.predict_one("a banana").probabilities == pytest.approx(reference.probabilities)


def test_label_mismatch_and_hand_made_maps(tiny_classifier_dir):
    with pytest.raises(LabelMismatch) as caught:
        load_engine(tiny_classifier_dir, task_labels=["positive", "negative"])
    assert "'hate', 'not hate'" in str(caught.value) and "--label-map" in str(caught.value)
    engine = load_engine(tiny_classifier_dir, task_labels=["positive", "negative"],
                         label_map={"0": "negative", "not hate": "positive"})
    p = engine.predict_one("hello")
    reference = load_engine(tiny_classifier_dir).predict_one("hello")
    assert p.probabilities["negative"] == pytest.approx(reference.probabilities["hate"])
    with pytest.raises(LabelMismatch, match="no task label given"):
        load_engine(tiny_classifier_dir, task_labels=["positive", "negative"], label_map={"0": "negative"})
    with pytest.raises(LabelMismatch, match="not a label of the task"):
        load_engine(tiny_classifier_dir, task_labels=["positive", "negative"], label_map={"0": "bad", "1": "good"})


def test_labels_match_up_to_case_and_separators(tiny_classifier_dir):
    engine = load_engine(tiny_classifier_dir, task_labels=["Not_Hate", "HATE"])
    assert set(engine.predict_one("x").probabilities) == {"Not_Hate", "HATE"}


def test_several_classes_may_map_onto_one_label(tiny_classifier_dir):
    engine = load_engine(tiny_classifier_dir, task_labels=["any"], label_map={"0": "any", "1": "any"})
    assert engine.predict_one("x").probabilities == {"any": pytest.approx(1.0)}


def test_gpu_is_never_assumed(tiny_classifier_dir, trigger_onnx_dir):
    import onnxruntime
    import torch

    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable, match="no usable GPU"):
            load_engine(tiny_classifier_dir, device="cuda")
    if "CUDAExecutionProvider" not in onnxruntime.get_available_providers():
        with pytest.raises(DeviceUnavailable, match="CUDAExecutionProvider"):
            load_engine(trigger_onnx_dir, device="cuda")
    with pytest.raises(DeviceUnavailable, match="Unknown device"):
        load_engine(tiny_classifier_dir, device="tpu")


def test_onnx_session_that_falls_back_to_cpu_is_an_error(trigger_onnx_dir, monkeypatch):
    """onnxruntime quietly runs on the CPU when CUDA fails to start; Dynadesk says so instead."""
    import onnxruntime

    from local_models.backends import onnx as onnx_backend

    monkeypatch.setattr(onnxruntime, "get_available_providers",
                        lambda: ["CUDAExecutionProvider", "CPUExecutionProvider"])
    real_session = onnx_backend._session

    def cpu_only(file, device, num_threads):  # what a failed CUDA start looks like
        return real_session(file, "cpu", num_threads)

    monkeypatch.setattr(onnx_backend, "_session", cpu_only)
    with pytest.raises(DeviceUnavailable, match="fell back to CPUExecutionProvider"):
        load_engine(trigger_onnx_dir, device="cuda")


def test_spec_refuses_files_changed_since_registration(tiny_classifier_dir):
    spec = ModelSpec(tiny_classifier_dir, expected_sha256="0" * 64, name="tiny")
    with pytest.raises(ModelChanged, match="changed since the model was registered"):
        spec.load()
    assert ModelSpec(tiny_classifier_dir, expected_sha256=model_sha256(tiny_classifier_dir)).load().labels == LABELS

