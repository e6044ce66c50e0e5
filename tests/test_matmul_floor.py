"""The bench's matmul-only floor (``bench.matmul_floor``): from a form's own graph, a graph of exactly its
matrix nodes with their weights, fed the activations the form computes for each token count, giving the
outputs the form's matrix nodes give; and the rows the bench prints from it (time-free properties only)."""

from __future__ import annotations

import collections
import json

import numpy as np
import onnx
import onnxruntime
import pytest

from bench import matmul_floor
from bench.matmul_floor import MATRIX_OPS, build_floor_graph, optimized_form, session_options, token_feeds
from local_models.engine import load_engine
from local_models.fused_graph import export_fused_graph
from local_models.int8 import Int8Recipe, build_int8

TEXTS = ("a banana", "the old teacher walked near the quiet river garden today",
         "my small red banana stayed behind the busy city garden and waited for the blue neighbour again")


@pytest.fixture(scope="module")
def forms(trigger_model_dir, trigger_onnx_dir, tmp_path_factory):
    """The trigger model's fp32 graph, its dynamic int8 graph and its fused int8 graph (QAttention)."""
    folder = tmp_path_factory.mktemp("floor-forms")
    build_int8(trigger_onnx_dir / "model.onnx", folder / "int8.onnx", Int8Recipe("dynamic"))
    engine = load_engine(trigger_model_dir)
    try:
        fused = export_fused_graph(engine, folder / "fused-fp32.onnx")
    finally:
        engine.close()
    build_int8(fused.path, folder / "fused-int8.onnx", Int8Recipe("dynamic", fused=True))
    return {"fp32": trigger_onnx_dir / "model.onnx", "int8": folder / "int8.onnx",
            "fused int8": folder / "fused-int8.onnx"}


@pytest.fixture(scope="module")
def encoder(trigger_onnx_dir):
    engine = load_engine(trigger_onnx_dir)
    yield engine.encoder
    engine.close()


def layers(model_dir) -> int:
    return json.loads((model_dir / "config.json").read_text())["num_hidden_layers"]


@pytest.mark.parametrize("form", ["fp32", "int8", "fused int8"])
def test_the_floor_graph_is_exactly_the_forms_matrix_nodes_and_gives_their_outputs(form, forms, encoder, tmp_path):
    feeds = token_feeds(encoder, TEXTS)
    counts = sorted(feeds)
    assert len(counts) == 3 and counts[0] < counts[1] < counts[2]
    floor = build_floor_graph(forms[form], feeds, 1, keep_outputs=True)

    optimized = optimized_form(forms[form], 1, tmp_path / "optimized.onnx")
    matrix = collections.Counter(n.op_type for n in optimized.graph.node if n.op_type in MATRIX_OPS)
    assert floor.matrix_nodes == dict(matrix)
    assert floor.other_nodes == len(optimized.graph.node) - sum(matrix.values()) > 0  # LayerNorm, GELU, ...
    model = onnx.load_from_string(floor.model)
    assert collections.Counter(n.op_type for n in model.graph.node) == matrix  # nothing else
    onnx.checker.check_model(model)
    # the desk's session options keep every node as it is (no further fusion makes the floor cheaper)
    again = optimized_form_of_bytes(floor.model, tmp_path / "floor-optimized.onnx")
    assert collections.Counter(n.op_type for n in again.graph.node) == matrix

    session = onnxruntime.InferenceSession(floor.model, session_options(1), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    assert floor.outputs is not None
    for tokens in counts:
        assert set(floor.feeds[tokens]) == {i.name for i in session.get_inputs()}
        results = dict(zip(names, session.run(None, floor.feeds[tokens])))
        assert {k: v.shape for k, v in results.items()} == floor.output_shapes[tokens]
        for name, value in results.items():  # the same kernels on the same inputs as in the form
            np.testing.assert_allclose(value, floor.outputs[tokens][name], rtol=1e-5, atol=1e-6)
        by_tokens = [shape for shape in floor.output_shapes[tokens].values() if tokens in shape]
        assert len(by_tokens) >= 2 * layers(forms[form].parent if form == "fp32" else forms["fp32"].parent)

    if form == "int8":
        assert {"DynamicQuantizeMatMul", "MatMulIntegerToFloat"} & set(matrix)
    if form == "fused int8":
        assert matrix["QAttention"] == layers(forms["fp32"].parent)


def optimized_form_of_bytes(model: bytes, target):
    source = target.with_suffix(".source.onnx")
    source.write_bytes(model)
    return optimized_form(source, 1, target)


def test_the_floor_rows_report_both_graphs_call_for_call_and_the_token_bands_the_texts_fall_in(forms, encoder):
    order = [int(encoder.encode([t]).lengths[0]) for t in TEXTS]
    feeds = token_feeds(encoder, TEXTS)
    floor = build_floor_graph(forms["int8"], feeds, 1)
    timings = matmul_floor.time_side_by_side(forms["int8"], floor, order, 1, 7)
    assert timings.tokens == [order[k % 3] for k in range(7)]
    for measured in (timings.wall, timings.cpu, timings.outside):
        assert set(measured) == {"form", "floor"} and all(len(v) == 7 for v in measured.values())
    assert all(v > 0 for v in timings.cpu["form"])
    profiles = {"form": matmul_floor.op_profile(str(forms["int8"]), floor.form_feeds, 1),
                "floor": matmul_floor.op_profile(floor.model, floor.feeds, 1)}
    assert set(profiles["form"]) == set(order)
    assert set(profiles["floor"][order[0]]) <= MATRIX_OPS  # the profiler sees nothing but matrix kernels
    assert "LayerNormalization" in profiles["form"][order[1]] or "SkipLayerNormalization" in profiles["form"][order[1]]

    rows = matmul_floor.floor_rows("x: ", "int8", floor, timings, profiles, 5.0, "note")
    names = [r.name for r in rows]
    bands = [matmul_floor.band_name(t for t in order if low <= t <= high) for low, high in matmul_floor.BINS
             if any(low <= t <= high for t in order)]
    assert len(bands) == 3  # the texts fall in three bands
    assert names == ["x: matmul floor: int8: full form", "x: matmul floor: int8: matmul-only graph (lower bound)",
                     "x: matmul floor: int8: matmul-only graph, quickest call per token count",
                     "x: matmul floor: int8: matmul-only / full form", *(f"x: matmul floor: int8: {b}" for b in bands)]
    assert all(r.n == 7 for r in rows[:4]) and [r.unit for r in rows[:3]] == ["CPU ms"] * 3
    assert rows[0].budget == rows[1].budget == ""  # the form's own budget row is the prediction row's
    quickest = rows[2]
    assert quickest.budget and quickest.within_budget == (quickest.p95 <= 5.0)
    assert quickest.median <= rows[1].median and quickest.p95 <= max(timings.cpu["floor"])  # never above a call
    assert sum(r.n for r in rows[4:]) == 7


def test_a_graph_without_matrix_nodes_has_no_floor(tmp_path):
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "n"])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, "n"])])
    path = tmp_path / "relu.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    with pytest.raises(ValueError, match="no matrix nodes"):
        build_floor_graph(path, {3: {"x": np.ones((1, 3), np.float32)}}, 1)
