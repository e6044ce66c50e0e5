"""The fused graph: an export onnxruntime's transformer fuser turns into Attention, SkipLayerNormalization
and BiasGelu nodes, that answers as the PyTorch model, quantizes (QAttention) within the parity rule,
is what the int8 search tries first, and is rebuilt byte for byte from a recorded recipe."""

from __future__ import annotations

import json

import onnx
import pytest

from local_models import int8_search
from local_models.engine import load_engine
from local_models.export import export_onnx
from local_models.files import file_sha256
from local_models.fused_graph import FusionUnavailable, export_fused_graph, fused_counts
from local_models.int8 import Int8Recipe, build_int8
from local_models.int8_search import TaskTexts
from local_models.parity import MIN_TEXTS, judge
from tests.model_fixtures import trigger_sentences


def sentences(n: int, seed: int) -> tuple[str, ...]:
    return tuple(text for text, _ in trigger_sentences(n, seed=seed))


def layers(model_dir) -> int:
    return json.loads((model_dir / "config.json").read_text())["num_hidden_layers"]


def test_the_fused_export_holds_fused_attention_layernorm_and_gelu_and_answers_as_the_model(trigger_model_dir,
                                                                                             tmp_path):
    engine = load_engine(trigger_model_dir)
    try:
        fused = export_fused_graph(engine, tmp_path / "a" / "fused.onnx")
        again = export_fused_graph(engine, tmp_path / "b" / "fused.onnx")
    finally:
        engine.close()
    n = layers(trigger_model_dir)
    assert fused.counts["Attention"] == n and fused.counts["SkipLayerNormalization"] == 2 * n
    assert fused.counts["BiasGelu"] == n and fused.counts["EmbedLayerNormalization"] == 1
    assert fused_counts(fused.path) == fused.counts
    assert fused.max_difference <= 1e-3  # padded batch and one text at a time, against PyTorch
    assert file_sha256(fused.path) == file_sha256(again.path)  # the same weights give the same bytes


def test_a_fused_recipe_refuses_a_graph_without_fused_attention(trigger_onnx_dir, tmp_path):
    from local_models.errors import ExportFailed

    with pytest.raises(ExportFailed, match="no fused Attention"):
        build_int8(trigger_onnx_dir / "model.onnx", tmp_path / "int8.onnx", Int8Recipe("dynamic", fused=True))


def test_an_onnx_model_has_no_fused_graph(trigger_onnx_dir, tmp_path):
    engine = load_engine(trigger_onnx_dir)
    try:
        with pytest.raises(FusionUnavailable, match="only PyTorch models"):
            export_fused_graph(engine, tmp_path / "fused.onnx")
    finally:
        engine.close()


def test_the_int8_search_keeps_the_fused_graph_when_it_passes_and_records_each_attempts_latency(
        trigger_model_dir, trigger_onnx_dir, tmp_path):
    texts = TaskTexts(sentences(MIN_TEXTS, 21), sentences(200, 22), "synthetic trigger sentences")
    report = export_onnx(trigger_model_dir, tmp_path / "int8", int8=True, task_texts=texts,
                         graph=trigger_onnx_dir / "model.onnx")
    assert report.parity is not None and report.parity["passed"]
    assert report.quantization.startswith("fused graph (LayerNorm unfused) + dynamic")
    graph = onnx.load(str(report.path / "model.onnx"))
    ops = {node.op_type for node in graph.graph.node}
    assert {"QAttention", "LayerNormalization", "BiasGelu", "EmbedLayerNormalization"} <= ops
    assert "SkipLayerNormalization" not in ops  # its kernel is slower than Add + LayerNormalization
    assert "Attention" not in ops and "Softmax" not in ops  # attention is one quantized node per layer
    assert sorted(report.path.iterdir()) == sorted(p for p in report.path.iterdir() if "fused" not in p.name)
    export = json.loads((report.path / "dynadesk_model.json").read_text())["export"]
    assert export["int8_recipe"]["fused"] is True
    first = export["parity"]["attempts"][0]
    assert first["fused"] and first["latency"]["median_ms"] > 0 and first["latency"]["calls"] == MIN_TEXTS
    assert export["latency"]["median_ms"] > 0 and export["latency"]["p95_ms"] >= export["latency"]["median_ms"]
    engine = load_engine(report.path)
    try:
        assert engine.predict_one("a banana in the garden").label == "fruit"
        assert engine.predict_one("the teacher walked near the river").label == "plain"
    finally:
        engine.close()


def test_when_the_first_ratio_fails_the_search_tries_the_next_ratios_before_whole_float_matmuls(
        trigger_model_dir, trigger_onnx_dir, tmp_path, monkeypatch):
    """On a real model and real graphs: the rule is made to refuse every attempt until the second outlier
    ratio, so the order the search walks is seen, fused graph first at each step, and every attempt it
    tried is recorded with its latency."""
    monkeypatch.setattr(int8_search, "FLOAT_CHANNEL_STEPS", ((6.0, 4), (4.0, 8), (2.0, 16)))
    monkeypatch.setattr(int8_search, "LADDER", (4,))
    built: list[Int8Recipe] = []
    real_build = int8_search.build_int8

    def recording_build(fp32, target, recipe):
        built.append(recipe)
        return real_build(fp32, target, recipe)

    def judged(figures, **kwargs):  # refuses attempts before the split at the second ratio
        verdict = judge(figures, **kwargs)
        recipe = built[-1]
        second = recipe.float_channel_ratio is not None and recipe.float_channel_ratio < 6.0
        return verdict if second else verdict.__class__(verdict.figures, False, ("refused for this test",))

    monkeypatch.setattr(int8_search, "build_int8", recording_build)
    monkeypatch.setattr(int8_search, "judge", judged)
    engine = load_engine(trigger_model_dir)
    try:
        texts = TaskTexts(sentences(MIN_TEXTS, 21), (), "synthetic trigger sentences")
        search = int8_search.search_int8(engine, trigger_onnx_dir / "model.onnx", texts, tmp_path / "search")
    finally:
        engine.close()
    names = [(r.fused, r.float_channel_ratio, len(r.excluded_nodes)) for r in built]
    assert names[:2] == [(True, None, 0), (False, None, 0)]  # plain dynamic int8: fused graph, then plain export
    splits = [n for n in names[2:] if n[1] is not None]
    assert splits and all(n[2] == 0 for n in splits)
    assert [n[1] for n in splits] == sorted((n[1] for n in splits), reverse=True)  # 6x before 4x before 2x
    for ratio in {n[1] for n in splits}:  # at each ratio the fused graph comes first
        at = [n[0] for n in splits if n[1] == ratio]
        assert at[0] is True or not any(at)
    assert search.passed and search.recipe is not None and search.recipe.float_channel_ratio < 6.0
    assert len(search.attempts) == len(built)  # every attempt recorded, with its latency
    assert all(a["latency"]["median_ms"] > 0 for a in search.attempts)
    assert search.latency == search.attempts[-1]["latency"]
    assert search.fusion["available"] and search.fusion["counts"]["Attention"] == layers(trigger_model_dir)
    assert not any(r.excluded_nodes for r in built)  # passed before any whole MatMul was kept in float


def test_the_shipped_default_model_fuses_and_its_fused_int8_form_keeps_the_parity_rule(default_model_cache,
                                                                                         tmp_path):
    """The default model (MiniLM, 6 layers): every attention, LayerNorm and GELU fuses, and the fused
    int8 form with the outlier channels of its recipe's ratio kept in float passes the parity rule on the
    model's own held-out texts (Davidson et al. 2017 dev + test, as the shipped recipe was judged)."""
    from local_models.int8 import float_channels_at, input_peaks
    from local_models.int8_search import compare, feeds_for, probabilities, read_recipe_file, run_graph
    from local_models.quantize_default import DEFAULT_DATA, DEFAULT_PART, default_task_texts

    torch_dir = next(default_model_cache.glob("*/torch"))
    engine = load_engine(torch_dir)
    try:
        fused = export_fused_graph(engine, tmp_path / "fused.onnx")
        assert fused.counts == {"Attention": 6, "BiasGelu": 6, "EmbedLayerNormalization": 1,
                                "SkipLayerNormalization": 12}
        assert fused.max_difference <= 1e-3
        if not DEFAULT_DATA.is_file():
            pytest.skip(f"the default model's training data is not at {DEFAULT_DATA}")
        texts = default_task_texts()
        ratio = read_recipe_file(DEFAULT_PART).recipe.float_channel_ratio
        peaks = input_peaks(fused.path, [feeds_for(engine, [t]) for t in texts.calibration[:int8_search.RANKING_TEXTS]])
        recipe = Int8Recipe("dynamic", fused=True, float_channels=float_channels_at(peaks, ratio),
                            float_channel_ratio=ratio)
        build_int8(fused.path, tmp_path / "int8.onnx", recipe)
        ops = {node.op_type for node in onnx.load(str(tmp_path / "int8.onnx")).graph.node}
        assert {"QAttention", "SkipLayerNormalization", "BiasGelu"} <= ops
        verdict = judge(compare(probabilities(engine, list(texts.parity)),
                                run_graph(engine, tmp_path / "int8.onnx", list(texts.parity)), texts.source))
    finally:
        engine.close()
    assert verdict.figures.texts >= MIN_TEXTS
    assert verdict.passed, verdict.reason
