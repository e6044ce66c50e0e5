"""The int8 parity rule: measured on >= 2,000 task texts, a model that breaks it is
refused, one that meets it is used, its figures land in the model's provenance, and a trained
part's recorded recipe is rebuilt on a desk only when it is the graph that was checked: its bytes,
or its answers on the recipe's check texts (a graph with other bytes and the same function is taken,
one that computes otherwise is refused with the texts that differ)."""

from __future__ import annotations

import functools
import json
import re
import shutil

import numpy as np
import onnx
import pytest

from local_models import int8_search
from local_models.default_model import prepare_default_model
from local_models.engine import load_engine
from local_models.errors import ParityCheckFailed
from local_models.export import export_onnx
from local_models.int8_form import REFUSAL_FILE, record_int8_recipe
from local_models.int8_search import RECIPE_FILE, TaskTexts, read_recipe_file
from local_models.parity import MIN_TEXTS, compare_probabilities, judge
from local_models.progress import Progress
from tests.model_fixtures import trigger_sentences


def sentences(n: int, seed: int) -> tuple[str, ...]:
    return tuple(text for text, _ in trigger_sentences(n, seed=seed))


def task_texts(n: int = MIN_TEXTS) -> TaskTexts:
    return TaskTexts(sentences(n, 21), sentences(200, 22), "synthetic trigger sentences")


def probabilities(n: int, rng: np.random.Generator) -> np.ndarray:
    p = rng.uniform(0.02, 0.98, n)
    return np.stack([p, 1 - p], axis=1)


def test_the_rule_judges_agreement_and_the_99th_percentile_on_enough_texts():
    rng = np.random.default_rng(0)
    reference = probabilities(2000, rng)
    close = reference + rng.normal(0, 0.004, reference.shape)
    verdict = judge(compare_probabilities(reference, close, "test"))
    assert verdict.passed and verdict.figures.texts == 2000 and verdict.figures.p99_change < 0.05
    assert verdict.figures.max_change >= verdict.figures.p99_change >= verdict.figures.mean_change

    flipped = reference.copy()
    flipped[:11] = flipped[:11, ::-1]  # 11 of 2,000 labels change: 99.45 % < 99.5 %
    flipped[:11, 0] = np.where(flipped[:11, 0] == 0.5, 0.6, flipped[:11, 0])
    verdict = judge(compare_probabilities(reference, flipped, "test"))
    assert not verdict.passed and verdict.figures.labels_changed >= 11
    assert "agreement 99.45% < 99.5%" in verdict.reason

    drifted = reference.copy()
    drifted[:40] += np.array([0.06, -0.06]) * np.sign(0.5 - reference[:40, :1]) * -1  # 2 % of texts move by 0.06
    verdict = judge(compare_probabilities(reference, np.clip(drifted, 0, 1), "test"))
    assert not verdict.passed and "99th percentile of the probability change is 0.06" in verdict.reason


def test_fewer_texts_than_the_rule_needs_never_pass():
    rng = np.random.default_rng(1)
    reference = probabilities(1999, rng)
    verdict = judge(compare_probabilities(reference, reference, "a small round"))
    assert not verdict.passed and verdict.figures.agreement == 1.0
    assert "only 1,999 task texts" in verdict.reason and "(1 more)" in verdict.reason
    stored = verdict.to_json(forced=True)
    assert stored["forced"] is True and stored["problems"] == list(verdict.problems)


@pytest.fixture(scope="module")
def graph(trigger_onnx_dir):
    return trigger_onnx_dir / "model.onnx"


def test_an_int8_form_that_keeps_the_labels_is_used_and_its_figures_recorded(trigger_model_dir, graph, tmp_path,
                                                                              desk):
    from app.core.int8_status import int8_status
    from app.core.services.target_models import register_model

    report = export_onnx(trigger_model_dir, tmp_path / "int8", int8=True, task_texts=task_texts(), graph=graph)
    assert report.int8 and not report.forced and report.parity is not None and report.parity["passed"]
    parity = json.loads((report.path / "dynadesk_model.json").read_text())["export"]["parity"]
    assert parity["texts"] == MIN_TEXTS and parity["agreement"] >= 0.995 and parity["p99_change"] <= 0.05
    assert {"max_change", "mean_change", "labels_changed", "attempts"} <= set(parity)
    assert load_engine(report.path).predict_one("a banana in the garden").label == "fruit"

    record = register_model(desk, report.path, name="trigger int8")
    assert record.provenance["export"]["parity"]["passed"] is True  # the figures travel into the record
    assert int8_status(record.provenance).startswith("int8 passed: ")


def test_an_int8_form_that_breaks_the_rule_is_refused(tiny_classifier_dir, tmp_path, monkeypatch):
    """The random tiny classifier answers 50/50 on every text: int8's small changes flip about a third
    of its labels, so every recipe of the search fails (already on the selection texts) and nothing is kept."""
    monkeypatch.setattr(int8_search, "LADDER", (4,))  # one step of the sensitivity ladder is enough here
    monkeypatch.setattr(int8_search, "FLOAT_CHANNEL_STEPS", ((6.0, 4),))  # and one outlier split
    monkeypatch.setattr(int8_search, "COMBINED_LADDER", ())
    exports = tmp_path / "exports"
    texts = TaskTexts(sentences(MIN_TEXTS, 21), sentences(int8_search.SELECTION_TEXTS, 22), "trigger sentences")
    lines: list[str] = []
    reports: list[tuple[int, int]] = []
    with pytest.raises(ParityCheckFailed, match="none of the [3-5] int8 recipe.* passed on the selection texts"):
        export_onnx(tiny_classifier_dir, exports / "refused", int8=True, task_texts=texts,
                    progress=Progress(lambda done, total: reports.append((done, total)), lines.append))
    assert list(exports.iterdir()) == []  # neither the export nor its staging folder is left
    # each attempt says what it measures as it goes, and its texts are the progress it reports
    attempts = [line for line in lines if line.startswith("attempt ")]
    # the fused graph first, then the plain export
    assert attempts[0] == (f"attempt 1 (more follow if it fails): fused graph (LayerNorm unfused) + dynamic, weights per channel, on "
                           f"{int8_search.SELECTION_TEXTS:,} selection texts")
    assert any(re.match(r"attempt 1 .*: failed on the selection texts", line) for line in attempts)
    assert (f"attempt 2 (more follow if it fails): dynamic, weights per channel, on "
            f"{int8_search.SELECTION_TEXTS:,} selection texts") in attempts
    assert any(re.match(r"attempt [3-5] of [3-5]: dynamic, weights per channel, 4 most sensitive", line)
               for line in attempts)
    assert (int8_search.REPORT_EVERY, int8_search.SELECTION_TEXTS) in reports


def test_after_plain_int8_the_search_tries_the_outlier_split_at_each_ratio_before_whole_float_matmuls():
    """Cheapest graph first: a few float channels (at 6x, then 4x and 3x the median peak, with more channels
    allowed) cost far less than a whole float MatMul; a ratio that keeps the same channels is not tried twice."""
    peaks = {"x": np.array([1.0] * 20 + [3.5, 5.0, 7.0]), "y": np.array([1.0] * 20 + [7.0, 7.5, 8.0])}
    ranked = [f"MatMul_{i}" for i in range(10)]
    recipes = int8_search.fallback_recipes(peaks, ranked, (4, 8))
    split = [(r.float_channel_ratio, dict(r.float_channels or {}), len(r.excluded_nodes)) for r in recipes]
    assert split == [
        (6.0, {"x": (22,), "y": (20, 21, 22)}, 0),
        (4.0, {"x": (21, 22), "y": (20, 21, 22)}, 0),
        (3.0, {"x": (20, 21, 22), "y": (20, 21, 22)}, 0),
        (3.0, {"x": (20, 21, 22), "y": (20, 21, 22)}, 2),  # the widest split, and the 2 most sensitive MatMuls
        (3.0, {"x": (20, 21, 22), "y": (20, 21, 22)}, 4),
        (None, {}, 4),  # only then the ladder of whole float MatMuls
        (None, {}, 8),
    ]
    assert recipes[3].excluded_nodes == ("MatMul_0", "MatMul_1")
    assert "outlier input channels (peak over 3x the median) kept float, 2 most sensitive" in recipes[3].name
    flat = {"x": np.ones(23)}  # no outliers: straight to the ladder
    assert [len(r.excluded_nodes) for r in int8_search.fallback_recipes(flat, ranked, (4,))] == [4]
    same = {"x": np.array([1.0] * 20 + [9.0])}  # the same channel at every ratio: tried once
    assert [r.float_channel_ratio for r in int8_search.fallback_recipes(same, ranked, ())] == [6.0, 6.0, 6.0]


def test_the_fused_graphs_split_comes_before_the_plain_exports_at_each_ratio():
    peaks = {"x": np.array([1.0] * 20 + [3.5, 5.0, 7.0])}
    fused_peaks = {"x_fused": np.array([1.0] * 20 + [3.5, 5.0, 7.0])}
    recipes = int8_search.fallback_recipes(peaks, [f"MatMul_{i}" for i in range(10)], (4,), fused_peaks)
    assert [(r.fused, r.float_channel_ratio, len(r.excluded_nodes)) for r in recipes] == [
        (True, 6.0, 0), (False, 6.0, 0), (True, 4.0, 0), (False, 4.0, 0), (True, 3.0, 0), (False, 3.0, 0),
        (False, 3.0, 2), (False, 3.0, 4), (False, None, 4)]  # whole float MatMuls only on the plain export, last
    assert recipes[0].float_channels == {"x_fused": (22,)} and recipes[1].float_channels == {"x": (22,)}
    assert recipes[0].name.startswith("fused graph (LayerNorm unfused) + dynamic") and recipes[0].plain_layer_norm
    assert int8_search.Int8Recipe.from_json(recipes[0].to_json()) == recipes[0]
    assert "fused" not in recipes[1].to_json()  # recipes without it keep the bytes they had


def test_a_forced_int8_form_is_kept_and_recorded_as_forced(trigger_model_dir, graph, tmp_path, monkeypatch):
    """The rule's threshold made unreachable: the search fails, and --force keeps the form with its figures."""
    monkeypatch.setattr(int8_search, "judge", functools.partial(judge, max_p99_change=-1.0))
    monkeypatch.setattr(int8_search, "LADDER", (4,))
    forced = export_onnx(trigger_model_dir, tmp_path / "forced", int8=True, task_texts=task_texts(), graph=graph,
                         force=True)
    parity = json.loads((forced.path / "dynadesk_model.json").read_text())["export"]["parity"]
    assert forced.forced and parity["forced"] is True and parity["passed"] is False and parity["attempts"]
    assert parity["texts"] == MIN_TEXTS and "99th percentile" in parity["problems"][0]
    assert "4 most sensitive MatMul(s) kept float" in forced.quantization  # the form the figures belong to


def test_too_few_task_texts_refuse_int8_and_say_how_many_are_missing(trigger_model_dir, graph, tmp_path):
    with pytest.raises(ParityCheckFailed, match="only 500 task texts"):
        export_onnx(trigger_model_dir, tmp_path / "few", int8=True, task_texts=task_texts(500), graph=graph)
    with pytest.raises(ParityCheckFailed, match="no task texts to check it on"):
        export_onnx(trigger_model_dir, tmp_path / "none", int8=True, graph=graph)
    forced = export_onnx(trigger_model_dir, tmp_path / "forced", int8=True, graph=graph, force=True)
    assert forced.parity is not None and forced.parity["forced"] and not forced.parity["passed"]


@pytest.fixture(scope="module")
def part_with_recipe(trigger_part_dir, trigger_model_dir, tmp_path_factory):
    part = tmp_path_factory.mktemp("recipe") / "part"
    shutil.copytree(trigger_part_dir, part)
    search = record_int8_recipe(part, task_texts(), model_dir=trigger_model_dir)
    assert search.passed, search.reason
    return part


@pytest.fixture(scope="module")
def prepared_with_recipe(part_with_recipe, tiny_base_dir, tmp_path_factory):
    """The part prepared like a promoted candidate, and a copy of its cache as it stood before the int8
    step (assembled, fp32 exported), so the tests of that step do not export again."""
    cache = tmp_path_factory.mktemp("prepared") / "cache"
    prepared = prepare_default_model(part_with_recipe, cache, base_dir=tiny_base_dir, slug="candidate")
    before_int8 = cache.parent / "before-int8"
    shutil.copytree(cache, before_int8)
    root = before_int8 / prepared.torch_dir.parent.name
    shutil.rmtree(root / prepared.onnx_dir.name)
    export_onnx(prepared.torch_dir, root / "onnx-fp32")  # the plain graph: the int8 step exports the fused one
    return prepared, before_int8


def test_a_trained_parts_recipe_gives_the_desk_the_checked_int8_graph(part_with_recipe, prepared_with_recipe):
    prepared, _ = prepared_with_recipe
    assert prepared.onnx_int8 and prepared.notes == ()
    export = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]
    recorded = read_recipe_file(part_with_recipe)
    assert export["parity"]["agreement"] == recorded.parity["agreement"] and "sha256" in export["parity"]["verified_by"]
    assert export["int8_recipe"] == recorded.recipe.to_json()
    # the search chose the fused graph: the desk exported it (once) and got the bytes that were checked
    assert recorded.recipe.fused and recorded.document["fusion"]["available"]
    assert export["parity"]["verification"]["by"] == "sha256"
    ops = {node.op_type for node in onnx.load(str(prepared.onnx_dir / "model.onnx")).graph.node}
    assert {"QAttention", "LayerNormalization", "BiasGelu"} <= ops and "SkipLayerNormalization" not in ops
    assert not any(p.name.startswith("fused") for p in prepared.onnx_dir.iterdir())


def test_a_fused_recipe_exports_the_fused_graph_once_and_it_is_also_the_fp32_form(part_with_recipe, tiny_base_dir,
                                                                                  tmp_path, monkeypatch):
    """A first start exports one graph: the fused one, which the conversion check compares with the model, serves
    as the fp32 form while int8 is built, and is quantized as it was exported (the recipe's bytes)."""
    from local_models import export, fused_graph

    exported = []
    fused_export, plain_export = fused_graph.export_fused_graph, export._export_graph
    monkeypatch.setattr(export, "export_fused_graph", lambda *a, **k: exported.append("fused") or fused_export(*a, **k))
    monkeypatch.setattr(export, "_export_graph", lambda *a, **k: exported.append("plain") or plain_export(*a, **k))
    kept = []
    from local_models import int8_form

    def int8_step(part_dir, torch_dir, fp32_dir, int8_dir, **kwargs):
        kept.append(json.loads((fp32_dir / "dynadesk_model.json").read_text()))
        return build_int8_form(part_dir, torch_dir, fp32_dir, int8_dir, **kwargs)

    build_int8_form = int8_form.prepare_int8_form
    monkeypatch.setattr(int8_form, "prepare_int8_form", int8_step)
    prepared = prepare_default_model(part_with_recipe, tmp_path / "cache", base_dir=tiny_base_dir, slug="candidate")
    assert exported == ["fused"] and prepared.onnx_int8
    [fp32_form] = kept  # the fp32 form the int8 step starts from (removed once the int8 form is built)
    assert fp32_form["export"]["fused_ops"]["Attention"] >= 1 and fp32_form["export"]["opset"] == 17
    assert fp32_form["export"]["conversion_check"]["max_probability_difference"] <= 1e-3
    verification = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]["parity"]["verification"]
    assert verification["by"] == "sha256" and verification["int8_sha256"] == read_recipe_file(part_with_recipe).int8_sha256


@pytest.mark.parametrize("damage, message", [
    (lambda path: path.unlink(), "there is no int8 recipe"),
    (lambda path: path.write_text("{ not json", encoding="utf-8"), "is not readable JSON"),
    (lambda path: path.write_text(json.dumps({**json.loads(path.read_text()), "int8_sha256": "0" * 64, "check": None})),
     "records no check texts to compare its answers on"),
])
def test_a_missing_broken_or_different_recipe_leaves_fp32_with_the_reason(part_with_recipe, prepared_with_recipe,
                                                                          tiny_base_dir, tmp_path, damage, message):
    part = tmp_path / "part"
    shutil.copytree(part_with_recipe, part)
    damage(part / RECIPE_FILE)
    cache = tmp_path / "cache"
    shutil.copytree(prepared_with_recipe[1], cache)  # assembled and exported: only the int8 step runs
    prepared = prepare_default_model(part, cache, base_dir=tiny_base_dir, slug="candidate")
    assert not prepared.onnx_int8 and prepared.onnx_dir.name == "onnx-fp32"
    assert message.lower() in prepared.notes[0].lower() and prepared.notes[0].endswith("The ONNX model is fp32.")
    assert (prepared.onnx_dir.parent / REFUSAL_FILE).is_file()  # a verdict: later starts do not build again
    assert prepare_default_model(part, cache, base_dir=tiny_base_dir, slug="candidate").notes == prepared.notes


def test_a_small_training_run_records_why_it_has_no_int8_form(trigger_part_dir, tmp_path):
    part = tmp_path / "part"
    shutil.copytree(trigger_part_dir, part)
    record_int8_recipe(part, task_texts(120))
    recorded = read_recipe_file(part)
    assert recorded.recipe is None and not recorded.usable
    assert "only 120 task texts" in recorded.reason and f"{MIN_TEXTS:,}" in recorded.reason


def test_outlier_channels_kept_in_float_leave_the_float_model_and_travel_in_the_recipe(trigger_model_dir, graph,
                                                                                       tmp_path):
    """The channel split rewrites the graph, not the function: without quantization it answers as before;
    the chosen channels go through the recipe's JSON, and the same recipe builds the same bytes."""
    import onnx
    import onnxruntime

    from local_models.files import file_sha256
    from local_models.int8 import Int8Recipe, build_int8, measure_float_channels, split_float_channels

    engine = load_engine(trigger_model_dir)
    feeds = [int8_search.feeds_for(engine, [text]) for text in sentences(12, 23)]
    engine.close()
    channels = measure_float_channels(graph, feeds, ratio=1.5)  # the tiny random model has no strong outliers
    assert channels and all(0 < len(kept) <= 4 for kept in channels.values())
    model = onnx.load(str(graph))
    float_nodes = split_float_channels(model, channels)
    assert len(float_nodes) >= len(channels)
    split, plain = (onnxruntime.InferenceSession(g, providers=["CPUExecutionProvider"])
                    for g in (model.SerializeToString(), str(graph)))
    wanted = {i.name for i in plain.get_inputs()}
    for feed in feeds:
        given = {k: v for k, v in feed.items() if k in wanted}
        np.testing.assert_allclose(split.run(None, given)[0], plain.run(None, given)[0], atol=1e-4)

    recipe = Int8Recipe("dynamic", float_channels=channels, float_channel_ratio=1.5)
    again = Int8Recipe.from_json(json.loads(json.dumps(recipe.to_json())))
    assert again.float_channels == channels and "outlier input channels" in again.name
    build_int8(graph, tmp_path / "a.onnx", recipe)
    build_int8(graph, tmp_path / "b.onnx", again)
    assert file_sha256(tmp_path / "a.onnx") == file_sha256(tmp_path / "b.onnx")
    with pytest.raises(ValueError, match="does not name them"):
        Int8Recipe.from_json({**recipe.to_json(), "float_channels": None})


def test_the_recipe_records_check_texts_over_lengths_and_every_label(part_with_recipe, trigger_model_dir):
    """The project's sentences first, spread over token lengths; the trigger model never says "fruit" on them,
    so the recipe's own parity texts fill that label; no text beyond those two sources."""
    from local_models.int8_check import CHECK_SENTENCES, CHECK_TEXTS, PER_DECISION

    check = read_recipe_file(part_with_recipe).check
    assert check is not None and check["max_change"] == 1e-4 and check["made_with"]["onnxruntime"]
    texts = check["texts"]
    assert 12 <= len(texts) <= CHECK_TEXTS + PER_DECISION and len(set(texts)) == len(texts)
    assert len(check["probabilities"]) == len(check["decisions"]) == len(check["fp32_probabilities"]) == len(texts)
    parity_texts = set(task_texts().parity)
    assert all(t in CHECK_SENTENCES or t in parity_texts for t in texts)
    assert sum(t in CHECK_SENTENCES for t in texts) >= CHECK_TEXTS - PER_DECISION
    engine = load_engine(trigger_model_dir)
    lengths = engine.encode(texts).lengths
    assert min(lengths) <= 4 and max(lengths) == engine.max_length  # a word or two, and texts cut at the longest
    assert {engine.runtime.model_labels[d[0]] for d in check["decisions"]} == set(engine.runtime.model_labels)
    engine.close()
    for p, fp32 in zip(check["probabilities"], check["fp32_probabilities"]):
        assert abs(sum(p) - 1) < 1e-6 and abs(sum(fp32) - 1) < 1e-6


def _rewritten_fp32(cache, prepared, change) -> None:
    """The cache's fp32 graph, rewritten by ``change`` (an onnx.ModelProto edit), as another exporter might write it."""
    import onnx

    path = cache / prepared.torch_dir.parent.name / "onnx-fp32" / "model.onnx"
    model = onnx.load(str(path))
    change(model)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def _rewritten_graph(cache, prepared, recipe, change, monkeypatch) -> None:
    """The graph the recipe quantizes, rewritten by ``change``: the cache's fp32 graph, or for a fused recipe
    the fused graph the desk exports again (as another exporter or fuser release might write it)."""
    if not recipe.fused:
        _rewritten_fp32(cache, prepared, change)
        return
    import onnx

    from local_models import export, fused_graph

    def rewritten(*args, **kwargs):
        made = fused_graph.export_fused_graph(*args, **kwargs)
        model = onnx.load(str(made.path))
        change(model)
        onnx.checker.check_model(model)
        onnx.save(model, str(made.path))
        return made

    monkeypatch.setattr(export, "export_fused_graph", rewritten)


def _same_function_other_bytes(recipe):
    def change(model):
        import onnx

        initializers = list(model.graph.initializer)[::-1]  # weights in another order
        del model.graph.initializer[:]
        model.graph.initializer.extend(initializers)
        kept = set(recipe.excluded_nodes)  # names the recipe refers to stay; every other node is renamed
        for number, node in enumerate(model.graph.node):
            if node.name not in kept:
                node.name = f"other_exporter_{number}_{node.op_type}"
        output = model.graph.output[0].name  # and an Identity before the output
        for node in model.graph.node:
            node.output[:] = [f"{o}_before" if o == output else o for o in node.output]
        model.graph.node.append(onnx.helper.make_node("Identity", [f"{output}_before"], [output], name="extra"))
    return change


def _one_weight_scaled(factor):
    def change(model):
        from onnx import numpy_helper

        weights = {t.name: t for t in model.graph.initializer}
        matmuls = [n for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in weights]
        tensor = weights[matmuls[len(matmuls) // 2].input[1]]
        tensor.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(tensor) * np.float32(factor), tensor.name))
    return change


def test_a_graph_with_other_bytes_and_the_same_function_is_taken_by_its_answers(part_with_recipe, prepared_with_recipe,
                                                                                 tiny_base_dir, tmp_path, monkeypatch):
    """An exporter release that orders weights otherwise, names nodes otherwise and adds an Identity changes every
    byte of the int8 graph and nothing it answers: the desk takes it, saying how it knew."""
    from local_models.files import file_sha256

    recorded = read_recipe_file(part_with_recipe)
    cache = tmp_path / "cache"
    shutil.copytree(prepared_with_recipe[1], cache)
    _rewritten_graph(cache, prepared_with_recipe[0], recorded.recipe, _same_function_other_bytes(recorded.recipe),
                     monkeypatch)
    prepared = prepare_default_model(part_with_recipe, cache, base_dir=tiny_base_dir, slug="candidate")
    assert prepared.onnx_int8 and prepared.notes == ()
    parity = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]["parity"]
    verification = parity["verification"]
    assert verification["by"] == "answers" and verification["int8_sha256"] != recorded.int8_sha256
    assert verification["checked_int8_sha256"] == recorded.int8_sha256
    assert verification["check"]["passed"] and verification["check"]["max_change"] <= 1e-4
    assert parity["verified_by"].startswith("answers on the recipe's check texts: the same decisions on all")
    assert parity["answers"] == recorded.check  # travels with the form, for desks that fetch it
    assert parity["agreement"] == recorded.parity["agreement"]  # the figures carry over
    from app.core.int8_status import int8_detail

    detail = int8_detail({"export": {"parity": parity}})
    assert f"taken by its answers on {len(recorded.check['texts'])} check texts" in detail
    assert file_sha256(prepared.onnx_dir / "model.onnx") != file_sha256(prepared_with_recipe[0].onnx_dir / "model.onnx")


def test_a_graph_that_computes_otherwise_is_refused_naming_the_texts_that_differ(part_with_recipe, prepared_with_recipe,
                                                                               tiny_base_dir, tmp_path, monkeypatch):
    """One weight matrix 5 % off (a recipe meeting a graph it was not made for): fp32 serves, and the note says
    which check texts moved, by how much, and that the fp32 graph itself answers otherwise."""
    from local_models.int8_check import toolchain_versions

    cache = tmp_path / "cache"
    shutil.copytree(prepared_with_recipe[1], cache)
    _rewritten_graph(cache, prepared_with_recipe[0], read_recipe_file(part_with_recipe).recipe, _one_weight_scaled(1.05),
                     monkeypatch)
    prepared = prepare_default_model(part_with_recipe, cache, base_dir=tiny_base_dir, slug="candidate")
    assert not prepared.onnx_int8 and prepared.onnx_dir.name == "onnx-fp32"
    note = prepared.notes[0]
    assert note.startswith("Int8 refused: the int8 graph built here (sha256 ") and "is not byte for byte" in note
    assert re.search(r"(\d+) of \1 check texts answer otherwise|\d+ of \d+ check texts answer otherwise", note)
    assert re.search(r"'[^']+': probability moved by \d", note)
    assert "allowed 0.0001" in note and "The fp32 graph it was built from answers otherwise too" in note
    assert note.endswith("The ONNX model is fp32.")
    refusal = json.loads((prepared.onnx_dir.parent / REFUSAL_FILE).read_text())
    assert refusal["toolchain"] == toolchain_versions()  # remembered for these releases only
    assert prepare_default_model(part_with_recipe, cache, base_dir=tiny_base_dir, slug="candidate").notes == (note,)
    refusal["toolchain"] = {**refusal["toolchain"], "transformers": "0.0.1"}  # made under other releases
    (prepared.onnx_dir.parent / REFUSAL_FILE).write_text(json.dumps(refusal))
    from local_models import int8_form

    assert int8_form.cached_refusal(part_with_recipe, prepared.onnx_dir.parent) is None  # so it is built again


def test_the_check_takes_changes_within_1e_4_and_refuses_larger_ones_or_another_label(part_with_recipe,
                                                                                    prepared_with_recipe):
    from local_models.int8_check import verify_check

    check = read_recipe_file(part_with_recipe).check
    prepared = prepared_with_recipe[0]
    engine = load_engine(prepared.torch_dir)
    graph = prepared.onnx_dir / "model.onnx"  # the checked graph (with the export's metadata)
    try:
        same = verify_check(engine, graph, check)
        assert same.passed and same.max_change <= 1e-6 and same.texts == len(check["texts"])

        def moved(index, by, decision=None):
            probabilities = [list(p) for p in check["probabilities"]]
            probabilities[index] = [probabilities[index][0] + by, probabilities[index][1] - by]
            decisions = [list(d) for d in check["decisions"]]
            if decision is not None:
                decisions[index] = [decision]
            return {**check, "probabilities": probabilities, "decisions": decisions}

        assert verify_check(engine, graph, moved(3, 5e-5)).passed
        over = verify_check(engine, graph, moved(3, 2e-4))
        text = check["texts"][3]
        assert not over.passed and len(over.differing) == 1 and over.differing[0]["text"] == text
        assert over.summary.startswith(f"1 of {len(check['texts'])} check texts answer otherwise (largest "
                                       "probability change 0.0002, allowed 0.0001; 0 decision(s) changed)")
        assert repr(text[:45])[1:-1] in over.summary
        other = 1 - check["decisions"][0][0]
        flipped = verify_check(engine, graph, moved(0, 0.0, decision=other))
        labels = engine.runtime.model_labels
        recorded_label = labels[check["decisions"][0][0]]
        assert not flipped.passed and f"decision {labels[other]} -> {recorded_label}" in flipped.summary
        unreadable = verify_check(engine, graph, {**check, "texts": []})
        assert not unreadable.passed and "has no texts" in unreadable.summary
    finally:
        engine.close()


def test_a_new_recipe_builds_its_form_beside_the_earlier_one_and_never_over_it(part_with_recipe, prepared_with_recipe,
                                                                             tiny_base_dir, tmp_path):
    """A registered model (a round's target, the team's) may name the int8 form an earlier recipe built, in the
    folder earlier releases used: a release with the same recipe takes that form where it is; one with another
    recipe builds its own form in a folder of its own, and the earlier form keeps its bytes and its checksum."""
    from local_models.files import file_sha256
    from local_models.int8_form import LEGACY_INT8_FOLDER, int8_folder, recipe_key

    part = tmp_path / "part"
    shutil.copytree(part_with_recipe, part)
    cache = tmp_path / "cache"
    shutil.copytree(prepared_with_recipe[0].torch_dir.parent.parent, cache)
    root = cache / prepared_with_recipe[0].torch_dir.parent.name
    legacy = root / LEGACY_INT8_FOLDER
    (root / prepared_with_recipe[0].onnx_dir.name).rename(legacy)  # as an earlier release left it
    earlier = {p.name: file_sha256(p) for p in legacy.iterdir()}
    assert prepare_default_model(part, cache, base_dir=tiny_base_dir, slug="candidate").onnx_dir == legacy

    recipe = json.loads((part / RECIPE_FILE).read_text())
    (part / RECIPE_FILE).write_text(json.dumps({**recipe, "reason": "made again"}))  # another recipe file
    again = prepare_default_model(part, cache, base_dir=tiny_base_dir, slug="candidate")
    assert again.onnx_int8 and again.onnx_dir == int8_folder(part, root) != legacy
    assert again.onnx_dir.name == f"{LEGACY_INT8_FOLDER}-{recipe_key(part)[:12]}"
    assert {p.name: file_sha256(p) for p in legacy.iterdir()} == earlier  # the earlier form is as it was
