"""Sentence embeddings from a loaded engine: the mean of the last hidden state over real tokens,
the same from PyTorch and from the model's ONNX export."""

from __future__ import annotations

import numpy as np
import pytest

from local_models.engine import load_engine
from local_models.errors import Cancelled
from local_models.progress import Progress
from tests.model_fixtures import LABELS, built_once

TEXTS = ["they are not welcome here", "ok", "a much longer sentence about the river and the quiet garden in the city"]


@pytest.fixture(scope="module")
def tiny_onnx_dir(tmp_path_factory, tiny_classifier_dir):
    from local_models.export import export_onnx

    return built_once(tmp_path_factory, "tiny-onnx-fp32",
                      lambda root: export_onnx(tiny_classifier_dir, root / "tiny-onnx-fp32")) / "tiny-onnx-fp32"


@pytest.fixture(scope="module")
def tiny_onnx_int8_dir(tmp_path_factory, tiny_onnx_dir):
    """The fp32 export quantized as the desk's recipes do (dynamic, per channel); no parity rule here:
    the embeddings are what this file checks."""
    import shutil

    from local_models.int8 import Int8Recipe, build_int8

    def build(root):
        shutil.copytree(tiny_onnx_dir, root / "tiny-onnx-int8")
        build_int8(tiny_onnx_dir / "model.onnx", root / "tiny-onnx-int8" / "model.onnx", Int8Recipe())

    return built_once(tmp_path_factory, "tiny-onnx-int8", build) / "tiny-onnx-int8"


def test_torch_embeddings_are_the_masked_mean_of_the_encoders_output(tiny_classifier_dir):
    import torch
    from transformers import BertModel, BertTokenizerFast

    engine = load_engine(tiny_classifier_dir, task_labels=LABELS)
    vectors = engine.embed(TEXTS)
    assert vectors.shape == (3, 32) and vectors.dtype == np.float32
    # by hand, one text at a time (no padding at all): the encoder's tokens averaged
    encoder = BertModel.from_pretrained(str(tiny_classifier_dir), local_files_only=True).eval()
    tokenizer = BertTokenizerFast.from_pretrained(str(tiny_classifier_dir), local_files_only=True)
    for text, vector in zip(TEXTS, vectors):
        with torch.inference_mode():
            hidden = encoder(**tokenizer(text, return_tensors="pt")).last_hidden_state[0]
        assert np.allclose(vector, hidden.mean(dim=0).numpy(), atol=1e-5)
    # padding does not move an embedding: alone or beside a longer text, the same vector
    assert np.allclose(engine.embed(["ok"])[0], vectors[1], atol=1e-5)
    assert engine.embed([]).shape[0] == 0


def test_onnx_embeddings_match_torch_and_int8_stays_close(tiny_classifier_dir, tiny_onnx_dir, tiny_onnx_int8_dir):
    torch_vectors = load_engine(tiny_classifier_dir, task_labels=LABELS).embed(TEXTS)
    onnx_vectors = load_engine(tiny_onnx_dir, task_labels=LABELS).embed(TEXTS)
    assert np.allclose(onnx_vectors, torch_vectors, atol=1e-4)
    int8 = load_engine(tiny_onnx_int8_dir, task_labels=LABELS)
    int8_vectors = int8.embed(TEXTS)
    cosine = (int8_vectors * torch_vectors).sum(1) / np.linalg.norm(int8_vectors, axis=1) / np.linalg.norm(
        torch_vectors, axis=1)
    assert cosine.min() > 0.98
    assert int8.predict(["ok"])[0].label in LABELS  # the first session still answers as before


def test_embedding_is_cancellable_between_batches(tiny_classifier_dir):
    engine = load_engine(tiny_classifier_dir, task_labels=LABELS)
    progress = Progress()
    reports = []
    progress._on_report = lambda done, total: (reports.append(done), progress.cancel() if done else None)
    with pytest.raises(Cancelled):
        engine.embed(TEXTS * 3, batch_size=2, progress=progress)
    assert reports == [0, 2]


def test_a_dynamic_int8_classifier_answers_a_text_alike_alone_and_in_a_batch(tiny_onnx_int8_dir):
    """Dynamic int8 takes one activation scale per tensor: batched, a text's answer moved with its
    neighbours (0.05 seen on the default model), so such graphs run a batch one text at a time."""
    engine = load_engine(tiny_onnx_int8_dir, task_labels=LABELS)
    assert engine.runtime.row_by_row
    neighbours = ["!!! " * 30 + "a very long and loud text that would set the batch's activation scale", "ok"]
    alone = engine.predict([TEXTS[0]])[0].probabilities
    in_batch = engine.predict([TEXTS[0], *neighbours])
    assert in_batch[0].probabilities == alone
    assert [p.probabilities for p in in_batch[1:]] == [p.probabilities for p in engine.predict(neighbours)]
