"""A fused recipe with ``plain_layer_norm``: the fused graph's SkipLayerNormalization nodes written back as Add +
LayerNormalization (onnxruntime runs those faster), computing the same thing, kept so by onnxruntime's session,
and a recipe field that leaves every recipe without it as it was, to the byte."""

from __future__ import annotations

import collections
import json

import numpy as np
import onnx
import onnxruntime
import pytest

from local_models.engine import load_engine
from local_models.errors import ExportFailed
from local_models.fused_graph import export_fused_graph
from local_models.int8 import Int8Recipe, build_int8
from local_models.int8_search import feeds_for
from local_models.layer_norm import unfuse_skip_layer_norm
from tests.model_fixtures import trigger_sentences

TEXTS = [text for text, _ in trigger_sentences(12, seed=5)] + ["banana", "a " * 40 + "banana"]


@pytest.fixture(scope="module")
def fused(trigger_model_dir, tmp_path_factory):
    engine = load_engine(trigger_model_dir)
    try:
        graph = export_fused_graph(engine, tmp_path_factory.mktemp("plain-ln") / "fused.onnx")
        feeds = [feeds_for(engine, [t]) for t in TEXTS]
    finally:
        engine.close()
    return graph, feeds


def layers(model_dir) -> int:
    return json.loads((model_dir / "config.json").read_text())["num_hidden_layers"]


def op_counts(model) -> collections.Counter:
    return collections.Counter(n.op_type for n in model.graph.node)


def run(path_or_bytes, feeds) -> list[np.ndarray]:
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads, options.log_severity_level = 1, 3
    session = onnxruntime.InferenceSession(path_or_bytes, options, providers=["CPUExecutionProvider"])
    names = {i.name for i in session.get_inputs()}
    return [session.run(None, {k: v for k, v in f.items() if k in names})[0] for f in feeds]


def test_the_rewritten_fp32_graph_computes_what_the_fused_one_does(fused, trigger_model_dir):
    graph, feeds = fused
    model = onnx.load(str(graph.path))
    before = op_counts(model)
    n = layers(trigger_model_dir)
    assert unfuse_skip_layer_norm(model) == before["SkipLayerNormalization"] == 2 * n
    after = op_counts(model)
    assert after["SkipLayerNormalization"] == 0
    assert after["LayerNormalization"] == before["LayerNormalization"] + 2 * n
    assert after["Attention"] == before["Attention"] and after["BiasGelu"] == before["BiasGelu"]
    onnx.checker.check_model(model)
    for a, b in zip(run(str(graph.path), feeds), run(model.SerializeToString(), feeds)):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-5)  # one text at a time, 3 to 42 tokens


def test_a_plain_layer_norm_recipe_builds_an_int8_graph_onnxruntime_keeps_unfused(fused, tmp_path):
    graph, feeds = fused
    plain = Int8Recipe("dynamic", fused=True, plain_layer_norm=True)
    build_int8(graph.path, tmp_path / "plain.onnx", plain)
    build_int8(graph.path, tmp_path / "again.onnx", plain)
    build_int8(graph.path, tmp_path / "skip.onnx", Int8Recipe("dynamic", fused=True))
    assert (tmp_path / "plain.onnx").read_bytes() == (tmp_path / "again.onnx").read_bytes()
    counts = op_counts(onnx.load(str(tmp_path / "plain.onnx")))
    assert counts["SkipLayerNormalization"] == 0 and counts["QAttention"] > 0
    # the desk's session optimizer (all levels) does not fuse them back
    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    onnxruntime.InferenceSession(str(tmp_path / "plain.onnx"), options, providers=["CPUExecutionProvider"])
    optimized = op_counts(onnx.load(str(tmp_path / "optimized.onnx")))
    assert optimized["SkipLayerNormalization"] == 0 and optimized["LayerNormalization"] >= counts["LayerNormalization"]
    # int8 either way: the answers stay near the fp32 graph's and each other's
    reference = run(str(graph.path), feeds)
    for other in ("plain.onnx", "skip.onnx"):
        moved = max(float(np.abs(a - b).max()) for a, b in zip(run(str(tmp_path / other), feeds), reference))
        assert moved < 0.1, other  # logits of a trained trigger model


def test_the_recipe_field_is_written_only_when_set_and_needs_the_fused_graph(trigger_onnx_dir, tmp_path):
    fused = Int8Recipe("dynamic", fused=True)
    assert "plain_layer_norm" not in fused.to_json()  # recipes made before it keep their bytes
    assert Int8Recipe.from_json(fused.to_json()) == fused
    plain = Int8Recipe("dynamic", fused=True, plain_layer_norm=True)
    assert plain.to_json()["plain_layer_norm"] is True
    assert Int8Recipe.from_json(json.loads(json.dumps(plain.to_json()))) == plain != fused
    assert "LayerNorm unfused" in plain.name
    with pytest.raises(ValueError, match="needs fused"):
        Int8Recipe("dynamic", plain_layer_norm=True)
    with pytest.raises(ExportFailed, match="no fused Attention"):
        build_int8(trigger_onnx_dir / "model.onnx", tmp_path / "int8.onnx", plain)


def test_a_node_that_outputs_its_mean_is_refused_untouched():
    from onnx import TensorProto, helper

    node = helper.make_node("SkipLayerNormalization", ["x", "s", "g"], ["y", "mean"], domain="com.microsoft")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4]),
                                            helper.make_tensor_value_info("s", TensorProto.FLOAT, [1, 2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4])],
                              initializer=[helper.make_tensor("g", TensorProto.FLOAT, [4], [1.0] * 4)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(ValueError, match="mean or deviation"):
        unfuse_skip_layer_norm(model)
    assert op_counts(model) == {"SkipLayerNormalization": 1}
