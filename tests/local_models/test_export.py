"""ONNX export: dynamic axes, metadata, and the fp32 conversion check that refuses bad exports (the int8
parity rule: test_int8_parity.py)."""

from __future__ import annotations

import json

import pytest

from local_models.engine import load_engine
from local_models.errors import ExportFailed, ParityCheckFailed, UnsupportedOperation
from local_models.export import export_onnx, parity_difference

TEXTS = ["a banana", "the quiet river near the old garden, today and always", "", "🍌 banana!!", "x " * 80]


def test_fp32_export_matches_the_original(trigger_model_dir, trigger_onnx_dir):
    original, exported = load_engine(trigger_model_dir), load_engine(trigger_onnx_dir)
    assert parity_difference(original, exported, TEXTS) < 1e-4
    assert exported.labels == original.labels and exported.max_length == original.max_length
    description = json.loads((trigger_onnx_dir / "dynadesk_model.json").read_text())
    assert description["export"]["parent_sha256"] == original.sha256
    assert description["export"]["conversion_check"]["max_probability_difference"] < 1e-4
    assert description["metrics"]["test"]["accuracy"] == 1.0  # the trained model's figures travel along


def test_dynamic_axes_any_batch_and_length(trigger_onnx_dir):
    engine = load_engine(trigger_onnx_dir)
    for batch in ([TEXTS[0]], TEXTS, TEXTS * 7):
        predictions = engine.predict(batch)
        assert len(predictions) == len(batch)


@pytest.fixture
def graph(trigger_onnx_dir):
    """The fp32 graph already exported: these tests are about what happens after the slow torch export."""
    return trigger_onnx_dir / "model.onnx"


def test_export_over_the_allowed_difference_is_refused_and_leaves_nothing(
        trigger_model_dir, tmp_path, graph):
    exports = tmp_path / "exports"
    with pytest.raises(ParityCheckFailed, match="differs from the original by up to") as caught:
        export_onnx(trigger_model_dir, exports / "refused", max_difference=-1.0, graph=graph)
    assert caught.value.max_difference >= 0
    assert list(exports.iterdir()) == []  # neither the export nor its staging folder is left


def test_forced_export_is_kept_and_says_so(trigger_model_dir, tmp_path, graph):
    report = export_onnx(trigger_model_dir, tmp_path / "forced", max_difference=-1.0, force=True, graph=graph)
    assert report.forced and report.max_difference >= 0 and not report.int8
    parity = json.loads((report.path / "dynadesk_model.json").read_text())["export"]["conversion_check"]
    assert parity["forced"] is True and parity["max_probability_difference"] == report.max_difference
    assert load_engine(report.path).sha256 == report.sha256


def test_export_replaces_an_older_export(trigger_model_dir, tmp_path, graph):
    out = tmp_path / "again"
    first = export_onnx(trigger_model_dir, out, graph=graph)
    (out / "stale-file.txt").write_text("from an older export")
    second = export_onnx(trigger_model_dir, out, sample_texts=["a banana", "plain words"], graph=graph)
    assert second.texts_compared == 2 and first.sha256 == second.sha256
    assert not (out / "stale-file.txt").exists()


def test_only_exportable_back_ends_export(trigger_onnx_dir, tmp_path):
    with pytest.raises(UnsupportedOperation, match="only Hugging Face folders export"):
        export_onnx(trigger_onnx_dir, tmp_path / "out")


def test_failed_quantization_is_a_typed_error(tmp_path):
    from local_models.int8 import Int8Recipe, build_int8

    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"not an onnx model")
    with pytest.raises(ExportFailed, match=r"int8 quantization \(dynamic, weights per channel\) failed"):
        build_int8(broken, tmp_path / "out.onnx", Int8Recipe("dynamic"))
