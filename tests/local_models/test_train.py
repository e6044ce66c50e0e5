"""Training: reading labelled CSV files, the seeded stratified split, class weights, a
reproducible trained part, and assembling it with its base model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from app.core.io.training import read_labelled_csv
from local_models.errors import CorruptModel, TrainingFailed
from local_models.train import (
    TRAINED_PART_FILE,
    TrainingConfig,
    assemble,
    class_weights,
    parse_label_map,
    stratified_split,
    train_classifier,
)


def write_csv(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_label_map_option():
    assert parse_label_map('0=hate,1="not hate",2=not hate') == {"0": "hate", "1": "not hate", "2": "not hate"}
    assert parse_label_map(None) is None
    with pytest.raises(ValueError, match="VALUE=LABEL"):
        parse_label_map("0=hate,1")


def test_reading_a_csv_with_a_label_map(tmp_path):
    path = write_csv(tmp_path / "d.csv", '\ufeff,count,class,tweet\n'
                     '0,3,0,"you &amp; your kind"\n'
                     '1,3,1,"multi\nline tweet"\n'
                     '2,3,2,"plain"\n'
                     '3,3,2,"plain"\n'
                     '4,3,1,""\n')
    data = read_labelled_csv(path, "tweet", "class", label_map={"0": "hate", "1": "not hate", "2": "not hate"},
                             unescape_html=True)
    assert data.texts == ["you & your kind", "multi\nline tweet", "plain"]
    assert data.labels == [0, 1, 1] and data.label_names == ["hate", "not hate"]
    assert data.source["duplicates_dropped"] == 1 and data.source["rows_skipped_empty"] == 1
    assert data.source["label_counts"] == {"hate": 1, "not hate": 2} and len(data.source["sha256"]) == 64


def test_csv_problems_are_named(tmp_path):
    path = write_csv(tmp_path / "d.csv", "text,label\na,x\nb,y\nc,z\n")
    with pytest.raises(TrainingFailed, match="no column 'tweet'; it has text, label"):
        read_labelled_csv(path, "tweet", "label")
    with pytest.raises(TrainingFailed, match="Label values z .* not in the label map"):
        read_labelled_csv(path, "text", "label", label_map={"x": "a", "y": "b"})
    single = write_csv(tmp_path / "s.csv", "text,label\na,x\nb,x\n")
    with pytest.raises(TrainingFailed, match="fewer than two labels"):
        read_labelled_csv(single, "text", "label")
    with pytest.raises(TrainingFailed, match="no CSV file"):
        read_labelled_csv(tmp_path / "missing.csv", "text", "label")
    (tmp_path / "latin1.csv").write_bytes("text,label\ncaf\xe9,x\n".encode("latin-1"))
    with pytest.raises(TrainingFailed, match="not a readable UTF-8 CSV"):
        read_labelled_csv(tmp_path / "latin1.csv", "text", "label")
    # the one strict row reader (app.core.io.rows): a quote left open is named, not swallowed
    broken = write_csv(tmp_path / "q.csv", 'text,label\n"a,x\nb,y\n')
    with pytest.raises(TrainingFailed, match="not a readable UTF-8 CSV file .line 2: a quoted field opens"):
        read_labelled_csv(broken, "text", "label")


def test_split_is_seeded_and_stratified():
    labels = [0] * 60 + [1] * 940
    config = TrainingConfig(seed=4)
    first = stratified_split(labels, config)
    assert first == stratified_split(labels, config)
    assert first != stratified_split(labels, TrainingConfig(seed=5))
    train, dev, test = first
    assert len(train) == 800 and len(dev) == 100 and len(test) == 100
    assert not set(train) & set(dev) and not set(dev) & set(test) and not set(train) & set(test)
    assert [sum(labels[i] == 0 for i in part) for part in first] == [48, 6, 6]


def test_class_weights():
    labels = [0] * 10 + [1] * 90
    assert class_weights(labels, 2, "none").tolist() == [1.0, 1.0]
    assert class_weights(labels, 2, "balanced") == pytest.approx([5.0, 100 / 180])
    sqrt = class_weights(labels, 2, "sqrt")
    assert sqrt[0] / sqrt[1] == pytest.approx(3.0) and (sqrt * [10, 90]).sum() == pytest.approx(100)
    with pytest.raises(TrainingFailed):
        class_weights(labels, 2, "cubic")


def test_trained_part_is_small_described_and_reproducible(trigger_part_dir, tiny_base_dir, trigger_csv, tmp_path):
    from safetensors import safe_open

    description = json.loads((trigger_part_dir / "dynadesk_model.json").read_text())
    assert description["id2label"] == {"0": "fruit", "1": "plain"}
    assert description["training"]["split"] == {"seed": 3, "train": 480, "dev": 60, "test": 60, "stratified": True}
    assert description["metrics"]["test"]["macro_f1"] == 1.0
    with safe_open(str(trigger_part_dir / TRAINED_PART_FILE), "pt") as part:
        names = set(part.keys())
    assert names == set(description["trained_tensors"])
    # only the top layer, the pooler and the head, under their names in the whole model
    assert {"bert.encoder.layer.1.attention.self.query.weight", "bert.pooler.dense.weight", "classifier.weight"} <= names
    assert all(n.startswith(("bert.encoder.layer.1.", "bert.pooler.", "classifier.")) for n in names)

    data = read_labelled_csv(trigger_csv, "sentence", "kind")
    config = TrainingConfig(**description["training"]["config"])
    again = train_classifier(data, tmp_path / "again", base_dir=tiny_base_dir, config=config, name="trigger")
    with safe_open(str(trigger_part_dir / TRAINED_PART_FILE), "pt") as a, \
            safe_open(str(again.out_dir / TRAINED_PART_FILE), "pt") as b:
        for name in names:
            assert np.array_equal(a.get_tensor(name).numpy(), b.get_tensor(name).numpy()), name


def test_bad_training_options(trigger_csv, tiny_base_dir, tmp_path):
    data = read_labelled_csv(trigger_csv, "sentence", "kind")
    with pytest.raises(TrainingFailed, match="train_layers must be between 1 and 2"):
        train_classifier(data, tmp_path / "x", base_dir=tiny_base_dir, config=TrainingConfig(train_layers=3))


def test_assembly_checks_the_base_model(trigger_part_dir, tiny_classifier_dir, tiny_base_dir, tmp_path):
    with pytest.raises(CorruptModel, match="not the one this model was trained on"):
        assemble(trigger_part_dir, tmp_path / "wrong-base", base_dir=tiny_classifier_dir)
    assert not (tmp_path / "wrong-base").exists()
    with pytest.raises(CorruptModel, match="does not hold a trained part"):
        assemble(tmp_path, tmp_path / "nothing", base_dir=tiny_base_dir)
    out = assemble(trigger_part_dir, tmp_path / "ok", base_dir=tiny_base_dir)
    assert json.loads((out / "tokenizer_config.json").read_text())["model_max_length"] == 32
    assert {p.name for p in out.iterdir()} >= {"config.json", "model.safetensors", "tokenizer.json", "dynadesk_model.json"}
