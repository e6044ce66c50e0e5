"""Hostile model folders: configs that claim absurd sizes, weight indexes that point outside the
folder, and pickles. Each is refused with a message that says what is wrong, and the absurd
configs are refused from the weights' headers, before transformers builds anything."""

from __future__ import annotations

import json
import os

import pytest

from local_models.engine import load_engine
from local_models.errors import CorruptModel, UnsafeModelFile
from tests.model_fixtures import LABELS


class Built(BaseException):
    """Raised if transformers starts building a config; nothing in the loader catches it."""


@pytest.fixture
def nothing_built(monkeypatch):
    """Building the config is where transformers starts allocating what config.json claims
    (ten million labels alone take 20 s and 2 GB); a refusal must come before it."""
    import transformers

    def refuse(self, *args, **kwargs):
        raise Built("transformers was asked to build the config")

    monkeypatch.setattr(transformers.BertConfig, "__init__", refuse)


def edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_absurd_layer_count_is_refused_from_the_headers(tiny_classifier_dir, copy_model, nothing_built):
    folder = edit_config(copy_model(tiny_classifier_dir), num_hidden_layers=100_000)
    with pytest.raises(CorruptModel, match=r"config.json says 100000 hidden layers \(num_hidden_layers\) "
                                           r"but model.safetensors holds weights for 2\."):
        load_engine(folder)


@pytest.mark.parametrize("changes, message", [
    ({"num_labels": 10_000_000, "id2label": None, "label2id": None},
     r"num_labels of config.json gives 10000000 labels, which does not match the classifier weights' 2 rows"),
    ({"num_labels": 10_000_000}, r"config.json gives num_labels 10000000 but id2label names 2 labels"),
])
def test_absurd_label_count_is_refused_from_the_headers(tiny_classifier_dir, copy_model, nothing_built,
                                                        changes, message):
    with pytest.raises(CorruptModel, match=message):
        load_engine(edit_config(copy_model(tiny_classifier_dir), **changes))


def test_sizes_must_be_whole_numbers(tiny_classifier_dir, copy_model):
    folder = copy_model(tiny_classifier_dir)
    for value, shown in (("abc", '"abc"'), (3.5, "3.5"), (True, "true"), (-1, "-1")):
        with pytest.raises(CorruptModel) as caught:
            load_engine(edit_config(folder, hidden_size=value))
        assert str(caught.value) == (f"{folder / 'config.json'}: hidden_size must be a whole number of at least 1; "
                                     f"it is {shown}.")


def test_other_bad_config_values_are_named_in_words(tiny_classifier_dir, copy_model):
    folder = edit_config(copy_model(tiny_classifier_dir), layer_norm_eps="abc")
    with pytest.raises(CorruptModel, match="layer_norm_eps must be a number; it is 'abc'") as caught:
        load_engine(folder)
    assert "Error" not in str(caught.value)


def test_sizes_that_do_not_fit_the_weights_are_refused_before_loading(tiny_classifier_dir, copy_model, monkeypatch):
    """A vocabulary of 10^12 would be 128 TB of embeddings: the shapes are compared on the meta device."""
    import transformers

    def refuse(*args, **kwargs):
        raise Built("from_pretrained was called")

    monkeypatch.setattr(transformers.BertForSequenceClassification, "from_pretrained", refuse)
    folder = edit_config(copy_model(tiny_classifier_dir), vocab_size=10**12)
    with pytest.raises(CorruptModel, match=r"word_embeddings.weight is \[30522, 32\] in the weights but the config "
                                           r"makes it \[1000000000000, 32\]"):
        load_engine(folder)


def _index(folder, shard_name):
    (folder / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {}, "weight_map": {"classifier.weight": shard_name, "classifier.bias": shard_name}}))


@pytest.mark.parametrize("where", ["parent", "absolute", "link"])
def test_weight_index_naming_files_outside_the_folder_is_refused(tiny_classifier_dir, copy_model, tmp_path, where):
    folder = copy_model(tiny_classifier_dir)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (folder / "model.safetensors").rename(outside / "model.safetensors")
    if where == "parent":
        _index(folder, "../elsewhere/model.safetensors")
    elif where == "absolute":
        _index(folder, str(outside / "model.safetensors"))
    else:
        os.symlink(outside / "model.safetensors", folder / "model-00001-of-00001.safetensors")
        _index(folder, "model-00001-of-00001.safetensors")
    with pytest.raises(UnsafeModelFile, match="outside the model folder"):
        load_engine(folder)


def test_weight_index_without_a_weight_map(tiny_classifier_dir, copy_model):
    folder = copy_model(tiny_classifier_dir)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": ["model.safetensors"]}))
    with pytest.raises(CorruptModel, match="has no weight_map naming the weight files"):
        load_engine(folder)


def test_hugging_face_cache_snapshot_links_are_inside(tiny_classifier_dir, tmp_path):
    """The hub cache keeps a snapshot's files as links into the repository's blobs/ folder."""
    repository = tmp_path / "models--tiny"
    snapshot = repository / "snapshots" / "0123abc"
    (repository / "blobs").mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for file in tiny_classifier_dir.iterdir():
        blob = repository / "blobs" / f"blob-{file.name}"
        blob.write_bytes(file.read_bytes())
        os.symlink(os.path.relpath(blob, snapshot), snapshot / file.name)
    assert load_engine(snapshot).labels == LABELS


def test_legacy_pickle_is_named_and_the_advice_converts_it(tiny_classifier_dir, copy_model, monkeypatch):
    import torch
    from safetensors.torch import load_file

    folder = copy_model(tiny_classifier_dir)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin",
               _use_new_zipfile_serialization=False)
    (folder / "model.safetensors").unlink()
    with pytest.raises(UnsafeModelFile, match="pytorch_model.bin in .* is a legacy pickle file") as caught:
        load_engine(folder)
    advice = str(caught.value)
    assert "loads only safetensors or weights-only torch files" in advice
    monkeypatch.chdir(folder)
    exec(advice.split('python -c "', 1)[1].rstrip('"'), {})  # the conversion it suggests
    assert load_engine(folder).labels == LABELS

    (folder / "pytorch_model.bin").write_bytes(b"not a torch file at all")
    (folder / "model.safetensors").unlink()
    with pytest.raises(CorruptModel, match="truncated or damaged"):
        load_engine(folder)


def test_onnx_config_beside_is_checked(trigger_onnx_dir, copy_model):
    folder = edit_config(copy_model(trigger_onnx_dir), max_position_embeddings=True)
    with pytest.raises(CorruptModel, match="max_position_embeddings must be a whole number of at least 1; it is true"):
        load_engine(folder)


def test_training_base_with_an_absurd_config(tiny_base_dir, copy_model, trigger_csv, tmp_path, nothing_built):
    from app.core.io.training import read_labelled_csv
    from local_models.train import train_classifier

    base = edit_config(copy_model(tiny_base_dir), num_hidden_layers=100_000)
    with pytest.raises(CorruptModel, match="config.json says 100000 hidden layers"):
        train_classifier(read_labelled_csv(trigger_csv, "sentence", "kind"), tmp_path / "part", base_dir=base)


def test_cli_register_shows_the_message(tiny_classifier_dir, copy_model, capsys):
    from app.cli import main

    folder = edit_config(copy_model(tiny_classifier_dir), num_labels=10_000_000, id2label=None, label2id=None)
    with pytest.raises(SystemExit) as exited:
        main(["models", "register", str(folder), "--task", "hate_speech"])
    assert exited.value.code == 1
    err = capsys.readouterr().err
    assert err.startswith("Error: num_labels of config.json gives 10000000 labels") and "Traceback" not in err


def test_a_config_that_grows_a_tensor_the_weights_lack_is_refused_before_building(tiny_classifier_dir, copy_model,
                                                                                  monkeypatch):
    """The header checks compare the tensors the weights hold; a tensor they leave out is one
    transformers would allocate at whatever size config.json gives (a 100-million-word vocabulary)."""
    import transformers
    from safetensors.torch import load_file, save_file

    folder = copy_model(tiny_classifier_dir)
    tensors = load_file(folder / "model.safetensors")
    dropped = next(name for name in tensors if name.endswith("word_embeddings.weight"))
    save_file({k: v for k, v in tensors.items() if k != dropped}, folder / "model.safetensors", metadata={"format": "pt"})
    edit_config(folder, vocab_size=100_000_000)

    def built(*args, **kwargs):
        raise Built("the model was built")

    monkeypatch.setattr(transformers.BertForSequenceClassification, "from_pretrained", built)
    with pytest.raises(CorruptModel, match=r"hold 20,386 parameters; config.json asks for 3,200,000,000 more that "
                                           r"they lack \(bert.embeddings.word_embeddings.weight \[100000000, 32\]\)"):
        load_engine(folder)
